//! What a Redis holds for the sharded mode, read without changing anything: for
//! `uidgen takeover sharded --check`, which shows a team what the original service (or uidgen)
//! left in its lists before uidgen continues them.
//!
//! The original service's keys are uidgen's (`keys.rs`): its lists `{prefix}idList_{app}_{shard}`
//! hold indexes it claimed from `id_alloc` and pushed (each at or below the shard's `max_id`),
//! its refill locks are `{prefix}lock_{app}_{shard}` (`SETNX`, then a 60 s `EXPIRE`) and its
//! config lock is `{prefix}idList_`. uidgen adds a mark per list, `{prefix}popped_{app}_{shard}`.

use crate::error::{Result, ShardedError};
use crate::keys::Keys;
use crate::link::client_of;
use crate::options::ShardedOptions;

/// One shard's keys as found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListSurvey {
    /// The app.
    pub app_id: u8,
    /// The shard.
    pub shard: u8,
    /// How many indexes the list holds.
    pub len: u64,
    /// Its first entry (the next popped), if any.
    pub first: Option<String>,
    /// Its last entry, if any.
    pub last: Option<String>,
    /// uidgen's mark (the highest index uidgen popped from it), if any.
    pub mark: Option<String>,
    /// The refill lock's remaining life in ms: `None` when free, `Some(-1)` for a lock without
    /// an expiry (a holder that died between `SETNX` and `EXPIRE`).
    pub lock_ttl_ms: Option<i64>,
}

/// Every list of `shards` under `options.key_prefix`, and whether the config lock is held,
/// read in one pipeline per app.
///
/// Errors: [`ShardedError::InvalidOption`] for a URL that does not parse,
/// [`ShardedError::Redis`] when Redis cannot be read.
pub async fn survey(
    options: &ShardedOptions,
    shards: &[(u8, u8)],
) -> Result<(Vec<ListSurvey>, bool)> {
    let url = uidgen_store::redact_url(&options.redis_url);
    let failed = |action: &'static str, e: redis::RedisError| ShardedError::Redis {
        url: url.clone(),
        action,
        reason: e.to_string(),
    };
    let (client, config) = client_of(options, &url)?;
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| failed("connecting", e))?;
    let keys = Keys::new(&options.key_prefix);
    let mut found = Vec::with_capacity(shards.len());
    for app in shards.chunk_by(|a, b| a.0 == b.0) {
        let mut pipe = redis::pipe();
        for &(app_id, shard) in app {
            let list = keys.list(app_id, shard);
            pipe.cmd("LLEN")
                .arg(&list)
                .cmd("LINDEX")
                .arg(&list)
                .arg(0)
                .cmd("LINDEX")
                .arg(&list)
                .arg(-1)
                .cmd("GET")
                .arg(keys.popped_mark(app_id, shard))
                .cmd("PTTL")
                .arg(keys.refill_lock(app_id, shard));
        }
        type Row = (u64, Option<String>, Option<String>, Option<String>, i64);
        let rows: Vec<Row> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| failed("reading the lists", e))?;
        for (&(app_id, shard), (len, first, last, mark, pttl)) in app.iter().zip(rows) {
            found.push(ListSurvey {
                app_id,
                shard,
                len,
                first,
                last,
                mark,
                // PTTL: -2 no key, -1 no expiry.
                lock_ttl_ms: (pttl != -2).then_some(pttl),
            });
        }
    }
    let config_lock: bool = redis::cmd("EXISTS")
        .arg(keys.config_lock())
        .query_async(&mut conn)
        .await
        .map_err(|e| failed("reading the config lock", e))?;
    Ok((found, config_lock))
}
