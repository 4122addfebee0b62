//! [`SegmentBuffer`]: one biz tag's double buffer (Leaf's `SegmentBuffer`), lock-free on the
//! hot path.
//!
//! # How the hot path stays lock-free without repeating an ID
//!
//! Each of the two slots has a `cursor` (the next position; only ever raised, by `fetch_add` and
//! `fetch_max`) and bounds `start`/`max` describing the segment loaded into it. Taking IDs is
//! `first = cursor.fetch_add(n)`, then `max` (Acquire), then `start`, and keeping
//! `[first, first + n) ∩ [start, max)`. No lock, no allocation, no I/O. With a random skip
//! ([`SegmentOptions::random_skip_max`](crate::SegmentOptions::random_skip_max)) a take reserves
//! `1 + gap` positions the same way and keeps only the last of them inside `[start, max)`: the
//! reservations stay disjoint, so the argument below is unchanged. A position is an ID for a
//! single-database tag; for a tag served from several databases (Tinyid's `delta`), position
//! `v` is the ID `first_id + (v - start) * delta` (see the `slot` module).
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
//! The mapping from positions to IDs (`first_id`, `delta`) is read after `start`, so it could
//! come from a later load than `start`. The loader stores `start`, then a Release fence, then
//! the mapping; the reader reads the mapping, an Acquire fence, then `start` again. A mapping from
//! a later load comes with that load's `start` on the second read (fence to fence), and starts
//! strictly increase across a slot's loads (each segment has at least one position), so the
//! reader sees the change and takes nothing (a seqlock's check). Otherwise the mapping is the
//! one of `start`'s load, so the IDs are that segment's own.
//!
//! Across databases: positions of one slot keep increasing whichever database a segment came
//! from (a load starts at or above the slot's previous `max`), and IDs of different databases of
//! a group never coincide (distinct remainders of one delta); a claim whose residue overlaps one
//! already served must start at or above what was served of it (`ServedMax`).
//!
//! # Waiting
//!
//! Only when both segments are used up does a caller wait, for at most
//! [`SegmentOptions::wait_timeout`](crate::SegmentOptions::wait_timeout): the blocking
//! [`SegmentBuffer::next_id`] parks on a `parking_lot::Condvar` (so it works from plain threads
//! with no runtime), the `async` variants await a `tokio::sync::Notify`. Loads always run as tasks
//! on the service's tokio runtime; a blocking caller on a *current-thread* runtime's only thread
//! would starve that task, so async code should use the `_async` methods.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::time::Instant;

use crossbeam_utils::CachePadded;
use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;
use uidgen_store::ReturnedRange;

use crate::error::{Result, SegmentError};
use crate::shared::Shared;
use crate::slot::{Slot, Taken, Untouched};
use crate::state::TagState;

mod load;
pub(crate) mod load_state;

use load_state::{FailureKind, LoadFailure, LoadKind, ServedMax};

/// What the slow path decided, under the control lock.
enum Advance {
    /// A segment is in place: take again.
    Retry,
    /// A load is in flight: wait for it.
    Wait,
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
    /// Why the last load failed; cleared by a successful one, an upsert of the tag, and (for an
    /// unknown tag) a tag sync that lists it.
    failure: Option<LoadFailure>,
    /// The step of the latest segment (Leaf's `buffer.step`).
    step: i64,
    /// The step stored in the table (Leaf's `minStep`).
    min_step: i64,
    /// When the previous segment was loaded (Leaf's `updateTimestamp`), clock ms.
    update_timestamp: Option<u64>,
    /// The highest `max_id` served so far, per residue: a claim starting below that of a
    /// residue it overlaps is refused. Seeded from the tag's previous buffer when a deleted tag
    /// comes back, so a re-created row (which restarts at `max_id` 1) cannot make this service
    /// repeat IDs.
    served_max: ServedMax,
    /// Segments loaded.
    loads: u64,
    /// Loads that failed (including timeouts).
    load_failures: u64,
    /// Loads served from ranges handed back (`leaf_alloc_returned`), and their IDs.
    reused_ranges: u64,
    reused_ids: u64,
    /// What no taker was given when the buffer was evicted (both slots' untouched tails) and
    /// any segment a load brought in after that: what a clean stop hands back.
    untouched: Vec<Untouched>,
}

