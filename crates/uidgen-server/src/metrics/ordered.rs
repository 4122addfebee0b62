//! `uidgen_ordered_*{tag}`: each ordered tag's leader and term on this server, and the calls it
//! forwarded (issue 35), published from [`OrderedView`]s when scraped.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::ordered::OrderedView;

/// Label set naming an ordered tag (tags an admin marked: never client input).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OrderedLabel {
    /// The biz tag.
    pub tag: String,
}

/// `uidgen_ordered_*{tag}`.
#[derive(Debug, Clone, Default)]
pub struct OrderedMetrics {
    leading: Family<OrderedLabel, Gauge>,
    term: Family<OrderedLabel, Gauge>,
    forwarded: Family<OrderedLabel, Counter<u64, AtomicU64>>,
    batches: Family<OrderedLabel, Counter<u64, AtomicU64>>,
    issued: Family<OrderedLabel, Counter<u64, AtomicU64>>,
    terms: Family<OrderedLabel, Counter<u64, AtomicU64>>,
}

impl OrderedMetrics {
    /// Register the families in `registry`.
    pub(crate) fn register(&self, registry: &mut Registry) {
        registry.register(
            "ordered_leading",
            "1 while this server leads the ordered tag (issues its IDs), else 0",
            self.leading.clone(),
        );
        registry.register(
            "ordered_term",
            "The ordered tag's current term, as this server last read it",
            self.term.clone(),
        );
        registry.register(
            "ordered_forwarded_calls",
            "Calls of the ordered tag this server forwarded to its leader",
            self.forwarded.clone(),
        );
        registry.register(
            "ordered_forward_batches",
            "Forwards sent to the ordered tag's leader (each carries one or more calls)",
            self.batches.clone(),
        );
        registry.register(
            "ordered_issued_ids",
            "IDs of the ordered tag this server issued as its leader",
            self.issued.clone(),
        );
        registry.register(
            "ordered_terms_led",
            "Terms of the ordered tag this server began as its leader",
            self.terms.clone(),
        );
    }

    /// Publish every ordered tag's view.
    ///
    /// ```
    /// let metrics = uidgen_server::metrics::Metrics::new();
    /// metrics.ordered.publish(&[]); // no ordered tag: no series
    /// assert!(!metrics.encode().contains("uidgen_ordered_term{"));
    /// ```
    pub fn publish(&self, views: &[(String, OrderedView)]) {
        for (tag, view) in views {
            let label = OrderedLabel { tag: tag.clone() };
            self.leading
                .get_or_create(&label)
                .set(i64::from(view.leading));
            self.term.get_or_create(&label).set(view.term);
            copy(&self.forwarded, &label, view.forwarded_calls);
            copy(&self.batches, &label, view.forward_batches);
            copy(&self.issued, &label, view.issued);
            copy(&self.terms, &label, view.terms_led);
        }
    }
}

/// Set a counter to the count kept elsewhere (it only grows).
fn copy(family: &Family<OrderedLabel, Counter<u64, AtomicU64>>, label: &OrderedLabel, to: u64) {
    let counter = family.get_or_create(label);
    let now = counter.get();
    if to > now {
        counter.inc_by(to - now);
    }
}
