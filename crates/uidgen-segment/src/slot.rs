//! [`Slot`]: one of a [`SegmentBuffer`](crate::SegmentBuffer)'s two segment slots: the cursor
//! every taker bumps, and the bounds of the segment loaded into it.
//!
//! The ordering argument that keeps the lock-free hot path from repeating an ID is in the
//! `buffer` module's docs; this module holds the writes it relies on (`install`, `fence`).
//!
//! The cursor and the bounds count *positions*, not IDs: position `v` of a segment is the ID
//! `first + (v - start) * delta`. A new single-database segment has `delta` 1 and usually
//! `first = start`; a segment of a database in a group (Tinyid's `delta`/`remainder`) has one
//! position per number of its residue, and a range handed back by a stopping server
//! (`leaf_alloc_returned`) lies below the slot's previous positions, so it is placed above them.
//! Positions only go up across the loads of a slot, whichever database or table a segment came
//! from, which is what the ordering argument needs.

use std::sync::atomic::{AtomicI64, Ordering, fence};

use crossbeam_utils::CachePadded;
use uidgen_store::{Residue, ReturnedRange};

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
    /// The ID at position `start`; stored after `start` and a Release fence (`install`).
    pub(crate) first: AtomicI64,
    /// The distance between the IDs of consecutive positions (the residue's delta).
    pub(crate) delta: AtomicI64,
    /// The claimed `max_id` (exclusive end of the segment's IDs), for monitoring.
    pub(crate) end: AtomicI64,
    /// The tag's life the segment was claimed in, for handing its tail back.
    pub(crate) epoch: AtomicI64,
}

/// IDs taken from a slot: `count` numbers from `first`, `delta` apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    /// The first ID.
    pub(crate) first: i64,
    /// How many (at least 1).
    pub(crate) count: i64,
    /// The distance between consecutive IDs.
    pub(crate) delta: i64,
}

impl Taken {
    /// The IDs, in increasing order.
    pub(crate) fn ids(self) -> impl Iterator<Item = i64> {
        // Each ID lies in the claimed segment, below its i64 max_id: no overflow.
        (0..self.count).map(move |k| self.first + k * self.delta)
    }
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
                first: AtomicI64::new(0),
                delta: AtomicI64::new(1),
                end: AtomicI64::new(i64::MIN),
                epoch: AtomicI64::new(0),
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

