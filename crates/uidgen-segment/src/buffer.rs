//! [`SegmentBuffer`]: one biz tag's double buffer (Leaf's `SegmentBuffer`), lock-free on the
//! hot path.
//!
//! # How the hot path stays lock-free without repeating an ID
//!
//! Each of the two slots has a `cursor` (the next ID; only ever raised, by `fetch_add` and
//! `fetch_max`) and bounds `start`/`max` describing the segment loaded into it. Taking IDs is
//! `first = cursor.fetch_add(n)`, then `max` (Acquire), then `start`, and keeping
//! `[first, first + n) ∩ [start, max)`. No lock, no allocation, no I/O.
//!
//! A slot is reloaded while late readers may still be on it, so a reader can see bounds from
//! different loads. That is safe because the loader writes `start` before `max` (Release) and
//! the reader reads `max` (Acquire) before `start`: a reader that sees load *i*'s `max` sees load
//! *i*'s `start` or a later one. A later `start` is at or above every earlier `max` (claims only
//! move `max_id` up, and [`Control::served_max`] refuses any claim that does not), so a mixed pair
//! is an empty range and the reader simply moves on. A matching pair is a segment we own. Within a
//! slot every taken ID is distinct because the cursor never goes down; across slots the segments
//! are disjoint. So no ID is served twice, whatever the interleaving; a reader that loses a race
//! at most skips IDs, which Leaf allows.
//!
//! # Waiting
//!
//! Only when both segments are used up does a caller wait, for at most
//! [`SegmentOptions::wait_timeout`](crate::SegmentOptions::wait_timeout): the blocking
//! [`SegmentBuffer::next_id`] parks on a `parking_lot::Condvar` (so it works from plain threads with
//! no runtime), the `async` variants await a `tokio::sync::Notify`. Loads always run as tasks on
//! the service's tokio runtime; a blocking caller on a *current-thread* runtime's only thread would
//! starve that task, so async code should use the `_async` methods.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

use crate::error::{Result, SegmentError};
use crate::service::Shared;
use crate::state::{SegmentState, TagState};
use crate::step::next_step;

/// One segment slot. The cursor is written by every taker; the bounds are written once per load,
/// so they sit on their own cache line and stay shared (read-only) between cores.
#[derive(Debug)]
struct Slot {
    /// The next ID to hand out. Only raised (`fetch_add`, `fetch_max`), so never repeats.
    cursor: CachePadded<AtomicI64>,
    /// The loaded segment.
    bounds: CachePadded<Bounds>,
}

#[derive(Debug)]
struct Bounds {
    /// First ID of the segment.
    start: AtomicI64,
    /// Exclusive end of the segment (the claimed `max_id`); stored last, with Release.
    max: AtomicI64,
    /// The segment's length.
    step: AtomicI64,
    /// Once the cursor passes this, the next segment is loaded in the background.
    prefetch_at: AtomicI64,
}

impl Slot {
    fn empty() -> Self {
        Self {
            // Far below any segment, so attempts before the first load waste none of it.
            cursor: CachePadded::new(AtomicI64::new(i64::MIN)),
            // (MAX, MIN) is an empty range, and any real `start` is >= MIN: the ordering argument
            // in the module docs holds from the first load on.
            bounds: CachePadded::new(Bounds {
                start: AtomicI64::new(i64::MAX),
                max: AtomicI64::new(i64::MIN),
                step: AtomicI64::new(0),
                prefetch_at: AtomicI64::new(i64::MAX),
            }),
        }
    }

    /// Whether the cursor is still below the end (slow path only).
    fn has_room(&self) -> bool {
        // Acquire/Relaxed as in `try_take`: a stale view only costs a retry or a wait.
        let max = self.bounds.max.load(Ordering::Acquire);
        // Relaxed: a hint; `try_take`'s atomic add decides.
        self.cursor.load(Ordering::Relaxed) < max
    }

    fn state(&self) -> SegmentState {
        // Relaxed: a monitoring snapshot; fields may be from neighbouring loads.
        let start = self.bounds.start.load(Ordering::Relaxed);
        let max = self.bounds.max.load(Ordering::Relaxed);
        let step = self.bounds.step.load(Ordering::Relaxed);
        if max == i64::MIN {
            return SegmentState {
                value: 0,
                max: 0,
                step: 0,
                idle: 0,
            };
        }
        let value = self.cursor.load(Ordering::Relaxed).clamp(start, max);
        SegmentState {
            value,
            max,
            step,
            idle: max - value,
        }
    }
}

