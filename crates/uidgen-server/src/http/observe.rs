//! The one place requests are measured and failures logged: handlers and error constructors only
//! say what happened (`Issued` in a task-local, `ErrorReport` in the response's extensions),
//! and [`App`], the one service around the whole router, turns that into metrics and log lines.
//!
//! Every metric's route label is the route pattern the request matched (e.g.
//! `/v1/segments/{tag}`), never the concrete path: a label per tag or per ID would grow without
//! bound. Requests that match no route are labelled `unmatched`.
//!
//! Why one service around the router rather than `Router::layer`: axum's `layer` boxes every
//! route once more, and on every request that box costs a clone of the boxed route, a `oneshot`,
//! three allocations and a second content-length pass (≈2 k instructions, 12% of a Leaf
//! request; docs/BENCHMARKS.md). Outside the router there is no `MatchedPath`, so [`App`]
//! finds the pattern itself: one lookup in a `matchit` router (the router crate axum matches
//! with, so both agree on every path) built once from the OpenAPI document's paths, which are
//! the routing table's (each route is added by its description). No route list is kept
//! by hand: a route added to the table is measured under its own pattern without further change.
//!
//! The same lookup lets the single-ID text routes answer a plain `GET` without the router at all
//! (`Direct`): when the ID is there now (a ring or a segment holds one), the route's own
//! function answers from the path parameters the lookup found, and the request skips axum's
//! second lookup, its path-parameter map, the extractors and the route's boxed future (≈5 k
//! instructions, 30% of a Leaf request; docs/BENCHMARKS.md, fourth pass). Anything else takes the router:
//! a method other than `GET`, a parameter with a `%` (axum decodes it, the lookup does not), a
//! generator that would have to wait, and every request to a route a gate covers (caller tokens
//! while they are required: `gates.rs`, the one list both ways consult). A route's direct
//! function and its handler share the code that picks the source and shapes the answer, so both
//! give the same response.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Instant;

use axum::Router;
use axum::body::HttpBody;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use tokio::task::futures::TaskLocalFuture;
use tower::Service;

use super::admission::Admission;
use super::error::ErrorReport;
use super::error::MAX_BODY_BYTES;
use super::gates::Gates;
use crate::metrics::RouteMetrics;
use crate::metrics::waits::{self, RouteWaits};
use crate::service::state::AppState;

/// The route label of requests no route matched (the 404 fallback).
const UNMATCHED: &str = "unmatched";

/// A response body that handed out `count` IDs: counted in `uidgen_ids_issued_total` under the
/// route that answered.
#[derive(Debug)]
pub(super) struct Issued<T>(pub(super) u64, pub(super) T);

/// One ID as a bare decimal, as Leaf's and Vesta's routes answer it (the ID, segment and
/// sharded routes alike, so it sits here beside [`Issued`] rather than in one of them).
pub(super) fn decimal(id: impl ToString) -> Issued<String> {
    Issued(1, id.to_string())
}

tokio::task_local! {
    /// IDs handed out by the request this task is answering, set by [`Issued`]. A task-local
    /// rather than a response extension: the first extension of a response allocates a map,
    /// on every request of every ID route.
    static ISSUED: Cell<u64>;
}

/// IDs handed out so far by the request this task is answering (0 outside [`App`]): for a
/// layer inside it (the caller-token check) to count them by caller.
pub(super) fn issued_so_far() -> u64 {
    ISSUED.try_with(Cell::get).unwrap_or(0)
}

/// A route's answer to a plain `GET` without the router, from the path parameters the route
/// table's lookup found (raw, and free of `%`, so as axum would decode them): `None` when it
/// cannot answer at once, and the router takes the request. See the module docs.
pub(super) type Direct = fn(&AppState, &matchit::Params<'_, '_>) -> Option<Answered>;

/// A response given without the router, and the IDs it handed out.
pub(super) struct Answered {
    issued: u64,
    response: Response,
}

impl Answered {
    /// What a direct function answers: the route's response when `result` has one now, and
    /// `None` (take the router) for `Ok(None)`.
    pub(super) fn now<T: IntoResponse, E: IntoResponse>(
        result: Result<Option<Issued<T>>, E>,
    ) -> Option<Self> {
        match result {
            Ok(Some(Issued(issued, body))) => Some(Self {
                issued,
                response: body.into_response(),
            }),
            Ok(None) => None,
            Err(error) => Some(Self {
                issued: 0,
                response: error.into_response(),
            }),
        }
    }
}

impl<T: IntoResponse> IntoResponse for Issued<T> {
    fn into_response(self) -> Response {
        // Outside the service (a handler called on its own) there is nothing to count into.
        let _ = ISSUED.try_with(|issued| issued.set(issued.get().saturating_add(self.0)));
        self.1.into_response()
    }
}

