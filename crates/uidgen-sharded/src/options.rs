//! [`ShardedOptions`]: the knobs of the sharded service, with the original service's values as
//! defaults.

use std::time::Duration;

use crate::error::{Result, ShardedError};

/// The default Redis: the local one.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379";
/// The original service's key prefix: lists are `id.gen.idList_{app}_{shard}`.
pub const DEFAULT_KEY_PREFIX: &str = "id.gen.";
/// The longest key prefix.
pub const MAX_KEY_PREFIX_LEN: usize = 64;
/// The shortest refill lock: a refill (a claim and a push) must fit in it, most of the time.
pub const MIN_LOCK_TTL: Duration = Duration::from_millis(100);
/// The longest refill lock: a dead holder blocks its list's refills this long at most.
pub const MAX_LOCK_TTL: Duration = Duration::from_secs(600);

/// How a [`ShardedService`](crate::ShardedService) behaves.
///
/// ```
/// use std::time::Duration;
/// use uidgen_sharded::ShardedOptions;
/// let options = ShardedOptions { key_prefix: "test.".into(), ..ShardedOptions::default() };
/// assert_eq!(options.refill_ratio, 0.2);
/// assert_eq!(options.refill_interval, Duration::from_secs(120));
/// options.validate()?;
/// # Ok::<(), uidgen_sharded::ShardedError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedOptions {
    /// Where Redis is: `redis://[user:password@]host:port[/db]` (default
    /// [`DEFAULT_REDIS_URL`]).
    pub redis_url: String,
    /// Prefix of every key the service writes (default `id.gen.`, the original's). Services
    /// that share a Redis and a database use the same prefix; tests use one each.
    pub key_prefix: String,
    /// Refill a shard's list once it holds this share of the shard's step or less (default
    /// 0.2, the original's `IDLE`). 0 refills only an empty list.
    pub refill_ratio: f64,
    /// Check every shard's list this often and refill the short ones (default 2 min, as the
    /// original's schedule). Lists are also refilled when a pop sees them short, and on demand
    /// when a pop finds them empty.
    pub refill_interval: Duration,
    /// How long a refill lock lives if its holder never releases it, e.g. because it died
    /// (default 10 s). A refill takes milliseconds; the lock only keeps servers from claiming
    /// segments for one list at once, uniqueness never depends on it.
    pub lock_ttl: Duration,
    /// Re-read the app list from the database this often; the server that wins the config
    /// lock also deletes the lists of apps that are gone (default 60 s).
    pub sync_interval: Duration,
    /// Re-read the app list this often while it has never loaded (default 1 s).
    pub init_retry_interval: Duration,
    /// Check the Redis server's identity (run id and replication id) this often, besides after
    /// every reconnect and every failed command (default 1 s). See the crate doc.
    pub verify_interval: Duration,
    /// How long connecting to Redis may take (default 1 s).
    pub connect_timeout: Duration,
    /// How long one Redis command may take (default 2 s).
    pub response_timeout: Duration,
    /// After a failed connection attempt, callers fail at once for this long instead of each
    /// trying again (default 250 ms).
    pub reconnect_backoff: Duration,
    /// How long one database call (a segment claim, the app list) may take (default 5 s).
    pub claim_timeout: Duration,
    /// Largest batch (default 100,000).
    pub max_batch: usize,
    /// How many times a pop that finds its list empty, while another server holds the list's
    /// refill lock, waits for that server's push in vain (each wait up to `lock_wait`) before
    /// it answers [`QueueEmpty`](ShardedError::QueueEmpty) (default 2, as the original's two
    /// tries). A pop that gets the lock refills the list itself and keeps what it needs from
    /// the new segment, so its own tries always bring numbers.
    pub empty_tries: u32,
    /// How long one such try waits for the lock holder's push (default 500 ms; a refill takes
    /// milliseconds).
    pub lock_wait: Duration,
}

