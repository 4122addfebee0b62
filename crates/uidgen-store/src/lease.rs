//! Leased worker ids: [`LeasedWorkerIdAssigner`] and the [`LeaseGuard`] that keeps a lease.
//!
//! For narrow layouts (a 10-bit Snowflake) where a fresh id per start would run out. The rules
//! that keep IDs unique when a worker id changes hands:
//!
//! - A lease is claimed by one conditional statement (an `INSERT` for a never-used id, an
//!   `UPDATE ... WHERE expires_at_ms < now` for an expired one); the affected-row count picks
//!   exactly one winner among racing processes.
//! - The holder only issues IDs whose whole time unit ends by the lease's expiry
//!   ([`GuardedGenerator`](crate::GuardedGenerator) checks each one), so a successor, which may
//!   only take over once its clock is past that expiry, cannot stamp the same unit.
//! - The heartbeat records the generator's [`issued_until_ms`](uidgen_core::UidGenerator::issued_until_ms);
//!   a new holder waits until its clock has passed the recorded time (up to a bound, else
//!   [`StoreError::ClockBehindLastIssued`]).
//! - A lease that cannot be renewed stops being valid at its expiry; one taken over is lost at
//!   once. Either way [`LeaseGuard::check`] fails with [`StoreError::LeaseLost`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use uidgen_core::{Clock, Layout, SystemClock, UidGenerator};

use crate::assigner::{AssignmentKind, BoxFuture, WorkerAssignment, WorkerIdAssigner};
use crate::cache::{CachedWorker, read_cache, write_cache};
use crate::error::{Result, StoreError};
use crate::store::Store;

/// How a [`LeasedWorkerIdAssigner`] leases.
///
/// ```
/// use std::time::Duration;
/// use uidgen_store::LeaseOptions;
/// let options = LeaseOptions { cache_path: Some("/var/lib/uidgen/worker.cache".into()), ..Default::default() };
/// assert_eq!(options.ttl, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// How long a lease lasts without renewal (default 30 s).
    pub ttl: Duration,
    /// Renew this often from a background task (default 10 s); `None` leaves renewal to the
    /// caller ([`LeaseGuard::renew`]).
    pub heartbeat_interval: Option<Duration>,
    /// The longest a new holder waits for its clock to pass the previous holder's last issued
    /// time before refusing (default 5 s).
    pub max_takeover_wait: Duration,
    /// A local file caching the worker id and the time it is used until, for start-up while
    /// the database is unreachable (default none).
    pub cache_path: Option<PathBuf>,
    /// The holder's name (at most 128 characters); default `<ip>/<pid>/<random>`.
    pub holder: Option<String>,
}

impl Default for LeaseOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(30),
            heartbeat_interval: Some(Duration::from_secs(10)),
            max_takeover_wait: Duration::from_secs(5),
            cache_path: None,
            holder: None,
        }
    }
}

/// Leases a worker id in `0..=layout.max_worker_id()` from the `worker_lease` table.
///
/// ```no_run
/// # async fn demo() -> uidgen_store::Result<()> {
/// use uidgen_core::{Layout, SystemClock};
/// use uidgen_store::{LeaseOptions, LeasedWorkerIdAssigner, Store, WorkerIdAssigner};
/// let store = Store::connect("postgres://postgres@127.0.0.1/test").await?;
/// let assigner = LeasedWorkerIdAssigner::new(store, SystemClock, LeaseOptions::default());
/// let assignment = assigner.assign(&Layout::snowflake()?).await?;
/// let lease = assignment.lease.expect("a leased assignment carries its lease");
/// lease.check()?; // before issuing; the heartbeat keeps it valid
/// lease.release().await?; // on clean shutdown
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LeasedWorkerIdAssigner {
    store: Store,
    clock: Arc<dyn Clock>,
    options: LeaseOptions,
}

impl LeasedWorkerIdAssigner {
    /// An assigner over `store`, reading time from `clock`.
    pub fn new(store: Store, clock: impl Clock + 'static, options: LeaseOptions) -> Self {
        Self {
            store,
            clock: Arc::new(clock),
            options,
        }
    }

    /// An assigner on the system clock with default options.
    pub fn with_defaults(store: Store) -> Self {
        Self::new(store, SystemClock, LeaseOptions::default())
    }