/// The HTTP service: the routing table, with the request body limit
/// (`MAX_BODY_BYTES`) and the metrics and failure logs around every request, route and
/// fallback alike. Built by [`app`](super::app); cloning it is two reference-count increments.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use axum::body::Body;
/// use axum::http::{Request, StatusCode};
/// use tower::ServiceExt;
/// use uidgen_core::{Layout, SnowflakeGenerator, SystemClock};
/// use uidgen_server::http::{observe::App, app};
/// use uidgen_server::service::state::AppState;
///
/// let generator = SnowflakeGenerator::new(Layout::snowflake()?, 1, SystemClock)?;
/// let state = Arc::new(AppState::embedded(Arc::new(generator), 1));
/// let service: App = app(Arc::clone(&state));
/// let response = service.oneshot(Request::get("/api/snowflake/get/x").body(Body::empty())?).await?;
/// assert_eq!(response.status(), StatusCode::OK);
/// // Measured under the route's pattern, not its path.
/// let metrics = state.metrics.encode();
/// assert!(metrics.contains(r#"uidgen_ids_issued_total{route="/api/snowflake/get/{key}"} 1"#));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct App {
    router: Router,
    routes: Arc<RouteTable>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("router", &self.router)
            .field("patterns", &self.routes.slots.len())
            .finish_non_exhaustive()
    }
}

/// Every route pattern and, after its first request, its metrics.
struct RouteTable {
    state: Arc<AppState>,
    /// A path's pattern, as an index into `slots`.
    patterns: matchit::Router<usize>,
    /// One per pattern, and last the one for requests no pattern matches.
    slots: Box<[RouteSlot]>,
}

/// One route pattern's share of the metrics, resolved on its first request: a route nobody
/// asks has no series, as before any request.
struct RouteSlot {
    pattern: String,
    metrics: OnceLock<RouteMetrics>,
    /// How the route answers a plain `GET` without the router, if it can.
    direct: Option<Direct>,
    /// What a request must be to reach the route (`admission.rs`).
    admission: Admission,
}

impl App {
    /// `router` measured under the patterns of `paths`, the routing table's description, with
    /// the `direct` answers of some of them and the admission rules of each (`issuing`: the
    /// patterns whose `GET` hands out IDs), by pattern.
    pub(super) fn new(
        router: Router,
        paths: &super::described::Paths,
        direct: &[(String, Direct)],
        issuing: &[String],
        gates: &Gates,
        state: Arc<AppState>,
    ) -> Self {
        let mut lookup = matchit::Router::new();
        let mut slots = Vec::new();
        for (pattern, item) in paths {
            // axum inserted the same patterns into the same matchit without a conflict, so this
            // cannot fail; if it did, that route would only be counted as `unmatched`.
            if let Err(error) = lookup.insert(pattern.as_str(), slots.len()) {
                tracing::error!(pattern, %error, "route pattern not measured under its name");
                continue;
            }
            // A gate in front of the route (`gates.rs`) is never gone round.
            let answer = direct
                .iter()
                .find(|(of, _)| of == pattern && !gates.covers(pattern))
                .map(|(_, f)| *f);
            let admission = Admission::of(pattern, item, issuing.contains(pattern));
            slots.push(RouteSlot::new(pattern, answer, admission));
        }
        slots.push(RouteSlot::new(UNMATCHED, None, Admission::default()));
        Self {
            router,
            routes: Arc::new(RouteTable {
                state,
                patterns: lookup,
                slots: slots.into_boxed_slice(),
            }),
        }
    }

    /// Answer `request` without taking the service mutably (as [`answer_from`] with no
    /// peer known).
    ///
    /// [`answer_from`]: Self::answer_from
    pub(super) fn answer(&self, request: Request) -> AppFuture {
        self.answer_from(request, None)
    }

