//! Health, readiness, metrics and the fallback.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

use super::{ApiError, AppState};
use crate::metrics::Metrics;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: the store answers and the generator issues IDs.
pub async fn readyz(State(state): State<Arc<AppState>>) -> Result<&'static str, ApiError> {
    (state.readiness)()
        .await
        .map_err(|why| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", why))?;
    if state.generator.layout().time_at(now_ms()).is_err() {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "exhausted",
            "the layout's time bits cannot represent the current time",
        ));
    }
    Ok("ready")
}

fn now_ms() -> u64 {
    use uidgen_core::Clock;
    uidgen_core::SystemClock.now_millis()
}

/// `GET /metrics`: Prometheus text exposition.
pub async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    if let Some(ring) = &state.ring {
        let s = ring();
        Metrics::set(&state.metrics.ring_capacity, s.capacity);
        Metrics::set(&state.metrics.ring_available, s.available);
        Metrics::set(&state.metrics.ring_padding_runs, s.padding_runs);
        Metrics::set(&state.metrics.ring_borrowed_units, s.borrowed_units);
    }
    if let Some(segments) = &state.segments {
        for tag in segments.monitor() {
            state.metrics.segment_state(&tag);
        }
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
