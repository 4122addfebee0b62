//! `[redis]` and `[sharded]`: the sharded mode's sections, parsed into the library's
//! [`ShardedOptions`] (whose `validate` is the check; the defaults are the library's too).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_sharded::{ShardedError, ShardedOptions};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// `[redis]`: the Redis the sharded mode keeps its lists in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedisConfig {
    /// `redis://[user:password@]host:port[/db]`.
    pub url: String,
}

impl Default for RedisConfig {
    fn default() -> Self {
        Self {
            url: ShardedOptions::default().redis_url,
        }
    }
}

/// `[sharded]`: IDs with app id and shard inside, from Redis lists backed by `id_alloc`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShardedConfig {
    /// Serve `/api/shard/get/{app_id}`, `/v1/apps/...` and the app admin route (off by
    /// default: it needs a Redis).
    pub enabled: bool,
    /// Prefix of every Redis key (the original's `id.gen.`).
    pub key_prefix: String,
    /// Refill a list once it holds this share of a step or less (the original's 0.2).
    pub refill_ratio: f64,
    /// Check every list and refill short ones this often, in seconds (the original's 2 min).
    pub refill_interval_secs: u64,
    /// How long a refill lock lives if its holder dies, in milliseconds.
    pub lock_ttl_ms: u64,
    /// Re-read the app list this often, in seconds.
    pub sync_interval_secs: u64,
}

impl Default for ShardedConfig {
    fn default() -> Self {
        let options = ShardedOptions::default();
        Self {
            enabled: false,
            key_prefix: options.key_prefix,
            refill_ratio: options.refill_ratio,
            refill_interval_secs: options.refill_interval.as_secs(),
            lock_ttl_ms: ShardedOptions::millis(options.lock_ttl),
            sync_interval_secs: options.sync_interval.as_secs(),
        }
    }
}

/// The `[redis]` and `[sharded]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["redis", "url"], Kind::Str),
    (&["sharded", "enabled"], Kind::Bool),
    (&["sharded", "key_prefix"], Kind::Str),
    (&["sharded", "refill_ratio"], Kind::Float),
    (&["sharded", "refill_interval_secs"], Kind::Int),
    (&["sharded", "lock_ttl_ms"], Kind::Int),
    (&["sharded", "sync_interval_secs"], Kind::Int),
];

impl ShardedConfig {
    /// The sharded service's options from `[redis]`, `[sharded]` and `batch_cap`.
    ///
    /// ```
    /// use uidgen_server::config::sharded::{RedisConfig, ShardedConfig};
    /// let options = ShardedConfig::default().options(&RedisConfig::default(), 1000);
    /// assert_eq!(options.key_prefix, "id.gen.");
    /// ```
    pub fn options(&self, redis: &RedisConfig, batch_cap: usize) -> ShardedOptions {
        ShardedOptions {
            redis_url: redis.url.clone(),
            key_prefix: self.key_prefix.clone(),
            refill_ratio: self.refill_ratio,
            refill_interval: Duration::from_secs(self.refill_interval_secs),
            lock_ttl: Duration::from_millis(self.lock_ttl_ms),
            sync_interval: Duration::from_secs(self.sync_interval_secs),
            max_batch: batch_cap,
            ..ShardedOptions::default()
        }
    }

    /// The options when the mode is on (`None` when off: a broken Redis URL cannot stop a
    /// service that does not use Redis), checked by the library's rules and reported under
    /// the key that set the option.
    pub(crate) fn settings(
        &self,
        redis: &RedisConfig,
        batch_cap: usize,
    ) -> Result<Option<ShardedOptions>, ConfigError> {
        if !self.enabled {
            return Ok(None);
        }
        let options = self.options(redis, batch_cap);
        options.validate().map_err(|error| match error {
            ShardedError::InvalidOption { option, reason } => invalid(key_of(option), reason),
            other => invalid("sharded", other.to_string()),
        })?;
        Ok(Some(options))
    }
}

