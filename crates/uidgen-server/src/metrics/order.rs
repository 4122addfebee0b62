//! `uidgen_order_*{space}`: each ID space's order mark across restarts (issue 33 item 1),
//! published from the readings `crate::order` takes of its fences.

use std::sync::atomic::Ordering;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use uidgen_worker::OrderMarkStatus;

use super::label::SpaceLabel;

/// `uidgen_order_*{space}`: each space's order mark, read from its fence when scraped.
#[derive(Debug, Clone, Default)]
pub struct OrderMetrics {
    lead: Family<SpaceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    start_delay: Family<SpaceLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    writes: Family<SpaceLabel, Counter>,
    failures: Family<SpaceLabel, Counter>,
    past_mark: Family<SpaceLabel, Gauge>,
}

impl OrderMetrics {
    /// Register the families in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "order_mark_lead_seconds",
            "How far the ID space's order mark this server has written runs ahead of the \
             clock (negative: its keeper, the store, etcd or ZooKeeper, has not accepted a mark \
             for that long; see uidgen_order_mark_passed)",
            self.lead.clone(),
        );
        registry.register(
            "order_start_delay_seconds",
            "How long this server's start waited for its clock to reach the space's order mark",
            self.start_delay.clone(),
        );
        registry.register(
            "order_mark_writes",
            "Order marks this server wrote for the space",
            self.writes.clone(),
        );
        registry.register(
            "order_mark_write_failures",
            "Order mark writes that failed (the store, etcd or ZooKeeper did not answer)",
            self.failures.clone(),
        );
        registry.register(
            "order_mark_passed",
            "1 while this server issues past the order mark its keeper last accepted (the store, \
             etcd or ZooKeeper does not answer): a restart before it answers may start below \
             those IDs",
            self.past_mark.clone(),
        );
    }

    /// Publish every space's reading (`uidgen_server::order::readings`: the fences this
    /// process opened) at `now_ms`.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// metrics.order.publish(0, &uidgen_server::order::readings()); // none opened: no series
    /// assert!(!metrics.encode().contains("uidgen_order_mark_lead_seconds{"));
    /// ```
    pub fn publish(&self, now_ms: u64, readings: &[(String, OrderMarkStatus, Duration)]) {
        for (space, status, waited) in readings {
            let label = SpaceLabel {
                space: space.clone(),
            };
            self.past_mark
                .get_or_create(&label)
                .set(i64::from(status.past_mark));
            #[allow(clippy::cast_precision_loss)] // ms to seconds; a gauge, not an identity
            let lead = (status.limit_ms as f64 - now_ms as f64) / 1000.0;
            self.lead.get_or_create(&label).set(lead);
            self.start_delay
                .get_or_create(&label)
                .set(waited.as_secs_f64());
            // Relaxed (two): counts copied from the fence, nothing is ordered by them.
            self.writes
                .get_or_create(&label)
                .inner()
                .store(status.writes, Ordering::Relaxed);
            (self.failures.get_or_create(&label).inner()).store(status.failures, Ordering::Relaxed);
        }
    }
}
