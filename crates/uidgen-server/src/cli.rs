//! The `uidgen` subcommands other than `serve`: decode, make and bench (gen lives with the
//! store wiring, since it takes a worker id from the store).

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use uidgen_core::calendar::parse_epoch_ms;
use uidgen_core::{FieldKind, Layout, UidParts};

use crate::config::Config;

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
    Bench(crate::bench::BenchArgs),
    /// ZooKeeper worker ids: `uidgen zk reclaim --older-than 7d [--dry-run]`.
    Zk(crate::zk::ZkArgs),
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
    /// [`Config::settings`] checks them all once.
    pub fn read(&self) -> anyhow::Result<Config> {
        Ok(Config::read(self.config.as_deref())?)
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

    /// The layout of `config` with the arguments applied, every key checked.
    pub fn layout(&self, mut config: Config) -> anyhow::Result<Layout> {
        self.apply(&mut config);
        Ok(config.settings()?.layout)
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
    /// Use this worker id instead of taking one from the store. You answer for its uniqueness.
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

/// `uidgen decode`: one line per ID (or JSON), failing on the first malformed one.
pub fn decode(args: &DecodeArgs) -> anyhow::Result<()> {
    if args.layout.layout.as_deref() == Some(crate::sharded::LAYOUT) {
        return crate::sharded::decode_cli(&args.ids, args.json);
    }
    let layout = args.layout.layout(args.config.read()?)?;
    for text in &args.ids {
        let d = layout.decode_str(text)?;
        if args.json {
            println!("{}", d.to_baidu_json());
        } else {
            // keyworker splits its worker into machine and process parts: show both.
            let parts = d.worker_parts.map_or_else(String::new, |p| {
                format!(" machine={} process={}", p.machine, p.process)
            });
            // Vesta's fields, on the layouts that have them only.
            let vesta: String = [FieldKind::Version, FieldKind::Type, FieldKind::Method]
                .into_iter()
                .filter(|&k| layout.has(k))
                .map(|k| format!(" {}={}", k.name(), d.parts.get(k)))
                .collect();
            println!(
                "{} time={} worker={}{parts} sequence={}{vesta} layout={}",
                d.id,
                d.timestamp_iso8601(),
                d.parts.worker,
                d.parts.sequence,
                d.layout
            );
        }
    }
    Ok(())
}

/// `uidgen make`: print the ID with the given fields.
pub fn make(args: &MakeArgs) -> anyhow::Result<()> {
    let sharded = args.layout.layout.as_deref() == Some(crate::sharded::LAYOUT);
    match (sharded, args.index) {
        (true, index) => return crate::sharded::make_cli(args.app, args.shard, index),
        (false, Some(_)) => {
            bail!("--app, --shard and --index make sharded IDs: add --layout sharded")
        }
        (false, None) => {}
    }
    let layout = args.layout.layout(args.config.read()?)?;
    let time = match (&args.time, args.units) {
        (Some(t), None) => {
            let ms = parse_epoch_ms(t).with_context(|| format!("--time {t:?}"))?;
            layout.time_of(ms)?
        }
        (None, Some(units)) => units,
        _ => bail!("give --time (wall clock) or --units (raw time field)"),
    };
    let id = layout.compose(&UidParts {
        time,
        worker: args.worker.context("give --worker")?,
        sequence: args.seq.context("give --seq")?,
        ..layout.parts(0, 0, 0)
    })?;
    println!("{id}");
    Ok(())
}
