//! The ZooKeeper worker-id assigner in the service: its start-up, readiness, metrics and
//! `uidgen zk reclaim` (its section, `[zookeeper]`, is [`crate::config::zookeeper`]).

use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use uidgen_core::{Clock, Layout, SystemClock};
use uidgen_store::{Store, WorkerAssignment};
use uidgen_zk::{ZkHolder, ZkSource, ZkStatus, ZooKeeperWorkerIdAssigner};

use crate::config::ZkSettings;
pub use crate::config::zookeeper::{FALLBACK_STATIC_REMOVED, options};

/// The name the ZooKeeper range is recorded under in the store's `worker_id_range`, so that a
/// SQL assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "zookeeper";

/// Take a worker id from ZooKeeper (or its local cache), after recording its range in the
/// store so SQL assigners sharing it keep out.
pub async fn assign(
    settings: &ZkSettings,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<(WorkerAssignment, Option<ZkHolder>)> {
    let options = settings.options.clone();
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
    let config = args.config.read()?;
    let settings = config.settings()?;
    // `[zookeeper]` as the service would start with it, whatever assigner this host runs.
    let options = match settings.zookeeper {
        Some(zk) => zk.options,
        None => {
            let dir = settings.state_dir()?;
            let zk = ZkSettings::new(
                &config.zookeeper,
                settings.worker.range,
                &settings.layout,
                dir,
                settings.listen.port(),
            );
            zk.options
        }
    };
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
