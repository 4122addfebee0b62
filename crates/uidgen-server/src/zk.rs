//! The ZooKeeper worker-id assigner in the service: `[zookeeper]`, its start-up, readiness,
//! metrics and `uidgen zk reclaim`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use uidgen_core::clock::saturating_millis;
use uidgen_core::{Clock, Layout, SystemClock};
use uidgen_store::Store;
use uidgen_worker::WorkerAssignment;
use uidgen_zk::{ReleaseMode, ZkHolder, ZkOptions, ZkSource, ZkStatus, ZooKeeperWorkerIdAssigner};

use crate::config::{AssignerKind, Config, ConfigError};

/// The name the ZooKeeper range is recorded under in the store's `worker_id_range`, so that a
/// SQL assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "zookeeper";

/// `[zookeeper]`: where the ensemble is and how the worker id is kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZookeeperConfig {
    /// The ensemble with an optional chroot: `zk1:2181,zk2:2181/uidgen`.
    pub connect: String,
    /// Leaf's `leaf.name`: the namespace `/snowflake/{name}`.
    pub name: String,
    /// The session timeout asked of ZooKeeper (ms).
    pub session_timeout_ms: u64,
    /// How often the holder reports its time into its forever node (ms; Leaf: 3000).
    pub report_interval_ms: u64,
    /// The most this clock may differ from the other live holders' average report at start.
    pub max_peer_skew_ms: u64,
    /// How far ahead of each report the id is reserved (seconds): a holder cut off from
    /// ZooKeeper issues this long past its last accepted report, and a restart without the
    /// cache or a reclaim takes the id this long after its holder went silent.
    pub reservation_secs: u64,
    /// The most `reservation_secs` may be (seconds).
    pub max_outage_secs: u64,
    /// Free dead holders' ids automatically after this many seconds of silence (opt-in; at
    /// least `reservation_secs`).
    pub auto_reclaim_after_secs: Option<u64>,
    /// The local cache: worker id, last accepted report, reserved-until mark (default
    /// `uidgen-zk-{name}-{port}.state` in the state directory; a relative path is taken in
    /// it).
    pub cache_file: Option<PathBuf>,
}

