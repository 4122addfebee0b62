//! Taking over from Baidu uid-generator: its `WORKER_NODE` rows and its layout.
//!
//! Baidu's IDs are `(second, worker id, sequence)` in its layout (by default 1/28/22/13 from
//! `epochStr` 2016-05-20, read in the JVM's zone, +08:00 at Baidu), and its worker ids are the
//! rows of `WORKER_NODE`, one per start. uidgen continues it one of two ways, whichever its
//! configured layout is:
//! - **`baidu_continued`** (Baidu's layout with the sign bit as a 29th time bit, from the same
//!   epoch): every ID it issues has bit 63 set and no Baidu ID has, so none is equal and every
//!   new one sorts above every old one as an unsigned number, whatever worker ids the two
//!   share. It starts where Baidu's time field ran out (2024-11-20 for the default epoch), so it
//!   is the way once the legacy layout is used up.
//! - **Baidu's own layout continued** (the same widths and epoch), while its time field lasts:
//!   uidgen's worker ids then come from Baidu's `WORKER_NODE` counter (the disposable assigner,
//!   worker id = row id, from 1), so no start, Baidu's or uidgen's, gets a worker id another
//!   had, and Baidu's apps may keep running beside uidgen. On MySQL, where `WORKER_NODE` is a
//!   table apart from uidgen's `worker_node`, the takeover makes `worker_node` a view of it.
//!
//! Anything else, such as the `baidu` preset with its 2026 epoch (the same bits: its IDs of
//! 2026 read as 2016 in Baidu's layout, issue 31) is refused, naming `baidu_continued`.

use clap::Args;
use serde::{Deserialize, Serialize};
use uidgen_core::Layout;
use uidgen_core::calendar::format_iso8601;
use uidgen_store::{Dialect, Store};

use super::assessment::{Assessment, Report, Shape, now_ms};
use crate::config::Settings;
use crate::config::worker::AssignerKind;

/// `uidgen takeover baidu`.
#[derive(Debug, Args)]
pub struct BaiduArgs {
    /// Baidu's `epochStr` (`2016-05-20+08:00` by default: Baidu's, in its zone), as uidgen's
    /// `layout.epoch` takes it.
    #[arg(long, default_value = "2016-05-20+08:00")]
    pub legacy_epoch: String,
    /// Baidu's `timeBits,workerBits,seqBits`.
    #[arg(long, default_value = "28,22,13")]
    pub legacy_bits: String,
    /// Baidu's apps keep running beside uidgen during the switch.
    #[arg(long)]
    pub beside: bool,
}

/// What a Baidu takeover recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaiduDecision {
    /// Baidu's layout.
    pub legacy: Shape,
    /// The layout uidgen continues with.
    pub layout: Shape,
    /// Whether uidgen's worker ids must come from Baidu's counter (its own layout continued).
    pub shares_counter: bool,
    /// Whether Baidu's apps keep running beside uidgen.
    pub beside: bool,
}

impl BaiduDecision {
    /// Why `settings` contradicts the decision.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        let layout = &settings.layout;
        if !self.layout.holds(layout) || layout.name() != self.layout.name {
            return Some(format!(
                "layout {} is not {}, the layout uidgen continues Baidu's {} with: set \
                 `layout.preset = \"{}\"` and `layout.epoch = \"{}\"`",
                Shape::of(layout),
                self.layout,
                self.legacy,
                self.layout.name,
                self.layout.epoch_ms
            ));
        }
        if self.shares_counter {
            return counter_refusal(settings);
        }
        None
    }
}

/// Why uidgen's worker ids would not come from Baidu's counter.
fn counter_refusal(settings: &Settings) -> Option<String> {
    let worker = &settings.worker;
    let from_one = worker.server_range.is_none_or(|r| r.low() == 1);
    (worker.assigner != AssignerKind::Disposable || !from_one).then(|| {
        "Baidu's layout is continued as it is, so every worker id must come from Baidu's \
         WORKER_NODE counter, as Baidu's apps take theirs: set `worker.assigner = \
         \"disposable\"` and leave `worker.range` unset (worker id = row id, from 1)"
            .to_owned()
    })
}

