//! What the web console reads: the layouts this server can decode (`GET /v1/layouts`) and the
//! generator's state in one document (`GET /v1/status`), polled once a second.
//!
//! Nothing here waits for the database: a console left open all day costs one cheap request a
//! second. The modes' readiness is the last one checked, refreshed in the background at most
//! every 2 s however many consoles poll. Texts that may quote the database or ZooKeeper (a
//! stopped ring's reason, a lost ZooKeeper id's reason) are replaced by a flag and a fixed
//! sentence, as `/readyz` does.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use uidgen_core::calendar::format_iso8601;
use uidgen_core::layout::PRESET_NAMES;
use uidgen_core::{Clock, Layout, SystemClock};
use utoipa::ToSchema;

use crate::service::error::SEE_LOG;
use crate::service::readiness::Mode;
use crate::service::runway::RunwayInfo;
use crate::service::state::AppState;

/// One run of bits in an ID.
#[derive(Debug, Serialize, ToSchema)]
pub struct LayoutField {
    /// The field's name: `sign`, `version`, `type`, `method`, `time`, `worker`, `sequence`; on a
    /// layout that splits its worker field, `machine` and `process`; for `sharded`, `index`,
    /// `shard` and `app_id`.
    name: String,
    /// Width in bits.
    bits: u32,
    /// Position of the field's lowest bit (0 is the least significant bit of the ID).
    shift: u32,
}

/// A layout the decode route accepts as `?layout=<name>`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LayoutInfo {
    /// The name to pass as `layout=`.
    name: String,
    /// Whether this server issues IDs with this layout (its `/v1/ids` and the make route use it).
    served: bool,
    /// The time unit in milliseconds (1000 for seconds, 10 for Sonyflake); absent for `sharded`,
    /// whose IDs hold no time.
    #[serde(skip_serializing_if = "Option::is_none")]
    unit_ms: Option<u64>,
    /// The epoch, milliseconds since the Unix epoch; absent for `sharded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch_ms: Option<u64>,
    /// The epoch in ISO-8601 UTC; absent for `sharded`.
    #[serde(skip_serializing_if = "Option::is_none")]
    epoch: Option<String>,
    /// The fields from the most significant bit down; widths sum to 64, or to fewer for a
    /// narrower layout (`safe_js`: 53), whose IDs keep the bits above zero.
    fields: Vec<LayoutField>,
}

impl LayoutInfo {
    pub(super) fn of(layout: &Layout, served: bool) -> Self {
        let mut fields = Vec::with_capacity(layout.fields().len() + 1);
        for &(kind, bits) in layout.fields() {
            // A layout narrower than 64 bits tiles only its low bits: the layout says where.
            let shift = layout.shift(kind).unwrap_or_default();
            match (kind, layout.worker_split()) {
                // Coloured as two fields, as the decode route reports them, in the order the
                // layout places them (keyworker: process above machine).
                (uidgen_core::FieldKind::Worker, Some(split)) => {
                    fields.extend(split.spans().map(|part| LayoutField {
                        name: part.name.to_owned(),
                        bits: part.bits,
                        shift: shift + part.offset,
                    }));
                }
                _ => fields.push(LayoutField {
                    name: kind.name().to_owned(),
                    bits,
                    shift,
                }),
            }
        }
        Self {
            name: layout.name().to_owned(),
            served,
            unit_ms: Some(layout.unit().millis()),
            epoch_ms: Some(layout.epoch_ms()),
            epoch: Some(format_iso8601(layout.epoch_ms())),
            fields,
        }
    }

    /// The sharded mode's IDs: sign, index, shard, app id (uidgen-sharded's layout).
    fn sharded() -> Self {
        use uidgen_sharded::{APP_BITS, INDEX_BITS, SHARD_BITS};
        let field = |name: &str, bits, shift| LayoutField {
            name: name.to_owned(),
            bits,
            shift,
        };
        Self {
            name: "sharded".to_owned(),
            served: false,
            unit_ms: None,
            epoch_ms: None,
            epoch: None,
            fields: vec![
                field("sign", 1, 63),
                field("index", INDEX_BITS, APP_BITS + SHARD_BITS),
                field("shard", SHARD_BITS, APP_BITS),
                field("app_id", APP_BITS, 0),
            ],
        }
    }
}

