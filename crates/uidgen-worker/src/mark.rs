//! [`LocalMark`]: a worker id's reserved-until mark, kept in its local state file.
//!
//! A process that will reuse its worker id after a restart (a static id, or a lease restarted
//! from its local cache) must know how far its earlier life stamped. The mark is written and
//! synced to disk *before* any ID at or past its old value is issued, so after a crash the
//! file is never behind what was issued; a restart starts only once its clock has passed it.
//!
//! The mark is reserved ahead in steps by a background thread, so the hot path only reads an
//! atomic: it touches the disk only when demand outruns the thread (a cached generator
//! borrowing future time units, which happens on its padding thread anyway).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use parking_lot::Mutex;
use uidgen_core::{Clock, FenceRefusal, Layout, TimeFence};

use crate::cache::{CacheLock, CachedWorker, read_cache};
use crate::error::{Result, WorkerError};

/// The shortest step the mark is reserved ahead by.
const MIN_STEP_MS: u64 = 1_000;

/// How far ahead of the clock the mark is kept for `layout`: at least a second, and two of
/// the layout's time units (the unit being stamped ends up to one unit after the clock).
pub fn mark_step_ms(layout: &Layout) -> u64 {
    MIN_STEP_MS.max(layout.unit().millis().saturating_mul(2))
}

/// What the state file says and what this process has made durable.
#[derive(Debug)]
struct MarkState {
    /// The file as last written; `None` once forgotten (the worker id was given up).
    written: Option<CachedWorker>,
}

#[derive(Debug)]
struct MarkInner {
    cache: CacheLock,
    worker_id: u64,
    clock: Arc<dyn Clock>,
    step_ms: u64,
    /// The mark as written and synced: IDs may be stamped before this instant.
    limit_ms: AtomicU64,
    state: Mutex<MarkState>,
    /// The refresher stops when set (forgotten) or when the last handle is dropped.
    closed: AtomicBool,
}

/// A worker id's reserved-until mark in its locked local state file. Clones share it.
#[derive(Debug, Clone)]
pub struct LocalMark {
    inner: Arc<MarkInner>,
}

impl LocalMark {
    /// Lock the state file at `path` for `worker_id`; `Ok(None)` when another process (or
    /// another mark in this one) holds it. Returns the mark, starting at what the file said
    /// (0 when there was no file), and the file's previous contents.
    ///
    /// A file that names another worker id is an error: its mark would be lost.
    pub fn acquire(
        cache: CacheLock,
        worker_id: u64,
        clock: Arc<dyn Clock>,
        step_ms: u64,
    ) -> Result<(Self, Option<CachedWorker>)> {
        let previous = match read_cache(cache.path()) {
            Ok(previous) => Some(previous),
            Err(_) if !cache.path().exists() => None,
            Err(error) => return Err(error),
        };
        if let Some(previous) = &previous
            && previous.worker_id != worker_id
        {
            return Err(WorkerError::Cache {
                path: cache.path().display().to_string(),
                reason: format!(
                    "it records worker id {}, not {worker_id}: give each worker id its own state \
                     file (deleting it forgets how far worker id {} issued)",
                    previous.worker_id, previous.worker_id
                ),
            });
        }
        let start = previous.as_ref().map_or(0, |p| p.until_ms);
        let mark = Self {
            inner: Arc::new(MarkInner {
                cache,
                worker_id,
                clock,
                step_ms,
                limit_ms: AtomicU64::new(start),
                state: Mutex::new(MarkState {
                    written: previous.clone(),
                }),
                closed: AtomicBool::new(false),
            }),
        };
        Ok((mark, previous))
    }