    /// The options.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    /// Claim a lease from the database (no cache fallback), wait until the clock has passed
    /// the worker id's last issued time, and start the heartbeat if configured.
    pub async fn claim(&self, layout: &Layout) -> Result<LeaseGuard> {
        let holder = match &self.options.holder {
            Some(holder) => holder.clone(),
            None => default_holder(),
        };
        if holder.is_empty() || holder.chars().count() > 128 {
            return Err(StoreError::InvalidInput(format!(
                "lease holder {holder:?} must be 1 to 128 characters"
            )));
        }
        let ttl_ms = duration_ms(self.options.ttl).max(1);
        let max = layout.max_worker_id();
        // A lost race means someone else won that id; look again a few times.
        for _ in 0..8 {
            let now = self.clock.now_millis();
            let expires = now.saturating_add(ttl_ms);
            let rows = self.store.lease_rows(max).await?;
            let used: HashSet<u64> = rows.iter().map(|r| r.worker_id).collect();
            let mut expired: Vec<_> = rows.iter().filter(|r| r.expires_at_ms < now).collect();
            if u64::try_from(used.len()).map_or(true, |n| n > max) && expired.is_empty() {
                return Err(StoreError::NoFreeWorkerId {
                    max,
                    count: max.saturating_add(1),
                });
            }
            // A never-used id needs no wait; among expired ones, the least recently used first.
            if let Some(fresh) = (0..=max).find(|id| !used.contains(id))
                && self.store.try_insert_lease(fresh, &holder, expires).await?
            {
                return self.finish(fresh, holder, expires, 0).await;
            }
            expired.sort_by_key(|r| r.last_issued_ms);
            for row in expired {
                if self
                    .store
                    .try_take_over_lease(row.worker_id, &holder, expires, now)
                    .await?
                {
                    // We hold it now, so nobody else moves last_issued_ms: read it fresh.
                    let last = self
                        .store
                        .lease_row(row.worker_id)
                        .await?
                        .map_or(row.last_issued_ms, |r| r.last_issued_ms);
                    tracing::info!(worker_id = row.worker_id, previous = %row.holder, "took over an expired worker lease");
                    return self.finish(row.worker_id, holder, expires, last).await;
                }
            }
        }
        Err(StoreError::NoFreeWorkerId {
            max,
            count: max.saturating_add(1),
        })
    }

    /// We hold `worker_id` until `expires`: wait out the previous holder's last issued time,
    /// then hand out the guard.
    async fn finish(
        &self,
        worker_id: u64,
        holder: String,
        expires: u64,
        last_issued_ms: u64,
    ) -> Result<LeaseGuard> {
        let guard = LeaseGuard::new(LeaseState {
            store: self.store.clone(),
            clock: Arc::clone(&self.clock),
            worker_id,
            holder,
            ttl_ms: duration_ms(self.options.ttl).max(1),
            valid_until_ms: AtomicU64::new(expires),
            issued_until_ms: AtomicU64::new(last_issued_ms),
            tracked: AtomicBool::new(false),
            source: Mutex::new(None),
            ended: Mutex::new(None),
            last_error: Mutex::new(None),
            cache_path: self.options.cache_path.clone(),
            heartbeat: Mutex::new(None),
        });
        if let Err(error) = wait_for_clock(
            self.clock.as_ref(),
            worker_id,
            last_issued_ms,
            self.options.max_takeover_wait,
        )
        .await
        {
            // Hand the id back untouched so it does not stay blocked for a whole ttl.
            let _ = guard.release_recording(last_issued_ms).await;
            return Err(error);
        }
        guard.write_cache(expires);
        if let Some(interval) = self.options.heartbeat_interval {
            guard.start_heartbeat(interval);
        }
        tracing::info!(worker_id, holder = %guard.holder(), "leased a worker id");
        Ok(guard)
    }

    /// The database was unreachable: use the cached worker id if the clock is past the time
    /// it was used until.
    fn assign_from_cache(
        &self,
        layout: &Layout,
        unreachable: StoreError,
    ) -> Result<WorkerAssignment> {
        let Some(path) = &self.options.cache_path else {
            return Err(unreachable);
        };
        let cached = match read_cache(path) {
            Ok(cached) => cached,
            Err(error) => {
                tracing::warn!(%error, "no usable worker id cache");
                return Err(unreachable);
            }
        };
        let now = self.clock.now_millis();
        if now <= cached.until_ms {
            return Err(StoreError::Cache {
                path: path.display().to_string(),
                reason: format!(
                    "{unreachable}; the cached worker id {} was in use until {} ms and this clock reads {now} ms, so it cannot be reused yet",
                    cached.worker_id, cached.until_ms
                ),
            });
        }
        let max = layout.max_worker_id();
        if cached.worker_id > max {
            return Err(StoreError::Cache {
                path: path.display().to_string(),
                reason: format!(
                    "{unreachable}; the cached worker id {} exceeds the layout's maximum {max}",
                    cached.worker_id
                ),
            });
        }
        tracing::warn!(worker_id = cached.worker_id, %unreachable, "database unreachable; using the cached worker id");
        Ok(WorkerAssignment::fixed(
            cached.worker_id,
            AssignmentKind::LocalCache,
        ))
    }
}

impl WorkerIdAssigner for LeasedWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            match self.claim(layout).await {
                Ok(lease) => Ok(WorkerAssignment {
                    worker_id: lease.worker_id(),
                    kind: AssignmentKind::Leased,
                    lease: Some(lease),
                }),
                Err(error) if error.is_unreachable() => self.assign_from_cache(layout, error),
                Err(error) => Err(error),
            }
        })
    }
}

