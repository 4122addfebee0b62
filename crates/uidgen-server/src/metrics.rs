//! Prometheus metrics: IDs issued by route, errors by kind, request latency, callers waiting for
//! IDs ([`waits`]), the state of the ring buffer and segments, read when scraped, how long each
//! space's time field lasts ([`mod@runway`]), the build and the process ([`process`]).
//!
//! One label scheme: whatever is per route is labelled `route`, whose value is the HTTP route
//! pattern (`/v1/ids`, `/v1/segments/{tag}`) or the gRPC method's path
//! (`/uidgen.v1.IdService/NextIds`), never a concrete path or client input. docs/OPERATIONS.md
//! ("Metrics") lists every metric.

pub mod clock;
pub mod label;
pub mod order;
pub mod ordered;
pub mod process;
pub mod runway;
pub mod waits;

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use uidgen_worker::{KeeperReports, KeeperStatus};

use label::{RouteLabel, SpaceLabel};

/// Label set naming an error kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// The error code, e.g. `malformed_id`.
    pub kind: String,
}

/// Label set naming a segment tag.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TagLabel {
    /// The biz tag.
    pub tag: String,
}

/// Label set naming a sharded-mode event: one of a fixed list, never client input.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventLabel {
    /// The event, e.g. `refills`.
    pub event: &'static str,
}

/// Label set of one gRPC call's outcome: the method and its status code, both from fixed lists.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GrpcCallLabel {
    /// The method's path, e.g. `/uidgen.v1.IdService/NextId`: the `route` of every other
    /// per-route metric.
    pub route: &'static str,
    /// The status code's name, e.g. `ok`, `invalid_argument`.
    pub code: &'static str,
}

/// Label set naming the channel a segment lease went through: `http` or `grpc`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ChannelLabel {
    /// `http` or `grpc`.
    pub channel: &'static str,
}

/// Label set naming a caller: its token's name, made by an admin (so the series are as many as
/// the tokens an admin creates), never a value a request chose and never the secret.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallerLabel {
    /// The caller token's name.
    pub caller: String,
}

/// `uidgen_caller_requests_total` and `uidgen_caller_ids_total`, for handing to the token
/// cache (the families are shared handles).
#[derive(Debug, Clone, Default)]
pub struct CallerFamilies {
    requests: Family<CallerLabel, Counter>,
    ids: Family<CallerLabel, Counter>,
}

impl CallerFamilies {
    /// The counters of the caller named `name`, looked up once.
    pub fn caller(&self, name: &str) -> CallerCounters {
        let label = CallerLabel {
            caller: name.to_owned(),
        };
        CallerCounters {
            requests: self.requests.get_or_create_owned(&label),
            ids: self.ids.get_or_create_owned(&label),
        }
    }
}

/// One caller's counters.
#[derive(Debug, Clone, Default)]
pub struct CallerCounters {
    /// Requests the caller's token let through.
    pub requests: Counter,
    /// IDs handed to the caller.
    pub ids: Counter,
}

/// Label set of `uidgen_build_info`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabel {
    /// The crate version, e.g. `0.1.0`.
    pub version: &'static str,
    /// The target's operating system, e.g. `linux`.
    pub os: &'static str,
    /// The target's architecture, e.g. `x86_64`.
    pub arch: &'static str,
}

type HistogramFamily = Family<RouteLabel, Histogram, fn() -> Histogram>;

/// One route's metrics, looked up once and kept: recording through them takes no lock on the
/// family and allocates nothing.
#[derive(Debug, Clone)]
pub struct RouteMetrics {
    /// The route pattern, e.g. `/v1/ids`, for log lines.
    pub name: Arc<str>,
    /// `uidgen_http_request_duration_seconds{route=...}`.
    pub latency: Histogram,
    /// `uidgen_requests_waiting{route=...}` and `uidgen_request_wait_seconds{route=...}`.
    pub waits: &'static waits::RouteWaits,
    /// `uidgen_ids_issued_total{route=...}`, created by the route's first ID: a route that
    /// issues nothing (`/healthz`, `/metrics`) has no series of permanent zeros.
    issued: OnceLock<IssuedCounter>,
    /// Where the issued counter comes from, and its label.
    issued_family: Family<RouteLabel, Counter>,
    issued_total: Counter,
    label: RouteLabel,
}

