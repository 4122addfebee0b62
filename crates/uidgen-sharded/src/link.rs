//! [`RedisLink`]: the service's connection to Redis, used only after the server behind it was
//! verified, so that no list a Redis outage left stale is ever popped.
//!
//! # What Redis may lose, and why popping stays safe
//!
//! The database's `max_id` is the only authority: every number pushed to a list comes from a
//! segment claimed in the database right before, and is pushed once (one `RPUSH` of the whole
//! segment; a push whose reply is lost is never repeated). So no number is ever pushed twice,
//! and a list can hold a number that was already served only if Redis *forgot a pop*: its
//! dataset went back in time. Lists that are merely gone (a restart without persistence,
//! `FLUSHALL`) are harmless: they are refilled from fresh claims. A dataset goes back in time
//! only in these ways, and each changes what this module calls the server's *instance*, its
//! `run_id` (new on every start of a `redis-server` process) and its `master_replid` (new
//! whenever a server becomes a master, and taken over from the master when it becomes a
//! replica):
//! - a restart that loads an older RDB or AOF (or an AOF that lost its last second): new
//!   `run_id`; the restart also closes every client connection;
//! - a failover to a replica that had not yet received the latest pops: another process, so
//!   another `run_id`, and a new `master_replid` (Sentinel also kills every client connection of
//!   the servers it reconfigures);
//! - a master demoted to a replica and resynced from another master: `master_replid` changes,
//!   and while it is a replica every pop fails (`READONLY`).
//!
//! The rules:
//! 1. A connection ([`MultiplexedConnection`], one TCP connection that never reconnects by
//!    itself, so one server process for its whole life) is handed out only after `INFO`
//!    showed its instance and the instance was *verified*: either it is the instance this
//!    process verified before, or the marker `{prefix}verified.{run_id}.{replid}` exists on it
//!    (some uidgen server purged it since it became that instance: a restored snapshot cannot
//!    hold a marker naming an instance that did not exist when it was taken), or this process
//!    purges it now: every `{prefix}idList_*` list is deleted, then the marker is set.
//! 2. Any failed command drops the connection it ran on, so the next command goes through
//!    rule 1 on a new connection. That covers restarts (the connection dies), Sentinel
//!    failovers (connections are killed) and demotions (pops fail with `READONLY`).
//! 3. Every `verify_interval` (1 s) the instance of the current connection is read again and
//!    the connection dropped if it changed: that covers a master demoted and promoted again by
//!    hand while this service sent it nothing. It is the one case with a window (up to
//!    `verify_interval` after the promotion); use Sentinel, or restart Redis, rather than
//!    `REPLICAOF` by hand while uidgen runs.
//!
//! So every pop runs on a connection to an instance whose lists held, when it was verified,
//! only numbers pushed on that instance from fresh claims, and received only such numbers since;
//! none of them was served before. Losing numbers is allowed (a purge deletes lists that may
//! hold unserved numbers); repeating one is not.
//!
//! A `ConnectionManager` would reconnect in the background and send the next command on the
//! new connection before anyone checked the server behind it, which is exactly what rule 1
//! forbids; hence plain multiplexed connections and this module.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError, RedisResult};
use tracing::{info, warn};

use crate::error::{Result, ShardedError};
use crate::keys::Keys;
use crate::lock::RedisLock;
use crate::options::ShardedOptions;
use crate::stats::Stats;

/// How long a verified-marker lives. Long enough to outlast any sane gap between uidgen
/// starts; when it expires, the next process to start purges the lists once more (harmless).
const MARKER_TTL_SECS: u64 = 30 * 24 * 3600;

/// Keys deleted per `SCAN` step of a purge.
const SCAN_COUNT: u64 = 1000;

/// The oldest Redis whose `LPOP` takes a count.
const MIN_VERSION: (u32, u32) = (6, 2);

/// Which server process, and which replication history, a connection talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Instance {
    /// `run_id` from `INFO server`: new on every start of the process.
    run_id: String,
    /// `master_replid` from `INFO replication`: new on every promotion.
    replid: String,
}

impl std::fmt::Display for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.run_id, self.replid)
    }
}

/// A verified connection and the number that tells it from its successors.
#[derive(Clone)]
pub(crate) struct Verified {
    pub(crate) conn: MultiplexedConnection,
    generation: u64,
}

