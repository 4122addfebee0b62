//! `uidgen takeover <peer> [--check]`: switching to uidgen from Baidu uid-generator, Meituan Leaf,
//! Vesta, the sharded service or Tinyid without one repeated ID (issue 31), and [`enforce`], the
//! check `uidgen serve` runs at start.
//!
//! Each peer's module reads the peer's state in the peer's own formats (its tables in the
//! configured store, its ZooKeeper nodes and `workerID.properties`, its Redis keys), says what
//! uidgen will continue from and why no ID can repeat (ids above the peer's, a layout whose IDs
//! sort above the peer's, the indexes it will start at), and builds a [`Decision`]: what the
//! configuration must keep for that argument to stay true. `--check` prints it; without it the
//! peer's module makes the changes the argument needs (Baidu's counter shared, the sharded rows
//! read the original's way, Tinyid's biz types moved and fenced) and the decision is recorded in
//! the store (`uidgen_takeover`). [`enforce`] refuses a `serve` (or `gen`) whose configuration
//! contradicts a recorded decision, naming the peer and what to change, and, for Baidu's table
//! on MySQL, a start on a store that holds the peer's state and no decision at all.
//!
//! Where the peer may keep running beside uidgen during a rolling switch (`--beside`: Baidu apps
//! on one `WORKER_NODE`, Leaf segment servers on one `leaf_alloc`, Leaf's snowflake servers on one
//! ZooKeeper path, the sharded service on one `id_alloc` and Redis, Vesta processes on their
//! machine ids), uidgen uses the peer's table, key, lock and node formats; where it cannot
//! (Tinyid, a Leaf tag served from several databases), the takeover is refused and says why.
//! The steps per peer are in docs/MIGRATING.md.

pub mod baidu;
pub mod leaf;
pub mod sharded;
pub mod tinyid;
pub mod vesta;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use uidgen_core::{Clock, Layout, SystemClock, TimeUnit};
use uidgen_store::{Store, TakeoverRecord};

use super::args::ConfigArgs;
use crate::config::Settings;
use crate::generators::open_store;

/// `uidgen takeover <peer> [--check]`.
#[derive(Debug, Args)]
pub struct TakeoverArgs {
    /// Configuration: the store, layout and worker ids uidgen will serve with.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Only read and report: record nothing, change nothing.
    #[arg(long, global = true)]
    pub check: bool,
    /// The system to take over from.
    #[command(subcommand)]
    pub peer: Peer,
}

/// The systems uidgen takes over from.
#[derive(Debug, Subcommand)]
pub enum Peer {
    /// Baidu uid-generator: its `WORKER_NODE` rows and its layout.
    Baidu(baidu::BaiduArgs),
    /// Meituan Leaf: its ZooKeeper nodes (snowflake), `workerID.properties` and `leaf_alloc`.
    Leaf(leaf::LeafArgs),
    /// Vesta: the machine ids its processes hold.
    Vesta(vesta::VestaArgs),
    /// The original sharded service: its `id_alloc` rows and Redis lists.
    Sharded(sharded::ShardedArgs),
    /// Tinyid: its `tiny_id_info` rows and `tiny_id_token` tokens.
    Tinyid(tinyid::TinyidArgs),
}

impl Peer {
    /// The name decisions are recorded under.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Baidu(_) => "baidu",
            Self::Leaf(_) => "leaf",
            Self::Vesta(_) => "vesta",
            Self::Sharded(_) => "sharded",
            Self::Tinyid(_) => "tinyid",
        }
    }
}

/// A recorded decision: what the configuration must keep so that no ID repeats.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "peer", rename_all = "lowercase")]
pub enum Decision {
    /// Baidu uid-generator.
    Baidu(baidu::BaiduDecision),
    /// Meituan Leaf.
    Leaf(leaf::LeafDecision),
    /// Vesta.
    Vesta(vesta::VestaDecision),
    /// The original sharded service.
    Sharded(sharded::ShardedDecision),
    /// Tinyid.
    Tinyid(tinyid::TinyidDecision),
}

impl Decision {
    /// Why `settings` contradicts the decision, naming the key to change; `None` when they
    /// agree.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        match self {
            Self::Baidu(d) => d.contradiction(settings),
            Self::Leaf(d) => d.contradiction(settings),
            Self::Vesta(d) => d.contradiction(settings),
            Self::Sharded(d) => d.contradiction(settings),
            Self::Tinyid(d) => d.contradiction(settings),
        }
    }
}