impl RouteMetrics {
    /// Count `n` IDs issued on this route, and in the all-routes total.
    pub fn issued(&self, n: u64) {
        self.issued
            .get_or_init(|| IssuedCounter {
                route: self.issued_family.get_or_create_owned(&self.label),
                total: self.issued_total.clone(),
            })
            .add(n);
    }
}

/// One route's `uidgen_ids_issued_total` and the all-routes total (the console's IDs per
/// second), looked up once: counting takes no lock on the family and allocates nothing.
#[derive(Debug, Clone)]
pub struct IssuedCounter {
    route: Counter,
    total: Counter,
}

impl IssuedCounter {
    /// Count `n` IDs.
    pub fn add(&self, n: u64) {
        self.route.inc_by(n);
        self.total.inc_by(n);
    }
}

fn latency_histogram() -> Histogram {
    // 10 µs to ~5 s: the service answers in microseconds; anything near seconds is an incident.
    Histogram::new(exponential_buckets(0.000_01, 2.5, 15))
}

/// Every metric the service exports.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    ids_issued: Family<RouteLabel, Counter>,
    errors: Family<KindLabel, Counter>,
    latency: HistogramFamily,
    grpc_latency: HistogramFamily,
    waits: waits::WaitFamilies,
    /// Every route's IDs together, for the console's IDs-per-second chart (not exported: the
    /// per-route family sums to it).
    issued_total: Counter,
    grpc_calls: Family<GrpcCallLabel, Counter>,
    space_ids: Family<SpaceLabel, Counter>,
    segment_leases: Family<ChannelLabel, Counter>,
    segment_leased_ids: Family<ChannelLabel, Counter>,
    /// Slots in the ring buffer.
    pub ring_capacity: Gauge,
    /// IDs ready to take in the ring buffer.
    pub ring_available: Gauge,
    /// Padding runs so far (`uidgen_ring_padding_runs_total`).
    pub ring_padding_runs: Counter,
    /// Time units the ring runs ahead of the clock.
    pub ring_borrowed_units: Gauge,
    /// What the default space's worker ids sustain, and how far ahead it runs (issue 30).
    pub workers: WorkerMetrics,
    /// How long each space's time field lasts (`uidgen_time_field_runway_seconds`).
    pub runway: runway::RunwayMetrics,
    /// Each space's order mark across restarts (`uidgen_order_*`, issue 33).
    pub order: order::OrderMetrics,
    /// Each ordered tag's leader, term and forwarded calls (`uidgen_ordered_*`, issue 35).
    pub ordered: ordered::OrderedMetrics,
    /// This host's clock against the store's (`uidgen_clock_offset_seconds`, issue 33).
    pub clock: clock::ClockMetrics,
    /// IDs left in the current segment, per tag.
    pub segment_idle: Family<TagLabel, Gauge>,
    /// Current step per tag.
    pub segment_step: Family<TagLabel, Gauge>,
    /// Segments loaded from the database per tag (`uidgen_segment_loads_total`, the buffer's
    /// count copied in when scraped).
    pub segment_loads: Family<TagLabel, Counter>,
    /// Failed segment loads per tag (`uidgen_segment_load_failures_total`).
    pub segment_load_failures: Family<TagLabel, Counter>,
    /// Loads served from ranges a stopping server handed back, per tag
    /// (`uidgen_segment_reused_ranges_total`).
    pub segment_reused_ranges: Family<TagLabel, Counter>,
    /// The IDs in them (`uidgen_segment_reused_ids_total`): numbers a restart did not throw
    /// away.
    pub segment_reused_ids: Family<TagLabel, Counter>,
    /// What the sharded mode did, by event (`uidgen_sharded_events_total`, copied from its
    /// counters when scraped).
    pub sharded: Family<EventLabel, Counter>,
    /// Requests and IDs by caller token name (`auth.required`).
    pub callers: CallerFamilies,
    /// The figures of the worker id keeper's time reports, registered only when the keeper
    /// publishes them (ZooKeeper's), so other deployments do not export a permanent
    /// "disconnected".
    pub reports: Option<ReportMetrics>,
}