/// State only the task that (re)connects touches.
#[derive(Debug, Default)]
struct ConnectState {
    /// The instance whose lists this process verified last.
    trusted: Option<Instance>,
    /// When the last connection attempt failed, and why: callers within `reconnect_backoff`
    /// fail at once with that reason.
    failed: Option<(Instant, String)>,
}

/// Whether a command may be sent again after it failed on a dead connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Pops and reads: a pop whose reply was lost loses its numbers when sent again, it never
    /// repeats them.
    Once,
    /// Pushes and lock calls: a push sent twice would push one segment twice.
    Never,
}

/// See the module doc.
pub(crate) struct RedisLink {
    client: redis::Client,
    config: AsyncConnectionConfig,
    url: String,
    keys: Keys,
    reconnect_backoff: Duration,
    current: RwLock<Option<Verified>>,
    connect: tokio::sync::Mutex<ConnectState>,
    generations: AtomicU64,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink")
            .field("url", &self.url)
            .field("connected", &self.current.read().is_some())
            .finish_non_exhaustive()
    }
}

/// The Redis client and connection settings of `options` (`url`, its redacted form, names it
/// in the error of a URL that does not parse).
pub(crate) fn client_of(
    options: &ShardedOptions,
    url: &str,
) -> Result<(redis::Client, AsyncConnectionConfig)> {
    let client = redis::Client::open(options.redis_url.as_str()).map_err(|e| {
        ShardedError::InvalidOption {
            option: "redis_url",
            reason: format!("{url:?} is not a Redis URL ({e})"),
        }
    })?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(options.connect_timeout))
        .set_response_timeout(Some(options.response_timeout));
    Ok((client, config))
}

impl RedisLink {
    pub(crate) fn new(options: &ShardedOptions, keys: Keys, stats: Arc<Stats>) -> Result<Self> {
        let url = uidgen_store::redact_url(&options.redis_url);
        let (client, config) = client_of(options, &url)?;
        Ok(Self {
            client,
            config,
            url,
            keys,
            reconnect_backoff: options.reconnect_backoff,
            current: RwLock::new(None),
            connect: tokio::sync::Mutex::new(ConnectState::default()),
            generations: AtomicU64::new(0),
            stats,
        })
    }

    /// A [`ShardedError::Redis`] for `action`.
    pub(crate) fn error(&self, action: &'static str, reason: impl ToString) -> ShardedError {
        ShardedError::Redis {
            url: self.url.clone(),
            action,
            reason: reason.to_string(),
        }
    }

