//! The claim of a `worker_lease` row, shared by every kind of lease: a server's own worker id
//! ([`LeasedWorkerIdAssigner`](crate::LeasedWorkerIdAssigner)) and a client's fallback worker
//! id ([`FallbackLeases`](crate::FallbackLeases)). Both follow the rules of `lease.rs`:
//!
//! - one conditional statement wins a row: an `INSERT` of a never-used id, or an
//!   `UPDATE ... WHERE expires_at_ms < now` of an expired (or released) one, whose affected-row
//!   count picks exactly one winner among racing claimants;
//! - the row's expiry is written as `valid_until + reserve`;
//! - the winner's floor is the claim's `now`, which is past the expiry it replaced (and so past
//!   every unit the predecessor may stamp), and at least the predecessor's recorded
//!   issued-until time.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use uidgen_core::Clock;

use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::worker_lease::DEFAULT_SPACE;
use uidgen_worker::WorkerIdRange;

/// How many rounds a claim may lose to other claimants before giving up with
/// [`StoreError::LeaseContention`].
pub(crate) const CLAIM_ATTEMPTS: u32 = 8;

/// After a lost race, a claim picks among this many of the lowest never-used ids.
const SPREAD: u64 = 64;

/// A row this claim won.
#[derive(Debug, Clone)]
pub(crate) struct ClaimedRow {
    /// The worker id.
    pub(crate) worker_id: u64,
    /// The claim's clock reading: the expiry it replaced lies before it.
    pub(crate) claimed_at_ms: u64,
    /// The lease's own expiry: IDs may be stamped up to here.
    pub(crate) valid_until_ms: u64,
    /// What the row says: `valid_until_ms` plus the reserve.
    pub(crate) expires_ms: u64,
    /// The previous holders' recorded issued-until time (0 for a never-used id).
    pub(crate) last_issued_ms: u64,
}

impl ClaimedRow {
    /// Where earlier holders of the id stopped: they stamped only before the expiry this claim
    /// replaced, which was below the clock at the claim, and before their recorded
    /// issued-until time.
    pub(crate) fn floor_ms(&self) -> u64 {
        self.claimed_at_ms.max(self.last_issued_ms)
    }
}

/// Claim a row of `range` (already fitted to the layout) in the ID space `space` for `holder`:
/// a never-used id first, else the expired one used least recently. Rows of other spaces play
/// no part (IDs of two spaces may be equal); in a named space, an id leased before leases were
/// kept per space counts as held until the clock passed where its IDs of then lie below
/// ([`Store::lease_floors_before_spaces`]). `valid_until` is the clock plus `ttl_ms`, the
/// row's expiry that plus `reserve_ms`.
///
/// Errors: [`StoreError::NoFreeWorkerId`] when every id of the range is held by a live lease,
/// [`StoreError::LeaseContention`] when free ids exist but other claimants won each of them
/// [`CLAIM_ATTEMPTS`] times running, and database errors.
///
/// Cancel safety: dropped before a claim statement commits, nothing is claimed; dropped after,
/// the row holds the id under a holder string nobody keeps, until its expiry.
pub(crate) async fn claim_row(
    store: &Store,
    clock: &dyn Clock,
    space: &str,
    range: WorkerIdRange,
    holder: &str,
    ttl_ms: u64,
    reserve_ms: u64,
) -> Result<ClaimedRow> {
    let (low, max) = (range.low(), range.high());
    // An older uidgen leased one worker id for all of a server's spaces: an id a named space
    // never leased may still carry IDs of that time, in any space, up to its floor. The
    // default space's rows are those very leases, so they carry it already.
    let before_spaces = if space == DEFAULT_SPACE {
        HashMap::new()
    } else {
        store.lease_floors_before_spaces(low, max).await?
    };
    // A lost race means someone else won that id; look again.
    for attempt in 0..CLAIM_ATTEMPTS {
        if attempt > 0 {
            // Racers that retry in lockstep keep colliding; a short random pause spreads them.
            let pause = fastrand::u64(1..=5 * u64::from(attempt));
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        let now = clock.now_millis();
        let valid_until = now.saturating_add(ttl_ms);
        let expires = valid_until.saturating_add(reserve_ms);
        let won = |worker_id, last_issued_ms| ClaimedRow {
            worker_id,
            claimed_at_ms: now,
            valid_until_ms: valid_until,
            expires_ms: expires,
            last_issued_ms,
        };
        let mut rows = store.lease_rows(space, max).await?;
        rows.retain(|r| range.contains(r.worker_id));
        // Ids with a row, and never-used ids whose floor from before spaces is not behind the
        // clock yet: neither can be inserted now.
        let pending: Vec<(u64, u64)> = before_spaces
            .iter()
            .filter(|&(id, &floor)| floor >= now && range.contains(*id))
            .map(|(&id, &floor)| (id, floor))
            .collect();
        let used: HashSet<u64> = rows
            .iter()
            .map(|r| r.worker_id)
            .chain(pending.iter().map(|&(id, _)| id))
            .collect();
        let mut expired: Vec<_> = rows.iter().filter(|r| r.expires_at_ms < now).collect();
        if u64::try_from(used.len()).map_or(true, |n| n >= range.count()) && expired.is_empty() {
            // Every row is live (expires_at_ms >= now) and every pending floor ahead, so the
            // soonest of them is not behind.
            let soonest = rows
                .iter()
                .map(|r| r.expires_at_ms)
                .chain(pending.iter().map(|&(_, floor)| floor))
                .min()
                .unwrap_or(now);
            return Err(StoreError::NoFreeWorkerId {
                max,
                count: range.count(),
                retry_in_ms: soonest.saturating_sub(now).saturating_add(1),
            });
        }
        // A never-used id needs no wait; among expired ones, the least recently used first.
        // The lowest first; after a lost race, one of the lowest few at random, so that many
        // claimants starting together (a fleet of clients) spread out instead of all racing
        // for the same id round after round.
        let unused = range
            .count()
            .saturating_sub(u64::try_from(used.len()).unwrap_or(u64::MAX));
        let skip = if attempt == 0 || unused <= 1 {
            0
        } else {
            fastrand::u64(..unused.min(SPREAD))
        };
        let fresh = (low..=max)
            .filter(|id| !used.contains(id))
            .nth(usize::try_from(skip).unwrap_or(0));
        if let Some(fresh) = fresh
            && store
                .try_insert_lease(space, fresh, holder, expires)
                .await?
        {
            // Behind the clock (else it would be pending), so the claim's `now` covers it too.
            let before = before_spaces.get(&fresh).copied().unwrap_or(0);
            return Ok(won(fresh, before));
        }
        expired.sort_by_key(|r| r.last_issued_ms);
        for row in expired {
            if store
                .try_take_over_lease(space, row.worker_id, holder, expires, now)
                .await?
            {
                // We hold it now, so nobody else moves last_issued_ms: read it fresh.
                let last = store
                    .lease_row(space, row.worker_id)
                    .await?
                    .map_or(row.last_issued_ms, |r| r.last_issued_ms);
                tracing::info!(
                    space,
                    worker_id = row.worker_id,
                    previous = %row.holder,
                    "took over an expired worker lease"
                );
                return Ok(won(row.worker_id, last));
            }
        }
    }
    Err(StoreError::LeaseContention {
        attempts: CLAIM_ATTEMPTS,
    })
}

/// A fresh holder string: `name`, `#` and a random token of its own, so renewal and release
/// only ever match this claim's row.
pub(crate) fn holder_with_token(name: &str) -> String {
    format!("{name}#{:016x}", fastrand::u64(..))
}
