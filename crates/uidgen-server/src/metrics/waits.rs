//! Callers waiting for IDs: `uidgen_requests_waiting{route}` (how many wait now) and
//! `uidgen_request_wait_seconds{route}` (how long each waited), and a warning in the log when a
//! caller waits past [`SLOW_WAIT`].
//!
//! Invariants:
//! - Only a caller that could not be answered on the first look counts: a request the ring or
//!   the segment answers at once takes no lock, allocates nothing and touches no atomic here
//!   ([`Waited`] starts counting on its future's first `Pending`).
//! - Every wait that starts ends exactly once (the [`Wait`] guard's `Drop`), whether the
//!   request is answered, fails or is cancelled, so the gauge returns to 0.
//! - A route's series exist from its first wait on: a route that never waits has none.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

use super::label::RouteLabel;

/// A wait longer than this is logged (rate-limited): a caller stalled this long is an
/// incident in a service that answers in microseconds.
pub const SLOW_WAIT: Duration = Duration::from_secs(1);

/// At most one slow-wait warning per this interval; the ones in between are counted into the
/// next warning, so a storm of stalled callers costs a few log lines, not one per request.
const WARN_EVERY: Duration = Duration::from_secs(10);

type WaitHistograms = Family<RouteLabel, Histogram, fn() -> Histogram>;

fn wait_histogram() -> Histogram {
    // 1 ms to ~65 s: a ring refill takes milliseconds, a clock wait up to a time unit (1 s on
    // `baidu`), a stalled segment load up to its timeout.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// The families behind every route's wait figures, shared by handle.
#[derive(Debug, Clone)]
pub struct WaitFamilies {
    /// `uidgen_requests_waiting{route}`.
    pub(super) waiting: Family<RouteLabel, Gauge>,
    /// `uidgen_request_wait_seconds{route}`.
    pub(super) wait: WaitHistograms,
    /// When the last slow-wait warning was logged, and how many were held back since.
    limiter: Arc<WarnLimiter>,
}

impl Default for WaitFamilies {
    fn default() -> Self {
        Self {
            waiting: Family::default(),
            wait: Family::new_with_constructor(wait_histogram),
            limiter: Arc::default(),
        }
    }
}

impl WaitFamilies {
    /// The wait figures of `route` (an HTTP route pattern or a gRPC method path), for the
    /// caller to keep for good.
    ///
    /// Leaked, so that a request names its route's figures with a plain reference: with an
    /// `Arc`, every routed request would pay an increment and a decrement on a count all
    /// threads share. A server makes one per route pattern and gRPC method, once (the HTTP
    /// service when a pattern is first asked, the gRPC service when it is built), so what
    /// stays is bounded by the routing table.
    pub fn route(&self, route: &str) -> &'static RouteWaits {
        Box::leak(Box::new(RouteWaits {
            label: RouteLabel {
                route: route.to_owned(),
            },
            series: OnceLock::new(),
            families: self.clone(),
        }))
    }

    /// Figures that no registry exports: for a request whose route is unknown, which cannot
    /// happen while the route table holds its `unmatched` entry.
    pub fn detached() -> &'static RouteWaits {
        static DETACHED: OnceLock<&'static RouteWaits> = OnceLock::new();
        DETACHED.get_or_init(|| WaitFamilies::default().route("detached"))
    }
}

/// One route's wait figures, created on its first wait and kept.
#[derive(Debug)]
pub struct RouteWaits {
    label: RouteLabel,
    series: OnceLock<(Gauge, Histogram)>,
    families: WaitFamilies,
}

impl RouteWaits {
    /// The route's label value, for log lines.
    pub fn route(&self) -> &str {
        &self.label.route
    }

    /// Start counting a caller of this route as waiting, until the guard drops.
    pub fn begin(&'static self) -> Wait {
        let (waiting, _) = self.series();
        waiting.inc();
        Wait {
            route: self,
            since: Instant::now(),
        }
    }

    fn series(&self) -> &(Gauge, Histogram) {
        self.series.get_or_init(|| {
            (
                self.families.waiting.get_or_create_owned(&self.label),
                self.families.wait.get_or_create_owned(&self.label),
            )
        })
    }
}

/// A caller waiting for IDs: counted in `uidgen_requests_waiting` while it lives, its wait
/// observed in `uidgen_request_wait_seconds` when it drops.
#[derive(Debug)]
pub struct Wait {
    route: &'static RouteWaits,
    since: Instant,
}

impl Drop for Wait {
    fn drop(&mut self) {
        let waited = self.since.elapsed();
        let (waiting, wait) = self.route.series();
        waiting.dec();
        wait.observe(waited.as_secs_f64());
        if waited >= SLOW_WAIT {
            self.route.families.limiter.slow(self.route.route(), waited);
        }
    }
}

/// Lets one slow-wait warning through per [`WARN_EVERY`].
#[derive(Debug, Default)]
struct WarnLimiter {
    /// Milliseconds since `origin` when the last warning was logged (0: never).
    last_ms: AtomicU64,
    /// Slow waits not logged since the last warning.
    held_back: AtomicU64,
    origin: OnceLock<Instant>,
}

