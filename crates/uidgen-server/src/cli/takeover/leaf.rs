//! Taking over from Meituan Leaf: its snowflake mode on ZooKeeper (forever nodes, the sequence
//! counter, the `workerID.properties` caches of this host) and its segment mode (`leaf_alloc`).
//!
//! Snowflake: uidgen's ZooKeeper assigner keeps Leaf's tree (`/snowflake/{leaf.name}/forever`),
//! reads Leaf's nodes as used ids and keeps ZooKeeper's sequence counter above every id it
//! holds (`uidgen-zk`'s `assigner/sequence.rs`), so Leaf servers may keep running and starting
//! beside it; with Leaf's layout and `twepoch`, IDs of two worker ids are never equal. One thing
//! Leaf does outside ZooKeeper: a Leaf server whose ZooKeeper start fails (ZooKeeper down, or
//! its node's time check) falls back to
//! `{java.io.tmpdir}/{leaf.name}/leafconf/{port}/workerID.properties` (`workerID=N`) and runs on
//! `N` without ZooKeeper. Such a file whose id no Leaf node of that port reserves any more (a
//! node deleted, or reclaimed and taken by uidgen) would put a Leaf on an id uidgen may hold: the
//! takeover refuses while this host has one.
//!
//! Segments: Leaf and uidgen claim from one `leaf_alloc` the same way (`max_id = max_id + step`
//! committed, then `[max_id - step, max_id)`), so both may serve one tag at once. The columns
//! uidgen adds (`delta`, `remainder`, migration 0006) are invisible to Leaf, whose statements
//! name their columns; a tag served from several databases (a residue other than 0 mod 1, or a
//! `[[segment.groups]]` tag) cannot be served by Leaf beside uidgen: Leaf hands out every number
//! of its segments.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use uidgen_core::Layout;
use uidgen_core::layout::TWITTER_EPOCH_MS;
use uidgen_store::Store;
use uidgen_zk::ZooKeeperWorkerIdAssigner;

use super::assessment::{Assessment, Report, Shape, assigner_name, show_ids};
use crate::config::Settings;
use crate::config::worker::AssignerKind;

/// `uidgen takeover leaf`.
#[derive(Debug, Args)]
pub struct LeafArgs {
    /// Leaf's `twepoch` (ms, or a date as `layout.epoch` takes it); Leaf's server uses
    /// Twitter's, 1288834974657.
    #[arg(long)]
    pub twepoch: Option<String>,
    /// The directory of this host's Leaf caches, `{java.io.tmpdir}/{leaf.name}/leafconf`
    /// (default: the system's temporary directory, `zookeeper.name`, `leafconf`).
    #[arg(long)]
    pub leaf_conf: Option<PathBuf>,
    /// Leaf servers keep running beside uidgen during the switch.
    #[arg(long)]
    pub beside: bool,
}

/// What a Leaf takeover recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafDecision {
    /// The ZooKeeper namespace (`leaf.name`) whose ids uidgen shares with Leaf's snowflake
    /// servers, when it takes its worker ids from ZooKeeper.
    pub zk_name: Option<String>,
    /// Leaf's snowflake layout, which uidgen keeps in that namespace.
    pub layout: Option<Shape>,
    /// The worker ids Leaf's nodes held.
    pub leaf_ids: Vec<u64>,
    /// The `leaf_alloc` tags found.
    pub tags: Vec<String>,
    /// Whether Leaf servers keep running beside uidgen.
    pub beside: bool,
}

impl LeafDecision {
    /// Why `settings` contradicts the decision.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        if let Some(name) = &self.zk_name {
            let same_name = settings
                .zookeeper
                .as_ref()
                .is_some_and(|zk| &zk.options.name == name);
            if settings.worker.assigner != AssignerKind::Zookeeper || !same_name {
                return Some(format!(
                    "Leaf's snowflake ids are kept in ZooKeeper under /snowflake/{name}: uidgen \
                     must take its worker ids there to keep out of Leaf's (`worker.assigner = \
                     \"zookeeper\"`, `zookeeper.name = \"{name}\"`)"
                ));
            }
        }
        if let Some(shape) = &self.layout
            && !shape.holds(&settings.layout)
        {
            return Some(format!(
                "layout {} is not Leaf's {shape}: set `layout.preset = \"leaf\"` and \
                 `layout.epoch = \"{}\"`",
                Shape::of(&settings.layout),
                shape.epoch_ms
            ));
        }
        if self.beside {
            let grouped = grouped_tags(settings, &self.tags);
            if !grouped.is_empty() {
                return Some(format!(
                    "tags {grouped:?} are served from several databases (`[[segment.groups]]`) \
                     while Java Leaf serves them beside uidgen, handing out every number of its \
                     segments: take them out of the group, or stop Leaf and record the takeover \
                     again without --beside"
                ));
            }
        }
        None
    }
}