/// What a takeover found and will do: printed by `--check` and recorded with the decision.
#[derive(Debug, Default)]
pub struct Report {
    /// What the peer left: its rows, nodes, keys.
    pub found: Vec<String>,
    /// What uidgen continues from.
    pub continues: Vec<String>,
    /// Why no ID can repeat, and where the new IDs sort.
    pub why: Vec<String>,
    /// What the configuration or the peer's state must change first; the takeover is refused
    /// while any is left.
    pub refused: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sections = [
            ("found", &self.found),
            ("uidgen continues", &self.continues),
            ("why no ID repeats", &self.why),
            ("refused", &self.refused),
        ];
        for (title, lines) in sections {
            if lines.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for line in lines {
                writeln!(f, "- {line}")?;
            }
        }
        Ok(())
    }
}

/// A peer's assessment: the report, and the decision to record when nothing is refused.
#[derive(Debug)]
pub struct Assessment {
    /// What was found and will be done.
    pub report: Report,
    /// What to record.
    pub decision: Decision,
}

/// `uidgen takeover`: assess, print, and (without `--check`) apply and record.
pub async fn run(args: &TakeoverArgs) -> anyhow::Result<()> {
    let settings = args.config.read(false)?.settings()?;
    let store = open_store(&settings).await?;
    let outcome = takeover(args, &settings, &store).await;
    store.close().await;
    outcome
}

async fn takeover(args: &TakeoverArgs, settings: &Settings, store: &Store) -> anyhow::Result<()> {
    let peer = args.peer.name();
    let assessment = match &args.peer {
        Peer::Baidu(a) => baidu::assess(a, settings, store).await?,
        Peer::Leaf(a) => leaf::assess(a, settings, store).await?,
        Peer::Vesta(a) => vesta::assess(a, settings, store).await?,
        Peer::Sharded(a) => sharded::assess(a, settings, store).await?,
        Peer::Tinyid(a) => tinyid::assess(a, settings, store).await?,
    };
    let Assessment {
        mut report,
        decision,
    } = assessment;
    println!("uidgen takeover {peer} on {}", store.redacted_url());
    print!("{report}");
    if !report.refused.is_empty() {
        anyhow::bail!(
            "takeover from {peer} refused: {}",
            report.refused.join("; ")
        );
    }
    if args.check {
        println!("checked: nothing recorded; `uidgen takeover {peer}` records it");
        return Ok(());
    }
    let done = match &decision {
        Decision::Baidu(d) => baidu::apply(d, store).await?,
        Decision::Leaf(_) | Decision::Vesta(_) => Vec::new(),
        Decision::Sharded(_) => sharded::apply(store).await?,
        Decision::Tinyid(_) => tinyid::apply(store).await?,
    };
    for line in &done {
        println!("done: {line}");
    }
    report.continues.extend(done);
    store
        .record_takeover(&TakeoverRecord {
            peer: peer.to_owned(),
            decision: serde_json::to_string(&decision)?,
            summary: report.to_string(),
            recorded_ms: i64::try_from(SystemClock.now_millis()).unwrap_or(i64::MAX),
        })
        .await
        .context("cannot record the takeover decision")?;
    println!(
        "recorded: `uidgen serve` on this store now refuses a configuration that contradicts it"
    );
    Ok(())
}

/// Refuse a start whose configuration contradicts a recorded takeover decision, or that would
/// run on a peer's state no decision covers (see each peer's `unrecorded`). `uidgen serve` and
/// `uidgen gen` call it once the store is open, before they take a worker id.
pub async fn enforce(settings: &Settings, store: &Store) -> anyhow::Result<()> {
    let records = match store.takeovers().await {
        Ok(records) => records,
        // A leased start from its local cache while the database is down (`open_store`): the
        // decisions are read at the next start that reaches it; this one changes no table.
        Err(error) if error.is_unreachable() => {
            tracing::warn!(%error, "the store is unreachable: takeover decisions not checked");
            return Ok(());
        }
        Err(error) => return Err(error).context("cannot read the takeover decisions"),
    };
    let mut refusals = Vec::new();
    for record in &records {
        let decision: Decision = serde_json::from_str(&record.decision).with_context(|| {
            format!(
                "the takeover decision recorded for {} cannot be read; record it again with \
                 `uidgen takeover {}`",
                record.peer, record.peer
            )
        })?;
        if let Some(why) = decision.contradiction(settings) {
            refusals.push(format!(
                "{} (recorded by `uidgen takeover {}`)",
                why, record.peer
            ));
        }
        let state = match &decision {
            Decision::Sharded(_) => sharded::recorded_state(store).await?,
            Decision::Tinyid(_) => tinyid::recorded_state(store).await?,
            _ => None,
        };
        refusals.extend(state);
    }
    if !records.iter().any(|r| r.peer == "baidu") {
        refusals.extend(baidu::unrecorded(settings, store).await?);
    }
    if refusals.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "this configuration contradicts a takeover decision: {}",
        refusals.join("; ")
    )
}