/// Wait until `clock` reads past `until_ms`, polling (a test clock is moved by someone else);
/// refuse when that is further than `max_wait` away or does not happen within it.
async fn wait_for_clock(
    clock: &dyn Clock,
    worker_id: u64,
    until_ms: u64,
    max_wait: Duration,
) -> Result<()> {
    let max_wait_ms = duration_ms(max_wait);
    let deadline = tokio::time::Instant::now() + max_wait + Duration::from_millis(100);
    loop {
        let now_ms = clock.now_millis();
        if now_ms > until_ms {
            return Ok(());
        }
        let wait_ms = until_ms - now_ms + 1;
        if wait_ms > max_wait_ms || tokio::time::Instant::now() >= deadline {
            return Err(StoreError::ClockBehindLastIssued {
                worker_id,
                until_ms,
                now_ms,
                wait_ms,
                max_wait_ms,
            });
        }
        tokio::time::sleep(Duration::from_millis(wait_ms.min(10))).await;
    }
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn default_holder() -> String {
    let host = crate::worker_node::WorkerNode::detect().host_name;
    format!("{host}/{}/{:08x}", std::process::id(), fastrand::u32(..))
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
    /// Why the lease ended (released, taken over); `None` while held.
    ended: Mutex<Option<String>>,
    /// The last renewal error, for messages.
    last_error: Mutex<Option<String>>,
    cache_path: Option<PathBuf>,
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
    fn new(state: LeaseState) -> Self {
        Self {
            state: Arc::new(state),
        }
    }

    /// The leased worker id.
    pub fn worker_id(&self) -> u64 {
        self.state.worker_id
    }

    /// Who holds it (this process).
    pub fn holder(&self) -> &str {
        &self.state.holder
    }

    /// The lease's expiry (ms since the Unix epoch): IDs may be stamped up to here.
    pub fn valid_until_ms(&self) -> u64 {
        // Relaxed: a monotonic deadline; no other memory depends on it.
        self.state.valid_until_ms.load(Ordering::Relaxed)
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
        self.state.tracked.store(true, Ordering::Relaxed);
    }

    /// Record that IDs were issued up to `ms` (for callers that track no generator).
    pub fn record_issued_until(&self, ms: u64) {
        self.state.issued_until_ms.fetch_max(ms, Ordering::Relaxed);
        self.state.tracked.store(true, Ordering::Relaxed);
    }

    /// The issued-until instant to write down: the tracked generator's, or, when nothing is
    /// tracked, the lease's expiry (no ID can be stamped past it).
    fn issued_until(&self) -> u64 {
        let state = &self.state;
        let source = lock(&state.source).as_ref().and_then(Weak::upgrade);
        if let Some(ms) = source.and_then(|g| g.issued_until_ms()) {
            state.issued_until_ms.fetch_max(ms, Ordering::Relaxed);
        }
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
    pub async fn renew(&self) -> Result<()> {
        let state = &self.state;
        if lock(&state.ended).is_some() {
            return self.check();
        }
        let issued = self.issued_until();
        let expires = state.clock.now_millis().saturating_add(state.ttl_ms);
        match state
            .store
            .renew_lease(state.worker_id, &state.holder, expires, issued)
            .await
        {
            Ok(true) => {
                state.valid_until_ms.fetch_max(expires, Ordering::Relaxed);
                *lock(&state.last_error) = None;
                self.write_cache(self.valid_until_ms().max(issued));
                Ok(())
            }
            Ok(false) => {
                let reason = "taken over by another holder".to_owned();
                *lock(&state.ended) = Some(reason.clone());
                tracing::error!(worker_id = state.worker_id, "worker lease lost: {reason}");
                Err(StoreError::LeaseLost {
                    worker_id: state.worker_id,
                    reason,
                })
            }
            Err(error) => {
                tracing::warn!(worker_id = state.worker_id, %error, "cannot renew the worker lease");
                *lock(&state.last_error) = Some(error.to_string());
                Err(error)
            }
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
    /// time so the next holder waits for it. Call on clean shutdown.
    pub async fn release(&self) -> Result<()> {
        let issued = self.issued_until();
        self.release_recording(issued).await
    }

    async fn release_recording(&self, issued: u64) -> Result<()> {
        let state = &self.state;
        self.stop_heartbeat();
        {
            let mut ended = lock(&state.ended);
            if ended.is_none() {
                *ended = Some("released".to_owned());
            }
        }
        self.write_cache(issued);
        state
            .store
            .release_lease(state.worker_id, &state.holder, issued)
            .await?;
        tracing::info!(worker_id = state.worker_id, "released the worker lease");
        Ok(())
    }

    fn write_cache(&self, until_ms: u64) {
        if let Some(path) = &self.state.cache_path {
            let cached = CachedWorker {
                worker_id: self.state.worker_id,
                until_ms,
            };
            if let Err(error) = write_cache(path, &cached) {
                tracing::warn!(%error, "cannot write the worker id cache");
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
