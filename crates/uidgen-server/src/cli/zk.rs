//! `uidgen zk …`: ZooKeeper operations (`reclaim`, `init`, `recover`).

use std::time::Duration;

use clap::{Args, Subcommand};
use uidgen_zk::ZooKeeperWorkerIdAssigner;

use crate::config::zookeeper::ZkSettings;

/// `uidgen zk …`: ZooKeeper operations.
#[derive(Debug, Args)]
pub struct ZkArgs {
    /// Configuration (`[zookeeper]`, `worker.range`).
    #[command(flatten)]
    pub config: super::args::ConfigArgs,
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
    /// Declare the namespace (`zookeeper.name`) new, once, before its first start: its worker
    /// ids are then claimed at once. A start on a namespace ZooKeeper holds nothing under
    /// cannot tell a new one from one whose data ZooKeeper lost, so without this it waits out
    /// the reservation. Refused when the namespace has forever nodes (a start adopts a Leaf or
    /// earlier tree as it is) or its record says ZooKeeper lost data; nothing to do once
    /// initialised. Run it once, by hand, never as part of every start: after ZooKeeper lost
    /// its data it would let a claimant start an id below what its forgotten holder stamped.
    Init,
    /// Record that ZooKeeper lost data (restored from a snapshot, a server's disk replaced):
    /// every worker id whose node was written before now waits out the reservation before it
    /// is claimed again. Running holders keep their ids.
    Recover {
        /// What happened, kept in the namespace record for operators.
        #[arg(long, default_value = "recorded by `uidgen zk recover`")]
        why: String,
    },
}

/// `7d`, `36h`, `90m`, `3600s`, or plain seconds.
///
/// ```
/// use std::time::Duration;
/// use uidgen_server::cli::zk::parse_duration;
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
    let config = args.config.read(false)?;
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
    let root = options.root();
    match &args.command {
        ZkCommand::Init => {
            let record = ZooKeeperWorkerIdAssigner::new(options)
                .init_namespace()
                .await?;
            println!(
                "{root}: a new namespace ({:?}, written by {})",
                record.origin, record.by
            );
            Ok(())
        }
        ZkCommand::Recover { why } => {
            let record = ZooKeeperWorkerIdAssigner::new(options)
                .recover_namespace(why)
                .await?;
            println!(
                "{root}: worker ids whose nodes were written before now are fenced until {} ms \
                 ({})",
                record.floor_ms, record.why
            );
            Ok(())
        }
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