fn grouped_tags(settings: &Settings, tags: &[String]) -> Vec<String> {
    settings
        .segment
        .groups
        .iter()
        .flat_map(|g| g.tags.iter())
        .filter(|t| tags.contains(t))
        .cloned()
        .collect()
}

/// One of this host's `workerID.properties`: the port it belongs to and its worker id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedWorkerId {
    /// The Leaf server's port (the directory's name).
    pub port: String,
    /// `workerID`.
    pub worker_id: u64,
    /// The file.
    pub path: PathBuf,
}

/// Every `{port}/workerID.properties` under `dir`, read as Java's `Properties.load` reads the
/// line Leaf writes (`workerID=N`; blanks around `=` or `:`, `#` comments). Files that hold no
/// such line are skipped; a missing directory holds none.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::create_dir_all(dir.path().join("8080"))?;
/// std::fs::write(dir.path().join("8080/workerID.properties"), "#cache\nworkerID = 3\n")?;
/// let found = uidgen_server::cli::takeover::leaf::cached_worker_ids(dir.path())?;
/// assert_eq!((found[0].port.as_str(), found[0].worker_id), ("8080", 3));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cached_worker_ids(dir: &Path) -> std::io::Result<Vec<CachedWorkerId>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry?;
        let path = entry.path().join("workerID.properties");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let worker_id = text.lines().find_map(|line| {
            let line = line.trim();
            if line.starts_with('#') || line.starts_with('!') {
                return None;
            }
            let (key, value) = line.split_once(['=', ':'])?;
            (key.trim() == "workerID").then(|| value.trim().parse().ok())?
        });
        if let Some(worker_id) = worker_id {
            found.push(CachedWorkerId {
                port: entry.file_name().to_string_lossy().into_owned(),
                worker_id,
                path,
            });
        }
    }
    found.sort_by(|a, b| a.port.cmp(&b.port));
    Ok(found)
}