/// The configuration key of a [`ShardedOptions`] field.
fn key_of(option: &str) -> &'static str {
    match option {
        "redis_url" => "redis.url",
        "key_prefix" => "sharded.key_prefix",
        "refill_ratio" => "sharded.refill_ratio",
        "refill_interval" => "sharded.refill_interval_secs",
        "lock_ttl" => "sharded.lock_ttl_ms",
        "sync_interval" => "sharded.sync_interval_secs",
        "max_batch" => "batch_cap",
        _ => "sharded",
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn sharded_mode_is_off_by_default_with_the_originals_values() {
        let c = parse("", &[]).unwrap();
        assert!(!c.sharded.enabled);
        assert_eq!(c.redis.url, "redis://127.0.0.1:6379");
        let options = c.sharded.options(&c.redis, c.batch_cap);
        let defaults = uidgen_sharded::ShardedOptions::default();
        assert_eq!(options.key_prefix, "id.gen.");
        assert_eq!(
            (options.refill_ratio, options.refill_interval),
            (defaults.refill_ratio, defaults.refill_interval)
        );
        assert_eq!(options.lock_ttl, defaults.lock_ttl);
        assert_eq!(options.max_batch, c.batch_cap);
    }

    #[test]
    fn sharded_keys_come_from_the_file_or_the_environment() {
        let c = parse(
            "[sharded]\nenabled = true\nrefill_ratio = 0.5\n[redis]\nurl = \"redis://file:1\"",
            &[
                ("UIDGEN_REDIS_URL", "redis://10.0.0.1:6380/2"),
                ("UIDGEN_SHARDED_KEY_PREFIX", "ids."),
                ("UIDGEN_SHARDED_REFILL_INTERVAL_SECS", "30"),
                ("UIDGEN_SHARDED_LOCK_TTL_MS", "2500"),
                ("UIDGEN_SHARDED_SYNC_INTERVAL_SECS", "5"),
            ],
        )
        .unwrap();
        let options = c.sharded.options(&c.redis, c.batch_cap);
        assert_eq!(options.redis_url, "redis://10.0.0.1:6380/2");
        assert_eq!(options.key_prefix, "ids.");
        assert_eq!(options.refill_ratio, 0.5);
        assert_eq!(options.refill_interval.as_secs(), 30);
        assert_eq!(options.lock_ttl.as_millis(), 2500);
        assert_eq!(options.sync_interval.as_secs(), 5);
        let c = parse("", &[("UIDGEN_SHARDED_ENABLED", "true")]).unwrap();
        assert!(c.sharded.enabled);
    }

    #[test]
    fn invalid_sharded_keys_are_named_when_the_mode_is_on() {
        let cases: &[Refusal] = &[
            (
                "[sharded]\nenabled = true\nrefill_ratio = 1.0",
                &[],
                "invalid config key `sharded.refill_ratio`: must be at least 0 and below 1",
            ),
            (
                "[sharded]\nenabled = true\nlock_ttl_ms = 5",
                &[],
                "invalid config key `sharded.lock_ttl_ms`: must be between 100 ms and 600000 ms",
            ),
            (
                "[sharded]\nenabled = true\nrefill_interval_secs = 0",
                &[],
                "invalid config key `sharded.refill_interval_secs`: must be above zero",
            ),
            (
                "[sharded]\nenabled = true",
                &[("UIDGEN_REDIS_URL", "http://nope")],
                "invalid config key `redis.url`",
            ),
            (
                "[sharded]\nenabled = true\nkey_prefix = \"a b\"",
                &[],
                "invalid config key `sharded.key_prefix`",
            ),
            (
                "[sharded]\nenabled = true\ncolour = 1",
                &[],
                "unknown field `colour`",
            ),
        ];
        assert_refused(cases);
        // Off, the section is not checked: a broken Redis URL cannot stop a service that does
        // not use Redis.
        parse("[sharded]\nrefill_ratio = 7.0", &[]).unwrap();
    }
}
