//! `[ring]`: the cached generator's ring buffer, parsed into the library's
//! [`CachedOptions`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use uidgen_core::cached::MAX_BOOST_POWER;
use uidgen_core::ring::policy;
use uidgen_core::{CachedOptions, Layout, RejectPut, RingBuffer};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

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
    /// What a take from an empty ring does: wait for padding (the default) or fail at once
    /// with `ring_empty` (Baidu's own default policy).
    pub take_rejection: TakeRejection,
    /// With `take_rejection = "wait"`: how long a take waits for padding, in ms (at most
    /// [`MAX_TAKE_WAIT_MS`]). The library's reject-take waits this long in total; an HTTP or
    /// gRPC request gives up when nothing was padded for this long. Unset (the default): the
    /// library waits [`DEFAULT_TAKE_WAIT`] and requests wait for the generator's stall limit
    /// (two time units and 5 s), the longest a working padding thread is silent.
    pub take_wait_ms: Option<u64>,
    /// What a put into a full ring does with the ID besides counting it (`rejected_puts`):
    /// log a warning, at most once a second (the default), or discard it silently.
    pub put_rejection: PutRejection,
}

/// `ring.take_rejection`: Baidu's `RejectedUidBufferHandler` choices for an empty ring.
///
/// ```
/// use uidgen_server::config::ring::{RingConfig, TakeRejection};
/// assert_eq!(RingConfig::default().take_rejection, TakeRejection::Wait);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TakeRejection {
    /// Wait for padding (`ring.take_wait_ms`), then `ring_empty`.
    #[default]
    Wait,
    /// `ring_empty` at once.
    Fail,
}

/// `ring.put_rejection`: Baidu's `RejectedPutBufferHandler` choices for a full ring.
///
/// ```
/// use uidgen_server::config::ring::{PutRejection, RingConfig};
/// assert_eq!(RingConfig::default().put_rejection, PutRejection::Log);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PutRejection {
    /// Count the ID and drop it without a word.
    Discard,
    /// Count it, drop it, and log a warning (at most one a second: a full ring rejects every
    /// put of a run, which would flood the log).
    #[default]
    Log,
}

/// What an HTTP or gRPC request does when the ring holds fewer IDs than it asked for:
/// `ring.take_rejection` and `ring.take_wait_ms`, as the service applies them.
///
/// ```
/// use std::time::Duration;
/// use uidgen_server::config::ring::{EmptyRing, RingConfig, TakeRejection};
/// assert_eq!(RingConfig::default().empty_ring(), EmptyRing::AwaitStallLimit);
/// let fail = RingConfig { take_rejection: TakeRejection::Fail, ..RingConfig::default() };
/// assert_eq!(fail.empty_ring(), EmptyRing::Fail);
/// let patient = RingConfig { take_wait_ms: Some(2500), ..RingConfig::default() };
/// assert_eq!(patient.empty_ring(), EmptyRing::Await(Duration::from_millis(2500)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EmptyRing {
    /// Answer `ring_empty` at once.
    Fail,
    /// Await padding until none arrived for the generator's stall limit (the default).
    #[default]
    AwaitStallLimit,
    /// Await padding until none arrived for this long.
    Await(Duration),
}

/// How long the library's reject-take waits for padding unless `ring.take_wait_ms` says
/// otherwise: a second, the service's wait before the keys existed.
pub const DEFAULT_TAKE_WAIT: Duration = Duration::from_secs(1);

/// The largest `ring.take_wait_ms`: a minute. A request held longer has usually been given up
/// by its client, and the thread or task it holds is better spent elsewhere.
pub const MAX_TAKE_WAIT_MS: u64 = 60_000;

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
            take_rejection: TakeRejection::default(),
            take_wait_ms: None,
            put_rejection: PutRejection::default(),
        }
    }
}

/// The `[ring]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["ring", "boost_power"], Kind::Int),
    (&["ring", "padding_factor"], Kind::Int),
    (&["ring", "schedule_interval_secs"], Kind::Int),
    (&["ring", "max_borrow_seconds"], Kind::Int),
    (&["ring", "take_rejection"], Kind::Str),
    (&["ring", "take_wait_ms"], Kind::Int),
    (&["ring", "put_rejection"], Kind::Str),
];