    /// Answer `request`, which came from `peer`: what [`super::GatedApp`] calls on the shared
    /// instance.
    pub(super) fn answer_from(&self, mut request: Request, peer: Option<SocketAddr>) -> AppFuture {
        let start = Instant::now();
        let table = &self.routes;
        // Kept only for the access log: the method of most requests is a constant, but an
        // extension method's clone allocates.
        let access = table
            .state
            .access_log
            .then(|| (request.method().clone(), peer));
        let (slot, answered) = match table.patterns.at(request.uri().path()) {
            Ok(found) => {
                let slot = *found.value;
                let refused = table
                    .slots
                    .get(slot)
                    .and_then(|s| s.admission.check(&request));
                let answered = match refused {
                    Some(response) => Some(Answered {
                        issued: 0,
                        response,
                    }),
                    None => table.answer_directly(slot, request.method(), &found.params),
                };
                (slot, answered)
            }
            Err(_) => (table.slots.len() - 1, None),
        };
        let answer = match answered {
            Some(answered) => Answer::Direct {
                answered: Some(answered),
            },
            None => {
                // A body already at its end (a GET, `content-length: 0`) is under any limit;
                // leaving it unmarked saves the extension's allocation on the single-ID routes.
                if !request.body().is_end_stream() {
                    DefaultBodyLimit::max(MAX_BODY_BYTES).apply(&mut request);
                }
                // The route's waits count under its pattern (the direct answers never wait).
                let waits = match table.route_metrics(slot) {
                    Some(route) => route.waits,
                    None => waits::WaitFamilies::detached(),
                };
                Answer::Routed {
                    // A clone is one Arc increment: `Service::call` needs the router mutably.
                    future: ISSUED.scope(
                        Cell::new(0),
                        waits::scoped(waits, self.router.clone().call(request)),
                    ),
                }
            }
        };
        AppFuture {
            answer,
            table: Arc::clone(table),
            slot,
            start,
            access,
        }
    }
}

impl RouteTable {
    /// The metrics of pattern `slot`, made on its first request.
    fn route_metrics(&self, slot: usize) -> Option<&RouteMetrics> {
        let slot = self.slots.get(slot)?;
        Some(
            slot.metrics
                .get_or_init(|| self.state.metrics.route(&slot.pattern)),
        )
    }

    /// The direct answer of pattern `slot` to a request with `method` and `params`, when it
    /// has one (see the module docs for when it has not).
    fn answer_directly(
        &self,
        slot: usize,
        method: &Method,
        params: &matchit::Params<'_, '_>,
    ) -> Option<Answered> {
        let direct = self.slots.get(slot)?.direct?;
        if method != Method::GET || params.iter().any(|(_, value)| value.contains('%')) {
            return None;
        }
        direct(&self.state, params)
    }
}

impl RouteSlot {
    fn new(pattern: &str, direct: Option<Direct>, admission: Admission) -> Self {
        Self {
            pattern: pattern.to_owned(),
            metrics: OnceLock::new(),
            direct,
            admission,
        }
    }
}

impl Service<Request> for App {
    type Response = Response;
    type Error = Infallible;
    type Future = AppFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // axum's `Router::poll_ready` is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> AppFuture {
        self.answer(request)
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`App`], measured when it completes.
    pub struct AppFuture {
        #[pin]
        answer: Answer,
        table: Arc<RouteTable>,
        slot: usize,
        start: Instant,
        // The request's method and peer, when the access log is on.
        access: Option<(Method, Option<SocketAddr>)>,
    }
}

pin_project_lite::pin_project! {
    /// How a request is answered: by the router, or directly (already answered).
    #[project = AnswerProjection]
    enum Answer {
        Routed {
            #[pin]
            future: TaskLocalFuture<Cell<u64>, TaskLocalFuture<&'static RouteWaits, RouteFuture<Infallible>>>,
        },
        Direct { answered: Option<Answered> },
    }
}