    /// Lock and open the state file at `path` for `worker_id` with the step `layout` needs:
    /// the door for assigners outside this crate (uidgen-zk keeps its ZooKeeper worker id's
    /// mark and last accepted report here), which cannot reach the crate's lock type.
    /// `Ok(None)` when another process holds the file. Returns the mark, starting at what the
    /// file said, and the file's previous contents, as [`acquire`](Self::acquire) does.
    ///
    /// A file that names another worker id is an error, unless `replace_other` is set: then it
    /// is deleted first. Only do that when whatever that id's mark protected is guarded
    /// elsewhere (uidgen-zk: by the id's ZooKeeper node), since its mark is lost.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use uidgen_core::{Layout, SystemClock};
    /// use uidgen_worker::LocalMark;
    /// let dir = tempfile::tempdir().expect("a temporary directory");
    /// let path = dir.path().join("worker.state");
    /// let layout = Layout::snowflake()?;
    /// let (mark, previous) = LocalMark::open(&path, 5, Arc::new(SystemClock), &layout, false)?
    ///     .expect("nobody else holds the file");
    /// assert!(previous.is_none());
    /// mark.begin(Some("zk:demo/10.0.0.7:8080"), Some(1_000))?;
    /// // A second holder in this process (or another) is refused while the first lives.
    /// assert!(LocalMark::open(&path, 5, Arc::new(SystemClock), &layout, false)?.is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn open(
        path: &std::path::Path,
        worker_id: u64,
        clock: Arc<dyn Clock>,
        layout: &Layout,
        replace_other: bool,
    ) -> Result<Option<(Self, Option<CachedWorker>)>> {
        let Some(cache) = CacheLock::try_acquire(path)? else {
            return Ok(None);
        };
        if replace_other
            && let Ok(previous) = read_cache(path)
            && previous.worker_id != worker_id
        {
            cache.forget(previous.worker_id)?;
        }
        Self::acquire(cache, worker_id, clock, mark_step_ms(layout)).map(Some)
    }

    /// The state file.
    pub fn path(&self) -> &std::path::Path {
        self.inner.cache.path()
    }

    /// The mark: every ID stamped with this worker id lies before it.
    pub fn limit_ms(&self) -> u64 {
        // SeqCst: the mark is stored only after the file is synced; whoever reads the new
        // value then stamps under it, so the read must not be ordered before that store.
        self.inner.limit_ms.load(Ordering::SeqCst)
    }

    /// [`reserve`](Self::reserve) on behalf of a [`TimeFence`]: a mark that cannot be written
    /// refuses the extension, naming the fence's limit (`limit_ms`, read after the failure).
    ///
    /// # Errors
    /// [`FenceRefusal::NotYet`] with the write's error as the reason.
    pub fn reserve_for_fence(
        &self,
        until_ms: u64,
        limit_ms: impl FnOnce() -> u64,
    ) -> std::result::Result<u64, FenceRefusal> {
        self.reserve(until_ms)
            .map_err(|error| FenceRefusal::NotYet {
                limit_ms: limit_ms(),
                reason: format!("cannot record the reserved-until mark: {error}"),
            })
    }

    /// Make sure the mark is at least `until_ms`, writing it (a step further) and syncing the
    /// file first if it is not. Returns the mark.
    pub fn reserve(&self, until_ms: u64) -> Result<u64> {
        let inner = &self.inner;
        let mut state = inner.state.lock();
        let limit = self.limit_ms();
        if until_ms <= limit {
            return Ok(limit);
        }
        let Some(written) = &state.written else {
            return Err(self.forgotten());
        };
        let mut next = written.clone();
        next.until_ms = until_ms.saturating_add(inner.step_ms);
        inner.cache.write(&next)?;
        let mark = next.until_ms;
        state.written = Some(next);
        inner.limit_ms.store(mark, Ordering::SeqCst);
        Ok(mark)
    }

    /// Write the file now (starting it at the mark when there was none) with the claim this
    /// mark belongs to: a holder string and an expiry its authority (the database, ZooKeeper)
    /// accepted. Call once, before [`start_refresher`](Self::start_refresher); later claims go
    /// through [`record_claim`](Self::record_claim), which refuses a forgotten file.
    pub fn begin(&self, holder: Option<&str>, lease_expires_ms: Option<u64>) -> Result<()> {
        self.begin_from(holder, lease_expires_ms, 0)
    }

    /// [`begin`](Self::begin), with the mark raised to at least `floor_ms` in the same write:
    /// for a holder whose floor came from elsewhere (a claim in the database), so that a
    /// restart from the file, which takes the file's mark as its floor, starts no lower than
    /// this life did, even if it crashes before issuing anything.
    pub fn begin_from(
        &self,
        holder: Option<&str>,
        lease_expires_ms: Option<u64>,
        floor_ms: u64,
    ) -> Result<()> {
        let inner = &self.inner;
        let mut state = inner.state.lock();
        let mut next = state
            .written
            .clone()
            .unwrap_or_else(|| CachedWorker::new(inner.worker_id, self.limit_ms()));
        next.holder = holder.map(str::to_owned);
        next.lease_expires_ms = lease_expires_ms;
        next.until_ms = next.until_ms.max(floor_ms);
        inner.cache.write(&next)?;
        // SeqCst: as in `reserve`, raised only once the file says so.
        inner.limit_ms.fetch_max(next.until_ms, Ordering::SeqCst);
        state.written = Some(next);
        Ok(())
    }

    /// Record a (higher) lease expiry the database confirmed, for a restart from the file.
    pub fn record_lease_expiry(&self, expires_ms: u64) -> Result<()> {
        let mut state = self.inner.state.lock();
        let Some(written) = &state.written else {
            return Err(self.forgotten());
        };
        if written.lease_expires_ms.is_some_and(|e| e >= expires_ms) {
            return Ok(());
        }
        let mut next = written.clone();
        next.lease_expires_ms = Some(expires_ms);
        self.inner.cache.write(&next)?;
        state.written = Some(next);
        Ok(())
    }

    /// Record a newer claim the authority accepted: its holder string and an expiry, which
    /// never moves down. Refused once the file was [forgotten](Self::forget), so a report that
    /// finishes after the id was given up does not write the file back.
    pub fn record_claim(&self, holder: &str, expires_ms: u64) -> Result<()> {
        let mut state = self.inner.state.lock();
        let Some(written) = &state.written else {
            return Err(self.forgotten());
        };
        let mut next = written.clone();
        next.holder = Some(holder.to_owned());
        next.lease_expires_ms = Some(
            written
                .lease_expires_ms
                .map_or(expires_ms, |e| e.max(expires_ms)),
        );
        if next == *written {
            return Ok(());
        }
        self.inner.cache.write(&next)?;
        state.written = Some(next);
        Ok(())
    }

    /// Delete the file (the worker id was given up: nothing may restart on it from here) and
    /// stop writing it. The mark stays readable, so nothing past it is issued.
    pub fn forget(&self) -> Result<()> {
        let inner = &self.inner;
        let mut state = inner.state.lock();
        inner.closed.store(true, Ordering::SeqCst);
        if state.written.take().is_none() {
            return Ok(());
        }
        inner.cache.forget(inner.worker_id)
    }

    /// Keep the mark `step` ahead of the clock from a background thread, checking four times
    /// per step, until forgotten or dropped.
    pub fn start_refresher(&self) -> Result<()> {
        let weak: Weak<MarkInner> = Arc::downgrade(&self.inner);
        let period = Duration::from_millis((self.inner.step_ms / 4).max(1));
        thread::Builder::new()
            .name(format!("uidgen-mark-{}", self.inner.worker_id))
            .spawn(move || {
                loop {
                    thread::sleep(period);
                    let Some(inner) = weak.upgrade() else { return };
                    if inner.closed.load(Ordering::SeqCst) {
                        return;
                    }
                    let mark = LocalMark { inner };
                    let now = mark.inner.clock.now_millis();
                    if mark.limit_ms() < now.saturating_add(mark.inner.step_ms)
                        && let Err(error) = mark.reserve(now.saturating_add(mark.inner.step_ms))
                    {
                        tracing::warn!(%error,
                            "cannot move the worker id's reserved-until mark ahead");
                    }
                }
            })
            .map(drop)
            .map_err(|e| WorkerError::Cache {
                path: self.path().display().to_string(),
                reason: format!("cannot start the thread that keeps the mark ahead: {e}"),
            })
    }

    fn forgotten(&self) -> WorkerError {
        WorkerError::Cache {
            path: self.path().display().to_string(),
            reason: format!(
                "worker id {} was given up; its mark is no longer kept",
                self.inner.worker_id
            ),
        }
    }
}