/// What the slow path decided, under the control lock.
enum Advance {
    /// A segment is in place: take again.
    Retry,
    /// A load is in flight: wait for it.
    Wait,
}

/// Which slot a load fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoadKind {
    /// The first segment, into the current slot.
    Init,
    /// The next segment, into the other slot.
    Next,
}

/// Everything outside the hot path, behind one mutex.
#[derive(Debug)]
struct Control {
    /// The first segment has been loaded.
    init: bool,
    /// A load task is running (at most one per tag).
    loading: bool,
    /// The non-current slot holds a fresh segment.
    next_ready: bool,
    /// Why the last load failed; cleared by a successful one.
    last_error: Option<String>,
    /// The last failure was "no such tag".
    unknown_tag: bool,
    /// No background load before this time (clock ms), after a failure.
    retry_at_ms: u64,
    /// The step of the latest segment (Leaf's `buffer.step`).
    step: i64,
    /// The step stored in the table (Leaf's `minStep`).
    min_step: i64,
    /// When the previous segment was loaded (Leaf's `updateTimestamp`), clock ms.
    update_timestamp: Option<u64>,
    /// The highest `max_id` served so far: a claim starting below it is refused.
    served_max: i64,
}

/// Flags read on the hot path, on their own cache line.
#[derive(Debug)]
struct Hot {
    /// Index (0 or 1) of the current slot.
    current: AtomicUsize,
    /// A load is in flight or the next segment is ready: no prefetch needed.
    next_pending: AtomicBool,
    /// The tag was deleted (or the service shut down): serve no new segments.
    evicted: AtomicBool,
}

/// One biz tag's pair of segments.
///
/// Obtained from [`SegmentService::tag`](crate::SegmentService::tag) as a [`TagHandle`](crate::TagHandle);
/// most callers use [`SegmentService::get`](crate::SegmentService::get) instead.
#[derive(Debug)]
pub struct SegmentBuffer {
    tag: Box<str>,
    hot: CachePadded<Hot>,
    slots: [Slot; 2],
    control: Mutex<Control>,
    /// Woken after every load, for blocking waiters.
    loaded: Condvar,
    /// Woken after every load, for async waiters.
    loaded_async: Notify,
    shared: Arc<Shared>,
}

impl SegmentBuffer {
    pub(crate) fn new(tag: &str, shared: Arc<Shared>) -> Self {
        Self {
            tag: tag.into(),
            hot: CachePadded::new(Hot {
                current: AtomicUsize::new(0),
                next_pending: AtomicBool::new(false),
                evicted: AtomicBool::new(false),
            }),
            slots: [Slot::empty(), Slot::empty()],
            control: Mutex::new(Control {
                init: false,
                loading: false,
                next_ready: false,
                last_error: None,
                unknown_tag: false,
                retry_at_ms: 0,
                step: 0,
                min_step: 1,
                update_timestamp: None,
                served_max: i64::MIN,
            }),
            loaded: Condvar::new(),
            loaded_async: Notify::new(),
            shared,
        }
    }

    /// The biz tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The largest batch the service allows.
    pub(crate) fn max_batch(&self) -> usize {
        self.shared.options.max_batch
    }