/// The layout a decode request names: the served one when `name` is absent or is its name (a
/// served preset may have its own epoch), otherwise the preset of that name.
pub(super) fn pick_layout(state: &AppState, name: Option<&str>) -> uidgen_core::Result<Layout> {
    let served = state.generator.layout();
    match name {
        None => Ok(served.clone()),
        Some(name) if name == served.name() => Ok(served.clone()),
        Some(name) => Layout::preset(name),
    }
}

/// `GET /v1/layouts`: every layout `GET /v1/ids/{id}?layout=` decodes, the served one first,
/// with each field's bits and shift.
pub async fn layouts(State(state): State<Arc<AppState>>) -> Json<Vec<LayoutInfo>> {
    let served = state.generator.layout();
    let mut out = vec![LayoutInfo::of(served, true)];
    out.extend(
        PRESET_NAMES
            .iter()
            .filter(|&&name| name != served.name())
            // Every name in the list builds; a preset whose epoch lay in the future by this
            // clock would be refused, and is then left out rather than failing the list.
            .filter_map(|name| Layout::preset(name).ok())
            .map(|layout| LayoutInfo::of(&layout, false)),
    );
    out.push(LayoutInfo::sharded());
    Json(out)
}

/// The worker ids a generator stamps with, and what they sustain: an operator sees the
/// headroom before callers wait (docs/OPERATIONS.md, "Throughput and borrowing").
#[derive(Debug, Serialize, ToSchema)]
pub struct WorkersStatus {
    /// The worker ids, lowest first.
    held: Vec<u64>,
    /// IDs per second they sustain without borrowing ahead of the clock.
    sustained_ids_per_second: f64,
    /// IDs per second taken now (a moving average over about a second).
    demand_ids_per_second: f64,
    /// How far the IDs' time runs ahead of the clock (ms).
    borrowed_lead_ms: u64,
    /// The most it may run ahead (ms); absent when unbounded.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_borrow_ms: Option<u64>,
    /// Whether more worker ids are claimed under load (the cached generator, an assigner that
    /// hands out several, `worker.max_ids` above 1).
    grows: bool,
    /// The most worker ids held at once (`worker.max_ids`).
    max_ids: u64,
}

/// The ring buffer of the cached generator.
#[derive(Debug, Serialize, ToSchema)]
pub struct RingStatus {
    /// Slots.
    capacity: u64,
    /// IDs ready to take.
    available: u64,
    /// Padding runs since start.
    padding_runs: u64,
    /// Time units the ring runs ahead of the clock (Baidu's borrowed seconds).
    borrowed_units: u64,
    /// The padding has stopped for good: no more IDs will be issued.
    stopped: bool,
}

/// The holder of a worker id kept by a coordinator's time reports (ZooKeeper's reports,
/// etcd's keep-alive rounds).
#[derive(Debug, Serialize, ToSchema)]
pub struct ZkView {
    /// The last time report reached ZooKeeper.
    connected: bool,
    /// IDs may still be issued (the id is held and the reservation of its last accepted report has not run out).
    issuing: bool,
    /// Reports that failed since start.
    report_failures: u64,
    /// Milliseconds since ZooKeeper last accepted a report; absent before the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_report_age_ms: Option<u64>,
    /// IDs stop at this instant (ms since the Unix epoch) unless a report is accepted first.
    reserved_until_ms: u64,
    /// Since when reports have been failing (ms since the Unix epoch), if they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    outage_since_ms: Option<u64>,
    /// The worker id was lost: no ID is issued any more (the reason is in the server log).
    lost: bool,
    /// Ids freed by this holder's automatic reclaim.
    reclaimed: u64,
    /// Times the holder saw the coordinator lose data (docs/OPERATIONS.md, "When a
    /// coordinator loses its data").
    data_losses: u64,
    /// Times the holder took its worker id up again after its claim vanished.
    reestablished: u64,
}

