//! [`LeaseGuard`]: a held lease on a worker id, kept by renewal (the heartbeat) and given back
//! by release. How a lease is obtained is
//! [`LeasedWorkerIdAssigner`](crate::LeasedWorkerIdAssigner)'s business (`lease.rs`).
//!
//! Invariant: the lease's own expiry (`valid_until_ms`, up to which its generator may stamp)
//! never exceeds the `expires_at_ms` the database holds for it, which only ever rises while
//! the holder keeps it. Every claim and renewal writes `valid_until + reserve` and moves the
//! in-memory expiry to `valid_until` only after the database accepted it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use uidgen_core::{Clock, FenceRefusal, TimeFence, UidGenerator};
use uidgen_worker::{
    BoxFuture, HealthSnapshot, KeeperStatus, LocalMark, WorkerAssignment, WorkerError, WorkerKeeper,
};

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::Store;

/// What a new [`LeaseGuard`] starts from.
pub(crate) struct NewLease {
    pub(crate) store: Store,
    pub(crate) clock: Arc<dyn Clock>,
    /// The ID space the worker id is leased in.
    pub(crate) space: String,
    pub(crate) worker_id: u64,
    /// The holder string written to `worker_lease.holder` (name, `#`, claim token).
    pub(crate) holder: String,
    pub(crate) ttl_ms: u64,
    /// How far past `valid_until_ms` the database's expiry is written: the window in which a
    /// crashed holder may restart from its local cache while the database is down.
    pub(crate) reserve_ms: u64,
    /// IDs may be stamped up to here.
    pub(crate) valid_until_ms: u64,
    /// The previous holder's (or the cache's) issued-until instant.
    pub(crate) last_issued_ms: u64,
    /// The local state file's mark, when this lease keeps one.
    pub(crate) mark: Option<LocalMark>,
    /// Whether ending the lease deletes the local state file: yes for a leased id's cache (a
    /// start without the database must not pick an id given up); no for an exact-id lease
    /// (`exact_lease.rs`), whose file is the id's own mark, kept across lives as a static id's.
    pub(crate) forget_mark_on_end: bool,
    /// Whether the database has accepted this process's claim (false for a start from the
    /// local cache until its first renewal).
    pub(crate) confirmed: bool,
    /// Where earlier holders of the id stopped: this lease stamps no unit starting before it.
    pub(crate) floor_ms: u64,
    /// How far ahead of the clock a cached generator may borrow under this lease
    /// ([`LeaseOptions::max_borrow`](uidgen_worker::LeaseOptions::max_borrow)).
    pub(crate) max_borrow_ms: u64,
}

