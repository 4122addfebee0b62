//! Health, readiness, metrics and the fallback.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::error::TextError;
use super::extract::QueryParams;
use crate::metrics::Metrics;
use crate::service::error::{ApiError, ECHO_CHARS, SEE_LOG, clip};
use crate::service::readiness::{Mode, NotReady};
use crate::service::ready::{check as check_readiness, check_mode};
use crate::service::runway::RunwayInfo;
use crate::service::state::AppState;

/// `GET /healthz`: the process is up.
pub async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz[?mode=ids|segment|sharded]`: whether this server can serve. Without `mode`,
/// 200 while at least one configured mode can serve (a store outage takes segment mode down,
/// not the ID generator, so a load balancer keeps the instance), with the modes that cannot,
/// and a ZooKeeper outage within the reservation of the last accepted report, as
/// `ready (degraded: …)`; 503 when none can. With `mode`, that mode alone: 200, 503, or 404
/// when it is not enabled here. Why a mode is not ready is logged; the client gets a fixed
/// sentence, since the reason can name the database.
pub async fn readyz(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<String, ApiError> {
    if let Some(name) = params.get("mode") {
        let mode = Mode::from_name(name).ok_or_else(|| {
            ApiError::bad_parameter(format!(
                "unknown mode {:?}; use ids, segment or sharded",
                clip(name, ECHO_CHARS)
            ))
        })?;
        let check = check_mode(&state, mode).await.ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "mode_disabled",
                format!("{} mode is not enabled on this server", mode.name()),
            )
        })?;
        return match check {
            Ok(note) => Ok(ready_text(note.into_iter().collect())),
            Err(why) => Err(not_ready(why.code, why.public.to_string(), &[(mode, &why)])),
        };
    }
    let readiness = check_readiness(&state).await;
    let failed: Vec<(Mode, &NotReady)> = readiness
        .modes
        .iter()
        .filter_map(|(mode, check)| check.as_ref().err().map(|why| (*mode, why)))
        .collect();
    if !readiness.any_ready() {
        return Err(match failed.as_slice() {
            [(_, why)] => not_ready(why.code, why.public.to_string(), &failed),
            _ => {
                let each: Vec<String> = failed
                    .iter()
                    .map(|(mode, why)| format!("{}: {}", mode.name(), why.public))
                    .collect();
                let message = format!("no mode can serve: {}", each.join("; "));
                not_ready("not_ready", message, &failed)
            }
        });
    }
    let mut notes = Vec::new();
    for (mode, check) in &readiness.modes {
        match check {
            Ok(Some(note)) => notes.push(note.clone()),
            Ok(None) => {}
            Err(why) => notes.push(format!("{} mode: {}", mode.name(), why.public)),
        }
    }
    Ok(ready_text(notes))
}

/// `ready`, or `ready (degraded: …)` with the notes.
fn ready_text(notes: Vec<String>) -> String {
    if notes.is_empty() {
        "ready".to_owned()
    } else {
        format!("ready (degraded: {})", notes.join("; "))
    }
}

/// 503 with `message` and the server-log pointer; the modes' details go to the log.
fn not_ready(code: &'static str, message: String, failed: &[(Mode, &NotReady)]) -> ApiError {
    let cause: Vec<String> = failed
        .iter()
        .map(|(mode, why)| format!("{} mode: {}: {}", mode.name(), why.public, why.detail))
        .collect();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        code,
        format!("{message}; {SEE_LOG}"),
    )
    .with_cause(format!("not ready: {}", cause.join("; ")))
}

/// `GET /metrics`: Prometheus text exposition.
pub async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    if let Some(s) = state.generator.stock() {
        Metrics::set(&state.metrics.ring_capacity, s.capacity);
        Metrics::set(&state.metrics.ring_available, s.available);
        Metrics::copy(&state.metrics.ring_padding_runs, s.padding_runs);
        Metrics::set(&state.metrics.ring_borrowed_units, s.borrowed_units);
    }
    if let Some(pool) = &state.pool {
        state.metrics.workers.publish(&pool.status());
    }
    let now_ms = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
    for (space, generator) in crate::service::runway::spaces(&state) {
        let info = RunwayInfo::of(generator.as_ref(), now_ms, state.runway_warning);
        state
            .metrics
            .runway
            .publish(space, info.left_at_clock_ms, info.left_at_lead_ms);
    }
    state
        .metrics
        .order
        .publish(now_ms, &crate::order::readings());
    if let Some(ordered) = &state.ordered {
        state.metrics.ordered.publish(&ordered.views().await);
    }
    if let Some(segments) = &state.segments {
        for tag in segments.monitor() {
            state.metrics.segment_state(&tag);
        }
    }
    if let Some(keeper) = &state.keeper {
        state.metrics.keeper_status(&keeper.status());
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