/// The sharded mode's counters since start.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShardedView {
    /// Pop requests sent for callers.
    pops: u64,
    /// IDs handed out.
    ids_popped: u64,
    /// Pops that found their list empty.
    empty_pops: u64,
    /// Segments claimed and pushed.
    refills: u64,
    /// Refills that failed.
    refill_failures: u64,
    /// Refills skipped because another server held the list's lock.
    lock_busy: u64,
    /// Connections opened to Redis.
    reconnects: u64,
}

/// One mode's readiness, as `GET /readyz?mode=…` answers it (checked at most a few seconds
/// ago).
#[derive(Debug, Serialize, ToSchema)]
pub struct ModeStatus {
    /// The mode: `ids` (the ID generator), `segment` or `sharded`.
    mode: Mode,
    /// Whether the mode can serve.
    ready: bool,
    /// What is degraded while it still serves (a ZooKeeper outage within its allowance).
    #[serde(skip_serializing_if = "Option::is_none")]
    degraded: Option<String>,
    /// Why it cannot serve, as a sentence safe to show (the details are in the server log).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// `GET /v1/status`: what the console's Live panel shows.
#[derive(Debug, Serialize, ToSchema)]
pub struct Status {
    /// The server's version.
    version: &'static str,
    /// When this answer was made, ms since the Unix epoch (the console plots against it).
    now_ms: u64,
    /// Milliseconds since the server started serving.
    uptime_ms: u64,
    /// The served layout's name.
    layout: String,
    /// The generator kind: `cached`, `default` or `snowflake`; absent when embedded.
    #[serde(skip_serializing_if = "Option::is_none")]
    generator: Option<&'static str>,
    /// The worker id the generator stamps.
    worker_id: u64,
    /// How the worker id was assigned: `disposable`, `static`, `leased`, `local_cache`,
    /// `zookeeper`, `etcd`, `machine`; absent when embedded.
    #[serde(skip_serializing_if = "Option::is_none")]
    assigner: Option<&'static str>,
    /// IDs handed out since start, every route together (the console derives IDs per second).
    ids_issued: u64,
    /// The ring buffer, for the cached generator.
    #[serde(skip_serializing_if = "Option::is_none")]
    ring: Option<RingStatus>,
    /// The worker ids the default space stamps with and the headroom they give (issue 30);
    /// absent when embedded.
    #[serde(skip_serializing_if = "Option::is_none")]
    workers: Option<WorkersStatus>,
    /// Whether the admin routes exist (a token is configured).
    admin_enabled: bool,
    /// Whether the ID routes ask for a caller token (`auth.required`): the console then asks
    /// for one before it decodes, makes or lists segment tags.
    auth_required: bool,
    /// Whether segment mode is on (`GET /v1/segments` shows its tags).
    segments_enabled: bool,
    /// The ZooKeeper holder, when the worker id comes from ZooKeeper.
    #[serde(skip_serializing_if = "Option::is_none")]
    zookeeper: Option<ZkView>,
    /// The etcd holder, when the worker id comes from etcd (its keep-alive rounds are its
    /// reports; `reclaimed` stays 0: an etcd id comes free when its lease expires).
    #[serde(skip_serializing_if = "Option::is_none")]
    etcd: Option<ZkView>,
    /// The sharded mode's counters, when it is on (`GET /v1/apps` lists its apps).
    #[serde(skip_serializing_if = "Option::is_none")]
    sharded: Option<ShardedView>,
    /// Why generation stopped, if it did, as a sentence safe to show.
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped: Option<String>,
    /// Whether some mode can serve (what `/readyz` answers).
    ready: bool,
    /// Each mode this server serves, and whether it can now.
    modes: Vec<ModeStatus>,
    /// Each ID space, `default` first (as `GET /v1/spaces` lists them).
    spaces: Vec<crate::service::spaces::SpaceInfo>,
    /// How long the served layout's time field lasts, at today's rate and at the current
    /// borrowed lead (docs/OPERATIONS.md, "Runway").
    runway: RunwayInfo,
    /// This host's clock against the store's (and etcd's), and whether time-stamped IDs are refused for it
    /// (docs/OPERATIONS.md, "Clocks watched while serving").
    clock: crate::service::clock_watch::ClockStatus,
}

/// `GET /v1/status`: the generator's state, for the console (no database round trip).
pub async fn status(State(state): State<Arc<AppState>>) -> Json<Status> {
    let readiness = crate::service::ready::latest(&state).await;
    let modes = readiness
        .modes
        .iter()
        .map(|(mode, check)| ModeStatus {
            mode: *mode,
            ready: check.is_ok(),
            degraded: check.as_ref().ok().cloned().flatten(),
            reason: check.as_ref().err().map(|why| why.public.to_string()),
        })
        .collect();
    let now_ms = SystemClock.now_millis();
    let workers = state.pool.as_ref().map(|pool| {
        let s = pool.status();
        WorkersStatus {
            held: s.workers,
            sustained_ids_per_second: s.sustained_ids_per_second,
            demand_ids_per_second: s.demand_ids_per_second,
            borrowed_lead_ms: s.borrowed_lead_ms,
            max_borrow_ms: s.max_borrow_ms,
            grows: s.holds_several,
            max_ids: s.max_workers,
        }
    });
    let ring = state.generator.stock().map(|s| RingStatus {
        capacity: s.capacity,
        available: s.available,
        padding_runs: s.padding_runs,
        borrowed_units: s.borrowed_units,
        stopped: s.stopped.is_some(),
    });
    let keeper = state.keeper.as_ref().map(|keeper| keeper.status());
    // The document has a place for each coordinator's time reports (`zookeeper`, `etcd`, pinned
    // by the API); a keeper publishing under another key shows in metrics and readiness only.
    let reported = keeper
        .as_ref()
        .and_then(|s| s.reports.as_ref().map(|reports| (s, reports)));
    let view = |key: &str| {
        reported
            .filter(|(_, reports)| reports.key == key)
            .map(|(s, reports)| ZkView {
                connected: s.health.connected,
                issuing: s.issuing(now_ms),
                report_failures: s.health.failures,
                last_report_age_ms: s
                    .health
                    .last_report_ms
                    .map(|last| now_ms.saturating_sub(last)),
                reserved_until_ms: s.health.accepted_until_ms,
                outage_since_ms: s.health.outage_since_ms,
                lost: s.health.lost.is_some(),
                reclaimed: reports.reclaimed,
                data_losses: reports.data_losses,
                reestablished: reports.reestablished,
            })
    };
    let (zookeeper, etcd) = (view("zookeeper"), view("etcd"));
    let lost = reported
        .filter(|(s, _)| s.health.lost.is_some())
        .map(|(_, reports)| reports.authority);
    let stopped = if ring.as_ref().is_some_and(|r| r.stopped) {
        Some(format!("the ring buffer's padding has stopped; {SEE_LOG}"))
    } else {
        lost.map(|authority| format!("the {authority} worker id was lost; {SEE_LOG}"))
    };
    let sharded = state.sharded.as_ref().map(|sharded| {
        let s = sharded.stats();
        ShardedView {
            pops: s.pops,
            ids_popped: s.ids_popped,
            empty_pops: s.empty_pops,
            refills: s.refills,
            refill_failures: s.refill_failures,
            lock_busy: s.lock_busy,
            reconnects: s.reconnects,
        }
    });
    Json(Status {
        version: env!("CARGO_PKG_VERSION"),
        now_ms,
        uptime_ms: u64::try_from(state.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        layout: state.generator.layout().name().to_owned(),
        generator: state.generator_kind,
        worker_id: state.worker_id,
        assigner: state.assigner,
        ids_issued: state.metrics.issued_total(),
        ring,
        workers,
        admin_enabled: state.admin_token.is_some(),
        auth_required: super::callers::tokens_required(&state),
        segments_enabled: state.segments.is_some(),
        zookeeper,
        etcd,
        sharded,
        stopped,
        ready: readiness.any_ready(),
        modes,
        spaces: crate::service::spaces::list(&state),
        runway: RunwayInfo::of(state.generator.as_ref(), now_ms, state.runway_warning),
        clock: state.clock.status(),
    })
}