/// The default space's worker ids and the headroom they give, read from its
/// [`WorkerPool`](crate::workers::WorkerPool) when scraped: an operator sees the headroom
/// before callers wait.
#[derive(Debug, Default)]
pub struct WorkerMetrics {
    /// Worker ids the generator stamps with (`uidgen_worker_ids_held`).
    pub held: Gauge,
    /// IDs per second they sustain without borrowing (`uidgen_sustained_ids_per_second`).
    pub sustained: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// IDs per second taken, a moving average over about a second
    /// (`uidgen_demand_ids_per_second`).
    pub demand: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// How far the IDs' time runs ahead of the clock (`uidgen_borrowed_lead_seconds`).
    pub lead_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// The most it may run ahead (`uidgen_max_borrow_seconds`; -1: unbounded).
    pub max_borrow_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
}

impl WorkerMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "worker_ids_held",
            "Worker ids the default space's generator stamps with (more are claimed under load)",
            self.held.clone(),
        );
        registry.register(
            "sustained_ids_per_second",
            "IDs per second the held worker ids sustain without borrowing ahead of the clock",
            self.sustained.clone(),
        );
        registry.register(
            "demand_ids_per_second",
            "IDs per second taken from the generator (moving average over about a second)",
            self.demand.clone(),
        );
        registry.register(
            "borrowed_lead_seconds",
            "How far the IDs' time field runs ahead of the clock",
            self.lead_seconds.clone(),
        );
        registry.register(
            "max_borrow_seconds",
            "The most the IDs' time field may run ahead of the clock (-1: unbounded)",
            self.max_borrow_seconds.clone(),
        );
    }

    /// Copy in a pool's status.
    pub fn publish(&self, status: &crate::workers::PoolStatus) {
        self.held
            .set(i64::try_from(status.workers.len()).unwrap_or(i64::MAX));
        self.sustained.set(status.sustained_ids_per_second);
        self.demand.set(status.demand_ids_per_second);
        #[allow(clippy::cast_precision_loss)] // milliseconds far below 2^52
        {
            self.lead_seconds
                .set(status.borrowed_lead_ms as f64 / 1000.0);
            self.max_borrow_seconds
                .set(status.max_borrow_ms.map_or(-1.0, |ms| ms as f64 / 1000.0));
        }
    }
}