/// Read Leaf's state and decide.
pub async fn assess(
    args: &LeafArgs,
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Assessment<LeafDecision>> {
    let mut report = Report::default();
    let twepoch = args
        .twepoch
        .clone()
        .unwrap_or_else(|| TWITTER_EPOCH_MS.to_string());
    let leaf_layout = Layout::preset_with_epoch("leaf", Some(twepoch.as_str()))?;
    let (mut zk_name, mut layout, mut leaf_ids) = (None, None, Vec::new());
    match (&settings.zookeeper, settings.worker.assigner) {
        (Some(zk), AssignerKind::Zookeeper) => {
            let options = &zk.options;
            let assigner = ZooKeeperWorkerIdAssigner::new(options.clone());
            let nodes = assigner.nodes().await?;
            let sequence = assigner.leaf_sequence().await?;
            let (leaf, ours): (Vec<_>, Vec<_>) = nodes.iter().partition(|(_, (_, data))| {
                data.as_ref().is_none_or(|d| d.reserved_until.is_none())
            });
            leaf_ids = leaf.iter().map(|(id, _)| **id).collect();
            let our_ids: Vec<u64> = ours.iter().map(|(id, _)| **id).collect();
            report.found.push(format!(
                "ZooKeeper {} under {}: Leaf's forever nodes hold worker ids [{}], uidgen's [{}]; \
                 the sequence counter (Leaf's next new node) is at {sequence}",
                options.connect,
                options.root(),
                show_ids(&leaf_ids),
                show_ids(&our_ids)
            ));
            let conf = args
                .leaf_conf
                .clone()
                .unwrap_or_else(|| std::env::temp_dir().join(&options.name).join("leafconf"));
            let cached = cached_worker_ids(&conf)?;
            report.found.push(format!(
                "this host's Leaf caches in {}: {}",
                conf.display(),
                if cached.is_empty() {
                    "none".to_owned()
                } else {
                    cached
                        .iter()
                        .map(|c| format!("port {} workerID={}", c.port, c.worker_id))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
            for cache in &cached {
                let reserved = nodes.get(&cache.worker_id).is_some_and(|(name, data)| {
                    data.as_ref().is_none_or(|d| d.reserved_until.is_none())
                        && name.rsplit_once('-').is_some_and(|(address, _)| {
                            address.ends_with(&format!(":{}", cache.port))
                        })
                });
                if !reserved {
                    report.refused.push(format!(
                        "{} says workerID={}, but no Leaf node of port {} reserves that id in \
                         ZooKeeper any more: a Leaf on this port that starts while ZooKeeper is \
                         down would run on it, and uidgen may hold it; delete the file (Leaf \
                         writes it again at its next start with ZooKeeper)",
                        cache.path.display(),
                        cache.worker_id,
                        cache.port
                    ));
                }
            }
            let range = options.range_for(&settings.layout)?;
            if !Shape::of(&leaf_layout).holds(&settings.layout) {
                report.refused.push(format!(
                    "layout {} is not Leaf's {}: IDs of other widths or another epoch could \
                     equal Leaf's; set `layout.preset = \"leaf\"` and `layout.epoch = \"{}\"`",
                    Shape::of(&settings.layout),
                    Shape::of(&leaf_layout),
                    leaf_layout.epoch_ms()
                ));
            } else {
                report.continues.push(format!(
                    "snowflake: layout {}, worker ids of {range} that no forever node carries, \
                     claimed in {}",
                    Shape::of(&settings.layout),
                    options.root()
                ));
                report.why.push(
                    "uidgen never takes an id a forever node carries (Leaf's nodes count as \
                     used), and before it claims or continues an id it raises ZooKeeper's \
                     sequence counter past it, so a Leaf server started later numbers its node \
                     above every id uidgen holds; IDs of two worker ids differ in the worker \
                     field"
                        .to_owned(),
                );
                report.why.push(
                    "the same layout and twepoch: IDs sort by millisecond first, uidgen's \
                     after the milliseconds Leaf stamped before"
                        .to_owned(),
                );
            }
            zk_name = Some(options.name.clone());
            layout = Some(Shape::of(&leaf_layout));
        }
        _ => report.found.push(format!(
            "Leaf's snowflake mode: not read (`worker.assigner = \"{}\"`); if Java Leaf's \
             snowflake servers run, take uidgen's worker ids in their namespace: `worker.assigner \
             = \"zookeeper\"`, `zookeeper.name` = their `leaf.name`",
            assigner_name(settings.worker.assigner)
        )),
    }

    let mut tags = Vec::new();
    if settings.segment.enabled {
        for tag in store.list_tags().await? {
            if let Some(row) = store.get_tag(&tag).await? {
                tags.push(row);
            }
        }
        let shown: Vec<String> = tags
            .iter()
            .take(10)
            .map(|t| format!("{} (max_id {}, step {})", t.biz_tag, t.max_id, t.step))
            .collect();
        report.found.push(format!(
            "leaf_alloc: {} tags{}{}",
            tags.len(),
            if shown.is_empty() { "" } else { ": " },
            shown.join(", ") + if tags.len() > 10 { ", ..." } else { "" }
        ));
        report.continues.push(
            "segments: every tag from its max_id, claimed as Leaf claims (max_id = max_id + \
             step, committed, then [max_id - step, max_id)), Leaf's columns untouched"
                .to_owned(),
        );
        report.why.push(
            "Leaf and uidgen claim segments of one row, each committed before it is used: no \
             two overlap, and each lies above every number claimed before it"
                .to_owned(),
        );
        report.why.push(
            "uidgen's delta and remainder columns (migration 0006) are invisible to Java Leaf: \
             its statements (IDAllocMapper) name their columns, and it keeps working on the \
             migrated table"
                .to_owned(),
        );
        // Java Leaf takes any varchar(128) as a tag. uidgen serves such a row under its name
        // (a lookup of a tag the table holds checks nothing) but refuses to lease or change
        // it, which an operator should hear before the switch rather than from a caller.
        let outside: Vec<(&str, String)> = tags
            .iter()
            .filter_map(|t| {
                let tag = t.biz_tag.as_str();
                uidgen_store::validate_tag(tag)
                    .err()
                    .map(|e| (tag, e.to_string()))
            })
            .collect();
        if let Some((_, why)) = outside.first() {
            let names: Vec<&str> = outside.iter().map(|(tag, _)| *tag).collect();
            report.found.push(format!(
                "tags {names:?} are outside uidgen's tag alphabet ({why}): served under their \
                 names, but uidgen cannot lease or change them; rename them in leaf_alloc to \
                 bring them in"
            ));
        }
        if args.beside {
            let names: Vec<String> = tags.iter().map(|t| t.biz_tag.clone()).collect();
            let mut grouped = grouped_tags(settings, &names);
            grouped.extend(
                tags.iter()
                    .filter(|t| t.residue.delta > 1)
                    .map(|t| t.biz_tag.clone()),
            );
            grouped.sort();
            grouped.dedup();
            if !grouped.is_empty() {
                report.refused.push(format!(
                    "tags {grouped:?} are served from several databases (a residue, or \
                     `[[segment.groups]]`): Java Leaf beside uidgen would hand out every number \
                     of its segments, numbers another database serves; stop Leaf for them, or \
                     run without --beside"
                ));
            }
        }
    } else {
        report
            .found
            .push("leaf_alloc: not read (`segment.enabled = false`)".to_owned());
    }
    if args.beside {
        report
            .found
            .push("Leaf servers keep running beside uidgen (--beside)".to_owned());
    }
    Ok(Assessment {
        report,
        decision: LeafDecision {
            zk_name,
            layout,
            leaf_ids,
            tags: tags.into_iter().map(|t| t.biz_tag).collect(),
            beside: args.beside,
        },
    })
}
