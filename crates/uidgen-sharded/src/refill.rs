//! Refilling a shard's list: under the list's refill lock, if the list is short, claim one
//! segment in the database and push all of it in one `RPUSH`.
//!
//! Why no number is ever pushed twice, whatever the lock does: every push is one segment
//! claimed from the database right before it (`max_id = max_id + step`, committed before the
//! push; the segment is `max_id - step + 1 ..= max_id`, the original service's), and segments
//! of a shard never overlap, across threads, processes, servers and the original service's
//! servers refilling beside ours (which claim and push the same way); the
//! push is one command, so a segment is never half pushed; and a push that fails, or whose
//! reply is lost, is never sent again (its segment is skipped). Two servers refilling at once
//! therefore push two different segments; the lock only keeps them from overfilling a list.

use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::Ordering;

use tracing::{debug, warn};
use uidgen_store::IdSegment;

use crate::apps::ShardEntry;
use crate::error::{Result, ShardedError};
use crate::layout::MAX_INDEX_I64;
use crate::link::Retry;
use crate::state::{ShardedService, flag_index};
use crate::stats::Stats;

/// Refills of one app's shards that run at once in a scheduled pass.
const PASS_CONCURRENCY: usize = 8;

/// How often a caller waiting for another server's refill looks at the list.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(2);

/// A refill's outcome, and the indexes kept for the caller (never pushed).
#[derive(Debug)]
pub(crate) struct Refill {
    pub(crate) outcome: RefillOutcome,
    pub(crate) kept: std::ops::Range<u64>,
}

/// What a refill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefillOutcome {
    /// A segment was claimed and its indexes `start..end` pushed (those before `start`, if
    /// any, went to the caller whose pop found the list empty).
    Pushed {
        /// The first index pushed.
        start: u64,
        /// One past the last index pushed.
        end: u64,
    },
    /// The list holds more than the refill threshold: nothing to do.
    Full {
        /// Its length.
        len: u64,
    },
    /// Another holder has the list's refill lock: nothing was done, and nothing deleted.
    Busy,
}

/// What a scheduled pass over every shard did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefillReport {
    /// Shards whose list was short.
    pub short: u64,
    /// Segments pushed.
    pub pushed: u64,
    /// Short shards another server was refilling.
    pub busy: u64,
    /// Refills that failed (logged).
    pub failed: u64,
}

/// One refill asked for: the list (app and shard), its shard as last read, and how many
/// numbers of the new segment the caller keeps (0: the whole segment goes to the list).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RefillOrder {
    app_id: u8,
    shard: u8,
    entry: ShardEntry,
    keep: usize,
}

impl RefillOrder {
    /// A refill of `app_id`'s list of `shard`, described by `entry`, keeping `keep` numbers.
    pub(crate) fn new(app_id: u8, shard: u8, entry: ShardEntry, keep: usize) -> Self {
        Self {
            app_id,
            shard,
            entry,
            keep,
        }
    }
}

impl ShardedService {
    /// Refill one shard's list if it is short, as a scheduled pass or an empty pop would.
    /// [`RefillOutcome::Busy`] when another server holds the list's refill lock: the lock is
    /// left alone.
    ///
    /// Cancel safety: dropped mid-way, it may leave its lock held until `lock_ttl` and a claimed
    /// segment unpushed (its numbers are skipped); nothing is ever pushed twice.
    pub async fn refill(&self, app_id: u8, shard: u8) -> Result<RefillOutcome> {
        let entry = self.shard_entry(app_id, shard)?;
        Ok(self
            .refill_shard(RefillOrder::new(app_id, shard, entry, 0))
            .await?
            .outcome)
    }

    /// Refill one shard under its lock. With `keep` above 0 (a caller whose pop found the list
    /// empty), the list counts as short only when empty, and the caller keeps up to `keep`
    /// indexes from the front of the new segment; the rest is pushed.
    ///
    /// The refill runs as a task of its own: a caller that goes away (an HTTP client that
    /// disconnects drops its request) must not cancel it between taking the lock and releasing
    /// it, which would block the list's refills until the lock expired. If the caller is gone,
    /// the numbers it would have kept are skipped.
    pub(crate) async fn refill_shard(&self, order: RefillOrder) -> Result<Refill> {
        let Some(service) = self.me.upgrade() else {
            return Err(ShardedError::Shutdown);
        };
        let task = tokio::spawn(async move { service.refill_under_lock(order).await });
        match task.await {
            Ok(refill) => refill,
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(ShardedError::Shutdown),
        }
    }

