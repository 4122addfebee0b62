//! What the static and machine assigners need from a shared store, as traits the store
//! implements: a [`RangeRegistry`] (assigners sharing one worker-id space record disjoint
//! ranges) and an [`ExactLeaseRegistry`] (a worker id decided before the store is asked is
//! leased there, so that no other live process on any host holds it).

use uidgen_core::Layout;

use crate::assigner::{AssignmentKind, WorkerAssignment};
use crate::cache::CacheLock;
use crate::error::Result;
use crate::future::BoxFuture;
use crate::lease_options::LeaseOptions;
use crate::mark::MarkTiming;
use crate::range::WorkerIdRange;

/// Where assigners sharing one worker-id space record the range each hands ids from, so that
/// two of them never hand out one worker id. Implemented by the store (`worker_id_range`).
///
/// The contract: a range overlapping another assigner's recorded range is refused and
/// records nothing; an assigner has one range per registry (asking for another is refused);
/// registering the recorded range again is a no-op; registrations are serialised, so two
/// overlapping ranges registered at the same moment cannot both be recorded.
pub trait RangeRegistry: Send + Sync + std::fmt::Debug {
    /// Record that `assigner` hands out worker ids from `range`, or refuse (see the trait).
    fn register_worker_range<'a>(
        &'a self,
        assigner: &'a str,
        range: WorkerIdRange,
    ) -> BoxFuture<'a, Result<()>>;
}

/// Another holder's live lease on the worker id asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveHolder {
    /// Its holder string.
    pub holder: String,
    /// How long its lease runs from the claim's clock reading.
    pub expires_in_ms: u64,
}

/// A request to lease exactly one worker id (see [`ExactLeaseRegistry::lease_exact`]).
#[derive(Debug)]
pub struct ExactLease<'a> {
    /// The ttl, heartbeat and holder name (its range and cache are not used).
    pub options: &'a LeaseOptions,
    /// The clock, the longest start wait and the local borrowing bound.
    pub timing: &'a MarkTiming,
    /// The layout the id is stamped in.
    pub layout: &'a Layout,
    /// The worker id.
    pub worker_id: u64,
    /// The id's local state file, locked by the caller: its mark continues in the lease.
    pub cache: CacheLock,
    /// The kind the assignment reports.
    pub kind: AssignmentKind,
}

/// A registry that also leases exact worker ids (the store's `worker_lease`): a fence kept in
/// local files protects one host only; registered here, the claim is seen by every host and
/// container sharing the registry.
pub trait ExactLeaseRegistry: RangeRegistry {
    /// Lease exactly `request.worker_id`, continuing the local mark in `request.cache`, and
    /// return the assignment (kept by the lease, fenced by it and by the mark); `Ok(Err(..))`
    /// when another live holder has the id.
    ///
    /// The rules are a leased id's: the claim is one conditional statement (of two claimants,
    /// one wins); the winner waits until its clock has passed both the id's recorded
    /// issued-until time and the local mark; its generator stamps only under the lease's
    /// expiry and the mark. No reserve: a restart while the registry is unreachable is refused.
    fn lease_exact<'a>(
        &'a self,
        request: ExactLease<'a>,
    ) -> BoxFuture<'a, Result<std::result::Result<WorkerAssignment, LiveHolder>>>;
}

/// The builder methods of an assigner that leases its exact id in the store it is registered
/// in (static, machine, and `uidgen-k8s`'s statefulset assigner, hence exported). The type needs
/// `store: Option<Arc<dyn ExactLeaseRegistry>>`, `store_shared: bool` and
/// `lease: LeaseOptions` fields.
#[doc(hidden)]
#[macro_export]
macro_rules! exact_lease_setters {
    () => {
        /// [`registered_in`](Self::registered_in) a registry held elsewhere too.
        #[must_use]
        pub fn registered_in_shared(
            mut self,
            store: std::sync::Arc<dyn $crate::ExactLeaseRegistry>,
        ) -> Self {
            self.store = Some(store);
            self
        }

        /// Whether the registered store is shared by every host and container that could take
        /// these worker ids (default `true`). Say `false` for a store private to this host (the
        /// service's zero-config SQLite file): it still keeps the processes that share it
        /// apart, but does not count as a coordinator, so the container check applies (and
        /// an assigner whose processes span hosts refuses to start).
        #[must_use]
        pub fn with_store_shared(mut self, shared: bool) -> Self {
            self.store_shared = shared;
            self
        }

        /// The lease's ttl, heartbeat and holder name in the store (default
        /// `LeaseOptions::default()`; its range and cache are not used).
        #[must_use]
        pub fn with_lease_options(mut self, options: $crate::LeaseOptions) -> Self {
            self.lease = options;
            self
        }
    };
}
