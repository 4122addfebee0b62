//! Health, readiness, metrics and the fallback.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::error::ErrorBody;
use super::{ApiError, AppState, SEE_LOG, TextError};
use crate::metrics::Metrics;

/// `GET /healthz`: the process is up.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "operations",
    responses((
        status = 200,
        description = "The process is up",
        content_type = "text/plain",
        body = String,
        example = "ok"
    ))
)]
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the store answers and the generator issues IDs. Why not is logged; the
/// client gets a fixed sentence, since the reason can name the database.
///
/// A ZooKeeper worker id whose ensemble is away is *degraded but ready*: the held id still
/// issues (until the outage allowance ends), so a load balancer keeps the instance, and the
/// body says `ready (degraded: …)`. It turns 503 once the id is lost or the allowance ran out.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "operations",
    responses(
        (
            status = 200,
            description = "`ready`, or `ready (degraded: …)` while a ZooKeeper outage is within \
                           its allowance",
            content_type = "text/plain",
            body = String,
            example = "ready"
        ),
        (
            status = 503,
            description = "Not ready: the store, the lease, ZooKeeper or the generator",
            body = ErrorBody
        ),
    )
)]
pub async fn readyz(State(state): State<Arc<AppState>>) -> Result<String, ApiError> {
    if let Some(reason) = state.ring.as_ref().and_then(|ring| ring.stop_reason()) {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("the ID generator has stopped; {SEE_LOG}"),
        )
        .with_cause(format!(
            "not ready: the ring buffer's padding has stopped: {reason}"
        )));
    }
    if let Err(why) = (state.readiness)().await {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "not_ready",
            format!("{}; {SEE_LOG}", why.public),
        )
        .with_cause(format!("not ready: {}: {}", why.public, why.detail)));
    }
    let degraded = match state.zk.as_ref().map(crate::zk::readiness) {
        Some(Err(why)) => {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                format!("the ZooKeeper worker id can no longer issue IDs; {SEE_LOG}"),
            )
            .with_cause(format!("not ready: {why}")));
        }
        Some(Ok(degraded)) => degraded,
        None => None,
    };
    if state.generator.layout().time_at(now_ms()).is_err() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "exhausted",
            "the layout's time bits cannot represent the current time",
        ));
    }
    Ok(degraded.map_or_else(
        || "ready".to_owned(),
        |why| format!("ready (degraded: {why})"),
    ))
}

fn now_ms() -> u64 {
    use uidgen_core::Clock;
    uidgen_core::SystemClock.now_millis()
}

/// `GET /metrics`: Prometheus text exposition.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((
        status = 200,
        description = "Prometheus metrics, OpenMetrics text",
        content_type = "application/openmetrics-text",
        body = String
    ))
)]
pub async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    if let Some(ring) = &state.ring {
        let s = ring.snapshot();
        Metrics::set(&state.metrics.ring_capacity, s.capacity);
        Metrics::set(&state.metrics.ring_available, s.available);
        Metrics::copy(&state.metrics.ring_padding_runs, s.padding_runs);
        Metrics::set(&state.metrics.ring_borrowed_units, s.borrowed_units);
    }
    if let Some(segments) = &state.segments {
        for tag in segments.monitor() {
            state.metrics.segment_state(&tag);
        }
    }
    if let Some(zk) = &state.zk {
        state.metrics.zk_status(&crate::zk::status(zk));
    }
    if let Some(sharded) = &state.sharded {
        state.metrics.sharded_stats(&sharded.stats());
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
}

/// Anything else: 404 with the JSON error body.
pub async fn not_found() -> ApiError {
    ApiError::not_found()
}

/// A route that exists, asked with a method it does not take: 405, as JSON, or as text on
/// Leaf's routes (whose clients read bare text).
pub async fn method_not_allowed(uri: Uri) -> Response {
    let error = ApiError::method_not_allowed();
    if uri.path().starts_with("/api/") {
        TextError(error).into_response()
    } else {
        error.into_response()
    }
}