    /// Take up to `n` IDs from the current segment: the hot path.
    ///
    /// `Ok` holds a non-empty range (shorter than `n` when the segment ran out); `Err` holds the
    /// index of the exhausted slot.
    #[inline]
    pub(crate) fn try_take(self: &Arc<Self>, n: i64) -> Result<Range<i64>, usize> {
        // Acquire: pairs with the Release in `switch`, so a caller that sees the new index also
        // sees the bounds loaded before it (an older view only costs a retry).
        let idx = self.hot.current.load(Ordering::Acquire);
        let slot = &self.slots[idx & 1];
        let n = if n > 1 {
            // A batch reserves no more than looks left, so a batch that finds the segment
            // nearly used up does not push the cursor deep into the slot's next segment.
            // Relaxed (both): hints; the add and the bounds check below decide.
            let left = (slot.bounds.max.load(Ordering::Relaxed))
                .saturating_sub(slot.cursor.load(Ordering::Relaxed));
            if left <= 0 {
                return Err(idx & 1);
            }
            n.min(left)
        } else {
            n
        };
        // Relaxed: uniqueness needs only the atomicity of the RMW on this one counter; which
        // segment the IDs belong to is decided by the bounds check below.
        let first = slot.cursor.fetch_add(n, Ordering::Relaxed);
        // Acquire: pairs with the Release store of `max` in `install`, so `start` below is from
        // the same load or a later one (see the module docs).
        let max = slot.bounds.max.load(Ordering::Acquire);
        // Relaxed: ordered after the Acquire load of `max` above.
        let start = slot.bounds.start.load(Ordering::Relaxed);
        let lo = first.max(start);
        let hi = first.saturating_add(n).min(max);
        if lo < hi {
            // Relaxed: both are hints; a stale read delays or repeats a prefetch check, and the
            // check itself runs under the control lock.
            if first >= slot.bounds.prefetch_at.load(Ordering::Relaxed)
                && !self.hot.next_pending.load(Ordering::Relaxed)
            {
                self.prefetch();
            }
            Ok(lo..hi)
        } else {
            Err(idx & 1)
        }
    }

    /// The next ID, waiting (blocking this thread) up to the wait timeout when both segments
    /// are used up.
    pub(crate) fn next_id(self: &Arc<Self>) -> Result<i64> {
        loop {
            match self.try_take(1) {
                Ok(range) => return Ok(range.start),
                Err(idx) => self.advance_blocking(idx)?,
            }
        }
    }

    /// The next ID, awaiting (not blocking) when both segments are used up.
    pub(crate) async fn next_id_async(self: &Arc<Self>) -> Result<i64> {
        loop {
            match self.try_take(1) {
                Ok(range) => return Ok(range.start),
                Err(idx) => self.advance_async(idx).await?,
            }
        }
    }

