//! [`ShardedService`]: pops IDs from the shards' Redis lists, and starts the background work
//! (scheduled refills, app sync, instance checks) that keeps them filled and trustworthy.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use tracing::warn;
use uidgen_store::{AppSpec, Store};

use crate::apps::{AppInfo, AppTable, ShardEntry};
use crate::error::{Result, ShardedError, from_store};
use crate::java_hash::shard_of;
use crate::keys::Keys;
use crate::layout::{SHARDS, ShardedId};
use crate::link::{RedisLink, Retry};
use crate::options::ShardedOptions;
use crate::refill::{RefillOrder, RefillOutcome};
use crate::state::{ShardedService, flag_index};
use crate::stats::{Stats, StatsSnapshot};

/// Rounds of one call that bring no new ID (the list emptied by others each time) before it
/// gives up with [`QueueEmpty`](ShardedError::QueueEmpty): a guard against starving forever
/// under extreme contention, far above what normal contention needs.
const MAX_IDLE_ROUNDS: u32 = 100;

impl ShardedService {
    /// Start the service on the current tokio runtime: load the app list, fill every shard's
    /// list that is short, and keep doing so in the background (every `refill_interval`,
    /// re-reading the apps every `sync_interval`, checking the Redis instance every
    /// `verify_interval`).
    ///
    /// Neither a database nor a Redis that is down at start is an error: calls answer
    /// [`NotInitialised`](ShardedError::NotInitialised) until the app list loads, and
    /// [`Redis`](ShardedError::Redis) errors until Redis answers. Invalid options are an
    /// error, and so is a Redis that refuses the credentials of the URL
    /// ([`RedisAuth`](ShardedError::RedisAuth)).
    pub async fn start(store: Store, options: ShardedOptions) -> Result<Arc<Self>> {
        options.validate()?;
        let stats = Arc::new(Stats::default());
        let keys = Keys::new(&options.key_prefix);
        let link = RedisLink::new(&options, keys.clone(), Arc::clone(&stats))?;
        let flags = || {
            (0..256 * usize::from(SHARDS))
                .map(|_| AtomicBool::new(false))
                .collect::<Box<[AtomicBool]>>()
        };
        let service = Arc::new_cyclic(|me| Self {
            store,
            options,
            keys,
            link,
            apps: RwLock::new(None),
            init_error: Mutex::new("not loaded yet".to_owned()),
            refilling: flags(),
            exhausted: flags(),
            refilled: tokio::sync::Notify::new(),
            sync_lock: tokio::sync::Mutex::new(()),
            stats,
            me: me.clone(),
            shut_down: AtomicBool::new(false),
            tasks: Mutex::new(Vec::new()),
        });
        // A Redis that is down may come back, and is retried in the background; one that
        // refuses the credentials refuses them on every retry, so start-up fails on it.
        match service.link.verified().await {
            Err(error @ ShardedError::RedisAuth { .. }) => return Err(error),
            Err(error) => {
                warn!(%error, "sharded mode: redis is not usable yet; retrying in the background");
            }
            Ok(_) => {}
        }
        if let Err(error) = service.sync_apps().await {
            warn!(%error, "sharded mode: cannot load the app list yet; retrying in the background");
        }
        let weak = Arc::downgrade(&service);
        let tasks = vec![
            tokio::spawn(crate::sync::sync_loop(weak.clone())),
            tokio::spawn(crate::refill::refill_loop(weak.clone())),
            tokio::spawn(verify_loop(weak)),
        ];
        service.tasks.lock().extend(tasks);
        Ok(service)
    }

    /// One ID of `app_id`, in the shard of `gate_pass` ([`shard_of`]).
    pub async fn get(&self, app_id: u8, gate_pass: &str) -> Result<u64> {
        self.get_in_shard(app_id, gate_shard(gate_pass)?).await
    }

    /// One ID of `app_id` in `shard`.
    pub async fn get_in_shard(&self, app_id: u8, shard: u8) -> Result<u64> {
        let ids = self.take(app_id, shard, 1).await?;
        debug_assert_eq!(ids.len(), 1);
        ids.first().copied().ok_or(ShardedError::QueueEmpty {
            app_id,
            shard,
            tries: 0,
            reason: "no ID came back".to_owned(),
        })
    }

    /// `count` IDs of `app_id` in the shard of `gate_pass`, popped with `LPOP key count`.
    pub async fn get_batch(&self, app_id: u8, gate_pass: &str, count: usize) -> Result<Vec<u64>> {
        self.take(app_id, gate_shard(gate_pass)?, count).await
    }

    /// `count` IDs of one shard: pop what the list has; when it runs dry, refill it on this
    /// call (or wait for the server refilling it, `empty_tries` times at most); while it runs
    /// short, refill it in the background.
    ///
    /// Cancel safety: dropping the future loses the numbers of a pop in flight (they were
    /// removed from the list and are never pushed again), never repeats one.
    pub async fn get_batch_in_shard(
        &self,
        app_id: u8,
        shard: u8,
        count: usize,
    ) -> Result<Vec<u64>> {
        self.take(app_id, shard, count).await
    }

