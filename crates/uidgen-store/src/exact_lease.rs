//! Exact-id leases: a lease in `worker_lease` on one given worker id, for the assigners whose
//! id is decided before the store is asked (`static`: the configured id; `machine`: machine
//! part and process value). A fence kept in local files protects one host only; registered
//! here, the claim is seen by every host and container sharing the store.
//!
//! The rules are a leased id's (`lease.rs`, `lease_claim.rs`), on one id instead of a range:
//!
//! - the claim is one conditional statement (an insert of a never-used id, or a takeover of a
//!   lease that expired before the claim's clock reading): of two claimants, one wins;
//! - a live lease of another holder is not touched: the claim reports it ([`ExactClaim::Held`])
//!   and the caller moves on (machine) or refuses (static);
//! - the winner continues the id's recorded issued-until time as its floor, and the local
//!   state file's mark too (the id's earlier lives on this host), waiting until its clock has
//!   passed both; its generator is fenced by the lease's expiry and by the local mark;
//! - no reserve: a restart while the store is unreachable is refused, not run from the file.

use std::sync::Arc;

use uidgen_core::Clock;
use uidgen_core::clock::saturating_millis;

use uidgen_worker::{
    BoxFuture, ExactLease, ExactLeaseRegistry, LiveHolder, MarkFence, RangeRegistry,
    WorkerAssignment, WorkerError, WorkerIdRange, default_holder,
};

use crate::error::{Result, StoreError};
use crate::lease_claim::{CLAIM_ATTEMPTS, ClaimedRow, holder_with_token};
use crate::lease_guard::{LeaseGuard, NewLease};
use crate::store::Store;
use crate::worker_lease::DEFAULT_SPACE;

/// What a claim of one worker id found.
#[derive(Debug, Clone)]
pub(crate) enum ExactClaim {
    /// This claim holds it now.
    Won(ClaimedRow),
    /// Another holder's lease on it is live.
    Held(LiveHolder),
}

/// Claim exactly `worker_id` for `holder` until the clock plus `ttl_ms`, unless another
/// holder's lease on it is live.
///
/// Errors: [`StoreError::LeaseContention`] when the id changed hands under this claim
/// [`CLAIM_ATTEMPTS`] times running, and database errors.
///
/// Cancel safety: dropped before a statement commits, nothing is claimed; dropped after, the
/// row holds the id under a holder string nobody keeps, until its expiry (one ttl).
pub(crate) async fn claim_exact_row(
    store: &Store,
    clock: &dyn Clock,
    worker_id: u64,
    holder: &str,
    ttl_ms: u64,
) -> Result<ExactClaim> {
    for _ in 0..CLAIM_ATTEMPTS {
        let now = clock.now_millis();
        let valid_until = now.saturating_add(ttl_ms);
        let won = |last_issued_ms| {
            ExactClaim::Won(ClaimedRow {
                worker_id,
                claimed_at_ms: now,
                valid_until_ms: valid_until,
                expires_ms: valid_until,
                last_issued_ms,
            })
        };
        if store
            .try_insert_lease(DEFAULT_SPACE, worker_id, holder, valid_until)
            .await?
        {
            return Ok(won(0));
        }
        let Some(row) = store.lease_row(DEFAULT_SPACE, worker_id).await? else {
            continue; // deleted by hand between the two statements: insert again
        };
        if row.expires_at_ms >= now {
            return Ok(ExactClaim::Held(LiveHolder {
                holder: row.holder,
                expires_in_ms: row.expires_at_ms - now,
            }));
        }
        if store
            .try_take_over_lease(DEFAULT_SPACE, worker_id, holder, valid_until, now)
            .await?
        {
            // We hold it now, so nobody else moves last_issued_ms: read it fresh.
            let last = store
                .lease_row(DEFAULT_SPACE, worker_id)
                .await?
                .map_or(row.last_issued_ms, |r| r.last_issued_ms);
            if !row.holder.is_empty() {
                tracing::info!(worker_id, previous = %row.holder, "took over an expired lease");
            }
            return Ok(won(last));
        }
        // Someone else took it over first: look again (it is probably live now).
    }
    Err(StoreError::LeaseContention {
        attempts: CLAIM_ATTEMPTS,
    })
}

