//! How long a layout's time field lasts: the instant it runs out, and the time left before it
//! does, at the clock's rate and from the furthest instant a generator already stamped.
//!
//! Baidu's 2016 layout ran out on 2024-11-20 and its users found out in production
//! (<https://github.com/baidu/uid-generator/issues/100>); this is what lets a service say so
//! years ahead. Two figures, because a generator that borrows future time units (the cached
//! generator's padding) reaches the end earlier than the clock does:
//!
//! - **at today's rate**: from now to the end, if the clock runs at one second a second;
//! - **at the current borrowed lead**: from the furthest instant already issued
//!   ([`UidGenerator::issued_until_ms`](crate::UidGenerator::issued_until_ms)) to the end,
//!   shorter than the first by the lead.

use std::time::Duration;

use super::types::Layout;

/// Below this much time left, a service warns: two years (730 days), long enough to plan a
/// move to another layout or epoch and roll it out.
pub const DEFAULT_RUNWAY_WARNING: Duration = Duration::from_secs(730 * 86_400);

/// The time left in a layout's time field at one instant ([`Layout::runway`]).
///
/// ```
/// use uidgen_core::Layout;
/// let layout = Layout::baidu("2026-01-01")?;
/// let now = layout.epoch_ms() + 1_000;
/// let runway = layout.runway(now, Some(now + 60_000)); // a minute borrowed ahead
/// assert_eq!(runway.runs_out_at_ms, layout.runs_out_at_ms());
/// assert_eq!(runway.clock_ms, runway.runs_out_at_ms - now);
/// assert_eq!(runway.clock_ms - runway.lead_ms, 60_000, "shorter by the lead");
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runway {
    /// The first instant the time field cannot hold, ms since the Unix epoch.
    pub runs_out_at_ms: u64,
    /// Milliseconds left from the clock's reading to [`runs_out_at_ms`](Self::runs_out_at_ms)
    /// (0 once it has run out): the time left at today's rate.
    pub clock_ms: u64,
    /// Milliseconds left from the furthest instant already issued (the clock's reading if
    /// nothing was issued past it): the time left at the current borrowed lead, never more
    /// than [`clock_ms`](Self::clock_ms).
    pub lead_ms: u64,
}

impl Runway {
    /// Whether the shorter of the two figures is below `threshold` (a service warns then).
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::Layout;
    /// use uidgen_core::layout::DEFAULT_RUNWAY_WARNING;
    /// let legacy = Layout::baidu_legacy()?; // ran out on 2024-11-20
    /// assert!(legacy.runway(1_800_000_000_000, None).is_below(DEFAULT_RUNWAY_WARNING));
    /// let snowflake = Layout::snowflake()?; // until 2080
    /// assert!(!snowflake.runway(1_800_000_000_000, None).is_below(Duration::from_secs(86_400)));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn is_below(&self, threshold: Duration) -> bool {
        u128::from(self.lead_ms) < threshold.as_millis()
    }
}

impl Layout {
    /// The first instant (ms since the Unix epoch) the time field cannot hold: the epoch plus
    /// `2^time_bits` units. No generator of this layout issues an ID at or after it.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_core::calendar::format_iso8601;
    /// // Baidu's 2016 layout: 2^28 seconds after 2016-05-20 +08:00.
    /// let legacy = Layout::baidu_legacy()?;
    /// assert_eq!(format_iso8601(legacy.runs_out_at_ms()), "2024-11-20T13:24:16.000Z");
    /// // The service default: 28 bits of seconds from 2026-01-01.
    /// assert_eq!(format_iso8601(Layout::baidu_default()?.runs_out_at_ms()), "2034-07-04T21:24:16.000Z");
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn runs_out_at_ms(&self) -> u64 {
        // max_time is below 2^62 (time and sequence share at most 63 bits, sequence has one),
        // so the + 1 cannot wrap; millis_of saturates the product.
        self.millis_of(self.max_time() + 1)
    }

    /// Milliseconds left from `from_ms` until the time field runs out, 0 once it has.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// let layout = Layout::baidu("2026-01-01")?;
    /// assert_eq!(layout.time_left_ms(layout.runs_out_at_ms() - 5), 5);
    /// assert_eq!(layout.time_left_ms(layout.runs_out_at_ms() + 5), 0);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn time_left_ms(&self, from_ms: u64) -> u64 {
        self.runs_out_at_ms().saturating_sub(from_ms)
    }

    /// The time left at `now_ms` (the clock's reading), at today's rate and at the current
    /// borrowed lead, given the furthest instant a generator issued up to
    /// ([`UidGenerator::issued_until_ms`](crate::UidGenerator::issued_until_ms); `None` before
    /// its first ID). An `issued_until_ms` behind the clock (an idle generator) counts from the
    /// clock: the lead is never negative.
    pub fn runway(&self, now_ms: u64, issued_until_ms: Option<u64>) -> Runway {
        let ahead = issued_until_ms.map_or(now_ms, |until| until.max(now_ms));
        Runway {
            runs_out_at_ms: self.runs_out_at_ms(),
            clock_ms: self.time_left_ms(now_ms),
            lead_ms: self.time_left_ms(ahead),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{FieldKind, TimeUnit};

    #[test]
    fn the_end_is_the_first_time_value_the_field_cannot_hold() {
        let layout = Layout::new(
            "tiny",
            &[
                (FieldKind::Time, 4),
                (FieldKind::Worker, 2),
                (FieldKind::Sequence, 2),
            ],
            TimeUnit::TenMillis,
            1_000u64,
        )
        .unwrap();
        // 16 units of 10 ms from 1,000 ms: the last unit begins at 1,150, the end is 1,160.
        assert_eq!(layout.runs_out_at_ms(), 1_160);
        assert!(layout.time_of(1_159).is_ok());
        assert!(layout.time_of(1_160).is_err());
        let runway = layout.runway(1_100, Some(1_130));
        assert_eq!((runway.clock_ms, runway.lead_ms), (60, 30));
        // An idle generator's mark behind the clock: counted from the clock.
        assert_eq!(layout.runway(1_100, Some(1_050)).lead_ms, 60);
        assert_eq!(
            layout.runway(2_000, Some(3_000)),
            Runway {
                runs_out_at_ms: 1_160,
                clock_ms: 0,
                lead_ms: 0
            }
        );
    }

    #[test]
    fn the_widest_time_field_saturates_instead_of_wrapping() {
        let layout = Layout::new(
            "wide",
            &[
                (FieldKind::Time, 62),
                (FieldKind::Worker, 1),
                (FieldKind::Sequence, 1),
            ],
            TimeUnit::TenMillis,
            0u64,
        )
        .unwrap();
        assert_eq!(layout.runs_out_at_ms(), u64::MAX);
        assert!(!layout.runway(0, None).is_below(DEFAULT_RUNWAY_WARNING));
    }
}