    /// `n` IDs, possibly from two or more segments; blocking like [`next_id`](Self::next_id).
    /// On error the IDs already taken are dropped (skipped, never reissued).
    pub(crate) fn next_batch(self: &Arc<Self>, n: usize) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            match self.try_take(remaining(n, ids.len())) {
                Ok(range) => ids.extend(range),
                Err(idx) => self.advance_blocking(idx)?,
            }
        }
        Ok(ids)
    }

    /// `n` IDs, awaiting instead of blocking.
    pub(crate) async fn next_batch_async(self: &Arc<Self>, n: usize) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            match self.try_take(remaining(n, ids.len())) {
                Ok(range) => ids.extend(range),
                Err(idx) => self.advance_async(idx).await?,
            }
        }
        Ok(ids)
    }

    /// Slot `idx` is used up: switch to the next segment, or start a load and wait for it.
    fn advance_blocking(self: &Arc<Self>, idx: usize) -> Result<()> {
        let deadline = Instant::now() + self.shared.options.wait_timeout;
        let mut control = self.control.lock();
        loop {
            match self.advance_locked(&mut control, idx)? {
                Advance::Retry => return Ok(()),
                Advance::Wait => {
                    if self.loaded.wait_until(&mut control, deadline).timed_out() {
                        return Err(self.still_loading(&control));
                    }
                }
            }
        }
    }

    /// [`advance_blocking`](Self::advance_blocking) for async callers.
    async fn advance_async(self: &Arc<Self>, idx: usize) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.shared.options.wait_timeout;
        loop {
            let notified = self.loaded_async.notified();
            let mut notified = std::pin::pin!(notified);
            // Register before looking at the state, so a load that finishes in between wakes us.
            notified.as_mut().enable();
            {
                let mut control = self.control.lock();
                match self.advance_locked(&mut control, idx)? {
                    Advance::Retry => return Ok(()),
                    Advance::Wait => {}
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(self.still_loading(&self.control.lock()));
            }
        }
    }

    fn advance_locked(self: &Arc<Self>, control: &mut Control, idx: usize) -> Result<Advance> {
        if self.shared.is_shut_down() {
            return Err(SegmentError::Shutdown);
        }
        // Relaxed: set under the service's tag-map lock; a late view serves one more segment
        // at most, which the tag owned anyway.
        if self.hot.evicted.load(Ordering::Relaxed) || control.unknown_tag {
            return Err(SegmentError::UnknownTag(self.tag.to_string()));
        }
        // Relaxed: `current` only changes under the control lock, which we hold.
        if self.hot.current.load(Ordering::Relaxed) != idx {
            return Ok(Advance::Retry); // someone switched already
        }
        if self.slots[idx].has_room() {
            return Ok(Advance::Retry); // the first segment just arrived
        }
        if control.init && control.next_ready {
            self.switch(control, idx);
            return Ok(Advance::Retry);
        }
        if control.loading {
            return Ok(Advance::Wait);
        }
        if let Some(reason) = &control.last_error
            && self.shared.clock.now_millis() < control.retry_at_ms
        {
            // The database failed a moment ago: answer at once rather than hammer it.
            return Err(SegmentError::BothSegmentsNotReady {
                tag: self.tag.to_string(),
                reason: format!("loading a segment failed: {reason}"),
            });
        }
        let kind = if control.init {
            LoadKind::Next
        } else {
            LoadKind::Init
        };
        self.start_load(control, kind);
        Ok(Advance::Wait)
    }

    /// Make the other slot current (under the control lock).
    fn switch(&self, control: &mut Control, idx: usize) {
        control.next_ready = false;
        // Relaxed: the hot path re-reads it after the switch; the control lock orders it
        // against the next `start_load`.
        self.hot.next_pending.store(false, Ordering::Relaxed);
        // Release: pairs with the Acquire in `try_take` (see there).
        self.hot.current.store(1 - idx, Ordering::Release);
    }

    /// The cursor passed the prefetch point and no next segment is on its way: start loading
    /// it, unless another caller is already doing so.
    #[cold]
    fn prefetch(self: &Arc<Self>) {
        // try_lock: a taker never waits here; whoever holds the lock will see the same state.
        let Some(mut control) = self.control.try_lock() else {
            return;
        };
        if !control.init
            || control.loading
            || control.next_ready
            || self.shared.is_shut_down()
            || self.shared.clock.now_millis() < control.retry_at_ms
        {
            return;
        }
        self.start_load(&mut control, LoadKind::Next);
    }

    /// Spawn the one load task (under the control lock).
    fn start_load(self: &Arc<Self>, control: &mut Control, kind: LoadKind) {
        control.loading = true;
        // Relaxed: a hint for the hot path; the control lock is the truth.
        self.hot.next_pending.store(true, Ordering::Relaxed);
        // Relaxed: `current` only changes under the control lock, which we hold.
        let current = self.hot.current.load(Ordering::Relaxed);
        let target = match kind {
            LoadKind::Init => current,
            LoadKind::Next => 1 - current,
        };
        let buffer = Arc::clone(self);
        self.shared.runtime.spawn(async move {
            buffer.load(target, kind).await;
        });
    }

    /// Claim a segment and install it in slot `target`.
    async fn load(self: Arc<Self>, target: usize, kind: LoadKind) {
        let now = self.shared.clock.now_millis();
        let options = &self.shared.options;
        let step = {
            let control = self.control.lock();
            match (kind, control.update_timestamp) {
                // Leaf: the first two loads use the table's step; the second starts the clock.
                (LoadKind::Init, _) | (LoadKind::Next, None) => None,
                (LoadKind::Next, Some(_)) if !options.dynamic_step => None,
                (LoadKind::Next, Some(previous)) => Some(next_step(
                    control.step,
                    control.min_step,
                    options.max_step,
                    now.saturating_sub(previous),
                    options.segment_duration_ms(),
                )),
            }
        };
        let claimed = self.shared.source.claim(&self.tag, step).await;
        let mut control = self.control.lock();
        let outcome = claimed.and_then(|claim| {
            let start = claim
                .max_id
                .checked_sub(claim.step)
                .filter(|_| claim.step > 0);
            match start {
                Some(start) if start >= control.served_max => Ok((start, claim)),
                _ => Err(SegmentError::MaxIdWentBackwards {
                    tag: self.tag.to_string(),
                    start: start.unwrap_or(i64::MIN),
                    end: claim.max_id,
                    served_max: control.served_max,
                }),
            }
        });
        match outcome {
            Ok((start, claim)) => {
                self.install(target, start, claim.max_id, claim.step);
                control.served_max = claim.max_id;
                control.step = claim.step;
                if let Some(table_step) = claim.table_step {
                    control.min_step = table_step;
                }
                match kind {
                    LoadKind::Init => {
                        control.init = true;
                        // Relaxed: see `start_load`; the next segment is not on its way.
                        self.hot.next_pending.store(false, Ordering::Relaxed);
                    }
                    LoadKind::Next => {
                        control.next_ready = true;
                        control.update_timestamp = Some(now);
                    }
                }
                control.last_error = None;
                control.unknown_tag = false;
                tracing::debug!(tag = %self.tag, start, end = claim.max_id, step = claim.step, "loaded segment");
            }
            Err(error) => {
                tracing::warn!(tag = %self.tag, %error, "loading a segment failed");
                control.unknown_tag = matches!(error, SegmentError::UnknownTag(_));
                control.last_error = Some(error.to_string());
                control.retry_at_ms = self
                    .shared
                    .clock
                    .now_millis()
                    .saturating_add(options.retry_backoff_ms());
                // Relaxed: see `start_load`; lets the hot path trigger a retry later.
                self.hot.next_pending.store(false, Ordering::Relaxed);
            }
        }
        control.loading = false;
        drop(control);
        self.loaded.notify_all();
        self.loaded_async.notify_waiters();
    }

    /// Publish a claimed segment in slot `idx` (see the module docs for the order).
    fn install(&self, idx: usize, start: i64, max: i64, step: i64) {
        let slot = &self.slots[idx];
        let ratio = self.shared.options.prefetch_ratio;
        // Leaf: prefetch once more than `ratio` of the segment is used. f64 holds any step up to
        // 2^53 exactly; the product is below `step`, so the conversion back cannot overflow.
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let used = (step as f64 * ratio) as i64;
        // Relaxed: published by the Release store of `max` below.
        slot.bounds.start.store(start, Ordering::Relaxed);
        // Relaxed: published by the Release store of `max` below.
        slot.bounds.step.store(step, Ordering::Relaxed);
        // Relaxed: published by the Release store of `max` below.
        slot.bounds
            .prefetch_at
            .store(start.saturating_add(used), Ordering::Relaxed);
        // Release: a reader that sees this `max` sees the `start` above (module docs).
        slot.bounds.max.store(max, Ordering::Release);
        // Relaxed: a single-counter RMW; raising (never lowering) the cursor keeps every ID
        // it ever returned distinct.
        slot.cursor.fetch_max(start, Ordering::Relaxed);
    }

    /// The tag was deleted or the service is stopping: serve no new segment, wake waiters.
    pub(crate) fn evict(&self) {
        // Relaxed: read in the slow path under the control lock, taken just below.
        self.hot.evicted.store(true, Ordering::Relaxed);
        drop(self.control.lock());
        self.loaded.notify_all();
        self.loaded_async.notify_waiters();
    }

    /// An admin changed the stored step: the dynamic step never goes below it.
    pub(crate) fn set_table_step(&self, step: i64) {
        self.control.lock().min_step = step;
    }

    fn still_loading(&self, control: &Control) -> SegmentError {
        let waited = self.shared.options.wait_timeout.as_millis();
        let reason = match &control.last_error {
            Some(error) => format!("loading a segment failed: {error}"),
            None => format!("the next segment is still loading after {waited} ms"),
        };
        SegmentError::BothSegmentsNotReady {
            tag: self.tag.to_string(),
            reason,
        }
    }

    /// A snapshot for monitoring (Leaf's `/cache` page).
    pub(crate) fn state(&self) -> TagState {
        let control = self.control.lock();
        // Relaxed: a monitoring snapshot.
        let current = self.hot.current.load(Ordering::Relaxed);
        TagState {
            tag: self.tag.to_string(),
            init: control.init,
            next_ready: control.next_ready,
            loading: control.loading,
            pos: current,
            step: control.step,
            min_step: control.min_step,
            segments: [self.slots[0].state(), self.slots[1].state()],
            last_error: control.last_error.clone(),
        }
    }
}

/// `n - taken` as the i64 the cursor counts in; `n` is capped by `max_batch`, far below i64::MAX.
fn remaining(n: usize, taken: usize) -> i64 {
    i64::try_from(n - taken).unwrap_or(i64::MAX)
}
