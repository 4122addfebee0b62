//! Counters of what the service did, for metrics: read with [`ShardedService::stats`].
//!
//! Every counter is an independent `AtomicU64` updated with `Relaxed` ordering: each is only
//! ever read on its own, for a metric, and no other memory is published through it.
//!
//! [`ShardedService::stats`]: crate::ShardedService::stats

use std::sync::atomic::{AtomicU64, Ordering};

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(crate) pops: AtomicU64,
    pub(crate) ids_popped: AtomicU64,
    pub(crate) empty_pops: AtomicU64,
    pub(crate) refills: AtomicU64,
    pub(crate) numbers_pushed: AtomicU64,
    pub(crate) refill_failures: AtomicU64,
    pub(crate) lock_busy: AtomicU64,
    pub(crate) reconnects: AtomicU64,
    pub(crate) purges: AtomicU64,
    pub(crate) removed_lists: AtomicU64,
    pub(crate) corrupt_entries: AtomicU64,
    pub(crate) restored_lists: AtomicU64,
}

/// A copy of the counters at one moment (each counter read on its own).
///
/// ```
/// let stats = uidgen_sharded::StatsSnapshot::default();
/// assert_eq!(stats.refills, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StatsSnapshot {
    /// Pop requests (`LPOP`s sent for callers, a batch counts once per `LPOP`).
    pub pops: u64,
    /// IDs handed out.
    pub ids_popped: u64,
    /// Pops that found their list empty.
    pub empty_pops: u64,
    /// Segments claimed and pushed.
    pub refills: u64,
    /// Numbers pushed to lists.
    pub numbers_pushed: u64,
    /// Refills that failed (database, Redis, exhausted shard).
    pub refill_failures: u64,
    /// Refills skipped because another server held the list's refill lock.
    pub lock_busy: u64,
    /// Connections opened to Redis (the first, then every reconnect).
    pub reconnects: u64,
    /// Times every list was deleted because the Redis instance was new or had changed.
    pub purges: u64,
    /// Lists deleted because their app no longer exists.
    pub removed_lists: u64,
    /// List entries that were not indexes, skipped.
    pub corrupt_entries: u64,
    /// Lists found holding an index at or below their mark (written back behind uidgen's
    /// back, e.g. a restored backup), deleted from that entry on.
    pub restored_lists: u64,
}

impl Stats {
    /// Add `n` to `counter`.
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        // Relaxed: see the module doc.
        counter.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        // Relaxed: see the module doc.
        let read = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            pops: read(&self.pops),
            ids_popped: read(&self.ids_popped),
            empty_pops: read(&self.empty_pops),
            refills: read(&self.refills),
            numbers_pushed: read(&self.numbers_pushed),
            refill_failures: read(&self.refill_failures),
            lock_busy: read(&self.lock_busy),
            reconnects: read(&self.reconnects),
            purges: read(&self.purges),
            removed_lists: read(&self.removed_lists),
            corrupt_entries: read(&self.corrupt_entries),
            restored_lists: read(&self.restored_lists),
        }
    }
}
