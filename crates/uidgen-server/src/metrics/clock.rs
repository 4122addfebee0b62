//! `uidgen_clock_offset_seconds{source}` and `uidgen_clock_offset_uncertainty_seconds{source}`:
//! how far this host's clock is from the store's or etcd's, as the clock watch last measured it
//! ([`crate::service::clock_watch`], issue 33).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label set of one clock compared with this host's.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabel {
    /// `store` (PostgreSQL's or MariaDB's clock) or `etcd`.
    pub source: &'static str,
}

type Seconds = Gauge<f64, std::sync::atomic::AtomicU64>;

/// The clock gauges, one per source compared.
#[derive(Debug, Clone, Default)]
pub struct ClockMetrics {
    offset: Family<SourceLabel, Seconds>,
    uncertainty: Family<SourceLabel, Seconds>,
}

impl ClockMetrics {
    /// Register the families in `registry`.
    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "clock_offset_seconds",
            "The source's clock minus this host's, last measured (positive: this host is behind)",
            self.offset.clone(),
        );
        registry.register(
            "clock_offset_uncertainty_seconds",
            "How far the true offset may be from uidgen_clock_offset_seconds (half the round \
             trip plus the source's resolution)",
            self.uncertainty.clone(),
        );
    }

    /// Publish one source's reading.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// metrics.clock.publish("store", -7_250, 3);
    /// let text = metrics.encode();
    /// assert!(text.contains(r#"uidgen_clock_offset_seconds{source="store"} -7.25"#));
    /// assert!(text.contains(r#"uidgen_clock_offset_uncertainty_seconds{source="store"} 0.003"#));
    /// ```
    pub fn publish(&self, source: &'static str, offset_ms: i64, uncertainty_ms: u64) {
        let label = SourceLabel { source };
        #[allow(clippy::cast_precision_loss)] // ms to seconds; a gauge, not an identity
        {
            self.offset
                .get_or_create(&label)
                .set(offset_ms as f64 / 1000.0);
            self.uncertainty
                .get_or_create(&label)
                .set(uncertainty_ms as f64 / 1000.0);
        }
    }
}
