//! The `uidgen` command line: its arguments, and the code of every subcommand but `serve`'s
//! lifecycle ([`crate::serve`]): [`generate`] (`gen`, `migrate`, the embedded bench generator),
//! [`mod@decode`] (`decode`, `make`), [`mod@bench`], [`zk`] (`zk reclaim`, `zk init`, `zk recover`), [`etcd`]
//! (`etcd init`, `etcd recover`), [`takeover`] (`takeover <peer>`) and [`health`] (`health`).

use std::path::PathBuf;

pub mod bench;
pub mod decode;
pub mod etcd;
pub mod generate;
pub mod health;
pub mod takeover;
pub mod zk;

pub use decode::{decode, make};
pub use generate::{bench_generator, gen_ids, migrate};

use clap::{Args, Parser, Subcommand};
use uidgen_core::{Layout, Zone};

use crate::config::Config;
use crate::service::forms::FormName;

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
    /// Measure a running server or the embedded generator.
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
    /// Ask a server's `/readyz`: exit 0 when it answers 200, else 1 with the reason on one
    /// line (for a container's health check; no curl needed).
    Health(health::HealthArgs),
}

/// Options shared by commands that read the configuration.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// TOML configuration file; `UIDGEN_…` variables override it.
    #[arg(long, short = 'c', env = "UIDGEN_CONFIG")]
    pub config: Option<PathBuf>,
}

impl ConfigArgs {
    /// Read the configuration, for the command line to override keys before
    /// [`Config::settings`] checks them all.
    ///
    /// With `overridden` (the command line replaces some keys), the configuration is checked
    /// as read first: a broken file or variable is refused even where an argument replaces it,
    /// as it always was, since other commands on the host read it as it is.
    pub fn read(&self, overridden: bool) -> anyhow::Result<Config> {
        let path = self.config.as_deref();
        Ok(if overridden {
            Config::load(path)?
        } else {
            Config::read(path)?
        })
    }
}

/// Options that pick a layout, over the configured one.
#[derive(Debug, Clone, Args)]
pub struct LayoutArgs {
    /// Layout preset: baidu, baidu_legacy, baidu_continued, snowflake, leaf, vesta_max_peak,
    /// vesta_min_granularity, sonyflake, keyworker, safe_js.
    #[arg(long)]
    pub layout: Option<String>,
    /// Epoch for any preset but baidu_legacy, e.g. a Leaf twepoch (`2026-01-01`,
    /// `2026-01-01+08:00`, or milliseconds).
    #[arg(long)]
    pub epoch: Option<String>,
}

impl LayoutArgs {
    /// Apply the arguments to a configuration, before [`Config::settings`] checks it (a
    /// configured static worker id or worker range must fit the new layout too).
    pub fn apply(&self, config: &mut Config) {
        if let Some(preset) = &self.layout {
            config.layout.preset.clone_from(preset);
            if self.epoch.is_none() {
                config.layout.epoch = None;
            }
        }
        if let Some(epoch) = &self.epoch {
            config.layout.epoch = Some(epoch.clone());
        }
    }

    /// Whether an argument replaces a configured key.
    pub fn overrides(&self) -> bool {
        self.layout.is_some() || self.epoch.is_some()
    }

    /// The layout of the configuration `args` reads with the arguments applied, every key
    /// checked.
    pub fn layout(&self, args: &ConfigArgs) -> anyhow::Result<Layout> {
        Ok(self.settings(args)?.layout)
    }

    /// The settings of the configuration `args` reads with the arguments applied.
    pub fn settings(&self, args: &ConfigArgs) -> anyhow::Result<crate::config::Settings> {
        let mut config = args.read(self.overrides())?;
        self.apply(&mut config);
        Ok(config.settings()?)
    }
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

/// `uidgen gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// How many IDs.
    #[arg(short = 'n', long, default_value_t = 1)]
    pub count: usize,
    /// Store URL to take a worker id from, over the configuration.
    #[arg(long)]
    pub store: Option<String>,
    /// Use this worker id instead of a fresh one. With a configured store (`store`,
    /// UIDGEN_STORE, --store) it is leased there as the static assigner's is, so a second
    /// host using it at the same time is refused; without one, you answer for its uniqueness.
    #[arg(long)]
    pub worker: Option<u64>,
}

/// `uidgen decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Configuration (for its layout).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Print Baidu's parseUID JSON instead of a line of text.
    #[arg(long)]
    pub json: bool,
    /// Show the encoded time in this zone: `UTC` (the default), an offset such as `+08:00`,
    /// or an IANA name such as `Asia/Shanghai`. The `TZ` variable is not read, so a script's
    /// output does not change with the host's zone: pass `--tz "$TZ"` to use it. The text
    /// names the zone (an offset and `[name]` after the time); `--json` adds Baidu's
    /// `timestamp` in the zone's local time and a `timeZone` key. Sharded IDs hold no time.
    // A western offset starts with `-`: taken as the value, not as an option.
    #[arg(long, value_name = "ZONE", allow_hyphen_values = true)]
    pub tz: Option<Zone>,
    /// How the IDs are written: `decimal` (the default), `base36` / `base62` as the HTTP
    /// API's `?form=` writes them (fixed width for the layout), or `masked`, unmasked with the
    /// configuration's `[mask]` keys (`UIDGEN_MASK_KEYS`). Sharded IDs are decimal only.
    #[arg(long, value_name = "FORM", default_value = "decimal")]
    pub form: FormName,
    /// The IDs. Options may come before, between or after them; a negative number is taken
    /// as an ID (and refused as one), not as an option.
    #[arg(required = true, allow_negative_numbers = true)]
    pub ids: Vec<String>,
}

/// `uidgen make`.
#[derive(Debug, Args)]
pub struct MakeArgs {
    /// Configuration (for its layout).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Wall-clock time: ISO-8601 (`2026-03-01T12:00:00Z`) or milliseconds since 1970.
    #[arg(long, conflicts_with = "units")]
    pub time: Option<String>,
    /// The raw time field (units since the layout's epoch).
    #[arg(long)]
    pub units: Option<u64>,
    /// Worker (machine) id.
    #[arg(long, required_unless_present = "index")]
    pub worker: Option<u64>,
    /// Sequence.
    #[arg(long, required_unless_present = "index")]
    pub seq: Option<u64>,
    /// Datacenter id, on a layout with a datacenter field (`layout.datacenter_bits`); the
    /// configured `layout.datacenter_id` when absent.
    #[arg(long, conflicts_with = "index")]
    pub datacenter: Option<u64>,
    /// `--layout sharded`: the app id (0 to 255).
    #[arg(long, requires = "index")]
    pub app: Option<u8>,
    /// `--layout sharded`: the shard (0 to 63).
    #[arg(long, requires = "index")]
    pub shard: Option<u8>,
    /// `--layout sharded`: the index (the number popped from the shard's list).
    #[arg(
        long,
        requires_all = ["app", "shard"],
        conflicts_with_all = ["worker", "seq", "time", "units"]
    )]
    pub index: Option<u64>,
}

/// `uidgen migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Store URL, over the configuration.
    #[arg(long)]
    pub store: Option<String>,
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
