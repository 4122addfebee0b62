//! `uidgen_time_field_runway_seconds{space, basis}`: how long each space's time field lasts
//! (issue 33), read when scraped from [`crate::service::runway`].

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set of one runway figure: the space (a configuration name) and which figure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RunwayLabel {
    /// The ID space: `default`, or a `[spaces.<name>]` name.
    pub space: String,
    /// `clock`: time left at today's rate; `lead`: from the furthest instant already issued.
    pub basis: &'static str,
}

/// The runway gauges, one per space and basis.
#[derive(Debug, Clone, Default)]
pub struct RunwayMetrics {
    seconds: Family<RunwayLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
}

impl RunwayMetrics {
    /// Register the family in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "time_field_runway_seconds",
            "Seconds until the space's time field runs out: basis=clock at today's rate, \
             basis=lead from the furthest instant already issued (the borrowed lead's end)",
            self.seconds.clone(),
        );
    }

    /// Publish one space's reading: the milliseconds left at today's rate and at the current
    /// borrowed lead (`RunwayInfo`'s `left_at_clock_ms` and `left_at_lead_ms`), as plain
    /// figures so that metrics need nothing of the service.
    ///
    /// ```
    /// use uidgen_core::{Layout, SystemClock, DefaultUidGenerator};
    /// use uidgen_server::service::runway::RunwayInfo;
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// let generator = DefaultUidGenerator::new(Layout::baidu_legacy()?, 1, SystemClock)?;
    /// let info = RunwayInfo::of(&generator, 1_800_000_000_000, std::time::Duration::ZERO);
    /// metrics.runway.publish("default", info.left_at_clock_ms, info.left_at_lead_ms);
    /// let text = metrics.encode();
    /// assert!(text.contains(r#"uidgen_time_field_runway_seconds{space="default",basis="lead"} 0.0"#));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn publish(&self, space: &str, left_at_clock_ms: u64, left_at_lead_ms: u64) {
        for (basis, ms) in [("clock", left_at_clock_ms), ("lead", left_at_lead_ms)] {
            let label = RunwayLabel {
                space: space.to_owned(),
                basis,
            };
            #[allow(clippy::cast_precision_loss)] // ms to seconds; a gauge, not an identity
            self.seconds.get_or_create(&label).set(ms as f64 / 1000.0);
        }
    }
}