/// Lease exactly `request.worker_id` in `store`, continuing the local mark in its state file
/// (locked by the caller): `Ok(Err(holder))` when another live holder has it.
///
/// The clock, the longest start wait and the local borrowing bound come from `request.timing`;
/// the ttl, heartbeat and holder name from `request.options` (its range and cache are not
/// used). The borrowing bound is the lower of the mark's and the lease's, so a successor's wait
/// (the lease's takeover wait) covers it.
///
/// Cancel safety: as [`claim_exact_row`]; dropped while waiting for the clock, the row holds
/// the id until its expiry and the state file keeps its previous mark.
async fn lease_exact(
    store: &Store,
    request: ExactLease<'_>,
) -> Result<std::result::Result<WorkerAssignment, LiveHolder>> {
    let ExactLease {
        options,
        timing,
        layout,
        worker_id,
        cache,
        kind,
    } = request;
    options.validate()?;
    let holder = holder_with_token(&options.holder.clone().unwrap_or_else(default_holder));
    let ttl_ms = saturating_millis(options.ttl);
    let clock = Arc::clone(&timing.clock);
    let claimed = match claim_exact_row(store, clock.as_ref(), worker_id, &holder, ttl_ms).await? {
        ExactClaim::Won(claimed) => claimed,
        ExactClaim::Held(live) => return Ok(Err(live)),
    };
    let claim = Some((holder.as_str(), claimed.expires_ms));
    // Wait for the clock to pass what earlier holders stamped (the store's record, the local
    // file's mark); the claim's own clock reading needs no wait, it is the floor below.
    let fence = match MarkFence::continue_above(
        cache,
        worker_id,
        layout,
        timing,
        claimed.last_issued_ms,
        claim,
        true,
    )
    .await
    {
        Ok(fence) => fence,
        Err(error) => {
            // Hand the id back untouched, so it is not blocked for a whole ttl.
            let _ = store
                .release_lease(DEFAULT_SPACE, worker_id, &holder, claimed.last_issued_ms)
                .await;
            return Err(error.into());
        }
    };
    let max_borrow_ms = fence
        .max_borrow_ms
        .unwrap_or(u64::MAX)
        .min(saturating_millis(options.max_borrow(layout)));
    let waited = fence.floor_ms >= claimed.claimed_at_ms;
    // A takeover's predecessor stamped only before the expiry replaced, which lies below the
    // claim's clock reading.
    let floor_ms = fence.floor_ms.max(claimed.floor_ms());
    let guard = LeaseGuard::new(NewLease {
        store: store.clone(),
        clock,
        space: DEFAULT_SPACE.to_owned(),
        worker_id,
        holder,
        ttl_ms,
        reserve_ms: 0,
        valid_until_ms: claimed.valid_until_ms,
        last_issued_ms: claimed.last_issued_ms,
        mark: Some(fence.mark),
        forget_mark_on_end: false,
        confirmed: true,
        floor_ms,
        max_borrow_ms,
    });
    if waited {
        // The wait for the clock came out of the lease: renew now, so the heartbeat starts
        // from a whole ttl. Nothing is issued yet: record the predecessor's time. Any other
        // error leaves it valid until the claim's expiry; the heartbeat retries.
        if let Err(error @ StoreError::LeaseLost { .. }) =
            guard.renew_recording(claimed.last_issued_ms).await
        {
            return Err(error);
        }
    }
    if let Some(interval) = options.heartbeat_interval {
        guard.start_heartbeat(interval);
    }
    tracing::debug!(worker_id, holder = %guard.holder(), "leased an exact worker id");
    Ok(Ok(WorkerAssignment::kept(Arc::new(guard), kind)))
}

/// The store records the assigners' ranges in `worker_id_range`
/// ([`Store::register_worker_range`]).
impl RangeRegistry for Store {
    fn register_worker_range<'a>(
        &'a self,
        assigner: &'a str,
        range: WorkerIdRange,
    ) -> BoxFuture<'a, uidgen_worker::Result<()>> {
        Box::pin(async move {
            Store::register_worker_range(self, assigner, range)
                .await
                .map_err(WorkerError::from)
        })
    }
}

/// The store leases exact worker ids in `worker_lease`, for the static and machine assigners.
impl ExactLeaseRegistry for Store {
    fn lease_exact<'a>(
        &'a self,
        request: ExactLease<'a>,
    ) -> BoxFuture<'a, uidgen_worker::Result<std::result::Result<WorkerAssignment, LiveHolder>>>
    {
        Box::pin(async move { lease_exact(self, request).await.map_err(WorkerError::from) })
    }
}
