//! Worker ids for uidgen: where a worker id comes from, and how it is kept from stamping a
//! time unit twice.
//!
//! It is for the [`WorkerIdAssigner`] trait (with an open [`AssignmentKind`]: each
//! implementation names its own), the [`WorkerKeeper`] trait behind which a lease, a
//! ZooKeeper node or an etcd key keeps its id, the assigners that need no database
//! ([`StaticWorkerIdAssigner`], the zero-config [`MachineWorkerIdAssigner`]), the local
//! reserved-until marks and state files that fence a reused id ([`LocalMark`]), the one
//! [`wait_for_clock`] every start goes through, and [`GeneratorBuilder`], which turns an
//! assignment into a guarded generator; and [`OrderFence`], which keeps an ID space's order
//! mark ahead of what its generator stamps, wherever [`OrderMarks`] keeps it. It is not for
//! storage: the store's SQL assigners implement these traits, and the static and machine
//! assigners reach a shared store only through [`RangeRegistry`] and [`ExactLeaseRegistry`];
//! the store, etcd and ZooKeeper implement [`OrderMarks`]. Generating IDs is `uidgen-core`'s.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use uidgen_core::{Layout, SystemClock, UidGenerator};
//! use uidgen_worker::{AssignmentKind, GeneratorBuilder, StaticWorkerIdAssigner};
//!
//! let dir = tempfile::tempdir()?;
//! let built = GeneratorBuilder::new(Layout::snowflake()?)
//!     .assigner(StaticWorkerIdAssigner::new(7, dir.path().join("worker-7.state")))
//!     .build_snowflake(SystemClock)
//!     .await?;
//! let id = built.generator.next_id()?;
//! assert_eq!(built.generator.parse(id)?.parts.worker, 7);
//! assert_eq!(built.assignment.kind, AssignmentKind::STATIC);
//! # Ok(()) }
//! ```

mod assigner;
mod assigner_core;
pub mod blocking;
mod builder;
mod cache;
mod container;
mod error;
mod future;
mod holder_health;
mod host;
mod host_record;
mod keeper;
mod lease_options;
mod machine;
mod machine_part;
mod mark;
mod namespace;
mod order_fence;
mod order_record;
mod range;
mod range_checked;
mod registry;
mod remote_lease;
mod remote_resume;
mod state_dir;
mod static_id;
#[cfg(feature = "testing")]
pub mod testing;
mod wait;

pub use assigner::{AssignmentKind, WorkerAssignment, WorkerIdAssigner};
pub use assigner_core::{AssignerCore, ClockBehind};
pub use builder::{AnyBuilt, Built, GeneratorBuilder, GuardedGenerator};
pub use cache::{CacheLock, CachedWorker, read_cache, write_cache};
pub use container::{ContainerEvidence, ContainerProbe};
pub use error::{Result, WorkerError};
pub use future::BoxFuture;
pub use holder_health::{Coordinator, HealthSnapshot, HolderHealth};
pub use host::{ENV_HOST, ENV_PORT, default_holder, host_name, local_ip};
pub use host_record::{HOST_RECORD, HostRecord};
pub use keeper::{KeeperReports, KeeperStatus, WorkerKeeper};
pub use lease_options::{LeaseOptions, MAX_HOLDER_NAME_LEN, MAX_LEASE_TTL};
pub use machine::{MachineWorkerIdAssigner, PROCESS_BITS};
pub use machine_part::{HostIdentity, MACHINE_BITS, MachinePart, MachineSource};
pub use mark::{LocalMark, MarkFence, MarkTiming, mark_step_ms};
pub use namespace::{NamespaceRecord, Origin, RevisionWatch, may_reestablish};
pub use order_fence::{OrderFence, OrderMarkStatus, OrderMarks, OrderOptions, order_mark_name};
pub use order_record::{MarkRaise, OrderMarkRecord};
pub use range::WorkerIdRange;
pub use registry::{ExactLease, ExactLeaseRegistry, LiveHolder, RangeRegistry};
pub use remote_lease::{LeaseGrant, MIN_FALLBACK_LEASE_TTL, RemoteLease};
pub use remote_resume::{HeldLease, PendingResume, Resumable};
pub use state_dir::{ENV_STATE_DIR, SYSTEM_STATE_DIR, StateDir, StateDirError, StateDirSource};
pub use static_id::StaticWorkerIdAssigner;
pub use wait::wait_for_clock;
