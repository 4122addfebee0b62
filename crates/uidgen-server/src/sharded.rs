//! The sharded mode in the service: its configuration sections (`[redis]`, `[sharded]`), their
//! check, and starting the [`ShardedService`] when `sharded.enabled = true`.
//!
//! The defaults and the rules live in `uidgen_sharded::ShardedOptions`; this module only maps
//! keys to options and an option's error back to its key.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tracing::info;
use uidgen_sharded::{ShardedError, ShardedOptions, ShardedService};
use uidgen_store::Store;

use crate::config::{Config, ConfigError};

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

/// The sharded service's options from `[redis]`, `[sharded]` and `batch_cap`.
pub fn sharded_options(config: &Config) -> ShardedOptions {
    let sharded = &config.sharded;
    ShardedOptions {
        redis_url: config.redis.url.clone(),
        key_prefix: sharded.key_prefix.clone(),
        refill_ratio: sharded.refill_ratio,
        refill_interval: Duration::from_secs(sharded.refill_interval_secs),
        lock_ttl: Duration::from_millis(sharded.lock_ttl_ms),
        sync_interval: Duration::from_secs(sharded.sync_interval_secs),
        max_batch: config.batch_cap,
        ..ShardedOptions::default()
    }
}

/// Check the sharded keys when the mode is on: the library's rules, reported under the key
/// that set the option.
pub(crate) fn validate(config: &Config) -> Result<(), ConfigError> {
    if !config.sharded.enabled {
        return Ok(());
    }
    match sharded_options(config).validate() {
        Ok(()) => Ok(()),
        Err(ShardedError::InvalidOption { option, reason }) => Err(ConfigError::Invalid {
            key: config_key(option),
            reason,
        }),
        Err(other) => Err(ConfigError::Invalid {
            key: "sharded",
            reason: other.to_string(),
        }),
    }
}

/// The configuration key of a [`ShardedOptions`] field.
fn config_key(option: &str) -> &'static str {
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

/// Start the sharded mode when enabled. A Redis or database that is down is not an error here:
/// the service answers 503 until they are back. A Redis that refuses the credentials of
/// `redis.url` is: it would refuse them on every retry.
pub async fn start_sharded(
    config: &Config,
    store: &Store,
) -> anyhow::Result<Option<Arc<ShardedService>>> {
    if !config.sharded.enabled {
        return Ok(None);
    }
    let options = sharded_options(config);
    let service = ShardedService::start(store.clone(), options)
        .await
        .context("cannot start sharded mode")?;
    info!(
        redis = %uidgen_store::redact_url(&config.redis.url),
        key_prefix = %config.sharded.key_prefix,
        "sharded mode enabled"
    );
    Ok(Some(service))
}

/// The `--layout` name of sharded IDs in `uidgen decode` and `uidgen make` (and `?layout=` of
/// `GET /v1/ids/{id}`).
pub const LAYOUT: &str = "sharded";

/// `uidgen decode --layout sharded ID...`: app id, shard and index of each ID, one line each
/// (or JSON), failing on the first malformed one.
pub fn decode_cli(ids: &[String], json: bool) -> anyhow::Result<()> {
    for text in ids {
        let parts = uidgen_sharded::ShardedId::decode_str(text)?;
        let id = parts.to_u64();
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "id": id,
                    "layout": LAYOUT,
                    "app_id": parts.app_id,
                    "shard": parts.shard,
                    "index": parts.index,
                })
            );
        } else {
            println!(
                "{id} app_id={} shard={} index={} layout={LAYOUT}",
                parts.app_id, parts.shard, parts.index
            );
        }
    }
    Ok(())
}

/// `uidgen make --layout sharded --app A --shard S --index I`: print the ID.
pub fn make_cli(app: Option<u8>, shard: Option<u8>, index: Option<u64>) -> anyhow::Result<()> {
    let (Some(app), Some(shard), Some(index)) = (app, shard, index) else {
        anyhow::bail!("--layout sharded makes an ID from --app, --shard and --index");
    };
    println!(
        "{}",
        uidgen_sharded::ShardedId::new(app, shard, index)?.to_u64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn sharded_mode_is_off_by_default_with_the_originals_values() {
        let c = parse("", &[]).unwrap();
        assert!(!c.sharded.enabled);
        assert_eq!(c.redis.url, "redis://127.0.0.1:6379");
        let options = super::sharded_options(&c);
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
        let options = super::sharded_options(&c);
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
