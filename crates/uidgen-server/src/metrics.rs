//! Prometheus metrics: IDs issued by route, errors by kind, request latency, and the state of the
//! ring buffer and segments, read when scraped.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Label set naming a route (its matched path pattern).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    /// The route pattern, e.g. `/v1/ids`.
    pub route: String,
}

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

type HistogramFamily = Family<RouteLabel, Histogram, fn() -> Histogram>;

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
    /// Slots in the ring buffer.
    pub ring_capacity: Gauge,
    /// IDs ready to take in the ring buffer.
    pub ring_available: Gauge,
    /// Padding runs so far.
    pub ring_padding_runs: Gauge,
    /// Time units the ring runs ahead of the clock.
    pub ring_borrowed_units: Gauge,
    /// IDs left in the current segment, per tag.
    pub segment_idle: Family<TagLabel, Gauge>,
    /// Current step per tag.
    pub segment_step: Family<TagLabel, Gauge>,
    /// Segments loaded from the database per tag (a count read from the buffer when scraped).
    pub segment_loads: Family<TagLabel, Gauge>,
    /// Failed segment loads per tag.
    pub segment_load_failures: Family<TagLabel, Gauge>,
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
        let ring_capacity = Gauge::default();
        let ring_available = Gauge::default();
        let ring_padding_runs = Gauge::default();
        let ring_borrowed_units = Gauge::default();
        let segment_idle = Family::<TagLabel, Gauge>::default();
        let segment_step = Family::<TagLabel, Gauge>::default();
        let segment_loads = Family::<TagLabel, Gauge>::default();
        let segment_load_failures = Family::<TagLabel, Gauge>::default();
        registry.register("ids_issued", "IDs handed out, by route", ids_issued.clone());
        registry.register("errors", "Error responses, by kind", errors.clone());
        registry.register(
            "http_request_duration_seconds",
            "Request latency, by route",
            latency.clone(),
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
        // Gauges, not counters: the buffer owns the count and a scrape copies it; a tag evicted
        // and re-created starts again at zero, which a counter may not do.
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
        Self {
            registry,
            ids_issued,
            errors,
            latency,
            ring_capacity,
            ring_available,
            ring_padding_runs,
            ring_borrowed_units,
            segment_idle,
            segment_step,
            segment_loads,
            segment_load_failures,
        }
    }

    /// Count `n` IDs issued on `route`.
    pub fn issued(&self, route: &str, n: u64) {
        self.ids_issued
            .get_or_create(&RouteLabel {
                route: route.to_owned(),
            })
            .inc_by(n);
    }

    /// Count one error response of `kind`.
    pub fn error(&self, kind: &str) {
        self.errors
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// Record one request's latency.
    pub fn observe_latency(&self, route: String, seconds: f64) {
        self.latency
            .get_or_create(&RouteLabel { route })
            .observe(seconds);
    }

    /// Publish one tag's segment state (read when scraped).
    pub fn segment_state(&self, state: &uidgen_segment::TagState) {
        let label = TagLabel {
            tag: state.tag.clone(),
        };
        self.segment_step.get_or_create(&label).set(state.step);
        let current = &state.segments[state.pos.min(1)];
        self.segment_idle.get_or_create(&label).set(current.idle);
        Self::set(&self.segment_loads.get_or_create(&label), state.loads);
        Self::set(
            &self.segment_load_failures.get_or_create(&label),
            state.load_failures,
        );
    }

    /// Set a gauge from an unsigned value, saturating at `i64::MAX`.
    pub fn set(gauge: &Gauge, value: u64) {
        gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail; an error here would be a bug in the encoder.
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