impl Default for ZookeeperConfig {
    fn default() -> Self {
        let defaults = ZkOptions::new("127.0.0.1:2181", "uidgen", "127.0.0.1", "8080");
        Self {
            connect: defaults.connect,
            name: defaults.name,
            session_timeout_ms: saturating_millis(defaults.session_timeout),
            report_interval_ms: saturating_millis(defaults.report_interval),
            max_peer_skew_ms: saturating_millis(defaults.max_peer_skew),
            reservation_secs: defaults.reservation.as_secs(),
            max_outage_secs: defaults.max_outage.as_secs(),
            auto_reclaim_after_secs: None,
            cache_file: None,
        }
    }
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// The library's options for this service: its ip (`UIDGEN_HOST` or the detected address)
/// and port (`UIDGEN_PORT` or the listen port) name its forever node, and the range is
/// `worker.range` or Vesta's server range on a 10-bit worker field.
pub fn options(config: &Config, layout: &Layout) -> Result<ZkOptions, ConfigError> {
    let z = &config.zookeeper;
    let node = uidgen_store::WorkerNode::detect();
    let port = std::env::var(uidgen_worker::ENV_PORT)
        .ok()
        .filter(|p| !p.trim().is_empty())
        .map_or_else(|| config.listen_addr().map(|a| a.port().to_string()), Ok)?;
    let mut options = ZkOptions::new(&z.connect, &z.name, node.host_name, port);
    options.session_timeout = Duration::from_millis(z.session_timeout_ms);
    options.report_interval = Duration::from_millis(z.report_interval_ms);
    options.max_peer_skew = Duration::from_millis(z.max_peer_skew_ms);
    options.reservation = Duration::from_secs(z.reservation_secs);
    options.max_outage = Duration::from_secs(z.max_outage_secs);
    options.auto_reclaim_after = z.auto_reclaim_after_secs.map(Duration::from_secs);
    // The library's default is a bare file name: both it and a relative `cache_file` are
    // taken in the state directory, so that a restart from elsewhere finds its cache.
    let cache = z.cache_file.as_ref().unwrap_or(&options.cache_file);
    options.cache_file = config.state_dir()?.resolve(cache);
    options.range = Some(
        config
            .worker
            .id_range()?
            .unwrap_or_else(|| ReleaseMode::Server.default_range(layout)),
    );
    Ok(options)
}

/// Why `worker.fallback_static` is refused, and what to use instead.
pub const FALLBACK_STATIC_REMOVED: &str = "the static fallback was removed: one configured id is \
    the same id on every host that starts while ZooKeeper is down (their IDs repeat), and \
    ZooKeeper never records it (a leased service on the same store can be handed it too). Delete \
    the key; a start while ZooKeeper is down runs on the ZooKeeper-assigned id that \
    `zookeeper.cache_file` records, so keep that file on disk that survives restarts";

/// The `[zookeeper]` keys, checked by the library's own rules; this only names the key.
pub fn validate(config: &Config) -> Result<(), ConfigError> {
    if config.worker.fallback_static.is_some() {
        return Err(invalid("worker.fallback_static", FALLBACK_STATIC_REMOVED));
    }
    if config.worker.assigner != AssignerKind::Zookeeper {
        return Ok(());
    }
    let layout = config.build_layout()?;
    let options = options(config, &layout)?;
    options
        .range_for(&layout)
        .map_err(|e| invalid("worker.range", e.to_string()))?;
    options.validate().map_err(|error| {
        let text = error.to_string();
        let key = if matches!(error, uidgen_zk::ZkError::ReclaimThreshold { .. }) {
            "zookeeper.auto_reclaim_after_secs"
        } else if text.contains("reservation") {
            "zookeeper.reservation_secs"
        } else if text.contains("max_outage") {
            "zookeeper.max_outage_secs"
        } else if text.contains("report interval") {
            "zookeeper.report_interval_ms"
        } else if text.contains("session timeout") {
            "zookeeper.session_timeout_ms"
        } else if text.contains("max_peer_skew") {
            "zookeeper.max_peer_skew_ms"
        } else if text.contains("connect") {
            "zookeeper.connect"
        } else {
            "zookeeper.name"
        };
        invalid(key, text)
    })
}

/// Take a worker id from ZooKeeper (or its local cache), after recording its range in the
/// store so SQL assigners sharing it keep out.
pub async fn assign(
    config: &Config,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<(WorkerAssignment, Option<ZkHolder>)> {
    let options = options(config, layout)?;
    let range = options.range_for(layout)?;
    store
        .register_worker_range(REGISTRY_NAME, range)
        .await
        .context("cannot record the ZooKeeper range in the store")?;
    let assigned = ZooKeeperWorkerIdAssigner::new(options)
        .start(layout)
        .await
        .context("cannot obtain a worker id from ZooKeeper")?;
    if assigned.source != ZkSource::ZooKeeper {
        tracing::warn!(source = ?assigned.source, worker_id = assigned.assignment.worker_id,
            "not a ZooKeeper-held worker id: see the log above for why");
    }
    Ok((assigned.assignment, Some(assigned.holder)))
}

/// What `/readyz` says of a ZooKeeper holder: `Err` (503) once it cannot issue (the id was lost
/// or the reservation of its last accepted report ran out); `Ok(Some(..))` (200, degraded) while ZooKeeper is away but
/// the held id still issues; `Ok(None)` when all is well.
pub fn readiness(holder: &ZkHolder) -> Result<Option<String>, String> {
    holder.check().map_err(|e| e.to_string())?;
    let status = holder.status();
    if status.connected {
        return Ok(None);
    }
    let now = SystemClock.now_millis();
    let away = status
        .outage_since_ms
        .map_or(0, |since| now.saturating_sub(since) / 1000);
    Ok(Some(format!(
        "ZooKeeper unreachable for {away} s; IDs are still issued on worker id {} for up to {} s \
         more",
        status.worker_id,
        status.reserved_until_ms.saturating_sub(now) / 1000
    )))
}

/// The holder's figures for `/metrics`.
pub fn status(holder: &ZkHolder) -> ZkStatus {
    holder.status()
}

/// `uidgen zk …`: ZooKeeper operations.
#[derive(Debug, Args)]
pub struct ZkArgs {
    /// Configuration (`[zookeeper]`, `worker.range`).
    #[command(flatten)]
    pub config: crate::cli::ConfigArgs,
    /// What to do.
    #[command(subcommand)]
    pub command: ZkCommand,
}

/// The `uidgen zk` subcommands.
#[derive(Debug, Subcommand)]
pub enum ZkCommand {
    /// Free the worker ids of holders that are gone: no live node, and no report for longer
    /// than `--older-than` (at least `zookeeper.reservation_secs`).
    Reclaim {
        /// How long a holder must have been silent: `7d`, `36h`, `90m`, `3600s` or seconds.
        #[arg(long, value_parser = parse_duration)]
        older_than: Duration,
        /// Only list what would be freed.
        #[arg(long)]
        dry_run: bool,
    },
}

/// `7d`, `36h`, `90m`, `3600s`, or plain seconds.
///
/// ```
/// use std::time::Duration;
/// use uidgen_server::zk::parse_duration;
/// assert_eq!(parse_duration("7d"), Ok(Duration::from_secs(7 * 86_400)));
/// assert_eq!(parse_duration("90m"), Ok(Duration::from_secs(5_400)));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, "s"),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration like 7d, 36h, 90m or 3600s"))?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: use the units s, m, h or d")),
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// Run `uidgen zk …`.
pub async fn run(args: &ZkArgs) -> anyhow::Result<()> {
    let config = args.config.load()?;
    let layout = config.build_layout()?;
    let options = options(&config, &layout)?;
    match &args.command {
        ZkCommand::Reclaim {
            older_than,
            dry_run,
        } => {
            let assigner = ZooKeeperWorkerIdAssigner::new(options);
            let found = assigner.reclaim(*older_than, *dry_run).await?;
            for c in &found {
                println!(
                    "{} worker_id={} node={} last_report_ms={} next_floor_ms={}",
                    if c.freed {
                        "freed"
                    } else if *dry_run {
                        "would free"
                    } else {
                        "skipped (changed meanwhile)"
                    },
                    c.worker_id,
                    c.node,
                    c.last_report_ms,
                    c.floor_ms
                );
            }
            println!(
                "{} of {} dead forever nodes {}",
                found.iter().filter(|c| c.freed).count(),
                found.len(),
                if *dry_run {
                    "(dry run: nothing freed)"
                } else {
                    "freed"
                }
            );
            Ok(())
        }
    }
}
