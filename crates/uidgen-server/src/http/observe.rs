//! The one place requests are measured and failures logged: handlers and error constructors only
//! say what happened, in the response's extensions ([`Issued`], [`ErrorReport`]), and this
//! middleware turns that into metrics and log lines.
//!
//! Every metric's route label is the route pattern axum matched ([`MatchedPath`], e.g.
//! `/v1/segments/{tag}`), never the concrete path: a label per tag or per ID would grow without
//! bound. Requests that match no route are labelled `unmatched`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::{AppState, ErrorReport};

/// The route label of requests no route matched (the 404 fallback).
const UNMATCHED: &str = "unmatched";

/// A response body that handed out `count` IDs: counted in `uidgen_ids_issued_total` under the
/// route that answered.
#[derive(Debug)]
pub(super) struct Issued<T>(pub(super) u64, pub(super) T);

/// The count an [`Issued`] leaves in the response's extensions.
#[derive(Debug, Clone, Copy)]
struct IssuedCount(u64);

impl<T: IntoResponse> IntoResponse for Issued<T> {
    fn into_response(self) -> Response {
        let mut response = self.1.into_response();
        response.extensions_mut().insert(IssuedCount(self.0));
        response
    }
}

/// Record latency and issued IDs by route, count error responses by kind, and log the causes
/// error responses carry.
pub(super) async fn observe(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    // A clone of the matched path is a reference count, not a copy of the text.
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let start = Instant::now();
    let response = next.run(request).await;
    let elapsed = start.elapsed().as_secs_f64();
    let route = matched.as_ref().map_or(UNMATCHED, MatchedPath::as_str);
    state.metrics.observe_latency(route.to_owned(), elapsed);
    if let Some(IssuedCount(count)) = response.extensions().get::<IssuedCount>() {
        state.metrics.issued(route, *count);
    }
    match response.extensions().get::<ErrorReport>() {
        Some(report) => {
            state.metrics.error(report.kind);
            if let Some(cause) = &report.cause {
                log_cause(route, response.status(), report.kind, cause);
            }
        }
        None if !response.status().is_success() => state.metrics.error(response.status().as_str()),
        None => {}
    }
    response
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