/// The builder methods of an assigner whose ids keep a [`MarkFence`] (static, machine): the
/// clock it reads and the two bounds [`MarkFence::continue_from`] takes. The type needs
/// `clock: Arc<dyn Clock>`, `max_start_wait: Duration` and `max_borrow: Duration` fields.
macro_rules! mark_fence_setters {
    () => {
        /// Read time from `clock` (the one the generator reads).
        #[must_use]
        pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
            self.timing.clock = Arc::new(clock);
            self
        }

        /// The longest a start waits for its clock to pass the previous life's mark.
        #[must_use]
        pub fn max_start_wait(mut self, wait: Duration) -> Self {
            self.timing.max_start_wait = wait;
            self
        }

        /// How far ahead of the clock a cached generator may borrow.
        #[must_use]
        pub fn max_borrow(mut self, borrow: Duration) -> Self {
            self.timing.max_borrow = borrow;
            self
        }
    };
}
pub(crate) use mark_fence_setters;

/// How an assigner that keeps a local mark starts on it: the clock it reads, how long a start
/// waits for that clock to pass the previous life's mark, and how far a cached generator may
/// borrow ahead. The assigners' setters (`mark_fence_setters!`) write it.
#[derive(Debug, Clone)]
pub struct MarkTiming {
    /// The clock the generator reads.
    pub clock: Arc<dyn Clock>,
    /// The longest a start waits for its clock to pass the previous life's mark.
    pub max_start_wait: Duration,
    /// How far ahead of the clock a cached generator may borrow.
    pub max_borrow: Duration,
}

