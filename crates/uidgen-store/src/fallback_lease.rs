//! [`FallbackLeases`]: worker ids that servers lease to their clients' embedded fallbacks.
//!
//! A client (`uidgen-client`) that finds every server down issues IDs itself, with a worker id
//! of its own. That id must be one no server and no other client uses for the time units the
//! client stamps. The client never talks to the database, so a server claims the id for it,
//! in `worker_lease`, with the rules of every lease (`lease.rs`, `lease_claim.rs`):
//!
//! - ids come from the *embedded range*, registered in `worker_id_range` as
//!   [`FallbackLeases::REGISTRY_NAME`] before the first claim, so every other assigner on the
//!   store keeps out of it and an overlapping range is refused;
//! - a claim is one conditional statement (an insert of a never-used id or a takeover of an
//!   expired one): racing claims, from any number of servers, get distinct ids;
//! - the client stamps only units that end by the lease's `valid_until` (the row's
//!   `expires_at_ms`, no reserve: a client restarted from its state file runs only until the
//!   `valid_until` it recorded), and only units that end after the granted floor: the claim's
//!   clock reading, past the expiry it replaced, and at least the recorded issued-until time;
//! - a renewal matches the holder string (the client's name, `#`, a random token) and raises
//!   the row's expiry (never lowers it) before the client raises its own `valid_until`;
//!   a renewal after the id was taken over or released fails with [`StoreError::LeaseLost`].

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::clock::saturating_millis;
use uidgen_core::{Clock, Layout, SystemClock};

use crate::error::{Result, StoreError, StoreFuture};
use crate::lease_claim::{claim_row, holder_with_token};
use crate::store::Store;
use crate::worker_lease::DEFAULT_SPACE;
use uidgen_worker::{
    LeaseGrant, MAX_HOLDER_NAME_LEN, MAX_LEASE_TTL, MIN_FALLBACK_LEASE_TTL, WorkerIdRange,
};

/// The longest holder string (the `worker_lease.holder` column).
const MAX_HOLDER_LEN: usize = 128;

/// Leases worker ids of the embedded range to clients' fallbacks, through the store.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
/// use std::time::Duration;
/// use uidgen_core::Layout;
/// use uidgen_store::{FallbackLeases, Store};
/// use uidgen_worker::WorkerIdRange;
/// # let dir = tempfile::tempdir().map_err(|e| uidgen_store::StoreError::InvalidInput(e.to_string()))?;
/// # let url = format!("sqlite://{}", dir.path().join("uidgen.db").display());
/// let store = Store::connect(&url).await?;
/// let layout = Layout::vesta_max_peak()?;
/// let leases = FallbackLeases::new(store, WorkerIdRange::new(0, 923)?);
/// let a = leases.claim(&layout, "app-a", Duration::from_secs(60)).await?;
/// let b = leases.claim(&layout, "app-b", Duration::from_secs(60)).await?;
/// assert_ne!(a.worker_id, b.worker_id);
/// let renewed = leases.renew(&layout, a.worker_id, &a.holder, Duration::from_secs(60), 0).await?;
/// assert!(renewed >= a.valid_until_ms);
/// assert!(leases.release(&layout, b.worker_id, &b.holder, 0).await?);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct FallbackLeases {
    store: Store,
    clock: Arc<dyn Clock>,
    range: WorkerIdRange,
}

impl FallbackLeases {
    /// The name the embedded range is recorded under in `worker_id_range`.
    pub const REGISTRY_NAME: &'static str = "fallback";

    /// Lease ids of `range` (the embedded range) from `store`, reading the system clock.
    pub fn new(store: Store, range: WorkerIdRange) -> Self {
        Self {
            store,
            clock: Arc::new(SystemClock),
            range,
        }
    }