/// The figures of a keeper's time reports (ZooKeeper's: `uidgen_zk_*`), read from its status
/// when scraped.
#[derive(Debug, Default)]
pub struct ReportMetrics {
    /// 1 while the last report reached the coordinator, 0 during an outage.
    pub connected: Gauge,
    /// Reports that failed since start (the holder's own count, copied in).
    pub report_failures: Counter,
    /// Seconds since the last accepted report.
    pub last_report_age_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// 1 while the worker id may issue IDs (held, inside the reservation of its last accepted report).
    pub issuing: Gauge,
    /// Times the holder saw the coordinator lose data (the holder's own count, copied in).
    pub data_losses: Counter,
    /// Times the holder took its id up again under a new claim (the holder's count).
    pub reestablished: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Register every metric in a fresh registry.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("uidgen");
        let ids_issued = Family::<RouteLabel, Counter>::default();
        let errors = Family::<KindLabel, Counter>::default();
        let latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let grpc_latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        let waits = waits::WaitFamilies::default();
        let build = Family::<BuildLabel, Gauge>::default();
        build
            .get_or_create(&BuildLabel {
                version: env!("CARGO_PKG_VERSION"),
                os: std::env::consts::OS,
                arch: std::env::consts::ARCH,
            })
            .set(1);
        registry.register(
            "build_info",
            "The running build: always 1, its labels say which (version, os, arch)",
            build,
        );
        let grpc_calls = Family::<GrpcCallLabel, Counter>::default();
        let space_ids = Family::<SpaceLabel, Counter>::default();
        let segment_leases = Family::<ChannelLabel, Counter>::default();
        let segment_leased_ids = Family::<ChannelLabel, Counter>::default();
        let ring_capacity = Gauge::default();
        let ring_available = Gauge::default();
        let ring_padding_runs = Counter::default();
        let ring_borrowed_units = Gauge::default();
        let segment_idle = Family::<TagLabel, Gauge>::default();
        let segment_step = Family::<TagLabel, Gauge>::default();
        let segment_loads = Family::<TagLabel, Counter>::default();
        let segment_load_failures = Family::<TagLabel, Counter>::default();
        let segment_reused_ranges = Family::<TagLabel, Counter>::default();
        let segment_reused_ids = Family::<TagLabel, Counter>::default();
        let sharded = Family::<EventLabel, Counter>::default();
        registry.register("ids_issued", "IDs handed out, by route", ids_issued.clone());
        registry.register("errors", "Error responses, by kind", errors.clone());
        registry.register(
            "space_ids_issued",
            "IDs taken from a named space's generator, by space (the default space's are the \
             per-route counts)",
            space_ids.clone(),
        );
        registry.register(
            "http_request_duration_seconds",
            "Request latency, by route",
            latency.clone(),
        );
        registry.register(
            "requests_waiting",
            "Requests waiting for IDs now (ring empty, segment loading, clock wait), by route",
            waits.waiting.clone(),
        );
        registry.register(
            "request_wait_seconds",
            "How long requests waited for IDs, by route (only requests that could not be \
             answered at once)",
            waits.wait.clone(),
        );
        registry.register(
            "grpc_calls",
            "gRPC calls answered, by route (the method's path) and status code",
            grpc_calls.clone(),
        );
        registry.register(
            "grpc_request_duration_seconds",
            "gRPC call latency, by route (the method's path); a stream until it is opened",
            grpc_latency.clone(),
        );
        registry.register(
            "segment_leases",
            "Segment ranges leased to callers, by channel (http, grpc)",
            segment_leases.clone(),
        );
        registry.register(
            "segment_leased_ids",
            "Numbers in the segment ranges leased to callers, by channel (http, grpc)",
            segment_leased_ids.clone(),
        );
        registry.register(
            "ring_capacity",
            "Slots in the ring buffer",
            ring_capacity.clone(),
        );
        registry.register(
            "ring_available",
            "IDs ready to take in the ring buffer",
            ring_available.clone(),
        );
        // Counters whose count another part owns (the ring, a tag's buffer, the sharded
        // service): a scrape copies the count in (`copy`), so the registry adds `_total`.
        registry.register(
            "ring_padding_runs",
            "Padding runs of the ring buffer since start",
            ring_padding_runs.clone(),
        );
        registry.register(
            "ring_borrowed_units",
            "Time units the ring buffer runs ahead of the clock",
            ring_borrowed_units.clone(),
        );
        let workers = WorkerMetrics::default();
        workers.register(&mut registry);
        let runway = runway::RunwayMetrics::default();
        runway.register(&mut registry);
        let order = order::OrderMetrics::default();
        order.register(&mut registry);
        let ordered = ordered::OrderedMetrics::default();
        ordered.register(&mut registry);
        let clock = clock::ClockMetrics::default();
        clock.register(&mut registry);
        registry.register(
            "segment_idle",
            "IDs left in the current segment, by tag",
            segment_idle.clone(),
        );
        registry.register(
            "segment_step",
            "Current segment step, by tag",
            segment_step.clone(),
        );
        // A tag evicted and re-created counts from zero again: a counter reset, which
        // Prometheus's rate() takes in its stride.
        registry.register(
            "segment_loads",
            "Segments loaded from the database, by tag",
            segment_loads.clone(),
        );
        registry.register(
            "segment_load_failures",
            "Segment loads that failed (database error, timeout, exhausted tag), by tag",
            segment_load_failures.clone(),
        );
        registry.register(
            "segment_reused_ranges",
            "Segment loads served from ranges a stopping server handed back \
             (leaf_alloc_returned) instead of a new segment, by tag",
            segment_reused_ranges.clone(),
        );
        registry.register(
            "segment_reused_ids",
            "IDs in the handed-back ranges this server loaded (numbers a restart did not throw \
             away), by tag",
            segment_reused_ids.clone(),
        );
        registry.register(
            "sharded_events",
            "Sharded mode since start, by event: pops, ids_popped, empty_pops, refills, \
             numbers_pushed, refill_failures, lock_busy, reconnects, purges, removed_lists, \
             corrupt_entries, restored_lists",
            sharded.clone(),
        );
        let callers = CallerFamilies::default();
        registry.register(
            "caller_requests",
            "Requests let through by a caller token, by the token's name",
            callers.requests.clone(),
        );
        registry.register(
            "caller_ids",
            "IDs handed to a caller, by its token's name",
            callers.ids.clone(),
        );
        Self {
            registry,
            callers,
            ids_issued,
            errors,
            latency,
            grpc_latency,
            waits,
            issued_total: Counter::default(),
            grpc_calls,
            space_ids,
            segment_leases,
            segment_leased_ids,
            ring_capacity,
            ring_available,
            ring_padding_runs,
            ring_borrowed_units,
            workers,
            runway,
            order,
            ordered,
            clock,
            segment_idle,
            segment_step,
            segment_loads,
            segment_load_failures,
            segment_reused_ranges,
            segment_reused_ids,
            sharded,
            reports: None,
        }
    }

    /// Register the metrics of a keeper's time reports, named by the keeper
    /// (`uidgen_{prefix}_connected`, `_report_failures_total`, `_last_report_age_seconds`,
    /// `_issuing`; ZooKeeper's prefix is `zk`).
    pub fn register_reports(&mut self, reports: &KeeperReports) {
        let (prefix, authority) = (reports.metrics_prefix, reports.authority);
        let figures = ReportMetrics::default();
        self.registry.register(
            format!("{prefix}_connected"),
            format!("1 while the worker id's last time report reached {authority}"),
            figures.connected.clone(),
        );
        // A counter: the registry adds the `_total` suffix.
        self.registry.register(
            format!("{prefix}_report_failures"),
            format!("Time reports to {authority} that failed since start"),
            figures.report_failures.clone(),
        );
        self.registry.register(
            format!("{prefix}_last_report_age_seconds"),
            format!("Seconds since {authority} last accepted a time report"),
            figures.last_report_age_seconds.clone(),
        );
        self.registry.register(
            format!("{prefix}_issuing"),
            format!(
                "1 while the {authority} worker id may issue IDs (held, inside its last accepted \
                 reservation)"
            ),
            figures.issuing.clone(),
        );
        self.registry.register(
            format!("{prefix}_data_losses"),
            format!(
                "Times the worker id's holder saw {authority} lose data (its revision or zxid went \
                 back, or the holder's own record vanished); ids it forgot are fenced"
            ),
            figures.data_losses.clone(),
        );
        self.registry.register(
            format!("{prefix}_reestablished"),
            format!(
                "Times the holder took its worker id up again in {authority} after its claim \
                 vanished, without a gap in issuing"
            ),
            figures.reestablished.clone(),
        );
        self.reports = Some(figures);
    }

    /// Publish a keeper's status (read when scraped); nothing unless its reports were
    /// registered ([`register_reports`](Self::register_reports)).
    pub fn keeper_status(&self, status: &KeeperStatus) {
        let Some(figures) = &self.reports else {
            return;
        };
        let health = &status.health;
        figures.connected.set(i64::from(health.connected));
        // The keeper owns the count; fetch_max copies it in without double counting when two
        // scrapes race. Relaxed: a monotonic figure, nothing is ordered by it.
        figures
            .report_failures
            .inner()
            .fetch_max(health.failures, std::sync::atomic::Ordering::Relaxed);
        if let Some(reports) = &status.reports {
            // As report_failures: the keeper's counts, copied in.
            figures
                .data_losses
                .inner()
                .fetch_max(reports.data_losses, std::sync::atomic::Ordering::Relaxed);
            figures
                .reestablished
                .inner()
                .fetch_max(reports.reestablished, std::sync::atomic::Ordering::Relaxed);
        }
        let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
        let age_ms = health
            .last_report_ms
            .map_or(0, |last| now.saturating_sub(last));
        #[allow(clippy::cast_precision_loss)] // milliseconds well below 2^52
        figures.last_report_age_seconds.set(age_ms as f64 / 1000.0);
        figures.issuing.set(i64::from(status.issuing(now)));
    }

    /// The metrics of `route` (a route pattern), created if new: the HTTP layer calls this once
    /// per route and keeps the handles. Each call leaks the route's wait figures
    /// ([`waits::WaitFamilies::route`]), so call it once per route, not per request.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// let route = metrics.route("/genid");
    /// route.issued(3);
    /// route.latency.observe(0.000_2);
    /// assert!(metrics.encode().contains(r#"uidgen_ids_issued_total{route="/genid"} 3"#));
    /// ```
    pub fn route(&self, route: &str) -> RouteMetrics {
        let label = RouteLabel {
            route: route.to_owned(),
        };
        RouteMetrics {
            name: Arc::from(route),
            latency: self.latency.get_or_create_owned(&label),
            waits: self.waits.route(route),
            issued: OnceLock::new(),
            issued_family: self.ids_issued.clone(),
            issued_total: self.issued_total.clone(),
            label,
        }
    }

    /// The issued-IDs counter of `route` alone (the gRPC methods, which have no HTTP latency),
    /// for callers that keep it.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// metrics.issued_counter("/uidgen.v1.IdService/NextIds").add(5);
    /// assert_eq!(metrics.issued_total(), 5);
    /// ```
    pub fn issued_counter(&self, route: &str) -> IssuedCounter {
        self.issued_counter_for(&RouteLabel {
            route: route.to_owned(),
        })
    }

    fn issued_counter_for(&self, label: &RouteLabel) -> IssuedCounter {
        IssuedCounter {
            route: self.ids_issued.get_or_create_owned(label),
            total: self.issued_total.clone(),
        }
    }

    /// `uidgen_space_ids_issued_total{space=...}` of the space `space`, for the space to keep.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// metrics.space_counter("order").inc_by(3);
    /// assert!(metrics.encode().contains(r#"uidgen_space_ids_issued_total{space="order"} 3"#));
    /// ```
    pub fn space_counter(&self, space: &str) -> Counter {
        self.space_ids.get_or_create_owned(&SpaceLabel {
            space: space.to_owned(),
        })
    }

    /// IDs handed out since start, every route together.
    pub fn issued_total(&self) -> u64 {
        self.issued_total.get()
    }

    /// Count one error response of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Count one gRPC call of `route` (the method's path) answered with `code` (a status
    /// code's name).
    pub fn grpc_call(&self, route: &'static str, code: &'static str) {
        self.grpc_calls
            .get_or_create(&GrpcCallLabel { route, code })
            .inc();
    }

    /// The latency histogram and wait figures of the gRPC method at `route` (its path), for
    /// the service to keep (once: the wait figures are leaked, as [`Metrics::route`]'s are).
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// let (latency, _waits) = metrics.grpc_route("/uidgen.v1.IdService/NextIds");
    /// latency.observe(0.000_2);
    /// let text = metrics.encode();
    /// assert!(text.contains(
    ///     r#"uidgen_grpc_request_duration_seconds_count{route="/uidgen.v1.IdService/NextIds"} 1"#
    /// ));
    /// ```
    pub fn grpc_route(&self, route: &str) -> (Histogram, &'static waits::RouteWaits) {
        let label = RouteLabel {
            route: route.to_owned(),
        };
        (
            self.grpc_latency.get_or_create_owned(&label),
            self.waits.route(route),
        )
    }

    /// Count one segment lease of `size` numbers handed out through `channel`.
    pub fn segment_lease(&self, channel: &'static str, size: u64) {
        let label = ChannelLabel { channel };
        self.segment_leases.get_or_create(&label).inc();
        self.segment_leased_ids.get_or_create(&label).inc_by(size);
    }

    /// Publish one tag's segment state (read when scraped).
    pub fn segment_state(&self, state: &uidgen_segment::TagState) {
        let label = TagLabel {
            tag: state.tag.clone(),
        };
        self.segment_step.get_or_create(&label).set(state.step);
        let current = &state.segments[state.pos.min(1)];
        self.segment_idle.get_or_create(&label).set(current.idle);
        Self::copy(&self.segment_loads.get_or_create(&label), state.loads);
        Self::copy(
            &self.segment_load_failures.get_or_create(&label),
            state.load_failures,
        );
        Self::copy(
            &self.segment_reused_ranges.get_or_create(&label),
            state.reused_ranges,
        );
        Self::copy(
            &self.segment_reused_ids.get_or_create(&label),
            state.reused_ids,
        );
    }

    /// Publish the sharded mode's counters (read when scraped).
    pub fn sharded_stats(&self, stats: &uidgen_sharded::StatsSnapshot) {
        let events = [
            ("pops", stats.pops),
            ("ids_popped", stats.ids_popped),
            ("empty_pops", stats.empty_pops),
            ("refills", stats.refills),
            ("numbers_pushed", stats.numbers_pushed),
            ("refill_failures", stats.refill_failures),
            ("lock_busy", stats.lock_busy),
            ("reconnects", stats.reconnects),
            ("purges", stats.purges),
            ("removed_lists", stats.removed_lists),
            ("corrupt_entries", stats.corrupt_entries),
            ("restored_lists", stats.restored_lists),
        ];
        for (event, value) in events {
            Self::copy(&self.sharded.get_or_create(&EventLabel { event }), value);
        }
    }

    /// Set a counter to a count its owner keeps (read when scraped). Relaxed: a monitoring
    /// figure, nothing is ordered by it.
    ///
    /// ```
    /// use uidgen_server::metrics::Metrics;
    /// let metrics = Metrics::new();
    /// Metrics::copy(&metrics.ring_padding_runs, 7);
    /// assert!(metrics.encode().contains("# TYPE uidgen_ring_padding_runs counter"));
    /// assert!(metrics.encode().contains("uidgen_ring_padding_runs_total 7"));
    /// ```
    pub fn copy(counter: &Counter, value: u64) {
        counter.inner().store(value, Ordering::Relaxed);
    }

    /// Set a gauge from an unsigned value, saturating at `i64::MAX`.
    pub fn set(gauge: &Gauge, value: u64) {
        gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition, the process's figures (read now) included.
    ///
    /// ```
    /// let text = uidgen_server::metrics::Metrics::new().encode();
    /// assert!(text.contains(&format!(
    ///     r#"uidgen_build_info{{version="{}","#,
    ///     env!("CARGO_PKG_VERSION")
    /// )));
    /// assert!(text.ends_with("# EOF\n"));
    /// ```
    pub fn encode(&self) -> String {
        use prometheus_client::encoding::text;
        let mut out = String::new();
        // Writing to a String cannot fail; an error here would be a bug in the encoder.
        if text::encode_registry(&mut out, &self.registry).is_err() {
            out.clear();
        }
        process::ProcessFigures::read().encode(&mut out);
        // As above: a String takes any write.
        let _ = text::encode_eof(&mut out);
        out
    }
}
