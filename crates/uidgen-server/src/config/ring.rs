//! `[ring]`: the cached generator's ring buffer, parsed into the library's
//! [`CachedOptions`].

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::cached::MAX_BOOST_POWER;
use uidgen_core::{CachedOptions, Layout, RingBuffer};

use super::env::{EnvKey, Kind};
use super::{ConfigError, invalid};

/// `[ring]`: the cached generator's ring buffer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Ring size is `(max_sequence + 1) << boost_power`.
    pub boost_power: u32,
    /// Pad when fewer than this percentage of slots are left.
    pub padding_factor: u32,
    /// Also pad every this many seconds (0: only on demand).
    pub schedule_interval_secs: u64,
    /// Do not run more than this many seconds ahead of the clock: past it, callers wait for
    /// the clock (default [`DEFAULT_MAX_BORROW_SECONDS`]; 0: unbounded, as Baidu's).
    pub max_borrow_seconds: u64,
}

/// How far the cached generator may run ahead of the clock unless `ring.max_borrow_seconds`
/// says otherwise. Unbounded, a load test of `/v1/ids?count=1000` borrowed 17,127 seconds
/// (IDs stamped 4.75 hours ahead, eating into the 28-bit time field at 8 seconds a second);
/// a minute absorbs a burst of 60 × (max sequence + 1) IDs above the sustained rate (491,520
/// on Baidu's layout) while the IDs' time stays within a minute of the truth. The default ring
/// (8 units) fits well within it.
pub const DEFAULT_MAX_BORROW_SECONDS: u64 = 60;

impl Default for RingConfig {
    fn default() -> Self {
        let baidu = CachedOptions::default();
        Self {
            boost_power: baidu.boost_power,
            padding_factor: baidu.padding_factor,
            schedule_interval_secs: baidu.schedule_interval.map_or(0, |d| d.as_secs()),
            max_borrow_seconds: DEFAULT_MAX_BORROW_SECONDS,
        }
    }
}

/// The `[ring]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["ring", "boost_power"], Kind::Int),
    (&["ring", "padding_factor"], Kind::Int),
    (&["ring", "schedule_interval_secs"], Kind::Int),
    (&["ring", "max_borrow_seconds"], Kind::Int),
];

impl RingConfig {
    /// The ring options a service runs with: the configured sizes, and a reject-take policy
    /// that waits for padding (up to a second) rather than failing a request the next refill
    /// would serve (the HTTP and gRPC handlers do not use it: they await the padding's
    /// signal). A non-zero `max_borrow_seconds` is converted to the layout's time units (whole
    /// units, at least one: padding must always reach the unit after the clock's); 0 leaves
    /// borrowing unbounded.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_server::config::RingConfig;
    /// let options = RingConfig::default().options(&Layout::snowflake()?)?;
    /// assert_eq!(options.max_borrow_units, Some(60_000)); // a minute of milliseconds
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn options(&self, layout: &Layout) -> Result<CachedOptions, ConfigError> {
        // The library's rule, checked on the smallest ring it builds: the percentage is the
        // ring's own check, so the key cannot drift from it.
        RingBuffer::new(2, self.padding_factor)
            .map_err(|_| invalid("ring.padding_factor", "must be between 1 and 99"))?;
        if self.boost_power > MAX_BOOST_POWER {
            return Err(invalid(
                "ring.boost_power",
                format!("must be between 0 and {MAX_BOOST_POWER}"),
            ));
        }
        let unit_ms = layout.unit().millis();
        Ok(CachedOptions {
            boost_power: self.boost_power,
            padding_factor: self.padding_factor,
            schedule_interval: (self.schedule_interval_secs > 0)
                .then(|| Duration::from_secs(self.schedule_interval_secs)),
            max_borrow_units: (self.max_borrow_seconds > 0)
                .then(|| (self.max_borrow_seconds.saturating_mul(1000) / unit_ms).max(1)),
            ..CachedOptions::waiting(Duration::from_secs(1))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn the_ring_borrows_at_most_a_minute_by_default_and_zero_lifts_the_bound() {
        let units = |text: &str, env: &[(&str, &str)]| {
            let c = parse(text, env).unwrap();
            c.settings().unwrap().ring.max_borrow_units
        };
        assert_eq!(units("", &[]), Some(60), "baidu: seconds");
        assert_eq!(units("", &[("UIDGEN_LAYOUT", "snowflake")]), Some(60_000));
        assert_eq!(units("[ring]\nmax_borrow_seconds = 5", &[]), Some(5));
        assert_eq!(units("", &[("UIDGEN_RING_MAX_BORROW_SECONDS", "0")]), None);
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[
            (
                "[ring]\npadding_factor = 100",
                &[],
                "invalid config key `ring.padding_factor`: must be between 1 and 99",
            ),
            (
                "[ring]\nboost_power = 11",
                &[],
                "invalid config key `ring.boost_power`: must be between 0 and 10",
            ),
        ];
        assert_refused(cases);
    }
}