    /// Run `command` on a verified connection; a failure drops that connection (rule 2) and,
    /// with [`Retry::Once`] and a connection-level failure, sends the command once more on a
    /// new, verified one.
    pub(crate) async fn run<T, F, Fut>(
        &self,
        action: &'static str,
        retry: Retry,
        command: F,
    ) -> Result<T>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let first = self.verified().await?;
        match command(first.conn).await {
            Ok(value) => Ok(value),
            Err(error) => {
                self.drop_connection(first.generation, action, &error);
                if retry == Retry::Never || !is_connection_failure(&error) {
                    return Err(self.error(action, &error));
                }
                let second = self.verified().await?;
                command(second.conn).await.map_err(|error| {
                    self.drop_connection(second.generation, action, &error);
                    self.error(action, &error)
                })
            }
        }
    }

    /// Like [`run`](Self::run) with [`Retry::Never`], for a command that can only be sent once
    /// (it consumes what it sends, e.g. a lock).
    pub(crate) async fn run_once<T, F, Fut>(&self, action: &'static str, command: F) -> Result<T>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let verified = self.verified().await?;
        command(verified.conn).await.map_err(|error| {
            self.drop_connection(verified.generation, action, &error);
            self.error(action, &error)
        })
    }

    /// Try to take the lock at `key` for `ttl`, never retried (on a fresh connection the first
    /// attempt may have taken it already): `None` when another holder has it.
    pub(crate) async fn try_lock(
        &self,
        action: &'static str,
        key: &str,
        ttl: Duration,
    ) -> Result<Option<RedisLock>> {
        self.run(action, Retry::Never, |mut conn| async move {
            RedisLock::acquire(&mut conn, key, ttl).await
        })
        .await
    }

    /// Release `lock` on whatever connection is current: the compare-and-delete only removes its
    /// own token, so even a connection to another instance cannot free someone else's lock.
    /// `Ok(false)` when it had expired first.
    pub(crate) async fn unlock(&self, action: &'static str, lock: RedisLock) -> Result<bool> {
        self.run_once(
            action,
            |mut conn| async move { lock.release(&mut conn).await },
        )
        .await
    }

    /// The current verified connection, connecting and verifying a new one if there is none.
    pub(crate) async fn verified(&self) -> Result<Verified> {
        if let Some(current) = self.current.read().clone() {
            return Ok(current);
        }
        let mut state = self.connect.lock().await;
        // Someone else may have connected while we waited for the lock.
        if let Some(current) = self.current.read().clone() {
            return Ok(current);
        }
        if let Some((at, reason)) = &state.failed
            && at.elapsed() < self.reconnect_backoff
        {
            return Err(self.error("connecting", reason));
        }
        match self.connect_and_verify(&mut state).await {
            Ok(verified) => {
                state.failed = None;
                *self.current.write() = Some(verified.clone());
                Ok(verified)
            }
            Err(error) => {
                let reason = match &error {
                    ShardedError::Redis { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                state.failed = Some((Instant::now(), reason));
                Err(error)
            }
        }
    }

    /// Open a connection and verify its instance (rule 1); not yet installed.
    async fn connect_and_verify(&self, state: &mut ConnectState) -> Result<Verified> {
        let mut conn = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config)
            .await
            .map_err(|e| {
                if e.kind() == redis::ErrorKind::AuthenticationFailed {
                    ShardedError::RedisAuth {
                        url: self.url.clone(),
                        reason: e.to_string(),
                    }
                } else {
                    self.error("connecting", e)
                }
            })?;
        Stats::add(&self.stats.reconnects, 1);
        let instance = read_instance(&mut conn)
            .await
            .map_err(|e| self.error("reading the server's identity (INFO)", e))?
            .map_err(|reason| self.error("checking the server", reason))?;
        if state.trusted.as_ref() != Some(&instance) {
            let marker = self.keys.verified(&instance.to_string());
            let marked: bool = redis::cmd("EXISTS")
                .arg(&marker)
                .query_async(&mut conn)
                .await
                .map_err(|e| self.error("looking for the verified marker", e))?;
            if marked {
                let previous = state.trusted.as_ref().map(ToString::to_string);
                info!(instance = %instance, ?previous,
                    "redis instance already verified by another uidgen server; its lists are \
                     trusted");
            } else {
                let deleted = self
                    .purge(&mut conn)
                    .await
                    .map_err(|e| self.error("purging lists of an unverified instance", e))?;
                Stats::add(&self.stats.purges, 1);
                let previous = state.trusted.as_ref().map(ToString::to_string);
                if deleted > 0 || previous.is_some() {
                    warn!(instance = %instance, ?previous, deleted,
                        "redis instance not verified before (restart, failover or restored \
                         snapshot): deleted every list; they are refilled from fresh segments");
                } else {
                    info!(instance = %instance, "redis instance verified (no lists yet)");
                }
            }
            redis::cmd("SET")
                .arg(&marker)
                .arg(1)
                .arg("EX")
                .arg(MARKER_TTL_SECS)
                .query_async::<()>(&mut conn)
                .await
                .map_err(|e| self.error("setting the verified marker", e))?;
            state.trusted = Some(instance);
        }
        // Relaxed: generations only have to differ; the connection itself is published by the
        // write lock on `current`.
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        Ok(Verified { conn, generation })
    }

    /// Delete every list of the prefix (`SCAN` + `UNLINK`); how many were deleted.
    async fn purge(&self, conn: &mut MultiplexedConnection) -> RedisResult<u64> {
        let pattern = self.keys.list_pattern();
        let mut cursor = 0_u64;
        let mut deleted = 0_u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(conn)
                .await?;
            // The pattern also matches the config lock (`idList_`): only lists go.
            let keys: Vec<String> = keys
                .into_iter()
                .filter(|key| self.keys.parse_list(key).is_some())
                .collect();
            if !keys.is_empty() {
                let n: u64 = redis::cmd("UNLINK").arg(&keys).query_async(conn).await?;
                deleted += n;
            }
            if next == 0 {
                return Ok(deleted);
            }
            cursor = next;
        }
    }

    /// Rule 3: read the current connection's instance again and drop the connection if it is
    /// not the trusted one (or cannot be read).
    pub(crate) async fn check_instance(&self) {
        let Some(current) = self.current.read().clone() else {
            return;
        };
        let mut conn = current.conn;
        let instance = read_instance(&mut conn).await;
        let state = self.connect.lock().await;
        match instance {
            Ok(Ok(instance)) if state.trusted.as_ref() == Some(&instance) => {}
            Ok(Ok(instance)) => {
                let trusted = state.trusted.as_ref().map(ToString::to_string);
                warn!(instance = %instance, ?trusted,
                    "redis instance changed under a live connection; reconnecting to verify it");
                self.invalidate(current.generation);
            }
            Ok(Err(reason)) => {
                warn!(%reason, "redis server not usable; reconnecting");
                self.invalidate(current.generation);
            }
            Err(error) => {
                self.drop_connection(current.generation, "checking the server", &error);
            }
        }
    }

    /// Drop the connection of `generation` after `error`, unless it was replaced already.
    fn drop_connection(&self, generation: u64, action: &'static str, error: &RedisError) {
        if self.invalidate(generation) {
            warn!(url = %self.url, action, %error,
                "redis command failed; the connection is dropped and the server verified again \
                 before the next command");
        }
    }

    /// Forget the connection of `generation`; `true` if it was the current one.
    fn invalidate(&self, generation: u64) -> bool {
        let mut current = self.current.write();
        if current.as_ref().is_some_and(|c| c.generation == generation) {
            *current = None;
            true
        } else {
            false
        }
    }
}

