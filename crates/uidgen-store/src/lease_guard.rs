//! [`LeaseGuard`]: a held lease on a worker id, kept by renewal (the heartbeat) and given back
//! by release. How a lease is obtained is [`LeasedWorkerIdAssigner`](crate::LeasedWorkerIdAssigner)'s
//! business (`lease.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use uidgen_core::{Clock, UidGenerator};

use crate::cache::CacheLock;
use crate::error::{Result, StoreError};
use crate::store::Store;
use crate::worker_lease::WorkerLeaseRow;

/// What a new [`LeaseGuard`] starts from.
pub(crate) struct NewLease {
    pub(crate) store: Store,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) worker_id: u64,
    /// The holder string written to `worker_lease.holder` (name, `#`, claim token).
    pub(crate) holder: String,
    pub(crate) ttl_ms: u64,
    /// IDs may be stamped up to here.
    pub(crate) valid_until_ms: u64,
    /// The previous holder's (or the cache's) issued-until instant.
    pub(crate) last_issued_ms: u64,
    /// The locked local cache, when this lease owns it.
    pub(crate) cache: Option<CacheLock>,
    /// For a lease taken from the local cache: when this process started using the id.
    pub(crate) unconfirmed_since_ms: Option<u64>,
}

/// The shared state of a lease.
#[derive(Debug)]
struct LeaseState {
    store: Store,
    clock: Arc<dyn Clock>,
    worker_id: u64,
    holder: String,
    ttl_ms: u64,
    /// The expiry written by our last successful claim or renewal: IDs must end by it.
    valid_until_ms: AtomicU64,
    /// The highest issued-until instant known (recorded or read from the generator).
    issued_until_ms: AtomicU64,
    /// Whether issued-until is known (a generator is tracked or times were recorded).
    tracked: AtomicBool,
    /// The generator whose issued-until the heartbeat records.
    source: Mutex<Option<Weak<dyn UidGenerator>>>,
    /// `Some(since)` while the lease rests on the local cache alone: the database does not
    /// record it, and this process has used the id from `since` (ms) on. The next renewal
    /// claims the id in the database or ends the lease.
    unconfirmed_since_ms: Mutex<Option<u64>>,
    /// Why the lease ended (released, taken over); `None` while held.
    ended: Mutex<Option<String>>,
    /// The last renewal error, for messages.
    last_error: Mutex<Option<String>>,
    /// The local cache, locked for this lease; `None` when not configured or another lease
    /// holds it.
    cache: Option<CacheLock>,
    heartbeat: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for LeaseState {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.heartbeat.lock()
            && let Some(task) = slot.take()
        {
            task.abort();
        }
    }
}

/// A held lease on a worker id. Clones share the lease.
///
/// Call [`check`](Self::check) (or use a [`GuardedGenerator`](crate::GuardedGenerator), which
/// does) before issuing IDs; keep it renewed with the heartbeat; [`release`](Self::release) it
/// on clean shutdown so the id is free at once.
#[derive(Debug, Clone)]
pub struct LeaseGuard {
    state: Arc<LeaseState>,
}

impl LeaseGuard {
    pub(crate) fn new(lease: NewLease) -> Self {
        Self {
            state: Arc::new(LeaseState {
                store: lease.store,
                clock: lease.clock,
                worker_id: lease.worker_id,
                holder: lease.holder,
                ttl_ms: lease.ttl_ms,
                valid_until_ms: AtomicU64::new(lease.valid_until_ms),
                issued_until_ms: AtomicU64::new(lease.last_issued_ms),
                tracked: AtomicBool::new(false),
                source: Mutex::new(None),
                unconfirmed_since_ms: Mutex::new(lease.unconfirmed_since_ms),
                ended: Mutex::new(None),
                last_error: Mutex::new(None),
                cache: lease.cache,
                heartbeat: Mutex::new(None),
            }),
        }
    }

    /// The leased worker id.
    pub fn worker_id(&self) -> u64 {
        self.state.worker_id
    }

    /// Who holds it (this claim): the configured name, `#` and a random token.
    pub fn holder(&self) -> &str {
        &self.state.holder
    }

    /// The lease's expiry (ms since the Unix epoch): IDs may be stamped up to here.
    pub fn valid_until_ms(&self) -> u64 {
        // Relaxed: a monotonic deadline; no other memory depends on it.
        self.state.valid_until_ms.load(Ordering::Relaxed)
    }

    /// Whether the lease rests on the local cache alone (the database was unreachable at
    /// start-up and no renewal has claimed the id there yet).
    pub fn is_from_local_cache(&self) -> bool {
        lock(&self.state.unconfirmed_since_ms).is_some()
    }