impl Default for ShardedOptions {
    fn default() -> Self {
        Self {
            redis_url: DEFAULT_REDIS_URL.to_owned(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            refill_ratio: 0.2,
            refill_interval: Duration::from_secs(120),
            lock_ttl: Duration::from_secs(10),
            sync_interval: Duration::from_secs(60),
            init_retry_interval: Duration::from_secs(1),
            verify_interval: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(2),
            reconnect_backoff: Duration::from_millis(250),
            claim_timeout: Duration::from_secs(5),
            max_batch: 100_000,
            empty_tries: 2,
            lock_wait: Duration::from_millis(500),
        }
    }
}

impl ShardedOptions {
    /// Check that the options can work; the message names the field.
    ///
    /// ```
    /// use uidgen_sharded::ShardedOptions;
    /// let bad = ShardedOptions { refill_ratio: 1.0, ..ShardedOptions::default() };
    /// assert!(bad.validate().unwrap_err().to_string().contains("refill_ratio"));
    /// ```
    pub fn validate(&self) -> Result<()> {
        let bad = |option: &'static str, reason: String| {
            Err(ShardedError::InvalidOption { option, reason })
        };
        if let Err(reason) = redis::Client::open(self.redis_url.as_str()) {
            return bad(
                "redis_url",
                format!(
                    "{:?} is not a Redis URL ({reason}); use redis://host:port",
                    uidgen_store::redact_url(&self.redis_url)
                ),
            );
        }
        if self.key_prefix.chars().count() > MAX_KEY_PREFIX_LEN
            || self
                .key_prefix
                .chars()
                .any(|c| c.is_whitespace() || c.is_control())
        {
            return bad(
                "key_prefix",
                format!(
                    "must be at most {MAX_KEY_PREFIX_LEN} characters without spaces or control \
                     characters"
                ),
            );
        }
        // Written so NaN fails too.
        if !(self.refill_ratio >= 0.0 && self.refill_ratio < 1.0) {
            return bad(
                "refill_ratio",
                format!(
                    "must be at least 0 and below 1 (the share of a step left in a list when it is \
                     refilled), got {}",
                    self.refill_ratio
                ),
            );
        }
        let positive = [
            ("refill_interval", self.refill_interval),
            ("lock_ttl", self.lock_ttl),
            ("sync_interval", self.sync_interval),
            ("init_retry_interval", self.init_retry_interval),
            ("verify_interval", self.verify_interval),
            ("connect_timeout", self.connect_timeout),
            ("response_timeout", self.response_timeout),
            ("claim_timeout", self.claim_timeout),
            ("lock_wait", self.lock_wait),
        ];
        if let Some(&(option, _)) = positive.iter().find(|(_, d)| d.is_zero()) {
            return bad(option, "must be above zero".to_owned());
        }
        if self.lock_ttl < MIN_LOCK_TTL || self.lock_ttl > MAX_LOCK_TTL {
            return bad(
                "lock_ttl",
                format!(
                    "must be between {} ms and {} ms",
                    Self::millis(MIN_LOCK_TTL),
                    Self::millis(MAX_LOCK_TTL)
                ),
            );
        }
        if self.max_batch == 0 {
            return bad("max_batch", "must be at least 1".to_owned());
        }
        if self.empty_tries == 0 || self.empty_tries > 10 {
            return bad("empty_tries", "must be 1 to 10".to_owned());
        }
        Ok(())
    }

    /// How many numbers left in a list of a shard with `step` make it short: `step *
    /// refill_ratio`, rounded down.
    ///
    /// ```
    /// let options = uidgen_sharded::ShardedOptions::default();
    /// assert_eq!(options.refill_threshold(1000), 200);
    /// assert_eq!(options.refill_threshold(3), 0);
    /// ```
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "step * ratio is floored and clamped to 0..=step (a u32), so the cast is exact"
    )]
    pub fn refill_threshold(&self, step: i64) -> u64 {
        let step = u32::try_from(step.clamp(0, i64::from(u32::MAX))).unwrap_or(u32::MAX);
        let threshold = (f64::from(step) * self.refill_ratio)
            .floor()
            .clamp(0.0, f64::from(step));
        threshold as u64
    }

    /// A duration in whole milliseconds, saturating.
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(uidgen_sharded::ShardedOptions::millis(Duration::from_secs(2)), 2000);
    /// ```
    pub fn millis(duration: std::time::Duration) -> u64 {
        uidgen_core::clock::saturating_millis(duration)
    }
}