    /// Read time from `clock` instead.
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The embedded range, as configured (`LO-max` reaches the layout's largest id).
    pub fn range(&self) -> WorkerIdRange {
        self.range
    }

    /// Lease a worker id of the embedded range to the client `name` for `ttl`.
    ///
    /// Errors: [`StoreError::InvalidInput`] for a name of 0 or more than
    /// [`MAX_HOLDER_NAME_LEN`] characters (or with control characters) and a ttl outside
    /// [`MIN_FALLBACK_LEASE_TTL`] to [`MAX_LEASE_TTL`]; [`WorkerError::WorkerRangeOutsideLayout`](uidgen_worker::WorkerError::WorkerRangeOutsideLayout),
    /// [`StoreError::WorkerRangeConflict`] and [`StoreError::WorkerRangeChanged`] from the
    /// range's registration; [`StoreError::NoFreeWorkerId`] when every id of the range is held
    /// by a live lease; [`StoreError::LeaseContention`]; database errors.
    ///
    /// Cancel safety: dropped after the claim committed, the row holds the id under a holder
    /// string nobody knows, until it expires (one ttl); nothing was stamped under it.
    pub fn claim<'a>(
        &'a self,
        layout: &'a Layout,
        name: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, LeaseGrant> {
        Box::pin(async move {
            let ttl_ms = check_ttl(ttl)?;
            check_name(name)?;
            let range = self.range.within(layout)?;
            // Before any id is taken, so every other assigner on the store keeps out of the range.
            self.store
                .register_worker_range(Self::REGISTRY_NAME, self.range)
                .await?;
            let holder = holder_with_token(name);
            // No reserve: a client restarted from its state file runs only until the valid_until
            // it recorded, which the row's expiry covers.
            let claimed = claim_row(
                &self.store,
                self.clock.as_ref(),
                DEFAULT_SPACE,
                range,
                &holder,
                ttl_ms,
                0,
            )
            .await?;
            tracing::info!(
                worker_id = claimed.worker_id,
                holder = %holder,
                valid_until_ms = claimed.valid_until_ms,
                "leased a fallback worker id to a client"
            );
            Ok(LeaseGrant {
                worker_id: claimed.worker_id,
                floor_ms: claimed.floor_ms(),
                valid_until_ms: claimed.valid_until_ms,
                holder,
            })
        })
    }

    /// Extend `holder`'s lease on `worker_id` to `ttl` from now, recording that the client
    /// issued up to `issued_until_ms`; the new `valid_until` once the database accepted it.
    ///
    /// Errors: [`StoreError::LeaseLost`] when `holder` no longer holds the id (taken over after
    /// it expired, or released); [`StoreError::InvalidInput`] for a worker id outside the
    /// embedded range, a malformed holder, a ttl out of bounds or an issued-until time past
    /// what the lease allows; database errors (the lease then stands until its expiry).
    pub fn renew<'a>(
        &'a self,
        layout: &'a Layout,
        worker_id: u64,
        holder: &'a str,
        ttl: Duration,
        issued_until_ms: u64,
    ) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let ttl_ms = check_ttl(ttl)?;
            self.check_lease(layout, worker_id, holder)?;
            let now = self.clock.now_millis();
            check_issued(issued_until_ms, now)?;
            let valid_until = now.saturating_add(ttl_ms);
            if self
                .store
                .renew_lease(
                    DEFAULT_SPACE,
                    worker_id,
                    holder,
                    valid_until,
                    issued_until_ms,
                )
                .await?
            {
                return Ok(valid_until);
            }
            Err(StoreError::LeaseLost {
                worker_id,
                reason:
                    "the fallback lease is not held by this holder any more: it was taken over \
                     after it expired, or released"
                        .to_owned(),
            })
        })
    }

    /// Give `holder`'s lease on `worker_id` back, recording that the client issued up to
    /// `issued_until_ms`: the next holder's floor. `false` when `holder` did not hold it.
    ///
    /// Errors: as for [`renew`](Self::renew), but a lease that is not held is `Ok(false)`.
    pub fn release<'a>(
        &'a self,
        layout: &'a Layout,
        worker_id: u64,
        holder: &'a str,
        issued_until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            self.check_lease(layout, worker_id, holder)?;
            check_issued(issued_until_ms, self.clock.now_millis())?;
            let released = self
                .store
                .release_lease(DEFAULT_SPACE, worker_id, holder, issued_until_ms)
                .await?;
            if released {
                tracing::info!(
                    worker_id,
                    holder,
                    "a client released its fallback worker id"
                );
            }
            Ok(released)
        })
    }

    /// A renewal or release names an id of the embedded range and a well-formed holder.
    fn check_lease(&self, layout: &Layout, worker_id: u64, holder: &str) -> Result<()> {
        let range = self.range.within(layout)?;
        if !range.contains(worker_id) {
            return Err(StoreError::InvalidInput(format!(
                "worker id {worker_id} is not a fallback worker id: this server leases {range}"
            )));
        }
        let len = holder.chars().count();
        if !(3..=MAX_HOLDER_LEN).contains(&len) || !holder.contains('#') {
            return Err(StoreError::InvalidInput(format!(
                "holder must be the holder string the claim returned (3 to {MAX_HOLDER_LEN} \
                 characters with a `#`); got {len} characters"
            )));
        }
        Ok(())
    }
}

fn check_ttl(ttl: Duration) -> Result<u64> {
    if ttl < MIN_FALLBACK_LEASE_TTL || ttl > MAX_LEASE_TTL {
        return Err(StoreError::InvalidInput(format!(
            "ttl {} ms is out of range: ask for {} to {} ms",
            saturating_millis(ttl),
            saturating_millis(MIN_FALLBACK_LEASE_TTL),
            saturating_millis(MAX_LEASE_TTL)
        )));
    }
    Ok(saturating_millis(ttl))
}

fn check_name(name: &str) -> Result<()> {
    let len = name.chars().count();
    if len == 0 || len > MAX_HOLDER_NAME_LEN || name.chars().any(char::is_control) {
        return Err(StoreError::InvalidInput(format!(
            "holder name must be 1 to {MAX_HOLDER_NAME_LEN} characters without control characters \
             (e.g. `<host>/<pid>`); got {len} characters"
        )));
    }
    Ok(())
}

/// A client never stamps past its lease, which never runs more than [`MAX_LEASE_TTL`] past a
/// server's clock (`now_ms`; a day leaves room for any skew between servers): an issued-until
/// time beyond that is a bug, and recording it would hold every later holder back.
fn check_issued(issued_until_ms: u64, now_ms: u64) -> Result<()> {
    let bound = now_ms.saturating_add(saturating_millis(MAX_LEASE_TTL));
    if issued_until_ms > bound {
        return Err(StoreError::InvalidInput(format!(
            "issued_until_ms {issued_until_ms} lies past the lease's reach ({bound} ms): a client \
             issues only within its lease"
        )));
    }
    Ok(())
}