/// A layout's shape: its fields, unit and epoch, as a decision keeps it and a message shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// The preset's name.
    pub name: String,
    /// The fields from the top, `kind:bits`.
    pub fields: String,
    /// The time unit.
    pub unit: String,
    /// The epoch, ms since the Unix epoch.
    pub epoch_ms: u64,
}

impl Shape {
    /// The shape of `layout`.
    pub fn of(layout: &Layout) -> Self {
        let fields = layout
            .fields()
            .iter()
            .map(|(kind, bits)| format!("{kind:?}:{bits}").to_lowercase())
            .collect::<Vec<_>>()
            .join("/");
        let unit = match layout.unit() {
            TimeUnit::Seconds => "seconds",
            TimeUnit::TenMillis => "10 ms",
            TimeUnit::Millis => "ms",
        };
        Self {
            name: layout.name().to_owned(),
            fields,
            unit: unit.to_owned(),
            epoch_ms: layout.epoch_ms(),
        }
    }

    /// Whether `layout` stamps IDs of this shape (the same fields, unit and epoch).
    pub fn holds(&self, layout: &Layout) -> bool {
        let other = Self::of(layout);
        (other.fields.as_str(), other.unit.as_str(), other.epoch_ms)
            == (self.fields.as_str(), self.unit.as_str(), self.epoch_ms)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} in {}, epoch {})",
            self.name,
            self.fields,
            self.unit,
            uidgen_core::calendar::format_iso8601(self.epoch_ms)
        )
    }
}

/// An assigner as the configuration names it (`worker.assigner`).
pub(crate) fn assigner_name(kind: crate::config::worker::AssignerKind) -> String {
    format!("{kind:?}").to_lowercase()
}

/// The wall clock, as the decisions compare it with the peers' epochs.
pub(crate) fn now_ms() -> u64 {
    SystemClock.now_millis()
}

/// `1021-1023,7`: worker ids, one by one or as inclusive ranges.
///
/// ```
/// use uidgen_server::cli::takeover::parse_ids;
/// assert_eq!(parse_ids("1021-1023,7"), Ok(vec![7, 1021, 1022, 1023]));
/// assert!(parse_ids("7-").is_err());
/// ```
pub fn parse_ids(text: &str) -> Result<Vec<u64>, String> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} is not a worker id or a range like 1021-1023");
        let (low, high) = match part.split_once('-') {
            Some((low, high)) => (low.trim(), high.trim()),
            None => (part, part),
        };
        let (low, high): (u64, u64) = (
            low.parse().map_err(|_| bad())?,
            high.parse().map_err(|_| bad())?,
        );
        if low > high || high - low > 1 << 22 {
            return Err(bad());
        }
        ids.extend(low..=high);
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// `ids` as short ranges: `7, 1021-1023`.
pub fn show_ids(ids: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for &id in ids {
        run = match run {
            Some((low, high)) if id == high + 1 => Some((low, id)),
            Some((low, high)) => {
                parts.push(span(low, high));
                Some((id, id))
            }
            None => Some((id, id)),
        };
    }
    if let Some((low, high)) = run {
        parts.push(span(low, high));
    }
    parts.join(", ")
}

fn span(low: u64, high: u64) -> String {
    if low == high {
        low.to_string()
    } else {
        format!("{low}-{high}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_and_show_as_ranges() {
        let ids = parse_ids(" 7, 1021-1023 ,9,8").unwrap();
        assert_eq!(ids, [7, 8, 9, 1021, 1022, 1023]);
        assert_eq!(show_ids(&ids), "7-9, 1021-1023");
        assert!(parse_ids("9-1").is_err());
        assert!(parse_ids("x").is_err());
    }

    #[test]
    fn a_shape_is_fields_unit_and_epoch() {
        let baidu = Layout::baidu_legacy().unwrap();
        let shape = Shape::of(&baidu);
        assert_eq!(shape.fields, "sign:1/time:28/worker:22/sequence:13");
        assert!(shape.holds(&Layout::baidu(uidgen_core::layout::BAIDU_LEGACY_EPOCH_MS).unwrap()));
        assert!(
            !shape.holds(&Layout::baidu_default().unwrap()),
            "another epoch"
        );
        assert!(
            !shape.holds(&Layout::baidu_continued().unwrap()),
            "29 time bits"
        );
    }
}