    /// Publish a claimed segment at positions `[start, max)`, whose IDs are `first`, `first +
    /// delta`, ... (see the `buffer` module docs for the order); `end` is the claimed `max_id`.
    /// `prefetch_ratio` is Leaf's "load the next one once this share is used".
    pub(crate) fn install(&self, segment: Installed, prefetch_ratio: f64) {
        let Installed {
            start,
            max,
            first,
            delta,
            end,
            step,
            epoch,
        } = segment;
        // Leaf: prefetch once more than `ratio` of the segment is used. f64 holds any count up
        // to 2^53 exactly; the product is below it, so the conversion back cannot overflow.
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let used = ((max - start) as f64 * prefetch_ratio) as i64;
        // Relaxed: published by the Release store of `max` below.
        self.bounds.start.store(start, Ordering::Relaxed);
        // Release: a taker that reads the `first` or `delta` stored below and then fences
        // (Acquire) sees this `start` or a later one, and so notices a mix of loads (`try_take`).
        fence(Ordering::Release);
        // Relaxed (three): published by the fence above for the check, and by the Release
        // store of `max` below.
        self.bounds.first.store(first, Ordering::Relaxed);
        self.bounds.delta.store(delta, Ordering::Relaxed);
        self.bounds.end.store(end, Ordering::Relaxed);
        // Relaxed (two): published by the Release store of `max` below; `epoch` is read only
        // by `fence`, under the control lock this runs under.
        self.bounds.step.store(step, Ordering::Relaxed);
        self.bounds.epoch.store(epoch, Ordering::Relaxed);
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
    /// so takers fall into the slow path (which reports shutdown or eviction). Returns what
    /// no taker was given (the untouched tail), `None` when the segment is used up. Call it
    /// under the buffer's control lock, after which no load installs into this slot.
    pub(crate) fn fence(&self) -> Option<Untouched> {
        // Acquire: pairs with the Release in `install`, so we fence the latest segment.
        let max = self.bounds.max.load(Ordering::Acquire);
        // Relaxed: a single-counter RMW; the cursor's modification order alone decides which
        // takers came before the fence (their `fetch_add` reserved positions below `before`:
        // they may have handed out any of them) and which after (they got positions at or past
        // `max`, so nothing of this segment).
        let before = self.cursor.fetch_max(max, Ordering::Relaxed);
        // Relaxed (four): the bounds change only in `install`, under the control lock, which
        // the caller holds.
        let start = self.bounds.start.load(Ordering::Relaxed);
        let first = self.bounds.first.load(Ordering::Relaxed);
        let delta = self.bounds.delta.load(Ordering::Relaxed);
        let end = self.bounds.end.load(Ordering::Relaxed);
        // Relaxed: as the four above.
        let epoch = self.bounds.epoch.load(Ordering::Relaxed);
        // Below `start`: the cursor wrapped past i64::MAX above a segment ending there, every
        // position was taken. An empty slot is (MAX, MIN): never inside.
        if !(start..max).contains(&before) {
            return None;
        }
        let untouched = Untouched {
            // A position inside the claimed segment maps below its i64 max_id: no overflow.
            first: first + (before - start) * delta,
            end,
            delta,
            epoch,
        };
        debug_assert_eq!(
            untouched.residue().count_in(untouched.first..end),
            max - before
        );
        Some(untouched)
    }

    /// The slot as Leaf's `/cache` page shows it.
    pub(crate) fn state(&self) -> SegmentState {
        // Relaxed: a monitoring snapshot; fields may be from neighbouring loads.
        let start = self.bounds.start.load(Ordering::Relaxed);
        let max = self.bounds.max.load(Ordering::Relaxed);
        let step = self.bounds.step.load(Ordering::Relaxed);
        let first = self.bounds.first.load(Ordering::Relaxed);
        let delta = self.bounds.delta.load(Ordering::Relaxed);
        let end = self.bounds.end.load(Ordering::Relaxed);
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
        let position = if cursor < start { max } else { cursor.min(max) };
        let value = if position < max {
            first.saturating_add((position - start).saturating_mul(delta))
        } else {
            end
        };
        SegmentState {
            value,
            max: end,
            step,
            idle: max - position,
        }
    }
}

/// The untouched rest of a segment: the IDs from `first`, `delta` apart, below `end`; nobody
/// has been given any of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Untouched {
    /// The first untouched ID (a number of the segment's residue).
    pub(crate) first: i64,
    /// The segment's claimed `max_id`.
    pub(crate) end: i64,
    /// The residue's delta.
    pub(crate) delta: i64,
    /// The tag's life the segment was claimed in.
    pub(crate) epoch: i64,
}

impl Untouched {
    /// A whole segment nobody took from (a load that finished after the stop).
    pub(crate) fn whole(segment: &Installed) -> Self {
        Self {
            first: segment.first,
            end: segment.end,
            delta: segment.delta,
            epoch: segment.epoch,
        }
    }

    /// The residue of its IDs: `first` is one of them.
    pub(crate) fn residue(&self) -> Residue {
        Residue {
            delta: self.delta,
            remainder: self.first.rem_euclid(self.delta),
        }
    }

    /// As a range to hand back for `tag`.
    pub(crate) fn to_range(self, tag: &str) -> ReturnedRange {
        ReturnedRange {
            biz_tag: tag.to_owned(),
            start: self.first,
            end: self.end,
            residue: self.residue(),
            epoch: self.epoch,
        }
    }
}

/// A claimed segment as a slot holds it: positions `[start, max)`, IDs from `first`, `delta`
/// apart, below `end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Installed {
    pub(crate) start: i64,
    pub(crate) max: i64,
    pub(crate) first: i64,
    pub(crate) delta: i64,
    pub(crate) end: i64,
    pub(crate) step: i64,
    pub(crate) epoch: i64,
}
