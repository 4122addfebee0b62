//! The one place requests are measured and failures logged: handlers and error constructors only
//! say what happened ([`Issued`] in a task-local, [`ErrorReport`] in the response's extensions),
//! and this layer turns that into metrics and log lines.
//!
//! Every metric's route label is the route pattern axum matched ([`MatchedPath`], e.g.
//! `/v1/segments/{tag}`), never the concrete path: a label per tag or per ID would grow without
//! bound. Requests that match no route are labelled `unmatched`.
//!
//! The layer costs next to nothing per request, because `Router::layer` builds one instance of
//! it per route: each instance looks its route's metrics up once, on its first request, and
//! keeps the handles. No route list is kept by hand, so a route added to the table is measured
//! under its own pattern without further change.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::task::futures::TaskLocalFuture;
use tower::{Layer, Service};

use super::{AppState, ErrorReport};
use crate::metrics::RouteMetrics;

/// The route label of requests no route matched (the 404 fallback).
const UNMATCHED: &str = "unmatched";

/// A response body that handed out `count` IDs: counted in `uidgen_ids_issued_total` under the
/// route that answered.
#[derive(Debug)]
pub(super) struct Issued<T>(pub(super) u64, pub(super) T);

tokio::task_local! {
    /// IDs handed out by the request this task is answering, set by [`Issued`]. A task-local
    /// rather than a response extension: the first extension of a response allocates a map,
    /// on every request of every ID route.
    static ISSUED: Cell<u64>;
}

/// IDs handed out so far by the request this task is answering (0 outside the layer): for a
/// layer inside this one (the caller-token check) to count them by caller.
pub(super) fn issued_so_far() -> u64 {
    ISSUED.try_with(Cell::get).unwrap_or(0)
}

impl<T: IntoResponse> IntoResponse for Issued<T> {
    fn into_response(self) -> Response {
        // Outside the layer (a handler called on its own) there is nothing to count into.
        let _ = ISSUED.try_with(|issued| issued.set(issued.get().saturating_add(self.0)));
        self.1.into_response()
    }
}

/// Records latency and issued IDs by route, counts error responses by kind, and logs the causes
/// error responses carry. Put it on the router with `Router::layer`, after every route.
#[derive(Clone)]
pub(super) struct ObserveLayer {
    state: Arc<AppState>,
}

impl ObserveLayer {
    pub(super) fn new(state: Arc<AppState>) -> Self {
        Self { state }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        // Called once per route (per method, and for the fallbacks): the handles this
        // instance resolves belong to that route, whatever request comes first.
        Observe {
            inner,
            route: Arc::new(RouteObserver {
                state: Arc::clone(&self.state),
                metrics: OnceLock::new(),
            }),
        }
    }
}

/// One route's share of the layer: the state and, after its first request, its metrics.
struct RouteObserver {
    state: Arc<AppState>,
    metrics: OnceLock<RouteMetrics>,
}

/// The [`ObserveLayer`] around one route.
#[derive(Clone)]
pub(super) struct Observe<S> {
    inner: S,
    route: Arc<RouteObserver>,
}

impl<S> Service<Request> for Observe<S>
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = ObserveFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let start = Instant::now();
        let route = &self.route;
        route.metrics.get_or_init(|| {
            let pattern = request
                .extensions()
                .get::<MatchedPath>()
                .map_or(UNMATCHED, MatchedPath::as_str);
            route.state.metrics.route(pattern)
        });
        ObserveFuture {
            inner: ISSUED.scope(Cell::new(0), self.inner.call(request)),
            route: Arc::clone(route),
            start,
        }
    }
}

pin_project_lite::pin_project! {
    /// A route's response future, measured when it completes.
    pub(super) struct ObserveFuture<F> {
        #[pin]
        inner: TaskLocalFuture<Cell<u64>, F>,
        route: Arc<RouteObserver>,
        start: Instant,
    }
}

impl<F> Future for ObserveFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let Ok(response) = ready!(this.inner.as_mut().poll(cx));
        let issued = this.inner.take_value().map_or(0, Cell::into_inner);
        if let Some(metrics) = this.route.metrics.get() {
            record(&this.route.state, metrics, this.start, issued, &response);
        }
        Poll::Ready(Ok(response))
    }
}

/// Count and log one finished request.
fn record(
    state: &AppState,
    route: &RouteMetrics,
    start: &Instant,
    issued: u64,
    response: &Response,
) {
    route.latency.observe(start.elapsed().as_secs_f64());
    if issued > 0 {
        route.issued(issued);
    }
    match response.extensions().get::<ErrorReport>() {
        Some(report) => {
            state.metrics.error(report.kind);
            if let Some(cause) = &report.cause {
                log_cause(&route.name, response.status(), report.kind, cause);
            }
        }
        None if !response.status().is_success() => state.metrics.error(response.status().as_str()),
        None => {}
    }
}

/// A 500 is a bug (error); any other failure with a cause is the service's environment: a lost
/// lease, a database that does not answer (warn).
fn log_cause(route: &str, status: StatusCode, kind: &str, cause: &str) {
    if status == StatusCode::INTERNAL_SERVER_ERROR {
        tracing::error!(route, kind, cause, "request failed");
    } else {
        tracing::warn!(route, kind, cause, "request failed");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;
    use uidgen_core::{Layout, SnowflakeGenerator, SystemClock};

    use super::super::{AppState, app};

    #[tokio::test]
    async fn every_route_is_measured_under_its_pattern_and_misses_under_unmatched() {
        let generator =
            SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, SystemClock).unwrap();
        let state = Arc::new(AppState::embedded(Arc::new(generator), 1));
        let router = app(Arc::clone(&state));
        for uri in [
            "/genid",
            "/genid",
            "/api/snowflake/get/a",
            "/api/snowflake/get/b",
            "/v1/ids?count=5",
            "/nowhere",
            "/healthz",
        ] {
            let request = Request::get(uri).body(Body::empty()).unwrap();
            router.clone().oneshot(request).await.unwrap();
        }
        let text = state.metrics.encode();
        for line in [
            r#"uidgen_ids_issued_total{route="/genid"} 2"#,
            r#"uidgen_ids_issued_total{route="/api/snowflake/get/{key}"} 2"#,
            r#"uidgen_ids_issued_total{route="/v1/ids"} 5"#,
            r#"uidgen_http_request_duration_seconds_count{route="/genid"} 2"#,
            r#"uidgen_http_request_duration_seconds_count{route="/healthz"} 1"#,
            r#"uidgen_http_request_duration_seconds_count{route="unmatched"} 1"#,
            r#"uidgen_errors_total{kind="not_found"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from:\n{text}");
        }
        // Routes that issue nothing have no issued series at all.
        for route in ["/healthz", "unmatched"] {
            let series = format!(r#"uidgen_ids_issued_total{{route="{route}"}}"#);
            assert!(!text.contains(&series), "{series} in:\n{text}");
        }
    }
}