    /// Take the list's refill lock, refill, release. Callers run it in a task of its own (see
    /// [`refill_shard`](Self::refill_shard)).
    pub(crate) async fn refill_under_lock(&self, order: RefillOrder) -> Result<Refill> {
        let RefillOrder { app_id, shard, .. } = order;
        let lock_key = self.keys.refill_lock(app_id, shard);
        let lock = self
            .link
            .try_lock("taking a refill lock", &lock_key, self.options.lock_ttl)
            .await?;
        // Not acquired: we hold nothing, so there is nothing to release (the original deleted
        // the key here anyway, freeing the holder's lock).
        let Some(lock) = lock else {
            Stats::add(&self.stats.lock_busy, 1);
            return Ok(Refill {
                outcome: RefillOutcome::Busy,
                kept: 0..0,
            });
        };
        let outcome = self.refill_locked(order).await;
        if let Err(error) = &outcome {
            Stats::add(&self.stats.refill_failures, 1);
            warn!(app_id, shard, %error, "refill failed");
        }
        let released = self.link.unlock("releasing a refill lock", lock).await;
        // Wake this process's callers waiting for a refill to end (of any list: they look).
        self.refilled.notify_waiters();
        match released {
            Ok(true) => {}
            Ok(false) => {
                warn!(
                    app_id,
                    shard,
                    "the refill lock had expired before its release (a refill slower than \
                     lock_ttl); the lock was left to its new holder, if any"
                )
            }
            Err(error) => {
                debug!(
                    app_id,
                    shard,
                    %error,
                    "could not release a refill lock; it expires by itself"
                )
            }
        }
        outcome
    }

    /// The refill proper, with the lock held.
    async fn refill_locked(&self, order: RefillOrder) -> Result<Refill> {
        let RefillOrder {
            app_id,
            shard,
            entry,
            keep,
        } = order;
        let key = self.keys.list(app_id, shard);
        let len: u64 = self
            .link
            .run("reading a list's length", Retry::Once, |mut conn| {
                let key = key.clone();
                async move { redis::cmd("LLEN").arg(&key).query_async(&mut conn).await }
            })
            .await?;
        let short = if keep > 0 {
            len == 0
        } else {
            len <= entry.threshold
        };
        if !short {
            return Ok(Refill {
                outcome: RefillOutcome::Full { len },
                kept: 0..0,
            });
        }
        let segment = match self
            .timed(
                "claiming an id_alloc segment",
                // A caller that still needs `keep` numbers gets them from this one claim,
                // however small the app's step.
                self.store.claim_id_segment_at_least(
                    app_id,
                    shard,
                    MAX_INDEX_I64,
                    i64::try_from(keep).unwrap_or(i64::MAX).max(1),
                ),
            )
            .await
        {
            Ok(segment) => segment,
            Err(error) => {
                if let ShardedError::AppExhausted { .. } = error {
                    // Relaxed: a per-shard hint, reset by every app sync; no other memory depends
                    // on it.
                    self.exhausted[flag_index(app_id, shard)].store(true, Ordering::Relaxed);
                }
                return Err(error);
            }
        };
        let (start, end) = indexes(&segment);
        // The caller's share never reaches the list, so it cannot be popped by anyone else.
        let kept_end = start
            .saturating_add(u64::try_from(keep).unwrap_or(u64::MAX))
            .min(end);
        Stats::add(&self.stats.refills, 1);
        if kept_end < end {
            let numbers: Vec<u64> = (kept_end..end).collect();
            // One command for the whole rest of the segment, sent once: see the module doc.
            let len: u64 = self
                .link
                .run_once("pushing a segment", |mut conn| async move {
                    redis::cmd("RPUSH")
                        .arg(&key)
                        .arg(&numbers)
                        .query_async(&mut conn)
                        .await
                })
                .await?;
            Stats::add(&self.stats.numbers_pushed, end - kept_end);
            debug!(
                app_id,
                shard,
                start = kept_end,
                end,
                len,
                "pushed a segment"
            );
        }
        Ok(Refill {
            outcome: RefillOutcome::Pushed {
                start: kept_end,
                end,
            },
            kept: start..kept_end,
        })
    }

