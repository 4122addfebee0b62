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
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::Duration;

use uidgen_core::{Clock, FenceRefusal, Layout, TimeFence};

use crate::cache::{CacheLock, CachedWorker, read_cache};
use crate::error::{Result, StoreError};

/// The shortest step the mark is reserved ahead by.
const MIN_STEP_MS: u64 = 1_000;

/// How far ahead of the clock the mark is kept for `layout`: at least a second, and two of
/// the layout's time units (the unit being stamped ends up to one unit after the clock).
pub(crate) fn mark_step_ms(layout: &Layout) -> u64 {
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
    pub(crate) fn acquire(
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
            return Err(StoreError::Cache {
                path: cache.path().display().to_string(),
                reason: format!(
                    "it records worker id {}, not {worker_id}: give each worker id its own state file (deleting it forgets how far worker id {} issued)",
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

    /// Make sure the mark is at least `until_ms`, writing it (a step further) and syncing the
    /// file first if it is not. Returns the mark.
    pub fn reserve(&self, until_ms: u64) -> Result<u64> {
        let inner = &self.inner;
        let mut state = lock(&inner.state);
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

    /// Start the file (when there was none) at `until_ms` with the lease fields given.
    pub(crate) fn begin(&self, holder: Option<&str>, lease_expires_ms: Option<u64>) -> Result<()> {
        let inner = &self.inner;
        let mut state = lock(&inner.state);
        let mut next = state
            .written
            .clone()
            .unwrap_or_else(|| CachedWorker::new(inner.worker_id, self.limit_ms()));
        next.holder = holder.map(str::to_owned);
        next.lease_expires_ms = lease_expires_ms;
        inner.cache.write(&next)?;
        state.written = Some(next);
        Ok(())
    }

    /// Record a (higher) lease expiry the database confirmed, for a restart from the file.
    pub(crate) fn record_lease_expiry(&self, expires_ms: u64) -> Result<()> {
        let mut state = lock(&self.inner.state);
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

    /// Delete the file (the worker id was given up: nothing may restart on it from here) and
    /// stop writing it. The mark stays readable, so nothing past it is issued.
    pub(crate) fn forget(&self) -> Result<()> {
        let inner = &self.inner;
        let mut state = lock(&inner.state);
        inner.closed.store(true, Ordering::SeqCst);
        if state.written.take().is_none() {
            return Ok(());
        }
        inner.cache.forget(inner.worker_id)
    }

    /// Keep the mark `step` ahead of the clock from a background thread, checking four times
    /// per step, until forgotten or dropped.
    pub(crate) fn start_refresher(&self) -> Result<()> {
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
                        tracing::warn!(%error, "cannot move the worker id's reserved-until mark ahead");
                    }
                }
            })
            .map(drop)
            .map_err(|e| StoreError::Cache {
                path: self.path().display().to_string(),
                reason: format!("cannot start the thread that keeps the mark ahead: {e}"),
            })
    }

    fn forgotten(&self) -> StoreError {
        StoreError::Cache {
            path: self.path().display().to_string(),
            reason: format!(
                "worker id {} was given up; its mark is no longer kept",
                self.inner.worker_id
            ),
        }
    }
}

/// The fence of a static worker id: IDs only under the mark, which rises on demand.
#[derive(Debug)]
pub(crate) struct MarkFence {
    pub(crate) mark: LocalMark,
    pub(crate) max_borrow_ms: Option<u64>,
}

impl TimeFence for MarkFence {
    fn limit_ms(&self) -> u64 {
        self.mark.limit_ms()
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        self.mark
            .reserve(until_ms)
            .map_err(|error| FenceRefusal::NotYet {
                limit_ms: self.mark.limit_ms(),
                reason: format!("cannot record the reserved-until mark: {error}"),
            })
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        self.max_borrow_ms
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves whole-step data behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
