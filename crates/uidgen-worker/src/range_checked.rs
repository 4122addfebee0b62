//! The checked ways to a [`WorkerIdRange`]: [`new`](WorkerIdRange::new),
//! [`within`](WorkerIdRange::within) a layout, and parsing. Apart from `range.rs` so that the
//! crate's error type can name the range (in its variants) while these return that error,
//! without the two files importing each other.

use std::str::FromStr;

use uidgen_core::Layout;

use crate::error::{Result, WorkerError};
use crate::range::WorkerIdRange;

impl WorkerIdRange {
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
}