    /// Wait, up to `lock_wait`, for the server holding a shard's refill lock to push: `true`
    /// once the list holds numbers or the lock is gone, `false` if neither happened in time.
    pub(crate) async fn wait_for_refill(&self, app_id: u8, shard: u8) -> Result<bool> {
        let deadline = tokio::time::Instant::now() + self.options.lock_wait;
        let (key, lock_key) = (
            self.keys.list(app_id, shard),
            self.keys.refill_lock(app_id, shard),
        );
        loop {
            // Woken at once when a refill of this process ends (the usual holder), else after
            // WAIT_POLL, to see a refill of another server's.
            let refilled = self.refilled.notified();
            tokio::pin!(refilled);
            refilled.as_mut().enable();
            tokio::select! {
                () = refilled => {}
                () = tokio::time::sleep(WAIT_POLL) => {}
            }
            let (len, locked): (u64, bool) = self
                .link
                .run("waiting for a refill", Retry::Once, |mut conn| {
                    let (key, lock_key) = (key.clone(), lock_key.clone());
                    async move {
                        redis::pipe()
                            .cmd("LLEN")
                            .arg(&key)
                            .cmd("EXISTS")
                            .arg(&lock_key)
                            .query_async(&mut conn)
                            .await
                    }
                })
                .await?;
            if len > 0 || !locked {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    /// Refill a shard in the background, unless this process is already doing so.
    pub(crate) fn refill_soon(&self, app_id: u8, shard: u8, entry: ShardEntry) {
        let flag = flag_index(app_id, shard);
        // Relaxed: the flag only keeps this process from starting a second refill of the same
        // list while one runs; if two ever ran, the Redis lock would turn one away.
        if self.refilling[flag].swap(true, Ordering::Relaxed) {
            return;
        }
        let Some(service) = self.me.upgrade() else {
            // Relaxed: see above.
            self.refilling[flag].store(false, Ordering::Relaxed);
            return;
        };
        tokio::spawn(async move {
            // Errors are counted and logged by `refill_shard`.
            let _ = service
                .refill_under_lock(RefillOrder::new(app_id, shard, entry, 0))
                .await;
            // Relaxed: see above.
            service.refilling[flag].store(false, Ordering::Relaxed);
        });
    }

    /// Check every shard's list and refill the short ones, as the schedule does every
    /// `refill_interval` (and once at start). Cancel safety: as [`refill`](Self::refill); the
    /// refills it started finish on their own.
    pub async fn refill_all(&self) -> RefillReport {
        let mut report = RefillReport::default();
        let (Some(table), Some(service)) = (self.table(), self.me.upgrade()) else {
            return report;
        };
        let shards: Vec<_> = table.shards().collect();
        for app in shards.chunk_by(|a, b| a.0 == b.0) {
            let lengths = match self.lengths(app.iter().map(|&(a, s, _)| (a, s))).await {
                Ok(lengths) => lengths,
                Err(error) => {
                    warn!(%error, "scheduled refill: cannot read list lengths");
                    report.failed += 1;
                    return report;
                }
            };
            let mut running = tokio::task::JoinSet::new();
            for (&(app_id, shard, entry), len) in app.iter().zip(lengths) {
                if len > entry.threshold {
                    continue;
                }
                report.short += 1;
                while running.len() >= PASS_CONCURRENCY {
                    tally(&mut report, running.join_next().await);
                }
                let service = Arc::clone(&service);
                running.spawn(async move {
                    service
                        .refill_shard(RefillOrder::new(app_id, shard, entry, 0))
                        .await
                        .map(|r| r.outcome)
                });
            }
            while let Some(done) = running.join_next().await {
                tally(&mut report, Some(done));
            }
        }
        report
    }

    /// The lengths of some lists, in one round trip.
    async fn lengths(&self, shards: impl Iterator<Item = (u8, u8)>) -> Result<Vec<u64>> {
        let keys: Vec<String> = shards.map(|(a, s)| self.keys.list(a, s)).collect();
        self.link
            .run("reading list lengths", Retry::Once, |mut conn| {
                let mut pipe = redis::pipe();
                for key in &keys {
                    pipe.cmd("LLEN").arg(key);
                }
                async move { pipe.query_async(&mut conn).await }
            })
            .await
    }
}

/// Count one finished refill of a pass.
fn tally(
    report: &mut RefillReport,
    done: Option<std::result::Result<Result<RefillOutcome>, tokio::task::JoinError>>,
) {
    match done {
        Some(Ok(Ok(RefillOutcome::Pushed { .. }))) => report.pushed += 1,
        Some(Ok(Ok(RefillOutcome::Busy))) => report.busy += 1,
        Some(Ok(Ok(RefillOutcome::Full { .. }))) | None => {}
        Some(Ok(Err(_)) | Err(_)) => report.failed += 1,
    }
}

/// A segment's indexes as the unsigned numbers pushed: `start..end`. Rows start at `max_id`
/// 0 and only grow (a claim starts above it), and the claim never starts above
/// [`MAX_INDEX_I64`], so both ends are positive; a negative end would be a row edited by hand,
/// and is pushed as nothing.
fn indexes(segment: &IdSegment) -> (u64, u64) {
    let range = segment.range();
    let start = u64::try_from(range.start).unwrap_or(0);
    let end = u64::try_from(range.end).unwrap_or(0).max(start);
    (start, end)
}

/// Refill every short list once at start, then every `refill_interval`.
pub(crate) async fn refill_loop(service: Weak<ShardedService>) {
    loop {
        let Some(strong) = service.upgrade() else {
            return;
        };
        if strong.is_shut_down() {
            return;
        }
        let report = strong.refill_all().await;
        if report.short > 0 {
            debug!(?report, "scheduled refill pass");
        }
        let interval = strong.options.refill_interval;
        drop(strong);
        tokio::time::sleep(interval).await;
    }
}