fn parse_bits(text: &str) -> anyhow::Result<(u32, u32, u32)> {
    let bits: Vec<u32> = text
        .split(',')
        .map(|b| b.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("--legacy-bits {text:?}: use timeBits,workerBits,seqBits"))?;
    match bits[..] {
        [t, w, s] if t + w + s == 63 => Ok((t, w, s)),
        _ => anyhow::bail!(
            "--legacy-bits {text:?}: three widths summing to 63 (Baidu's default is 28,22,13)"
        ),
    }
}

/// Read Baidu's rows and the configured layout, and decide.
pub async fn assess(
    args: &BaiduArgs,
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Assessment<BaiduDecision>> {
    let (t, w, s) = parse_bits(&args.legacy_bits)?;
    let legacy = Layout::baidu_bits(t, w, s, args.legacy_epoch.as_str())?;
    let legacy_shape = Shape::of(&legacy);
    let nodes = store.baidu_worker_nodes().await?;
    let end_ms = legacy
        .epoch_ms()
        .saturating_add((legacy.max_time() + 1).saturating_mul(1000));
    let now = now_ms();
    let layout = &settings.layout;
    let shape = Shape::of(layout);
    let mut report = Report::default();

    match &nodes.legacy {
        Some(table) => report.found.push(format!(
            "Baidu's {}: {} rows, worker ids up to {}; uidgen's worker_node: {} rows, up to {} ({})",
            table.name,
            table.rows,
            show(table.max_id),
            nodes.own.rows,
            show(nodes.own.max_id),
            if nodes.shared {
                "a view of WORKER_NODE: one counter"
            } else {
                "a table apart, with a counter of its own"
            }
        )),
        None => report.found.push(format!(
            "worker_node (Baidu's WORKER_NODE on {}): {} rows, worker ids up to {}",
            store.dialect().name(),
            nodes.own.rows,
            show(nodes.own.max_id)
        )),
    }
    let ran_out = if now >= end_ms {
        "ran out on"
    } else {
        "runs out on"
    };
    report.found.push(format!(
        "Baidu's layout: {legacy_shape}; its time field {ran_out} {}",
        format_iso8601(end_ms)
    ));
    if args.beside {
        report
            .found
            .push("Baidu's apps keep running beside uidgen (--beside)".to_owned());
    }

    let continued = layout.name() == "baidu_continued";
    let same = legacy_shape.holds(layout);
    let mut shares_counter = false;
    if continued && (t, w, s) != (28, 22, 13) {
        report.refused.push(format!(
            "baidu_continued continues Baidu's default widths 28/22/13 only, not {t}/{w}/{s}; \
             the server has no key for a continuation of other widths"
        ));
    } else if continued && layout.epoch_ms() != legacy.epoch_ms() {
        report.refused.push(format!(
            "baidu_continued must start from Baidu's epoch: set `layout.epoch = \"{}\"` (it is \
             {})",
            args.legacy_epoch,
            format_iso8601(layout.epoch_ms())
        ));
    } else if continued && now < end_ms {
        report.refused.push(format!(
            "Baidu's layout runs until {}, and baidu_continued refuses every clock before it: \
             until then continue Baidu's own layout (`layout.preset = \"baidu\"`, \
             `layout.epoch = \"{}\"`, the disposable assigner), and switch to baidu_continued \
             after",
            format_iso8601(end_ms),
            args.legacy_epoch
        ));
    } else if continued {
        report.continues.push(format!(
            "layout {shape}: Baidu's layout past its end, every new ID at 2^63 or above"
        ));
        report.continues.push(format!(
            "worker ids from the {} assigner, any of them: bit 63 keeps the two ID sets apart",
            super::assessment::assigner_name(settings.worker.assigner)
        ));
        report.why.push(
            "every Baidu ID is below 2^63 (a positive Java long), every new one is at or above \
             it: none is equal, and every new one sorts above every Baidu ID as an unsigned \
             number (widen ID columns first: docs/OPERATIONS.md, \"Moving Baidu IDs past \
             2024-11-20\")"
                .to_owned(),
        );
    } else if same {
        if now >= end_ms {
            report.refused.push(format!(
                "Baidu's layout ran out on {}: continue with `layout.preset = \
                 \"baidu_continued\"` and `layout.epoch = \"{}\"`",
                format_iso8601(end_ms),
                args.legacy_epoch
            ));
        } else if let Some(refusal) = counter_refusal(settings) {
            report.refused.push(refusal);
        } else {
            shares_counter = true;
            report
                .continues
                .push(format!("layout {shape}: Baidu's own, continued"));
            let next = nodes.max_id().unwrap_or(0).saturating_add(1);
            report.continues.push(format!(
                "worker ids from Baidu's WORKER_NODE counter: {next} and up{}",
                if nodes.one_counter() {
                    ""
                } else {
                    " (the takeover makes worker_node a view of WORKER_NODE, raising its \
                     counter above every id either table handed out)"
                }
            ));
            report.why.push(
                "one AUTO_INCREMENT counter gives every start, Baidu's or uidgen's, a worker id \
                 no other start had, and IDs of two worker ids differ in the worker field"
                    .to_owned(),
            );
            report.why.push(
                "the same layout and epoch: new IDs carry the seconds uidgen stamps, after the \
                 seconds Baidu stamped before, so they sort as Baidu's own IDs sort among its \
                 apps (by second first)"
                    .to_owned(),
            );
        }
    } else {
        let remedy = if now >= end_ms {
            format!(
                "set `layout.preset = \"baidu_continued\"` and `layout.epoch = \"{}\"` (Baidu's \
                 layout past its end: every new ID above every Baidu ID)",
                args.legacy_epoch
            )
        } else {
            format!(
                "set `layout.preset = \"baidu\"` and `layout.epoch = \"{}\"` (Baidu's own, \
                 continued) until {}, then baidu_continued",
                args.legacy_epoch,
                format_iso8601(end_ms)
            )
        };
        report.refused.push(format!(
            "layout {shape} is neither Baidu's ({legacy_shape}) nor its continuation: its IDs \
             could equal Baidu's or sort below them; {remedy}"
        ));
    }
    Ok(Assessment {
        report,
        decision: BaiduDecision {
            legacy: legacy_shape,
            layout: shape,
            shares_counter,
            beside: args.beside,
        },
    })
}

/// Make the decision true in the store: one counter for Baidu and uidgen.
pub async fn apply(decision: &BaiduDecision, store: &Store) -> anyhow::Result<Vec<String>> {
    if !decision.shares_counter {
        return Ok(Vec::new());
    }
    Ok(match store.share_baidu_worker_node().await? {
        Some(next) => vec![format!(
            "worker_node is a view of Baidu's WORKER_NODE now (uidgen's own rows are kept as \
             worker_node_before_baidu); the next worker id is {next} or above"
        )],
        None => Vec::new(),
    })
}

/// Without a recorded Baidu decision: refuse a start on MySQL whose store holds Baidu's
/// `WORKER_NODE` rows apart from uidgen's `worker_node` (whose counter would hand out Baidu's
/// worker ids again), unless the layout keeps every ID apart from Baidu's anyway
/// (`baidu_continued`). Elsewhere the two tables are one, so the counter is shared already.
pub async fn unrecorded(settings: &Settings, store: &Store) -> anyhow::Result<Option<String>> {
    if store.dialect() != Dialect::MySql || settings.layout.name() == "baidu_continued" {
        return Ok(None);
    }
    let nodes = store.baidu_worker_nodes().await?;
    Ok(nodes
        .legacy
        .filter(|table| table.rows > 0 && !nodes.shared)
        .map(|table| {
            format!(
                "this store holds Baidu uid-generator's {} ({} rows, worker ids up to {}) apart \
                 from uidgen's worker_node, whose counter would hand Baidu's worker ids out \
                 again, and layout {} can make Baidu's IDs: run `uidgen takeover baidu --check` \
                 to see how to continue it (baidu_continued, or Baidu's own layout on its \
                 counter), then `uidgen takeover baidu`",
                table.name,
                table.rows,
                show(table.max_id),
                settings.layout.name()
            )
        }))
}

fn show(max_id: Option<i64>) -> String {
    max_id.map_or_else(|| "none".to_owned(), |id| id.to_string())
}