/// The shared state of a lease.
#[derive(Debug)]
struct LeaseState {
    store: Store,
    clock: Arc<dyn Clock>,
    /// See [`NewLease::space`].
    space: String,
    worker_id: u64,
    holder: String,
    ttl_ms: u64,
    reserve_ms: u64,
    /// See [`NewLease::floor_ms`].
    floor_ms: u64,
    /// See [`NewLease::max_borrow_ms`].
    max_borrow_ms: u64,
    /// The expiry of our last accepted claim or renewal, less the reserve: IDs must end by it.
    valid_until_ms: AtomicU64,
    /// The highest issued-until instant known (recorded or read from the generator).
    issued_until_ms: AtomicU64,
    /// Whether issued-until is known (a generator is tracked or times were recorded).
    tracked: AtomicBool,
    /// The generator whose issued-until the heartbeat records.
    source: Mutex<Option<Weak<dyn UidGenerator>>>,
    /// Whether the database has accepted this process's claim (see [`NewLease::confirmed`]).
    confirmed: AtomicBool,
    /// Set once the lease ended (released, taken over): read on every issued ID.
    ended_flag: AtomicBool,
    /// Why the lease ended; `None` while held.
    ended: Mutex<Option<String>>,
    /// The last renewal error, for messages.
    last_error: Mutex<Option<String>>,
    /// The local state file's mark: IDs also stay under it, so a restart from the file knows
    /// how far this process stamped.
    mark: Option<LocalMark>,
    /// See [`NewLease::forget_mark_on_end`].
    forget_mark_on_end: bool,
    heartbeat: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for LeaseState {
    fn drop(&mut self) {
        if let Some(task) = self.heartbeat.lock().take() {
            task.abort();
        }
    }
}

/// A held lease on a worker id. Clones share the lease.
///
/// Call [`check`](Self::check) (or use a
/// [`GuardedGenerator`](uidgen_worker::GuardedGenerator), which does) before issuing IDs; keep it renewed with the heartbeat; [`release`](Self::release) it
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
                space: lease.space,
                worker_id: lease.worker_id,
                holder: lease.holder,
                ttl_ms: lease.ttl_ms,
                reserve_ms: lease.reserve_ms,
                floor_ms: lease.floor_ms,
                max_borrow_ms: lease.max_borrow_ms,
                valid_until_ms: AtomicU64::new(lease.valid_until_ms),
                issued_until_ms: AtomicU64::new(lease.last_issued_ms),
                tracked: AtomicBool::new(false),
                source: Mutex::new(None),
                confirmed: AtomicBool::new(lease.confirmed),
                ended_flag: AtomicBool::new(false),
                ended: Mutex::new(None),
                last_error: Mutex::new(None),
                mark: lease.mark,
                forget_mark_on_end: lease.forget_mark_on_end,
                heartbeat: Mutex::new(None),
            }),
        }
    }

    /// The lease an assignment is kept by, if it is kept by one (a leased, local-cache,
    /// static or machine id registered in a store).
    ///
    /// ```
    /// use uidgen_store::LeaseGuard;
    /// use uidgen_worker::{AssignmentKind, WorkerAssignment};
    /// let fixed = WorkerAssignment::fixed(7, AssignmentKind::STATIC);
    /// assert!(LeaseGuard::of(&fixed).is_none());
    /// ```
    pub fn of(assignment: &WorkerAssignment) -> Option<LeaseGuard> {
        let keeper: &dyn std::any::Any = assignment.keeper.as_deref()?;
        keeper.downcast_ref::<LeaseGuard>().cloned()
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
        // SeqCst: raised only after the database accepted it; stamping under it must not be
        // ordered before that.
        self.state.valid_until_ms.load(Ordering::SeqCst)
    }

    /// Whether the lease rests on the local cache alone (the database was unreachable at
    /// start-up and no renewal has reached it yet).
    pub fn is_from_local_cache(&self) -> bool {
        !self.state.confirmed.load(Ordering::SeqCst)
    }

    /// Whether the lease ended (released or lost): no ID may be let out after this.
    pub fn is_ended(&self) -> bool {
        // SeqCst: pairs with the store in `end`; see `release` for why the order matters.
        self.state.ended_flag.load(Ordering::SeqCst)
    }

    /// Whether IDs may be issued now.
    pub fn is_valid(&self) -> bool {
        self.check().is_ok()
    }

    /// `Ok` while the lease is held and unexpired by the clock; else
    /// [`StoreError::LeaseLost`] saying why.
    pub fn check(&self) -> Result<()> {
        let state = &self.state;
        if self.is_ended()
            && let Some(reason) = state.ended.lock().clone()
        {
            return Err(StoreError::LeaseLost {
                worker_id: state.worker_id,
                reason,
            });
        }
        let now = state.clock.now_millis();
        let until = self.valid_until_ms();
        if now >= until {
            let cause = state
                .last_error
                .lock()
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
        self.track_dyn(&(Arc::clone(generator) as Arc<dyn UidGenerator>));
    }

    fn track_dyn(&self, generator: &Arc<dyn UidGenerator>) {
        *self.state.source.lock() = Some(Arc::downgrade(generator));
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
        let source = state.source.lock().as_ref().and_then(Weak::upgrade);
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

    /// Extend the lease by its ttl from now and record the issued-until time. A lease taken
    /// over by another holder is lost for good ([`StoreError::LeaseLost`]); a database error
    /// leaves it valid until its current expiry.
    ///
    /// The database's expiry never falls (a clock that stepped back writes a lower value,
    /// which the database ignores), and the in-memory expiry only rises to what the database
    /// accepted, so the two never disagree in the direction that matters: a successor waits
    /// for the database's. A lease started from the local cache renews under the holder string
    /// the cache recorded, so this succeeds only if nobody took the id over meanwhile.
    ///
    /// Cancel safety: dropping the future after the database accepted leaves the database's
    /// expiry higher than ours, which only delays a successor.
    pub fn renew(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            if self.is_ended() {
                return self.check();
            }
            self.renew_recording(self.issued_until()).await
        })
    }

    /// [`renew`](Self::renew), recording `issued` as the issued-until time: for a renewal
    /// before any generator is tracked, whose default (the lease's expiry) would hold the id
    /// back from the next holder far longer than needed.
    pub(crate) async fn renew_recording(&self, issued: u64) -> Result<()> {
        let state = &self.state;
        if self.is_ended() {
            return self.check();
        }
        let valid_until = state.clock.now_millis().saturating_add(state.ttl_ms);
        let expires = valid_until.saturating_add(state.reserve_ms);
        match state
            .store
            .renew_lease(
                &state.space,
                state.worker_id,
                &state.holder,
                expires,
                issued,
            )
            .await
        {
            Ok(true) => {
                if let Some(mark) = &state.mark
                    && let Err(error) = mark.record_lease_expiry(expires)
                {
                    // Only shortens how long a restart may run from the file.
                    tracing::warn!(%error,
                        "cannot record the lease's expiry in the local state file");
                }
                // SeqCst: see valid_until_ms().
                state
                    .valid_until_ms
                    .fetch_max(valid_until, Ordering::SeqCst);
                *state.last_error.lock() = None;
                if !state.confirmed.swap(true, Ordering::SeqCst) {
                    tracing::info!(
                        worker_id = state.worker_id,
                        "the database is back: renewed the worker lease started from the local \
                         cache"
                    );
                }
                Ok(())
            }
            Ok(false) => Err(self.lose(if state.confirmed.load(Ordering::SeqCst) {
                "taken over by another holder".to_owned()
            } else {
                "while this process ran on its local cache, the lease recorded there was taken \
                 over or released"
                    .to_owned()
            })),
            Err(error) => Err(self.renewal_failed(error)),
        }
    }

    fn renewal_failed(&self, error: StoreError) -> StoreError {
        tracing::warn!(worker_id = self.state.worker_id, %error, "cannot renew the worker lease");
        *self.state.last_error.lock() = Some(error.to_string());
        error
    }

    /// The lease is gone for good (another holder has the id): stop issuing, and forget the
    /// local state file so a start without the database does not pick the id again.
    fn lose(&self, reason: String) -> StoreError {
        let state = &self.state;
        self.end(&reason);
        if let Some(mark) = &state.mark
            && state.forget_mark_on_end
            && let Err(error) = mark.forget()
        {
            // Harmless: the file's lease expiry lies before the new holder's claim.
            tracing::warn!(%error, "cannot delete the local worker id state file");
        }
        tracing::error!(worker_id = state.worker_id, "worker lease lost: {reason}");
        StoreError::LeaseLost {
            worker_id: state.worker_id,
            reason,
        }
    }

    /// Mark the lease ended (the first reason sticks): from now on `check` fails, and no ID
    /// is let out.
    fn end(&self, reason: &str) {
        let mut ended = self.state.ended.lock();
        if ended.is_none() {
            *ended = Some(reason.to_owned());
        }
        // SeqCst: see `release`.
        self.state.ended_flag.store(true, Ordering::SeqCst);
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
                if guard.is_ended() {
                    break;
                }
                if let Err(StoreError::LeaseLost { .. }) = guard.renew().await {
                    break;
                }
            }
        });
        if let Some(old) = self.state.heartbeat.lock().replace(task) {
            old.abort();
        }
    }

    /// Stop the heartbeat; the lease then lapses at its expiry unless renewed by hand.
    pub fn stop_heartbeat(&self) {
        if let Some(task) = self.state.heartbeat.lock().take() {
            task.abort();
        }
    }

    /// Stop issuing, stop the heartbeat and give the lease back, recording the issued-until
    /// time so the next holder waits for it, and forget the local state file. Call on clean
    /// shutdown.
    ///
    /// Cancel safety: once it returns `Pending` the lease has ended in this process; dropping
    /// the future leaves the database row to expire as an unrenewed lease would.
    pub fn release(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            // End first, then read issued-until. A GuardedGenerator checks `is_ended` after each
            // ID is stamped (behind a SeqCst fence), so either it sees the end and drops the ID,
            // or its stamp is visible to the read below: the Dekker pattern, with a SeqCst fence on
            // both sides. Read first, and an ID stamped between the read and the end would be let
            // out with last_issued_ms recorded below it: the next holder could stamp its unit.
            self.end("released");
            std::sync::atomic::fence(Ordering::SeqCst);
            let issued = self.issued_until();
            self.release_recording(issued).await
        })
    }

    /// Give the lease back recording `issued` as its issued-until time.
    pub(crate) async fn release_recording(&self, issued: u64) -> Result<()> {
        let state = &self.state;
        self.stop_heartbeat();
        self.end("released");
        // The id is given up: a start without the database must not take it from the file.
        // Releasing lets the next holder in at once, before the reserve a restart from the
        // file counts on, so a file that cannot be deleted keeps the row until it expires.
        if let Some(mark) = &state.mark
            && state.forget_mark_on_end
        {
            mark.forget()?;
        }
        state
            .store
            .release_lease(&state.space, state.worker_id, &state.holder, issued)
            .await?;
        tracing::info!(worker_id = state.worker_id, "released the worker lease");
        Ok(())
    }

    /// Why the fence stops below `until_ms`: the lease's expiry and its last renewal error.
    #[cold]
    fn why_limited(&self, valid_until: u64) -> String {
        let cause = self
            .state
            .last_error
            .lock()
            .clone()
            .unwrap_or_else(|| "not renewed that far yet".to_owned());
        format!(
            "the lease on worker id {} runs until {valid_until} ms ({cause})",
            self.state.worker_id
        )
    }
}