impl WarnLimiter {
    fn slow(&self, route: &str, waited: Duration) {
        let origin = *self.origin.get_or_init(Instant::now);
        // +1 so that a warning in the first millisecond is not mistaken for "never".
        let now_ms = u64::try_from(origin.elapsed().as_millis())
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        if let Some(held_back) = self.let_through(now_ms) {
            tracing::warn!(
                route,
                waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                more_since_last_warning = held_back,
                "a caller waited {waited:.1?} for IDs (the ring or segment could not answer \
                 at once; see uidgen_requests_waiting and uidgen_request_wait_seconds)"
            );
        }
    }

    /// Whether a warning at `now_ms` (milliseconds since `origin`, at least 1) may be logged:
    /// `Some` with how many were held back since the last, or `None` (counted as held back).
    fn let_through(&self, now_ms: u64) -> Option<u64> {
        let every = u64::try_from(WARN_EVERY.as_millis()).unwrap_or(u64::MAX);
        // Relaxed: a log throttle; a race at worst lets one extra line through or holds one
        // back, and no other memory is published through it.
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now_ms.saturating_sub(last) >= every;
        // Relaxed: as above; the CAS only decides which of racing waiters logs.
        if due
            && self
                .last_ms
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // Relaxed: a tally for the log line, read and reset by whoever logs.
            Some(self.held_back.swap(0, Ordering::Relaxed))
        } else {
            // Relaxed: as above.
            self.held_back.fetch_add(1, Ordering::Relaxed);
            None
        }
    }
}

tokio::task_local! {
    /// The wait figures of the route whose request this task answers, set by the HTTP service
    /// around a routed request and by the gRPC service around a call.
    static ROUTE: &'static RouteWaits;
}

/// Run `request` as a request of `route`: the waits inside it count under that route.
pub fn scoped<F: Future>(
    route: &'static RouteWaits,
    request: F,
) -> tokio::task::futures::TaskLocalFuture<&'static RouteWaits, F> {
    ROUTE.scope(route, request)
}

/// `future`, counted as a wait of the current route (see [`scoped`]) from its first `Pending`
/// on; one that is ready at once costs nothing more than the poll.
pub fn waited<F: Future>(future: F) -> Waited<F> {
    Waited {
        inner: future,
        wait: WaitState::Fresh,
    }
}

enum WaitState {
    /// Not pending yet.
    Fresh,
    /// Pending, counted.
    Counting(#[allow(dead_code, reason = "held for its Drop, which ends the wait")] Wait),
    /// Pending outside any route (the embedded library, a test): nothing to count into.
    Uncounted,
}

pin_project_lite::pin_project! {
    /// A future counted as a caller's wait for IDs once it pends: see [`waited`].
    pub struct Waited<F> {
        #[pin]
        inner: F,
        wait: WaitState,
    }
}

impl<F: Future> Future for Waited<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        match this.inner.poll(cx) {
            Poll::Ready(output) => {
                // Dropping the guard ends the wait.
                *this.wait = WaitState::Uncounted;
                Poll::Ready(output)
            }
            Poll::Pending => {
                if matches!(this.wait, WaitState::Fresh) {
                    *this.wait = ROUTE
                        .try_with(|route| route.begin())
                        .map_or(WaitState::Uncounted, WaitState::Counting);
                }
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_future_ready_at_once_is_not_a_wait_and_one_that_pends_is() {
        let families = WaitFamilies::default();
        let route = families.route("/v1/ids");
        scoped(route, waited(async {})).await;
        assert!(route.series.get().is_none(), "a ready future made series");
        scoped(route, waited(tokio::task::yield_now())).await;
        let (waiting, wait) = route.series.get().expect("the wait made its series");
        assert_eq!(waiting.get(), 0, "the wait ended");
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("w", "", wait.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("w_count 1"), "{text}");
    }

    #[test]
    fn one_slow_wait_warning_goes_through_per_interval_and_the_rest_are_counted_into_the_next() {
        let limiter = WarnLimiter::default();
        let every = u64::try_from(WARN_EVERY.as_millis()).unwrap();
        assert_eq!(limiter.let_through(1), Some(0));
        assert_eq!(limiter.let_through(2), None);
        assert_eq!(limiter.let_through(every), None);
        assert_eq!(limiter.let_through(1 + every), Some(2));
        assert_eq!(limiter.let_through(2 + every), None);
    }

    #[tokio::test]
    async fn a_cancelled_wait_leaves_the_gauge_at_zero() {
        let families = WaitFamilies::default();
        let route = families.route("/genid");
        let pending = scoped(route, waited(std::future::pending::<()>()));
        let cancelled = tokio::time::timeout(Duration::from_millis(1), pending).await;
        assert!(cancelled.is_err());
        assert_eq!(route.series.get().unwrap().0.get(), 0);
    }
}