/// Whether an error means the connection itself failed (as opposed to an error reply).
fn is_connection_failure(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_timeout()
}

/// The instance behind `conn`, or why it cannot be used (a replica, a version without
/// `LPOP key count`).
async fn read_instance(
    conn: &mut MultiplexedConnection,
) -> RedisResult<std::result::Result<Instance, String>> {
    let (server, replication): (String, String) = redis::pipe()
        .cmd("INFO")
        .arg("server")
        .cmd("INFO")
        .arg("replication")
        .query_async(conn)
        .await?;
    Ok(parse_instance(&server, &replication))
}

/// The instance described by `INFO server` and `INFO replication`.
fn parse_instance(server: &str, replication: &str) -> std::result::Result<Instance, String> {
    let field = |text: &str, name: &str| {
        text.lines().find_map(|line| {
            line.trim_end()
                .strip_prefix(name)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(str::to_owned)
        })
    };
    let version = field(server, "redis_version").unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if (major, minor) < MIN_VERSION {
        return Err(format!(
            "redis {version:?} is too old: LPOP with a count needs 6.2 or later"
        ));
    }
    let role = field(replication, "role").unwrap_or_default();
    if role != "master" {
        return Err(format!(
            "the server's role is {role:?}: pops and pushes need the master"
        ));
    }
    match (field(server, "run_id"), field(replication, "master_replid")) {
        (Some(run_id), Some(replid)) if !run_id.is_empty() && !replid.is_empty() => {
            Ok(Instance { run_id, replid })
        }
        _ => Err("INFO shows no run_id or master_replid".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_instance;

    const SERVER: &str = "# Server\r\nredis_version:7.0.15\r\nrun_id:ea95\r\ntcp_port:6379\r\n";
    const MASTER: &str = "# Replication\r\nrole:master\r\nmaster_replid:8bef\r\n";

    #[test]
    fn an_instance_is_its_run_id_and_replication_id() {
        let instance = parse_instance(SERVER, MASTER).unwrap();
        assert_eq!(instance.to_string(), "ea95.8bef");
    }

    #[test]
    fn replicas_and_old_servers_are_not_usable() {
        let replica = "role:slave\r\nmaster_replid:8bef\r\n";
        assert!(
            parse_instance(SERVER, replica)
                .unwrap_err()
                .contains("\"slave\"")
        );
        let old = "redis_version:6.0.9\r\nrun_id:ea95\r\n";
        assert!(parse_instance(old, MASTER).unwrap_err().contains("too old"));
        let new = "redis_version:6.2.0\r\nrun_id:ea95\r\n";
        assert!(parse_instance(new, MASTER).is_ok());
    }
}