impl Future for AppFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (issued, response) = match this.answer.project() {
            AnswerProjection::Routed { mut future } => {
                let Ok(response) = ready!(future.as_mut().poll(cx));
                (future.take_value().map_or(0, Cell::into_inner), response)
            }
            AnswerProjection::Direct { answered } => match answered.take() {
                Some(Answered { issued, response }) => (issued, response),
                // Polled again after it completed: the caller's bug, answered rather than a
                // panic, and not measured twice.
                None => return Poll::Ready(Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response())),
            },
        };
        let table = &**this.table;
        if let Some(metrics) = table.route_metrics(*this.slot) {
            record(&table.state, metrics, this.start, issued, &response);
            if let Some((method, peer)) = this.access.take() {
                access(&method, peer, metrics, this.start, issued, &response);
            }
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

/// The access log's line of one request (`log.access`).
fn access(
    method: &Method,
    peer: Option<SocketAddr>,
    route: &RouteMetrics,
    start: &Instant,
    issued: u64,
    response: &Response,
) {
    let duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
    tracing::info!(
        target: crate::logging::ACCESS_TARGET,
        method = method.as_str(),
        route = &*route.name,
        status = response.status().as_u16(),
        duration_us,
        ids = issued,
        peer = peer.map(tracing::field::display),
        "{method} {} {}",
        route.name,
        response.status().as_u16()
    );
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
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;
    use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SnowflakeGenerator, SystemClock};

    use super::super::app;
    use super::super::error::MAX_BODY_BYTES;
    use super::{Answer, App};
    use crate::service::state::AppState;

    /// A server of the snowflake layout, worker 1, nothing configured.
    fn embedded() -> AppState {
        let generator =
            SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, SystemClock).unwrap();
        AppState::embedded(Arc::new(generator), 1)
    }

    #[tokio::test]
    async fn every_route_is_measured_under_its_pattern_and_misses_under_unmatched() {
        let state = Arc::new(embedded());
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

    /// A request with `body`, to `uri` with `method`.
    fn request(method: &str, uri: &str, body: Body) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .header("authorization", "Bearer observe-test-admin")
            .body(body)
            .unwrap()
    }

    #[tokio::test]
    async fn single_id_routes_answer_a_plain_get_directly_and_the_rest_take_the_router() {
        let ring = CachedUidGenerator::new(
            Layout::baidu_default().unwrap(),
            1,
            SystemClock,
            CachedOptions::default(),
        )
        .unwrap();
        let service = app(Arc::new(AppState::embedded(Arc::new(ring), 1)));
        let answered = |service: &App, method: &str, uri: &str| {
            let request = Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap();
            match service.answer(request).answer {
                Answer::Direct { answered } => Some(answered.unwrap().response.status()),
                Answer::Routed { .. } => None,
            }
        };
        for uri in ["/genid", "/api/snowflake/get/x", "/api/snowflake/get/x?y=1"] {
            assert_eq!(
                answered(&service, "GET", uri),
                Some(StatusCode::OK),
                "{uri}"
            );
        }
        // Segment mode is off: its answer, a 404, needs no router either.
        let segment = answered(&service, "GET", "/api/segment/get/t");
        assert_eq!(segment, Some(StatusCode::NOT_FOUND));
        // `HEAD` on an issuing route is answered before the router too, taking no ID
        // (`admission.rs`).
        assert_eq!(answered(&service, "HEAD", "/genid"), Some(StatusCode::OK));
        for (method, uri) in [
            ("GET", "/api/snowflake/get/%78"),
            ("HEAD", "/healthz"),
            ("POST", "/genid"),
            ("GET", "/v1/ids"),
            ("GET", "/nowhere"),
        ] {
            assert_eq!(answered(&service, method, uri), None, "{method} {uri}");
        }
        // A generator without a ring has no ID ready: the router waits for it.
        let plain = app(Arc::new(embedded()));
        assert_eq!(answered(&plain, "GET", "/genid"), None);
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused_whether_its_length_is_sent_or_not() {
        let mut state = embedded();
        state.admin_token = Some("observe-test-admin".into());
        let router = app(Arc::new(state));
        let big = format!(r#"{{"step":1,"pad":"{}"}}"#, "x".repeat(MAX_BODY_BYTES));
        for (method, uri) in [
            ("POST", "/v1/ids/make"),
            ("PUT", "/v1/admin/segments/observe-test"),
            ("POST", "/v1/admin/tokens"),
        ] {
            let sized = request(method, uri, Body::from(big.clone()));
            // A stream says nothing of its length up front: only reading it finds the excess.
            let chunks = big
                .as_bytes()
                .chunks(1024)
                .map(|chunk| Ok::<_, std::io::Error>(chunk.to_vec()))
                .collect::<Vec<_>>();
            let streamed = request(method, uri, Body::from_stream(tokio_stream::iter(chunks)));
            for request in [sized, streamed] {
                let response = router.clone().oneshot(request).await.unwrap();
                assert_eq!(
                    response.status(),
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "{method} {uri}"
                );
            }
        }
    }

    #[tokio::test]
    async fn every_pattern_of_the_document_is_its_own_label() {
        let state = Arc::new(embedded());
        let router = app(Arc::clone(&state));
        // From another instance, so that every pattern below is asked exactly once.
        let document = app(Arc::new(embedded()))
            .oneshot(request("GET", "/openapi.json", Body::empty()))
            .await
            .unwrap();
        let document: serde_json::Value = serde_json::from_slice(
            &http_body_util::BodyExt::collect(document.into_body())
                .await
                .unwrap()
                .to_bytes(),
        )
        .unwrap();
        let patterns: Vec<String> = document["paths"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert!(patterns.len() > 20, "{patterns:?}");
        for pattern in &patterns {
            // Each parameter as a value no pattern spells, sent with a method no route takes:
            // the 405 still belongs to the route's pattern, as axum's `MatchedPath` said.
            let path = pattern.replace('{', "p-").replace('}', "");
            router
                .clone()
                .oneshot(request("PATCH", &path, Body::empty()))
                .await
                .unwrap();
        }
        let text = state.metrics.encode();
        for pattern in &patterns {
            let series =
                format!(r#"uidgen_http_request_duration_seconds_count{{route="{pattern}"}} 1"#);
            assert!(text.contains(&series), "{series} missing from:\n{text}");
        }
        assert!(!text.contains(r#"route="unmatched""#), "{text}");
    }
}
