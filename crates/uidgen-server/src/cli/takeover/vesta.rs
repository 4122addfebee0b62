//! Taking over from Vesta: the machine ids its processes hold.
//!
//! Vesta's IDs carry a 10-bit machine id, the generation method (0 embedded, 1 central server,
//! 2 REST) and the type; its machine ids come from a property (`vesta.machine`, by convention
//! servers from 1023 down and embedded users from 1 up), a list of IPs, or its
//! `DB_MACHINE_ID_PROVIDER` table (a host's row for good). uidgen stamps the same fields, the
//! method by channel (CLI and library 0, gRPC 1, HTTP 2), so a uidgen process and a Vesta
//! process on one machine id and one method would stamp the same IDs. The takeover records
//! every machine id Vesta holds (the table's rows with an IP, and `--machines` for the ones set
//! by property or IP list), and `serve` refuses worker ranges that hold one of them, for its
//! servers (`worker.range`) and its clients' fallbacks (`worker.fallback_range`) alike: uidgen
//! never stamps a Vesta machine id, whatever the method, so Vesta's processes may go on
//! beside it.

use clap::Args;
use serde::{Deserialize, Serialize};
use uidgen_core::layout::VESTA_EPOCH_MS;
use uidgen_store::Store;
use uidgen_worker::WorkerIdRange;

use super::assessment::{Assessment, Report, Shape, parse_ids, show_ids};
use crate::config::Settings;
use crate::config::vesta::is_vesta;
use crate::config::worker::AssignerKind;

/// `uidgen takeover vesta`.
#[derive(Debug, Args)]
pub struct VestaArgs {
    /// Machine ids Vesta processes hold that no table records (`vesta.machine` properties,
    /// IP lists): `1021-1023,7`.
    #[arg(long)]
    pub machines: Option<String>,
    /// Vesta processes keep running beside uidgen during the switch.
    #[arg(long)]
    pub beside: bool,
}

/// What a Vesta takeover recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VestaDecision {
    /// Every machine id Vesta holds: uidgen stamps none of them.
    pub machines: Vec<u64>,
    /// Vesta's epoch, which uidgen's Vesta layouts keep.
    pub epoch_ms: u64,
    /// Whether Vesta processes keep running beside uidgen.
    pub beside: bool,
}

impl VestaDecision {
    /// Why `settings` contradicts the decision.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        refusals(settings, &self.machines).into_iter().next()
    }
}

/// The ids of `machines` in `range`.
fn inside(range: Option<WorkerIdRange>, machines: &[u64]) -> Vec<u64> {
    range.map_or_else(Vec::new, |r| {
        machines
            .iter()
            .copied()
            .filter(|&id| r.contains(id))
            .collect()
    })
}

/// What keeps `settings` from staying off Vesta's `machines`.
fn refusals(settings: &Settings, machines: &[u64]) -> Vec<String> {
    let layout = &settings.layout;
    let mut refused = Vec::new();
    if !is_vesta(layout) || layout.epoch_ms() != VESTA_EPOCH_MS {
        refused.push(format!(
            "layout {} is not one of Vesta's (from its epoch, {}): its IDs could equal Vesta's; \
             set `layout.preset = \"vesta_max_peak\"` or `\"vesta_min_granularity\"`, as \
             Vesta's `vesta.type` (0 or 1), without `layout.epoch`",
            Shape::of(layout),
            uidgen_core::calendar::format_iso8601(VESTA_EPOCH_MS)
        ));
        return refused;
    }
    let worker = &settings.worker;
    if worker.assigner == AssignerKind::Machine {
        refused.push(
            "the machine assigner takes any of the 1,024 machine ids, Vesta's too: use one that \
             takes a range (`worker.assigner = \"leased\"`, `zookeeper`, `etcd`, `static`)"
                .to_owned(),
        );
        return refused;
    }
    for (key, range) in [
        ("worker.range", worker.server_range),
        ("worker.fallback_range", worker.fallback_range),
    ] {
        let taken = inside(range, machines);
        if let (false, Some(range)) = (taken.is_empty(), range) {
            refused.push(format!(
                "`{key}` {range} holds Vesta's machine ids {}: set it to ids Vesta does not \
                 hold",
                show_ids(&taken)
            ));
        }
    }
    refused
}

/// Read Vesta's machine ids and decide.
pub async fn assess(
    args: &VestaArgs,
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Assessment<VestaDecision>> {
    let mut report = Report::default();
    let rows = store.vesta_machine_rows().await?;
    let configured = match &args.machines {
        Some(text) => parse_ids(text).map_err(|e| anyhow::anyhow!("--machines: {e}"))?,
        None => Vec::new(),
    };
    let mut machines = configured.clone();
    match &rows {
        Some(rows) => {
            let held: Vec<u64> = rows
                .iter()
                .filter(|r| r.ip.is_some())
                .filter_map(|r| u64::try_from(r.id).ok())
                .collect();
            report.found.push(format!(
                "Vesta's DB_MACHINE_ID_PROVIDER: {} rows; machine ids held by a host: [{}]",
                rows.len(),
                show_ids(&held)
            ));
            machines.extend(held);
        }
        None => report
            .found
            .push("no DB_MACHINE_ID_PROVIDER table in the store".to_owned()),
    }
    if !configured.is_empty() {
        report.found.push(format!(
            "machine ids set by property or IP list (--machines): [{}]",
            show_ids(&configured)
        ));
    }
    machines.sort_unstable();
    machines.dedup();
    if args.beside {
        report
            .found
            .push("Vesta processes keep running beside uidgen (--beside)".to_owned());
    }
    report.refused = refusals(settings, &machines);
    if report.refused.is_empty() {
        let show =
            |r: Option<WorkerIdRange>| r.map_or_else(|| "none".to_owned(), |r| r.to_string());
        report.continues.push(format!(
            "layout {}; servers' machine ids {}, clients' fallbacks {} (`uidgen gen` leases \
             from the latter): none of Vesta's [{}]",
            Shape::of(&settings.layout),
            show(settings.worker.server_range),
            show(settings.worker.fallback_range),
            show_ids(&machines)
        ));
        report.why.push(
            "uidgen stamps no machine id a Vesta process holds, whatever the generation method, \
             and IDs of two machine ids differ in the machine field"
                .to_owned(),
        );
        report.why.push(
            "Vesta's layout and epoch: IDs sort as Vesta's do, by version, type and generation \
             method, then time"
                .to_owned(),
        );
    }
    Ok(Assessment {
        report,
        decision: VestaDecision {
            machines,
            epoch_ms: VESTA_EPOCH_MS,
            beside: args.beside,
        },
    })
}