impl Control {
    /// Loads finished so far, successful or not: a waiter that sees it change knows the load
    /// it waited for has ended.
    fn attempts(&self) -> u64 {
        self.loads.wrapping_add(self.load_failures)
    }
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
    /// After a failed load, no background load before this time (clock ms); 0 after a success
    /// (0 also when a failure's back-off ends at clock 0: either way, no waiting).
    /// Written under the control lock, read without it by `prefetch`, so that during an outage
    /// takers past the prefetch point do not all contend for the lock.
    retry_at_ms: AtomicU64,
}

/// One biz tag's pair of segments.
///
/// Obtained from [`SegmentService::tag`](crate::SegmentService::tag) as a
/// [`TagHandle`](crate::TagHandle); most callers use
/// [`SegmentService::get`](crate::SegmentService::get) instead.
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
    /// A buffer with no segment yet; it refuses any claim starting below `served_max` (pass
    /// `ServedMax::default()` for a tag this service has never served).
    pub(crate) fn new(tag: &str, shared: Arc<Shared>, served_max: ServedMax) -> Self {
        Self {
            tag: tag.into(),
            hot: CachePadded::new(Hot {
                current: AtomicUsize::new(0),
                next_pending: AtomicBool::new(false),
                evicted: AtomicBool::new(false),
                retry_at_ms: AtomicU64::new(0),
            }),
            slots: [Slot::empty(), Slot::empty()],
            control: Mutex::new(Control {
                init: false,
                loading: false,
                next_ready: false,
                failure: None,
                step: 0,
                // Unknown until the first load reads the stored step, or an upsert on this
                // server sets it; no step is computed from it before a load.
                min_step: 0,
                update_timestamp: None,
                served_max,
                loads: 0,
                load_failures: 0,
                reused_ranges: 0,
                reused_ids: 0,
                untouched: Vec::new(),
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
    /// `Ok` holds at least one ID (fewer than `n` when the segment ran out); `Err` holds the
    /// index of the exhausted slot.
    #[inline]
    pub(crate) fn try_take(self: &Arc<Self>, n: i64) -> Result<Taken, usize> {
        // Acquire: pairs with the Release in `switch`, so a caller that sees the new index also
        // sees the bounds loaded before it (an older view only costs a retry).
        let idx = self.hot.current.load(Ordering::Acquire);
        let slot = &self.slots[idx & 1];
        // With a random skip, one ID per take: its reservation is the gap and the ID after it.
        let skip_max = self.shared.options.random_skip_max;
        let n = if skip_max > 0 {
            1
        } else if n > 1 {
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
        let reserve = if skip_max > 0 {
            1 + i64::from(fastrand::u32(0..=skip_max))
        } else {
            n
        };
        // Relaxed: uniqueness needs only the atomicity of the RMW on this one counter; which
        // segment the IDs belong to is decided by the bounds check below.
        let first = slot.cursor.fetch_add(reserve, Ordering::Relaxed);
        // Acquire: pairs with the Release store of `max` in `install`, so `start` below is from
        // the same load or a later one (see the module docs).
        let max = slot.bounds.max.load(Ordering::Acquire);
        // Relaxed: ordered after the Acquire load of `max` above.
        let start = slot.bounds.start.load(Ordering::Relaxed);
        let hi = first.saturating_add(reserve).min(max);
        // A skipping take keeps only the last reserved position inside the segment: the
        // positions before it are the gap (shorter when the segment ends inside it).
        let lo = if skip_max > 0 {
            first.max(start).max(hi.saturating_sub(1))
        } else {
            first.max(start)
        };
        if lo < hi {
            // Relaxed (both): checked below, see the module docs.
            let first_id = slot.bounds.first.load(Ordering::Relaxed);
            let delta = slot.bounds.delta.load(Ordering::Relaxed);
            // Acquire: pairs with the Release fence in `install`: a mapping from a later load
            // shows that load's `start` on the read below.
            fence(Ordering::Acquire);
            // Relaxed: ordered by the fence above.
            if slot.bounds.start.load(Ordering::Relaxed) != start {
                return Err(idx & 1); // reloaded under us: skip these positions
            }
            // Relaxed: both are hints; a stale read delays or repeats a prefetch check, and the
            // check itself runs under the control lock.
            if first >= slot.bounds.prefetch_at.load(Ordering::Relaxed)
                && !self.hot.next_pending.load(Ordering::Relaxed)
            {
                self.prefetch();
            }
            Ok(Taken {
                // Inside the claimed segment, below its i64 max_id: no overflow.
                first: first_id + (lo - start) * delta,
                count: hi - lo,
                delta,
            })
        } else {
            Err(idx & 1)
        }
    }

    /// The next ID, waiting (blocking this thread) up to the wait timeout when both segments
    /// are used up.
    pub(crate) fn next_id(self: &Arc<Self>) -> Result<i64> {
        loop {
            match self.try_take(1) {
                Ok(taken) => return Ok(taken.first),
                Err(idx) => self.advance_blocking(idx)?,
            }
        }
    }

    /// The next ID, awaiting (not blocking) when both segments are used up.
    pub(crate) async fn next_id_async(self: &Arc<Self>) -> Result<i64> {
        loop {
            match self.try_take(1) {
                Ok(taken) => return Ok(taken.first),
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
                Ok(taken) => ids.extend(taken.ids()),
                Err(idx) => self.advance_blocking(idx)?,
            }
        }
        Ok(increasing(ids))
    }

    /// `n` IDs, awaiting instead of blocking.
    pub(crate) async fn next_batch_async(self: &Arc<Self>, n: usize) -> Result<Vec<i64>> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            match self.try_take(remaining(n, ids.len())) {
                Ok(taken) => ids.extend(taken.ids()),
                Err(idx) => self.advance_async(idx).await?,
            }
        }
        Ok(increasing(ids))
    }

    /// Slot `idx` is used up: switch to the next segment, or start a load and wait for it.
    fn advance_blocking(self: &Arc<Self>, idx: usize) -> Result<()> {
        let deadline = Instant::now() + self.shared.options.wait_timeout;
        let mut control = self.control.lock();
        let entered = control.attempts();
        loop {
            match self.advance_locked(&mut control, idx, entered)? {
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
        let entered = self.control.lock().attempts();
        loop {
            let notified = self.loaded_async.notified();
            let mut notified = std::pin::pin!(notified);
            // Register before looking at the state, so a load that finishes in between wakes us.
            notified.as_mut().enable();
            {
                let mut control = self.control.lock();
                match self.advance_locked(&mut control, idx, entered)? {
                    Advance::Retry => return Ok(()),
                    Advance::Wait => {}
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Err(self.still_loading(&self.control.lock()));
            }
        }
    }

    /// The slow path's decision, under the control lock. `entered` is `Control::attempts` when
    /// the caller arrived: a load that failed since then is this caller's answer.
    fn advance_locked(
        self: &Arc<Self>,
        control: &mut Control,
        idx: usize,
        entered: u64,
    ) -> Result<Advance> {
        if self.shared.is_shut_down() {
            return Err(SegmentError::Shutdown);
        }
        // Relaxed: stored before `evict` takes the control lock, which we hold.
        if self.hot.evicted.load(Ordering::Relaxed) {
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
        if let Some(failure) = &control.failure
            && (control.attempts() != entered || self.backing_off())
        {
            // The load this caller waited for failed, or one failed a moment ago: answer at
            // once (typed: unknown tag, exhausted, or -3) rather than hammer the database.
            // After the back-off the next caller retries, whatever the failure was.
            return Err(failure.to_error(&self.tag));
        }
        let kind = if control.init {
            LoadKind::Next
        } else {
            LoadKind::Init
        };
        self.start_load(control, kind);
        Ok(Advance::Wait)
    }

    /// Whether a failed load's back-off is still running. Reads the clock only after a failure.
    fn backing_off(&self) -> bool {
        // Relaxed: written under the control lock; a stale value at most starts a load one
        // back-off early or late, and `start_load` itself runs under the lock.
        let retry_at = self.hot.retry_at_ms.load(Ordering::Relaxed);
        retry_at != 0 && self.shared.clock.now_millis() < retry_at
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
    /// it, unless another caller is already doing so or a failed load's back-off is running.
    #[cold]
    fn prefetch(self: &Arc<Self>) {
        // Checked before the lock: during an outage every taker past the prefetch point comes
        // here, and should cost one atomic load and a clock read, not a contended try_lock.
        if self.backing_off() {
            return;
        }
        // try_lock: a taker never waits here; whoever holds the lock will see the same state.
        let Some(mut control) = self.control.try_lock() else {
            return;
        };
        if !control.init
            || control.loading
            || control.next_ready
            || self.shared.is_shut_down()
            // Relaxed: stored before `evict` takes the control lock, which we hold.
            || self.hot.evicted.load(Ordering::Relaxed)
            || self.backing_off()
        {
            return;
        }
        self.start_load(&mut control, LoadKind::Next);
    }

    fn wake_waiters(&self) {
        self.loaded.notify_all();
        self.loaded_async.notify_waiters();
    }

    /// The tag was deleted or the service is stopping: serve no new ID, wake waiters. Returns
    /// the highest `max_id` served, for a later buffer of the same tag.
    ///
    /// Both slots are fenced (their cursors raised to their ends), so even takers that skip the
    /// tag lookup ([`TagHandle`](crate::TagHandle), the per-thread cache) fall into the slow
    /// path, which reports [`Shutdown`](SegmentError::Shutdown) or
    /// [`UnknownTag`](SegmentError::UnknownTag). What no taker got from either slot is kept for
    /// [`take_untouched`](Self::take_untouched).
    pub(crate) fn evict(&self) -> ServedMax {
        // Relaxed: read under the control lock (slow path, `load`), taken just below.
        self.hot.evicted.store(true, Ordering::Relaxed);
        let mut control = self.control.lock();
        for slot in &self.slots {
            if let Some(untouched) = slot.fence() {
                control.untouched.push(untouched);
            }
        }
        let served_max = control.served_max.clone();
        drop(control);
        self.wake_waiters();
        served_max
    }

    /// Wait until no load is in flight, or until `deadline`: a load that ends after the stop
    /// keeps its segment for [`take_untouched`](Self::take_untouched).
    pub(crate) async fn loads_settled(&self, deadline: tokio::time::Instant) {
        loop {
            let notified = self.loaded_async.notified();
            let mut notified = std::pin::pin!(notified);
            // Register before looking at the state, so a load that finishes in between wakes us.
            notified.as_mut().enable();
            if !self.control.lock().loading {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }

    /// The untouched tails kept since the eviction, as ranges to hand back; each only once.
    pub(crate) fn take_untouched(&self) -> Vec<ReturnedRange> {
        let untouched = std::mem::take(&mut self.control.lock().untouched);
        untouched
            .into_iter()
            .map(|u| u.to_range(&self.tag))
            .collect()
    }

    /// An admin created or changed the tag: the dynamic step never goes below the stored
    /// step, and a remembered failure (e.g. "unknown tag") is retried at once.
    pub(crate) fn tag_upserted(&self, step: i64) {
        let mut control = self.control.lock();
        control.min_step = step;
        self.forget_failure(&mut control);
    }

    /// A tag sync found the tag's row: a remembered "unknown tag" no longer holds.
    pub(crate) fn tag_listed(&self) {
        let mut control = self.control.lock();
        if control
            .failure
            .as_ref()
            .is_some_and(|f| f.kind == FailureKind::UnknownTag)
        {
            self.forget_failure(&mut control);
        }
    }

    fn forget_failure(&self, control: &mut Control) {
        control.failure = None;
        // Relaxed: written under the control lock, which we hold; a hint for `prefetch`.
        self.hot.retry_at_ms.store(0, Ordering::Relaxed);
    }

    fn still_loading(&self, control: &Control) -> SegmentError {
        match &control.failure {
            Some(failure) => failure.to_error(&self.tag),
            None => SegmentError::BothSegmentsNotReady {
                tag: self.tag.to_string(),
                reason: format!(
                    "the next segment is still loading after {} ms",
                    self.shared.options.wait_timeout.as_millis()
                ),
            },
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
            last_error: control.failure.as_ref().map(|f| f.message.clone()),
            loads: control.loads,
            load_failures: control.load_failures,
            reused_ranges: control.reused_ranges,
            reused_ids: control.reused_ids,
        }
    }
}

/// A batch in increasing order: it is already, unless it spans a switch to a range a stopped
/// server handed back, which lies below the segment before it.
fn increasing(mut ids: Vec<i64>) -> Vec<i64> {
    if !ids.is_sorted() {
        ids.sort_unstable();
    }
    ids
}

/// `n - taken` as the i64 the cursor counts in; `n` is capped by `max_batch`, far below i64::MAX.
fn remaining(n: usize, taken: usize) -> i64 {
    i64::try_from(n - taken).unwrap_or(i64::MAX)
}
