//! `[clock_watch]`: how often a serving server compares its clock with the store's (and etcd's or
//! ZooKeeper's), when to warn and when to stop issuing time-stamped IDs (issue 33;
//! docs/OPERATIONS.md, "Clocks watched while serving"). The watch itself is
//! [`crate::service::clock_watch`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// `[clock_watch]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClockWatchConfig {
    /// How often the clocks are compared, in milliseconds (default 5,000; 0 turns the watch
    /// off).
    pub interval_ms: u64,
    /// Warn in the log once the clocks are at least this far apart, uncertainty deducted, in
    /// milliseconds (default 500).
    pub warn_ms: u64,
    /// Stop issuing time-stamped IDs once the clocks are at least this far apart, uncertainty
    /// deducted, in milliseconds (default 5,000; 0 only warns).
    pub fence_ms: u64,
}

impl Default for ClockWatchConfig {
    fn default() -> Self {
        let defaults = ClockWatchSettings::default();
        Self {
            interval_ms: millis(defaults.interval),
            warn_ms: defaults.warn_ms,
            fence_ms: defaults.fence_ms.unwrap_or(0),
        }
    }
}

/// `duration` in whole milliseconds (the defaults are far below `u64::MAX` of them).
fn millis(duration: Option<Duration>) -> u64 {
    duration.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The `[clock_watch]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["clock_watch", "interval_ms"], Kind::Int),
    (&["clock_watch", "warn_ms"], Kind::Int),
    (&["clock_watch", "fence_ms"], Kind::Int),
];

/// The watch as the service runs it.
///
/// ```
/// use uidgen_server::config::clock_watch::ClockWatchSettings;
/// let settings = ClockWatchSettings::default();
/// assert_eq!(settings.interval, Some(std::time::Duration::from_secs(5)));
/// assert_eq!((settings.warn_ms, settings.fence_ms), (500, Some(5_000)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockWatchSettings {
    /// How often the clocks are compared; `None`: never.
    pub interval: Option<Duration>,
    /// Warn from this far apart (ms, uncertainty deducted).
    pub warn_ms: u64,
    /// Stop issuing from this far apart (ms, uncertainty deducted); `None`: never.
    pub fence_ms: Option<u64>,
}

impl Default for ClockWatchSettings {
    fn default() -> Self {
        // 5 s: the skew ZooKeeper's start-up check already allows between peers
        // (`zookeeper.max_peer_skew_ms`); an NTP-synchronised host is within milliseconds,
        // so 500 ms already means its synchronisation has failed.
        Self {
            interval: Some(Duration::from_secs(5)),
            warn_ms: 500,
            fence_ms: Some(5_000),
        }
    }
}

impl ClockWatchConfig {
    /// The settings; a fence below the warning is refused (it would fence without a warning).
    pub(crate) fn settings(&self) -> Result<ClockWatchSettings, ConfigError> {
        if self.fence_ms != 0 && self.fence_ms < self.warn_ms {
            return Err(invalid(
                "clock_watch.fence_ms",
                format!(
                    "{} is below clock_watch.warn_ms = {}; fence at or above the warning, or \
                     0 to only warn",
                    self.fence_ms, self.warn_ms
                ),
            ));
        }
        Ok(ClockWatchSettings {
            interval: (self.interval_ms > 0).then(|| Duration::from_millis(self.interval_ms)),
            warn_ms: self.warn_ms,
            fence_ms: (self.fence_ms > 0).then_some(self.fence_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn clock_watch_has_defaults_reads_its_section_and_variables_and_refuses_a_low_fence() {
        let settings = parse("", &[]).unwrap().settings().unwrap().clock_watch;
        assert_eq!(settings, super::ClockWatchSettings::default());
        let file = "[clock_watch]\ninterval_ms = 0\nwarn_ms = 100\nfence_ms = 0";
        let off = parse(file, &[]).unwrap().settings().unwrap().clock_watch;
        assert_eq!((off.interval, off.warn_ms, off.fence_ms), (None, 100, None));
        let env = parse(
            "",
            &[
                ("UIDGEN_CLOCK_WATCH_INTERVAL_MS", "250"),
                ("UIDGEN_CLOCK_WATCH_FENCE_MS", "2000"),
            ],
        )
        .unwrap()
        .settings()
        .unwrap()
        .clock_watch;
        assert_eq!(env.interval, Some(Duration::from_millis(250)));
        assert_eq!(env.fence_ms, Some(2000));
        let cases: &[Refusal] = &[
            (
                "[clock_watch]\nwarn_ms = 1000\nfence_ms = 10",
                &[],
                "`clock_watch.fence_ms`",
            ),
            ("[clock_watch]\nstep_ms = 1", &[], "step_ms"),
        ];
        assert_refused(cases);
    }
}