    /// Whether IDs may be issued now.
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` while the lease is held and unexpired by the clock; else
    /// [`StoreError::LeaseLost`] saying why.
    pub fn check(&self) -> Result<()> {
        let state = &self.state;
        if let Some(reason) = lock(&state.ended).clone() {
            return Err(StoreError::LeaseLost {
                worker_id: state.worker_id,
                reason,
            });
        }
        let now = state.clock.now_millis();
        let until = self.valid_until_ms();
        if now >= until {
            let cause = lock(&state.last_error)
                .clone()
                .unwrap_or_else(|| "no renewal".to_owned());
            return Err(StoreError::LeaseLost {
                worker_id: state.worker_id,
                reason: format!(
                    "it expired at {until} ms (clock reads {now} ms) without renewal: {cause}"
                ),
            });
        }
        Ok(())
    }

    /// Record the generator whose [`issued_until_ms`](UidGenerator::issued_until_ms) the
    /// heartbeat and [`release`](Self::release) write down. Held weakly.
    pub fn track<G: UidGenerator + 'static>(&self, generator: &Arc<G>) {
        let generator: Arc<dyn UidGenerator> = Arc::clone(generator) as Arc<dyn UidGenerator>;
        *lock(&self.state.source) = Some(Arc::downgrade(&generator));
        // Relaxed: only decides which value issued_until() reports; no data hangs on it.
        self.state.tracked.store(true, Ordering::Relaxed);
    }

    /// Record that IDs were issued up to `ms` (for callers that track no generator).
    pub fn record_issued_until(&self, ms: u64) {
        // Relaxed: a monotonic maximum read by the same process's renew/release, which
        // synchronise with the issuer through the `ended` mutex where it matters (release).
        self.state.issued_until_ms.fetch_max(ms, Ordering::Relaxed);
        // Relaxed: see track().
        self.state.tracked.store(true, Ordering::Relaxed);
    }

    /// The issued-until instant to write down: the tracked generator's, or, when nothing is
    /// tracked, the lease's expiry (no ID can be stamped past it).
    fn issued_until(&self) -> u64 {
        let state = &self.state;
        let source = lock(&state.source).as_ref().and_then(Weak::upgrade);
        if let Some(ms) = source.and_then(|g| g.issued_until_ms()) {
            // Relaxed: see record_issued_until().
            state.issued_until_ms.fetch_max(ms, Ordering::Relaxed);
        }
        // Relaxed (both): see record_issued_until() and track().
        let recorded = state.issued_until_ms.load(Ordering::Relaxed);
        if state.tracked.load(Ordering::Relaxed) {
            recorded
        } else {
            recorded.max(self.valid_until_ms())
        }
    }

    /// Whether an ID whose time unit ends at `unit_end_ms` may be issued.
    pub fn permits(&self, unit_end_ms: u64) -> Result<()> {
        self.check()?;
        let until = self.valid_until_ms();
        if unit_end_ms > until {
            return Err(StoreError::LeaseLost {
                worker_id: self.state.worker_id,
                reason: format!(
                    "an ID stamped up to {unit_end_ms} ms lies past the lease's expiry at {until} ms"
                ),
            });
        }
        Ok(())
    }

    /// Extend the lease by its ttl from now and record the issued-until time. A lease taken
    /// over by another holder is lost for good ([`StoreError::LeaseLost`]); a database error
    /// leaves it valid until its current expiry.
    ///
    /// A lease taken from the local cache is first claimed in the database: inserted if the
    /// id has no row, taken over if its row expired and records no use since this process
    /// started on the cache, else lost (another holder had it meanwhile).
    pub async fn renew(&self) -> Result<()> {
        let state = &self.state;
        if lock(&state.ended).is_some() {
            return self.check();
        }
        let unconfirmed = *lock(&state.unconfirmed_since_ms);
        if let Some(since) = unconfirmed {
            self.claim_cached_id(since).await?;
        }
        let issued = self.issued_until();
        let expires = state.clock.now_millis().saturating_add(state.ttl_ms);
        match state
            .store
            .renew_lease(state.worker_id, &state.holder, expires, issued)
            .await
        {
            Ok(true) => {
                // Relaxed: see valid_until_ms().
                state.valid_until_ms.fetch_max(expires, Ordering::Relaxed);
                *lock(&state.last_error) = None;
                self.write_cache(self.valid_until_ms().max(issued));
                Ok(())
            }
            Ok(false) => Err(self.lose("taken over by another holder".to_owned())),
            Err(error) => Err(self.renewal_failed(error)),
        }
    }

    /// Claim in the database the worker id this process has used from its local cache since
    /// `since_ms`.
    async fn claim_cached_id(&self, since_ms: u64) -> Result<()> {
        let state = &self.state;
        let (id, holder) = (state.worker_id, state.holder.as_str());
        let now = state.clock.now_millis();
        let expires = now.saturating_add(state.ttl_ms);
        let attempt = async {
            let row = state.store.lease_row(id).await?;
            let won = match &row {
                None => state.store.try_insert_lease(id, holder, expires).await?,
                Some(row) if row.holder == holder => true,
                Some(row) if row.expires_at_ms < now && row.last_issued_ms <= since_ms => {
                    state
                        .store
                        .try_take_over_lease_unused_since(id, holder, expires, now, since_ms)
                        .await?
                }
                Some(_) => false,
            };
            Ok::<_, StoreError>((won, row))
        };
        let (won, row) = attempt.await.map_err(|error| self.renewal_failed(error))?;
        if !won {
            return Err(self.lose(why_cached_id_is_lost(row.as_ref(), now, since_ms)));
        }
        *lock(&state.unconfirmed_since_ms) = None;
        tracing::info!(
            worker_id = id,
            "the database is back: claimed the worker id used from the local cache"
        );
        Ok(())
    }

    fn renewal_failed(&self, error: StoreError) -> StoreError {
        tracing::warn!(worker_id = self.state.worker_id, %error, "cannot renew the worker lease");
        *lock(&self.state.last_error) = Some(error.to_string());
        error
    }

    /// The lease is gone for good (another holder has the id): stop issuing, and forget the
    /// cache so a start without the database does not pick the id again.
    fn lose(&self, reason: String) -> StoreError {
        let state = &self.state;
        self.end(&reason);
        self.forget_cache();
        tracing::error!(worker_id = state.worker_id, "worker lease lost: {reason}");
        StoreError::LeaseLost {
            worker_id: state.worker_id,
            reason,
        }
    }

    /// Mark the lease ended (the first reason sticks): from now on `check` fails.
    fn end(&self, reason: &str) {
        let mut ended = lock(&self.state.ended);
        if ended.is_none() {
            *ended = Some(reason.to_owned());
        }
    }

    /// Renew every `interval` from a background tokio task until released, lost or dropped.
    /// Replaces a running heartbeat. Must be called inside a tokio runtime.
    pub fn start_heartbeat(&self, interval: Duration) {
        let weak = Arc::downgrade(&self.state);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(state) = weak.upgrade() else { break };
                let guard = LeaseGuard { state };
                if lock(&guard.state.ended).is_some() {
                    break;
                }
                if let Err(StoreError::LeaseLost { .. }) = guard.renew().await {
                    break;
                }
            }
        });
        if let Some(old) = lock(&self.state.heartbeat).replace(task) {
            old.abort();
        }
    }

    /// Stop the heartbeat; the lease then lapses at its expiry unless renewed by hand.
    pub fn stop_heartbeat(&self) {
        if let Some(task) = lock(&self.state.heartbeat).take() {
            task.abort();
        }
    }

    /// Stop issuing, stop the heartbeat and give the lease back, recording the issued-until
    /// time so the next holder waits for it, and forget the local cache. Call on clean
    /// shutdown.
    pub async fn release(&self) -> Result<()> {
        // End first, then read issued-until. A GuardedGenerator checks the lease again after
        // stamping each ID, so every ID it lets out passed that check before this end, and its
        // stamp (made before the check) is visible to the read below through the `ended`
        // mutex. Read first, and an ID stamped between the read and the end would be let out
        // with last_issued_ms recorded below it: the next holder could stamp the same unit.
        self.end("released");
        let issued = self.issued_until();
        self.release_recording(issued).await
    }

    /// Give the lease back recording `issued` as its issued-until time.
    pub(crate) async fn release_recording(&self, issued: u64) -> Result<()> {
        let state = &self.state;
        self.stop_heartbeat();
        self.end("released");
        // The id is given up: a start without the database must not take it from the cache.
        self.forget_cache();
        state
            .store
            .release_lease(state.worker_id, &state.holder, issued)
            .await?;
        tracing::info!(worker_id = state.worker_id, "released the worker lease");
        Ok(())
    }

    /// Record in the local cache (if this lease owns it) that the id is used until `until_ms`.
    pub(crate) fn write_cache(&self, until_ms: u64) {
        if let Some(cache) = &self.state.cache
            && let Err(error) = cache.write(self.state.worker_id, until_ms)
        {
            tracing::warn!(%error, "cannot write the worker id cache");
        }
    }

    fn forget_cache(&self) {
        if let Some(cache) = &self.state.cache
            && let Err(error) = cache.forget(self.state.worker_id)
        {
            tracing::warn!(%error, path = %cache.path().display(), "cannot forget the worker id cache");
        }
    }
}

/// Why a worker id used from the local cache cannot be claimed in the database.
fn why_cached_id_is_lost(row: Option<&WorkerLeaseRow>, now_ms: u64, since_ms: u64) -> String {
    match row {
        Some(row) if row.expires_at_ms >= now_ms && !row.holder.is_empty() => format!(
            "while this process ran on its local cache, {} leased it (until {} ms)",
            row.holder, row.expires_at_ms
        ),
        Some(row) if row.last_issued_ms > since_ms => format!(
            "while this process ran on its local cache (from {since_ms} ms), another holder issued IDs with it up to {} ms",
            row.last_issued_ms
        ),
        _ => "another holder claimed it first once the database was back".to_owned(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
