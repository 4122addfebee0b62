//! The sharded mode in the service: starting the [`ShardedService`] when `sharded.enabled =
//! true` (its sections, `[redis]` and `[sharded]`, are [`crate::config::sharded`]), and the
//! sharded IDs of `uidgen decode` and `uidgen make`.

use anyhow::Context;
use std::sync::Arc;
use tracing::info;
use uidgen_sharded::{ShardedOptions, ShardedService};
use uidgen_store::Store;

/// Start the sharded mode when enabled. A Redis or database that is down is not an error here:
/// the service answers 503 until they are back. A Redis that refuses the credentials of
/// `redis.url` is: it would refuse them on every retry.
pub async fn start_sharded(
    options: Option<&ShardedOptions>,
    store: &Store,
) -> anyhow::Result<Option<Arc<ShardedService>>> {
    let Some(options) = options else {
        return Ok(None);
    };
    let service = ShardedService::start(store.clone(), options.clone())
        .await
        .context("cannot start sharded mode")?;
    info!(
        redis = %uidgen_store::redact_url(&options.redis_url),
        key_prefix = %options.key_prefix,
        "sharded mode enabled"
    );
    Ok(Some(service))
}

/// The `--layout` name of sharded IDs in `uidgen decode` and `uidgen make` (and `?layout=` of
/// `GET /v1/ids/{id}`).
pub const LAYOUT: &str = "sharded";