/// A lease is its generator's fence: IDs only up to its expiry (and under the local state
/// file's mark, when it keeps one), nothing once it ended.
impl TimeFence for LeaseGuard {
    fn limit_ms(&self) -> u64 {
        if self.is_ended() {
            return 0;
        }
        let until = self.valid_until_ms();
        self.state
            .mark
            .as_ref()
            .map_or(until, |mark| until.min(mark.limit_ms()))
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        if let Err(error) = self.check()
            && self.is_ended()
        {
            return Err(FenceRefusal::Closed(error.to_string()));
        }
        let valid_until = self.valid_until_ms();
        if until_ms > valid_until {
            return Err(FenceRefusal::NotYet {
                limit_ms: self.limit_ms(),
                reason: self.why_limited(valid_until),
            });
        }
        if let Some(mark) = &self.state.mark {
            mark.reserve_for_fence(until_ms, || self.limit_ms())?;
        }
        Ok(self.limit_ms())
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        // Inside the ttl and covered by a successor's takeover wait (`LeaseOptions::max_borrow`).
        Some(self.state.max_borrow_ms)
    }

    fn floor_ms(&self) -> u64 {
        self.state.floor_ms
    }
}

/// The lease keeps its worker id: renewed by the heartbeat, released on clean shutdown.
impl WorkerKeeper for LeaseGuard {
    fn worker_id(&self) -> u64 {
        self.state.worker_id
    }