    async fn take(&self, app_id: u8, shard: u8, count: usize) -> Result<Vec<u64>> {
        if self.is_shut_down() {
            return Err(ShardedError::Shutdown);
        }
        if count == 0 || count > self.options.max_batch {
            return Err(ShardedError::InvalidCount {
                count,
                max: self.options.max_batch,
            });
        }
        let entry = self.shard_entry(app_id, shard)?;
        let key = self.keys.list(app_id, shard);
        let mark = self.keys.popped_mark(app_id, shard);
        let mut ids = Vec::with_capacity(count);
        // Waits for another server's refill that brought nothing, and rounds without a
        // single new ID: both bounded, so a call never spins forever.
        let (mut stalled, mut idle_rounds) = (0, 0);
        loop {
            let before = ids.len();
            let (popped, left) = self.pop(&key, &mark, count - ids.len()).await?;
            Stats::add(&self.stats.pops, 1);
            // A list left short is refilled in the background, unless this call is about to
            // refill it itself (below): a background refill holding the lock would push one
            // step and make this call wait for it, round after round, with a small step.
            if left <= entry.threshold && before + popped.len() >= count {
                self.refill_soon(app_id, shard, entry);
            }
            if popped.is_empty() {
                Stats::add(&self.stats.empty_pops, 1);
                if self.is_exhausted(app_id, shard) || entry.exhausted {
                    return Err(exhausted(app_id, shard, &entry));
                }
            }
            for value in popped {
                if let Some(id) = self.to_id(app_id, shard, &entry, &key, &value)? {
                    ids.push(id);
                }
            }
            if ids.len() < count {
                // The list ran dry: refill it on this call, keeping what we still need from
                // the new segment (so a refill of our own always brings numbers), or wait for
                // the server that holds the lock to push.
                let refill = self
                    .refill_shard(RefillOrder::new(app_id, shard, entry, count - ids.len()))
                    .await?;
                for index in refill.kept {
                    ids.push(self.index_id(app_id, shard, &entry, index)?);
                }
                // The caller kept (nearly) the whole claim: refill the list for the next one.
                if let RefillOutcome::Pushed { start, end } = refill.outcome
                    && end - start <= entry.threshold
                {
                    self.refill_soon(app_id, shard, entry);
                }
                if refill.outcome == RefillOutcome::Busy
                    && ids.len() < count
                    && !self.wait_for_refill(app_id, shard).await?
                {
                    stalled += 1;
                }
            }
            if ids.len() == count {
                Stats::add(
                    &self.stats.ids_popped,
                    u64::try_from(count).unwrap_or(u64::MAX),
                );
                return Ok(ids);
            }
            idle_rounds = if ids.len() > before {
                0
            } else {
                idle_rounds + 1
            };
            if stalled >= self.options.empty_tries || idle_rounds > MAX_IDLE_ROUNDS {
                return Err(ShardedError::QueueEmpty {
                    app_id,
                    shard,
                    tries: stalled,
                    reason: format!(
                        "another server held the refill lock without pushing for {} ms, {stalled} \
                         times, or others took every push ({idle_rounds} rounds)",
                        ShardedOptions::millis(self.options.lock_wait)
                    ),
                });
            }
        }
    }

    /// `LPOP key n` against the list's mark (`pop.rs`), in one round trip: what was popped
    /// and what is left. A list found written behind our back is reported and counted; what
    /// it held from the stale entry on is gone, and the caller refills.
    async fn pop(&self, key: &str, mark: &str, n: usize) -> Result<(Vec<String>, u64)> {
        let popped = self
            .link
            .run("popping IDs", Retry::Once, |mut conn| async move {
                crate::pop::pop(&mut conn, key, mark, n).await
            })
            .await?;
        if popped.dropped > 0 {
            Stats::add(&self.stats.restored_lists, 1);
            warn!(
                list = key,
                mark = %popped.mark,
                dropped = popped.dropped,
                "list held an index at or below the highest already served from it (restored \
                 from a backup, or written by hand): deleted it from there on; it is refilled \
                 from fresh segments"
            );
        }
        Ok((popped.served, popped.left))
    }

    /// The ID of a popped list entry: `None` for an entry that is not an index (skipped and
    /// logged); [`AppExhausted`](ShardedError::AppExhausted) for an index above the shard's
    /// ceiling (its limit was lowered after the number was pushed), which is dropped, never
    /// wrapped.
    fn to_id(
        &self,
        app_id: u8,
        shard: u8,
        entry: &ShardEntry,
        key: &str,
        value: &str,
    ) -> Result<Option<u64>> {
        let Ok(index) = value.parse::<u64>() else {
            Stats::add(&self.stats.corrupt_entries, 1);
            let error = ShardedError::CorruptEntry {
                key: key.to_owned(),
                value: value.chars().take(32).collect(),
            };
            warn!(%error, "skipping a list entry");
            return Ok(None);
        };
        self.index_id(app_id, shard, entry, index).map(Some)
    }

