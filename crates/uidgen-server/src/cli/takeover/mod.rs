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

mod assessment;
pub mod baidu;
pub mod leaf;
pub mod sharded;
pub mod tinyid;
pub mod vesta;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use uidgen_core::{Clock, SystemClock};
use uidgen_store::{Store, TakeoverRecord};

pub use assessment::{Assessment, Report, Shape, parse_ids, show_ids};

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
        Peer::Baidu(a) => baidu::assess(a, settings, store)
            .await?
            .map(Decision::Baidu),
        Peer::Leaf(a) => leaf::assess(a, settings, store).await?.map(Decision::Leaf),
        Peer::Vesta(a) => vesta::assess(a, settings, store)
            .await?
            .map(Decision::Vesta),
        Peer::Sharded(a) => sharded::assess(a, settings, store)
            .await?
            .map(Decision::Sharded),
        Peer::Tinyid(a) => tinyid::assess(a, settings, store)
            .await?
            .map(Decision::Tinyid),
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
