//! [`Slot`]: one of a [`SegmentBuffer`](crate::SegmentBuffer)'s two segment slots: the cursor
//! every taker bumps, and the bounds of the segment loaded into it.
//!
//! The ordering argument that keeps the lock-free hot path from repeating an ID is in the
//! `buffer` module's docs; this module holds the writes it relies on (`install`, `fence`).

use std::sync::atomic::{AtomicI64, Ordering};

use crossbeam_utils::CachePadded;

use crate::state::SegmentState;

/// One segment slot. The cursor is written by every taker; the bounds are written once per load,
/// so they sit on their own cache line and stay shared (read-only) between cores.
#[derive(Debug)]
pub(crate) struct Slot {
    /// The next ID to hand out. Only raised (`fetch_add`, `fetch_max`), so never repeats; it can
    /// wrap past `i64::MAX` only above a segment ending there, where it lands below `start`.
    pub(crate) cursor: CachePadded<AtomicI64>,
    /// The loaded segment.
    pub(crate) bounds: CachePadded<Bounds>,
}

/// The segment loaded into a slot.
#[derive(Debug)]
pub(crate) struct Bounds {
    /// First ID of the segment.
    pub(crate) start: AtomicI64,
    /// Exclusive end of the segment (the claimed `max_id`); stored last, with Release.
    pub(crate) max: AtomicI64,
    /// The segment's length.
    pub(crate) step: AtomicI64,
    /// Once the cursor passes this, the next segment is loaded in the background.
    pub(crate) prefetch_at: AtomicI64,
}

impl Slot {
    pub(crate) fn empty() -> Self {
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

    /// Whether the cursor is inside the segment (slow path only, under the control lock).
    ///
    /// Checking `start` as well as `max` matters at the very top of the ID space: callers that
    /// keep asking after a segment ending at `i64::MAX` wrap the cursor to negative values, which
    /// are below `max` but not in the segment; counting them as room would spin forever.
    pub(crate) fn has_room(&self) -> bool {
        // Acquire: pairs with the Release store of `max` in `install`, so `start` is as fresh.
        let max = self.bounds.max.load(Ordering::Acquire);
        // Relaxed: ordered after the Acquire load of `max` above.
        let start = self.bounds.start.load(Ordering::Relaxed);
        // Relaxed: a hint; `try_take`'s atomic add decides.
        let cursor = self.cursor.load(Ordering::Relaxed);
        (start..max).contains(&cursor)
    }

    /// Publish a claimed segment `[start, max)` (see the `buffer` module docs for the order).
    /// `prefetch_ratio` is Leaf's "load the next one once this share is used".
    pub(crate) fn install(&self, start: i64, max: i64, step: i64, prefetch_ratio: f64) {
        // Leaf: prefetch once more than `ratio` of the segment is used. f64 holds any step up to
        // 2^53 exactly; the product is below `step`, so the conversion back cannot overflow.
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let used = (step as f64 * prefetch_ratio) as i64;
        // Relaxed: published by the Release store of `max` below.
        self.bounds.start.store(start, Ordering::Relaxed);
        // Relaxed: published by the Release store of `max` below.
        self.bounds.step.store(step, Ordering::Relaxed);
        // Relaxed: published by the Release store of `max` below.
        self.bounds
            .prefetch_at
            .store(start.saturating_add(used), Ordering::Relaxed);
        // Release: a reader that sees this `max` sees the `start` above (module docs).
        self.bounds.max.store(max, Ordering::Release);
        // Relaxed: a single-counter RMW; raising (never lowering) the cursor keeps every ID
        // it ever returned distinct.
        self.cursor.fetch_max(start, Ordering::Relaxed);
    }

    /// Use the segment up without serving it: every later `fetch_add` lands at or past `max`,
    /// so takers fall into the slow path (which reports shutdown or eviction).
    pub(crate) fn fence(&self) {
        // Acquire: pairs with the Release in `install`, so we fence the latest segment.
        let max = self.bounds.max.load(Ordering::Acquire);
        // Relaxed: a single-counter RMW; the cursor's modification order alone decides which
        // takers came before the fence (and got their ID) and which after (and got none).
        self.cursor.fetch_max(max, Ordering::Relaxed);
    }

    /// The slot as Leaf's `/cache` page shows it.
    pub(crate) fn state(&self) -> SegmentState {
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
        let cursor = self.cursor.load(Ordering::Relaxed);
        // A cursor below `start` after a load has wrapped past i64::MAX: used up.
        let value = if cursor < start { max } else { cursor.min(max) };
        SegmentState {
            value,
            max,
            step,
            idle: max - value,
        }
    }
}