    /// The ID of an index; [`AppExhausted`](ShardedError::AppExhausted) above the shard's
    /// ceiling.
    fn index_id(&self, app_id: u8, shard: u8, entry: &ShardEntry, index: u64) -> Result<u64> {
        if !entry.fits(index) {
            return Err(exhausted(app_id, shard, entry));
        }
        Ok(ShardedId::new(app_id, shard, index)?.to_u64())
    }

    /// The configuration of one shard, or why it cannot serve.
    pub(crate) fn shard_entry(&self, app_id: u8, shard: u8) -> Result<ShardEntry> {
        match self.apps.read().as_ref() {
            Some(table) => table.shard(app_id, shard),
            None => Err(ShardedError::NotInitialised {
                reason: self.init_error.lock().clone(),
            }),
        }
    }

    /// The app table, if it loaded.
    pub(crate) fn table(&self) -> Option<Arc<AppTable>> {
        self.apps.read().clone()
    }

    /// Create app `spec.app_id` with its 64 shards, or change its name, step, limit and
    /// description; usable at once on this server (its lists fill on first use and at the next
    /// scheduled pass), on others after their next app sync. Answers the app as stored, with
    /// the largest index its limit allows.
    ///
    /// Cancel safety: the database change is one transaction, done or not; dropped after it,
    /// this server sees the change at its next app sync instead of at once.
    pub async fn upsert_app(&self, spec: &AppSpec) -> Result<AppInfo> {
        let _sync = self.sync_lock.lock().await;
        let app = self
            .timed(
                "creating or updating an app",
                self.store.create_or_update_app(spec),
            )
            .await?;
        for shard in 0..SHARDS {
            // Relaxed: a per-shard hint, reset by every app sync; no other memory depends on it.
            self.exhausted[flag_index(spec.app_id, shard)].store(false, Ordering::Relaxed);
        }
        self.load_apps().await?;
        Ok(AppInfo::from(&app))
    }

    /// Every app this server knows, as of its last app sync.
    pub async fn apps(&self) -> Result<Vec<AppInfo>> {
        let apps = self.timed("listing apps", self.store.apps()).await?;
        Ok(apps.iter().map(AppInfo::from).collect())
    }

    /// Whether the app list has loaded and Redis answers on a verified connection.
    pub async fn ready(&self) -> Result<()> {
        if self.apps.read().is_none() {
            return Err(ShardedError::NotInitialised {
                reason: self.init_error.lock().clone(),
            });
        }
        self.link.verified().await.map(|_| ())
    }

    /// The counters so far.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Stop the background tasks; later calls answer [`Shutdown`](ShardedError::Shutdown).
    pub fn shutdown(&self) {
        // Relaxed: a flag checked at the start of each call; a call already past the check
        // finishes normally.
        self.shut_down.store(true, Ordering::Relaxed);
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }

    pub(crate) fn is_shut_down(&self) -> bool {
        // Relaxed: see `shutdown`.
        self.shut_down.load(Ordering::Relaxed)
    }

    /// Whether the last claim of this shard was refused as exhausted.
    pub(crate) fn is_exhausted(&self, app_id: u8, shard: u8) -> bool {
        // Relaxed: a per-shard hint, reset by every app sync; no other memory depends on it.
        self.exhausted[flag_index(app_id, shard)].load(Ordering::Relaxed)
    }

    /// Run one database call, abandoning it after `claim_timeout`; store errors about apps
    /// become ours.
    pub(crate) async fn timed<T>(
        &self,
        action: &'static str,
        call: impl Future<Output = uidgen_store::Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.claim_timeout, call).await {
            Ok(result) => result.map_err(from_store),
            Err(_) => Err(ShardedError::TimedOut {
                action,
                waited_ms: ShardedOptions::millis(self.options.claim_timeout),
            }),
        }
    }
}

impl Drop for ShardedService {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The error of a shard that has handed out every index up to its ceiling.
#[cold]
fn exhausted(app_id: u8, shard: u8, entry: &ShardEntry) -> ShardedError {
    ShardedError::AppExhausted {
        app_id,
        shard,
        ceiling: entry.ceiling.unwrap_or(0),
    }
}

/// The shard of a gate pass, refusing an empty one.
fn gate_shard(gate_pass: &str) -> Result<u8> {
    if gate_pass.is_empty() {
        return Err(ShardedError::EmptyGatePass);
    }
    Ok(shard_of(gate_pass))
}

/// Check the Redis instance every `verify_interval` (rule 3 of `link.rs`).
async fn verify_loop(service: Weak<ShardedService>) {
    loop {
        let Some(interval) = service.upgrade().map(|s| s.options.verify_interval) else {
            return;
        };
        tokio::time::sleep(interval).await;
        let Some(service) = service.upgrade() else {
            return;
        };
        service.link.check_instance().await;
    }
}