impl MarkTiming {
    /// The system clock with these bounds.
    pub fn new(max_start_wait: Duration, max_borrow: Duration) -> Self {
        Self {
            clock: Arc::new(uidgen_core::SystemClock),
            max_start_wait,
            max_borrow,
        }
    }
}

/// The fence of a worker id kept by a local mark (static, machine, a lease's state file): IDs
/// only under the mark, which rises on demand.
#[derive(Debug)]
pub struct MarkFence {
    /// The mark, continued from the previous life's.
    pub mark: LocalMark,
    /// How far ahead of the clock a cached generator may borrow.
    pub max_borrow_ms: Option<u64>,
    /// The previous life's mark: nothing is stamped before it.
    pub floor_ms: u64,
}

impl MarkFence {
    /// Continue the mark a worker id keeps in `cache` (a static id's state file, a machine
    /// value's file): wait until `clock` has passed what the previous life reserved (at most
    /// `max_start_wait`), then start a mark of this life and fence the generator by it, so a
    /// time unit an earlier life stamped is never stamped again.
    ///
    /// Cancelling it while it waits leaves nothing behind: the file lock and the mark are
    /// dropped with the future, and the file still holds the previous life's mark.
    pub async fn continue_from(
        cache: CacheLock,
        worker_id: u64,
        layout: &Layout,
        timing: &MarkTiming,
    ) -> Result<Self> {
        Self::continue_above(cache, worker_id, layout, timing, 0, None, true).await
    }

