//! The `uidgen` command line: its arguments (each subcommand's with its code, the ones several
//! share in [`args`]), and the code of every subcommand but `serve`'s lifecycle
//! ([`crate::serve`]): [`generate`] (`gen`, `migrate`, the embedded bench generator),
//! [`mod@decode`] (`decode`, `make`), `bench` (with the `bench` feature), [`zk`]
//! (`zk reclaim`, `zk init`, `zk recover`), [`etcd`] (`etcd init`, `etcd recover`),
//! [`takeover`] (`takeover <peer>`), [`mod@layout`] (`layout check`) and [`health`] (`health`).
//! [`crate::command::run`] takes a parsed command line to its subcommand.

pub mod args;
#[cfg(feature = "bench")]
pub mod bench;
pub mod decode;
pub mod etcd;
pub mod generate;
pub mod health;
pub mod layout;
pub mod takeover;
pub mod zk;

use clap::{Args, Parser, Subcommand};

use args::{ConfigArgs, LayoutArgs};
use decode::{DecodeArgs, MakeArgs};
use generate::{GenArgs, MigrateArgs};

/// Command line of the `uidgen` binary.
#[derive(Debug, Parser)]
#[command(
    name = "uidgen",
    version,
    about = "Distributed unique 64-bit IDs: service and tools"
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the HTTP service.
    Serve(ServeArgs),
    /// Print new IDs (embedded: no server needed; the worker id comes from the store).
    Gen(GenArgs),
    /// Take IDs apart.
    Decode(DecodeArgs),
    /// Build an ID from its fields.
    Make(MakeArgs),
    /// Create or upgrade the store's tables.
    Migrate(MigrateArgs),
    /// Measure a running server or the embedded generator (built with the `bench` feature).
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
    /// ZooKeeper worker ids: `uidgen zk reclaim --older-than 7d [--dry-run]`, `uidgen zk init`
    /// (a new namespace), `uidgen zk recover` (after a loss).
    Zk(zk::ZkArgs),
    /// The etcd namespace: `uidgen etcd init` (a new one), `uidgen etcd recover` (after a loss).
    Etcd(etcd::EtcdArgs),
    /// Take over from Baidu, Leaf, Vesta, the sharded service or Tinyid without a repeated ID:
    /// `uidgen takeover baidu --check` reports, without `--check` it records the decision
    /// `serve` enforces (docs/MIGRATING.md).
    Takeover(takeover::TakeoverArgs),
    /// Layouts of a live ID space: `uidgen layout check --from A --to B --issued-until T`
    /// says whether moving from A to B can repeat an ID and whether B's sort above A's
    /// (docs/OPERATIONS.md, "Runway").
    Layout(layout::LayoutCommandArgs),
    /// Ask a server's `/readyz`: exit 0 when it answers 200, else 1 with the reason on one
    /// line (for a container's health check; no curl needed).
    Health(health::HealthArgs),
}

/// `uidgen serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout, over the configuration (`UIDGEN_LAYOUT`, `UIDGEN_LAYOUT_EPOCH`).
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Listen address, over the configuration (`UIDGEN_LISTEN`).
    #[arg(long)]
    pub listen: Option<String>,
    /// gRPC listen address, over the configuration (`UIDGEN_GRPC_LISTEN`); empty turns gRPC
    /// off.
    #[arg(long)]
    pub grpc_listen: Option<String>,
    /// Log format, over the configuration (`log.format`, `UIDGEN_LOG_FORMAT`): `text` for a
    /// person, `json` (one object a line) for a log collector.
    #[arg(long, value_enum)]
    pub log_format: Option<crate::config::log::LogFormat>,
}

/// An error as one line: the message and each cause the message does not already quote.
///
/// Errors that carry a driver's error often put its text in their own message and also keep
/// it as their source, and the driver's error quotes its own source again: anyhow's `{:#}`
/// would print the same sentence two or three times. A cause whose text is already in the line
/// adds nothing and is left out.
///
/// ```
/// use anyhow::Context;
/// let driver = std::io::Error::other("connection refused");
/// let error = anyhow::Error::new(driver)
///     .context("cannot reach database at postgres://db/uid: connection refused")
///     .context("cannot open the store");
/// assert_eq!(
///     uidgen_server::cli::error_line(&error),
///     "cannot open the store: cannot reach database at postgres://db/uid: connection refused"
/// );
/// ```
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}