    fn check(&self) -> uidgen_worker::Result<()> {
        LeaseGuard::check(self).map_err(WorkerError::from)
    }

    fn is_ended(&self) -> bool {
        LeaseGuard::is_ended(self)
    }

    fn track(&self, generator: Arc<dyn UidGenerator>) {
        self.track_dyn(&generator);
    }

    fn record_issued_until(&self, ms: u64) {
        LeaseGuard::record_issued_until(self, ms);
    }

    fn release(&self) -> BoxFuture<'_, uidgen_worker::Result<()>> {
        Box::pin(async move { LeaseGuard::release(self).await.map_err(WorkerError::from) })
    }

    fn status(&self) -> KeeperStatus {
        let ended = if self.is_ended() {
            self.state.ended.lock().clone()
        } else {
            None
        };
        let last_error = self.state.last_error.lock().is_some();
        KeeperStatus {
            worker_id: self.state.worker_id,
            from_local_cache: self.is_from_local_cache(),
            // The lease counts no renewals; its last error says whether the last one failed.
            health: HealthSnapshot {
                connected: !self.is_from_local_cache() && !last_error,
                failures: 0,
                last_report_ms: None,
                accepted_until_ms: self.valid_until_ms(),
                outage_since_ms: None,
                lost: ended,
            },
            not_issuing: "the worker id lease is lost",
            reports: None,
        }
    }
}