    /// [`continue_from`](Self::continue_from) for a mark that belongs to a lease: the floor is
    /// also at least `floor_ms` (where the lease's authority says earlier holders stopped),
    /// and the file records `claim`, the lease's holder string and an expiry its authority
    /// accepted, so that a restart from the file knows which lease it continues and until when.
    ///
    /// `keep_ahead` starts the thread that keeps the mark a step ahead of the clock, so that
    /// issuing seldom waits for the disk; without it the mark rises only when an ID needs it
    /// (for an id that issues only now and then, such as a client's fallback, which would
    /// otherwise write its file every second while it is not used).
    ///
    /// Cancel safety: as for `continue_from`, but once the wait is over the file records
    /// `claim` with the mark raised to the floor.
    pub async fn continue_above(
        cache: CacheLock,
        worker_id: u64,
        layout: &Layout,
        timing: &MarkTiming,
        floor_ms: u64,
        claim: Option<(&str, u64)>,
        keep_ahead: bool,
    ) -> Result<Self> {
        let clock = &timing.clock;
        let (mark, previous) =
            LocalMark::acquire(cache, worker_id, Arc::clone(clock), mark_step_ms(layout))?;
        let floor_ms = previous.as_ref().map_or(0, |p| p.until_ms).max(floor_ms);
        let wait = timing.max_start_wait;
        crate::wait::wait_for_clock(clock.as_ref(), worker_id, floor_ms, wait).await?;
        match claim {
            Some((holder, expires_ms)) => {
                mark.begin_from(Some(holder), Some(expires_ms), floor_ms)?;
            }
            None => mark.begin(None, None)?,
        }
        if keep_ahead {
            mark.start_refresher()?;
        }
        Ok(Self {
            mark,
            max_borrow_ms: Some(uidgen_core::clock::saturating_millis(timing.max_borrow)),
            floor_ms,
        })
    }
}

impl TimeFence for MarkFence {
    fn limit_ms(&self) -> u64 {
        self.mark.limit_ms()
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        self.mark
            .reserve_for_fence(until_ms, || self.mark.limit_ms())
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        self.max_borrow_ms
    }

    fn floor_ms(&self) -> u64 {
        self.floor_ms
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use uidgen_core::ManualClock;

    fn mark_at(path: &std::path::Path, clock: &ManualClock) -> LocalMark {
        let cache = CacheLock::try_acquire(path).unwrap().unwrap();
        let (mark, _) = LocalMark::acquire(cache, 3, Arc::new(clock.clone()), 1_000).unwrap();
        mark.begin(Some("host#token"), Some(5_000)).unwrap();
        mark
    }

    #[test]
    fn the_mark_is_on_disk_before_it_rises() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let mark = mark_at(&path, &ManualClock::new(1_000));
        assert_eq!(mark.reserve(2_500).unwrap(), 3_500);
        let on_disk = read_cache(&path).unwrap();
        assert_eq!(on_disk.until_ms, mark.limit_ms());
        assert_eq!(on_disk.holder.as_deref(), Some("host#token"));
        // Below the mark nothing is written again.
        assert_eq!(mark.reserve(3_000).unwrap(), 3_500);
    }

    /// Issue #8, case 6: a renewal that finishes after a concurrent release must not write the
    /// file back, or a start without the database would take a released id.
    #[test]
    fn nothing_writes_the_file_back_once_it_was_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let mark = mark_at(&path, &ManualClock::new(1_000));
        mark.forget().unwrap();
        assert!(!path.exists());
        assert!(mark.record_lease_expiry(9_000).is_err());
        assert!(mark.reserve(9_000).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn the_refresher_keeps_the_mark_a_step_ahead_of_the_clock() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let clock = ManualClock::new(10_000);
        let mark = mark_at(&path, &clock);
        mark.start_refresher().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while mark.limit_ms() < 11_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the refresher never moved the mark"
            );
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(read_cache(&path).unwrap().until_ms, mark.limit_ms());
    }
}
