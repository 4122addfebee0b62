//! [`WorkerIdRange`]: an inclusive range of worker ids, as each assigner sharing a worker-id
//! space hands ids from one (the `worker.range` configuration key). Where ranges are recorded
//! and kept disjoint is a [`RangeRegistry`](crate::RangeRegistry)'s business (the store's
//! `worker_id_range` table).

use std::fmt;
use std::str::FromStr;

use uidgen_core::Layout;

use crate::error::{Result, WorkerError};

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
    low: u64,
    /// The highest worker id in the range (inclusive); never below `low`, never above
    /// [`WorkerIdRange::MAX`], which stands for "the layout's maximum".
    high: u64,
}

impl WorkerIdRange {
    /// The largest worker id of any layout (a 63-bit worker field), which is also the largest
    /// a BIGINT column holds. A range ending here ends at the layout's maximum, written `max`.
    pub const MAX: u64 = i64::MAX.unsigned_abs();

    /// `low..=high`; [`WorkerError::InvalidWorkerRange`] when `low > high` or `high` is past
    /// [`MAX`](Self::MAX).
    pub fn new(low: u64, high: u64) -> Result<Self> {
        let invalid = |reason: String| WorkerError::InvalidWorkerRange {
            input: format!("{low}-{high}"),
            reason,
        };
        if low > high {
            return Err(invalid(
                "the low end is above the high end; write LO-HI with LO <= HI".to_owned(),
            ));
        }
        if high > Self::MAX {
            return Err(invalid(format!(
                "no layout has worker ids above {}; write LO-max for \"up to the layout's \
                 maximum\"",
                Self::MAX
            )));
        }
        Ok(Self { low, high })
    }

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

    /// The ids of the range that `layout`'s worker field holds: a `LO-max` range ends at the
    /// layout's maximum; any other range must fit entirely, else
    /// [`WorkerError::WorkerRangeOutsideLayout`].
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_worker::{WorkerError, WorkerIdRange};
    /// let layout = Layout::snowflake()?; // worker ids 0 to 1023
    /// assert_eq!(WorkerIdRange::new(512, 1023)?.within(&layout)?.high(), 1023);
    /// assert_eq!(WorkerIdRange::from_low(512).within(&layout)?.high(), 1023);
    /// let error = WorkerIdRange::new(512, 1024)?.within(&layout).unwrap_err();
    /// assert!(matches!(error, WorkerError::WorkerRangeOutsideLayout { max: 1023, .. }));
    /// assert!(WorkerIdRange::from_low(1024).within(&layout).is_err());
    /// # Ok::<(), WorkerError>(())
    /// ```
    pub fn within(self, layout: &Layout) -> Result<Self> {
        let max = layout.max_worker_id();
        let high = if self.high == Self::MAX {
            max.min(Self::MAX)
        } else {
            self.high
        };
        if high > max || self.low > high {
            return Err(WorkerError::WorkerRangeOutsideLayout { range: self, max });
        }
        Ok(Self {
            low: self.low,
            high,
        })
    }

    /// `Ok` when [`within`](Self::within) is.
    pub fn check_layout(self, layout: &Layout) -> Result<()> {
        self.within(layout).map(|_| ())
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

impl FromStr for WorkerIdRange {
    type Err = WorkerError;

    /// `"LO-HI"` (inclusive), `"LO-max"` or a single `"N"`; spaces around the parts are
    /// ignored.
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |reason: &str| WorkerError::InvalidWorkerRange {
            input: text.to_owned(),
            reason: reason.to_owned(),
        };
        let number = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| {
                invalid(
                    "expected LO-HI (e.g. 100-199), LO-max or a single worker id, in whole numbers \
                     from 0",
                )
            })
        };
        // `LO..=HI` too: Rust's inclusive range, as issue #9 writes `worker.range = "924..=1023"`.
        let range = match text.split_once("..=").or_else(|| text.split_once('-')) {
            Some((low, high)) if high.trim().eq_ignore_ascii_case("max") => {
                Ok(Self::from_low(number(low)?))
            }
            Some((low, high)) => Self::new(number(low)?, number(high)?),
            None => {
                let id = number(text)?;
                Self::new(id, id)
            }
        };
        // Name the text as it was written, not as the numbers were read.
        range.map_err(|error| match error {
            WorkerError::InvalidWorkerRange { reason, .. } => invalid(&reason),
            other => other,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: u64, high: u64) -> WorkerIdRange {
        WorkerIdRange { low, high }
    }

    #[test]
    fn parsing_accepts_lo_hi_lo_max_and_single_ids_and_names_the_input_otherwise() {
        assert_eq!(" 3 - 9 ".parse::<WorkerIdRange>().ok(), Some(range(3, 9)));
        assert_eq!("0".parse::<WorkerIdRange>().ok(), Some(range(0, 0)));
        assert_eq!(
            "924..=1023".parse::<WorkerIdRange>().ok(),
            Some(range(924, 1023))
        );
        let rest = "4000000-MAX".parse::<WorkerIdRange>().ok();
        assert_eq!(rest, Some(WorkerIdRange::from_low(4_000_000)));
        assert_eq!(rest.map(|r| r.to_string()).as_deref(), Some("4000000-max"));
        let too_high = format!("0-{}", WorkerIdRange::MAX + 1);
        for bad in [
            "", "-", "a-b", "-5", "5-", "1-2-3", "9-3", "1.5", "max", &too_high,
        ] {
            let error = bad.parse::<WorkerIdRange>().err();
            assert!(
                matches!(
                    &error,
                    Some(WorkerError::InvalidWorkerRange { input, .. }) if input == bad
                ),
                "{bad:?}: {error:?}"
            );
        }
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
