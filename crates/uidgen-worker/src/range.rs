//! [`WorkerIdRange`]: an inclusive range of worker ids, as each assigner sharing a worker-id
//! space hands ids from one (the `worker.range` configuration key). Where ranges are recorded
//! and kept disjoint is a [`RangeRegistry`](crate::RangeRegistry)'s business (the store's
//! `worker_id_range` table).

use std::fmt;

use uidgen_core::Layout;

/// An inclusive range of worker ids, `low..=high`, with `low <= high`.
///
/// Written and parsed as `"LO-HI"` (also read as Rust's `"LO..=HI"`; a single `"N"` is the
/// range of one id), as in the `worker.range` configuration key. `"LO-max"` reaches up to
/// whatever the layout's largest worker id is: the assigners' default ranges are of this kind,
/// so a service that changes its layout still registers the same range.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_worker::WorkerIdRange;
/// let range: WorkerIdRange = "100-199".parse()?;
/// assert_eq!((range.low(), range.high(), range.count()), (100, 199, 100));
/// assert!(range.contains(150) && !range.contains(200));
/// assert_eq!(range.to_string(), "100-199");
/// assert_eq!("7".parse::<WorkerIdRange>()?, WorkerIdRange::new(7, 7)?);
/// assert!("199-100".parse::<WorkerIdRange>().is_err());
///
/// let layout = Layout::snowflake()?; // worker ids 0 to 1023
/// assert_eq!(WorkerIdRange::full(&layout).to_string(), "0-1023");
/// let rest: WorkerIdRange = "512-max".parse()?;
/// assert_eq!(rest, WorkerIdRange::from_low(512));
/// assert_eq!(rest.within(&layout)?.to_string(), "512-1023");
/// # Ok::<(), uidgen_worker::WorkerError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerIdRange {
    /// The lowest worker id in the range.
    pub(crate) low: u64,
    /// The highest worker id in the range (inclusive); never below `low`, never above
    /// [`WorkerIdRange::MAX`], which stands for "the layout's maximum".
    pub(crate) high: u64,
}

impl WorkerIdRange {
    /// The largest worker id of any layout (a 63-bit worker field), which is also the largest
    /// a BIGINT column holds. A range ending here ends at the layout's maximum, written `max`.
    pub const MAX: u64 = i64::MAX.unsigned_abs();

    /// `low` up to the layout's largest worker id, whatever the layout (`"LO-max"`).
    /// A `low` past [`MAX`](Self::MAX) is clamped to it.
    pub fn from_low(low: u64) -> Self {
        Self {
            low: low.min(Self::MAX),
            high: Self::MAX,
        }
    }

    /// Every worker id of `layout`: `0..=layout.max_worker_id()`.
    pub fn full(layout: &Layout) -> Self {
        Self {
            low: 0,
            high: layout.max_worker_id().min(Self::MAX),
        }
    }

    /// The lowest worker id in the range.
    pub fn low(self) -> u64 {
        self.low
    }

    /// The highest worker id in the range (inclusive); [`MAX`](Self::MAX) for a range that
    /// reaches the layout's maximum (see [`within`](Self::within)).
    pub fn high(self) -> u64 {
        self.high
    }

    /// How many worker ids the range holds.
    pub fn count(self) -> u64 {
        // high <= MAX < u64::MAX, so this cannot overflow.
        self.high - self.low + 1
    }

    /// Whether `worker_id` lies in the range.
    pub fn contains(self, worker_id: u64) -> bool {
        (self.low..=self.high).contains(&worker_id)
    }

    /// Whether the two ranges share at least one worker id.
    ///
    /// ```
    /// use uidgen_worker::WorkerIdRange;
    /// let a = WorkerIdRange::new(0, 99)?;
    /// assert!(a.overlaps(WorkerIdRange::new(99, 120)?));
    /// assert!(!a.overlaps(WorkerIdRange::new(100, 120)?));
    /// assert!(a.overlaps(WorkerIdRange::from_low(50)));
    /// # Ok::<(), uidgen_worker::WorkerError>(())
    /// ```
    pub fn overlaps(self, other: Self) -> bool {
        self.low <= other.high && other.low <= self.high
    }
}

impl fmt::Display for WorkerIdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.high == Self::MAX {
            write!(f, "{}-max", self.low)
        } else {
            write!(f, "{}-{}", self.low, self.high)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: u64, high: u64) -> WorkerIdRange {
        WorkerIdRange { low, high }
    }

    #[test]
    fn ranges_touching_at_one_id_overlap_and_adjacent_ones_do_not() {
        assert!(range(0, 5).overlaps(range(5, 9)));
        assert!(range(5, 9).overlaps(range(0, 5)));
        assert!(range(0, 9).overlaps(range(3, 4)));
        assert!(!range(0, 4).overlaps(range(5, 9)));
        assert!(WorkerIdRange::from_low(0).overlaps(WorkerIdRange::from_low(1)));
        assert!(!range(0, 0).overlaps(WorkerIdRange::from_low(1)));
        assert_eq!(WorkerIdRange::from_low(0).count(), WorkerIdRange::MAX + 1);
    }
}