impl RingConfig {
    /// The ring options a service runs with: the configured sizes and reject policies (by
    /// default a reject-take that waits for padding, up to a second, rather than failing a
    /// call the next refill would serve; the HTTP and gRPC handlers do not call it: they await
    /// the padding's signal, as [`empty_ring`](Self::empty_ring) says). A non-zero `max_borrow_seconds` is converted to the layout's time units (whole
    /// units, at least one: padding must always reach the unit after the clock's); 0 leaves
    /// borrowing unbounded.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_server::config::ring::RingConfig;
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
        let reject_take = match (self.take_rejection, self.take_wait()?) {
            (TakeRejection::Fail, _) => policy::fail(),
            (TakeRejection::Wait, wait) => policy::wait(wait.unwrap_or(DEFAULT_TAKE_WAIT)),
        };
        let unit_ms = layout.unit().millis();
        Ok(CachedOptions {
            boost_power: self.boost_power,
            padding_factor: self.padding_factor,
            schedule_interval: (self.schedule_interval_secs > 0)
                .then(|| Duration::from_secs(self.schedule_interval_secs)),
            max_borrow_units: (self.max_borrow_seconds > 0)
                .then(|| (self.max_borrow_seconds.saturating_mul(1000) / unit_ms).max(1)),
            reject_take: Some(reject_take),
            reject_put: Some(reject_put(self.put_rejection)),
            ..CachedOptions::default()
        })
    }

    /// What a request does when the ring runs dry (the keys are checked by
    /// [`options`](Self::options), which every start-up calls first).
    pub fn empty_ring(&self) -> EmptyRing {
        match (self.take_rejection, self.take_wait_ms) {
            (TakeRejection::Fail, _) => EmptyRing::Fail,
            (TakeRejection::Wait, None) => EmptyRing::AwaitStallLimit,
            (TakeRejection::Wait, Some(ms)) => EmptyRing::Await(Duration::from_millis(ms)),
        }
    }

    /// `ring.take_wait_ms`, checked: within bounds, and only with the policy that waits.
    fn take_wait(&self) -> Result<Option<Duration>, ConfigError> {
        let Some(ms) = self.take_wait_ms else {
            return Ok(None);
        };
        if self.take_rejection == TakeRejection::Fail {
            return Err(invalid(
                "ring.take_wait_ms",
                "applies only with ring.take_rejection = \"wait\"; remove it or wait",
            ));
        }
        if ms > MAX_TAKE_WAIT_MS {
            return Err(invalid(
                "ring.take_wait_ms",
                format!("must be between 0 and {MAX_TAKE_WAIT_MS}"),
            ));
        }
        Ok(Some(Duration::from_millis(ms)))
    }
}

/// The reject-put handler of `policy`. The ring counts every rejected put itself
/// (`rejected_puts`), so discarding is a handler that does nothing.
fn reject_put(policy: PutRejection) -> RejectPut {
    match policy {
        PutRejection::Discard => Arc::new(|_: &RingBuffer, _: u64| {}),
        PutRejection::Log => {
            // The second of the last warning (0: none yet); one warning a second at most.
            let last_logged = AtomicU64::new(0);
            Arc::new(move |ring: &RingBuffer, uid: u64| {
                let second = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                // Relaxed: only decides whether to log; a race logs one extra line at worst.
                if last_logged.swap(second, Ordering::Relaxed) != second {
                    tracing::warn!(
                        uid,
                        rejected_puts = ring.rejected_puts(),
                        "ring buffer is full; dropped the ID (logged at most once a second)"
                    );
                }
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use uidgen_core::RingBuffer;

    use super::{EmptyRing, PutRejection, TakeRejection};
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
            (
                "[ring]\ntake_wait_ms = 60001",
                &[],
                "invalid config key `ring.take_wait_ms`: must be between 0 and 60000",
            ),
            (
                "",
                &[
                    ("UIDGEN_RING_TAKE_REJECTION", "fail"),
                    ("UIDGEN_RING_TAKE_WAIT_MS", "500"),
                ],
                "invalid config key `ring.take_wait_ms`: applies only with \
                 ring.take_rejection = \"wait\"",
            ),
        ];
        assert_refused(cases);
    }

    #[test]
    fn an_unknown_rejection_policy_is_refused_with_its_key_and_choices() {
        let err = parse("[ring]\ntake_rejection = \"sometimes\"", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("take_rejection"), "{err}");
        assert!(
            err.contains("`wait`, `fail`") || err.contains("`wait` or `fail`"),
            "{err}"
        );
        let err = parse("", &[("UIDGEN_RING_PUT_REJECTION", "drop")])
            .unwrap_err()
            .to_string();
        assert!(err.contains("put_rejection"), "{err}");
        assert!(err.contains("`discard` or `log`"), "{err}");
    }

    #[test]
    fn the_rejection_keys_default_to_the_service_before_them_and_reach_both_paths() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.ring.take_rejection, TakeRejection::Wait);
        assert_eq!(c.ring.put_rejection, PutRejection::Log);
        let settings = c.settings().unwrap();
        assert_eq!(settings.empty_ring, EmptyRing::AwaitStallLimit);
        assert!(settings.ring.reject_take.is_some() && settings.ring.reject_put.is_some());
        let c = parse(
            "[ring]\ntake_rejection = \"fail\"\nput_rejection = \"discard\"",
            &[],
        )
        .unwrap();
        assert_eq!(c.settings().unwrap().empty_ring, EmptyRing::Fail);
        let c = parse("", &[("UIDGEN_RING_TAKE_WAIT_MS", "0")]).unwrap();
        assert_eq!(
            c.settings().unwrap().empty_ring,
            EmptyRing::Await(Duration::ZERO)
        );
    }

    #[test]
    fn the_library_reject_take_fails_at_once_or_waits_as_configured() {
        let take = |text: &str| {
            let options = parse(text, &[]).unwrap().settings().unwrap().ring;
            let policy = options.reject_take.unwrap();
            // An empty ring whose producer never comes: the policy alone decides.
            let ring = RingBuffer::new(4, 50).unwrap().with_reject_take(policy);
            ring.take().unwrap_err().to_string()
        };
        assert!(take("[ring]\ntake_rejection = \"fail\"").contains("tail -1 cursor -1"));
        assert!(take("[ring]\ntake_wait_ms = 1").contains("waited 1 ms for padding"));
    }

    #[test]
    fn both_put_policies_count_every_rejected_put() {
        for policy in [PutRejection::Discard, PutRejection::Log] {
            let ring = RingBuffer::new(2, 50)
                .unwrap()
                .with_reject_put(super::reject_put(policy));
            assert!(ring.put(1) && ring.put(2));
            assert!(!ring.put(3) && !ring.put(4), "{policy:?}");
            assert_eq!(ring.rejected_puts(), 2, "{policy:?}");
        }
    }
}
