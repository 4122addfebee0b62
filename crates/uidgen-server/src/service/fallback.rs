//! Fallback worker-id leases for clients' embedded fallbacks, the same over HTTP and gRPC: claim,
//! renew and release, and a store failure as the client sees it.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use uidgen_store::{FallbackLeases, StoreError};
use uidgen_worker::LeaseGrant;

use super::error::{ApiError, SEE_LOG};
use super::state::AppState;

fn leases(state: &AppState) -> Result<&Arc<FallbackLeases>, ApiError> {
    state.fallback.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "fallback_disabled",
            "this server leases no fallback worker ids: set `worker.fallback_range` \
             (UIDGEN_WORKER_FALLBACK_RANGE) on every server to a range no server's \
             `worker.range` uses (on Vesta layouts it defaults to 0-923)",
        )
    })
}

/// Lease a fallback worker id to `holder` for `ttl_ms`.
pub async fn claim(state: &AppState, holder: &str, ttl_ms: u64) -> Result<LeaseGrant, ApiError> {
    let leases = leases(state)?;
    leases
        .claim(
            state.generator.layout(),
            holder,
            Duration::from_millis(ttl_ms),
        )
        .await
        .map_err(|e| fallback_error(leases, e))
}

/// Renew `holder`'s lease on `worker_id`; its new `valid_until`.
pub async fn renew(
    state: &AppState,
    worker_id: u64,
    holder: &str,
    ttl_ms: u64,
    issued_until_ms: u64,
) -> Result<u64, ApiError> {
    let leases = leases(state)?;
    leases
        .renew(
            state.generator.layout(),
            worker_id,
            holder,
            Duration::from_millis(ttl_ms),
            issued_until_ms,
        )
        .await
        .map_err(|e| fallback_error(leases, e))
}

/// Release `holder`'s lease on `worker_id`.
pub async fn release(
    state: &AppState,
    worker_id: u64,
    holder: &str,
    issued_until_ms: u64,
) -> Result<bool, ApiError> {
    let leases = leases(state)?;
    leases
        .release(state.generator.layout(), worker_id, holder, issued_until_ms)
        .await
        .map_err(|e| fallback_error(leases, e))
}

/// A store failure as the client sees it: its own mistake (400), a lease that is not its own
/// any more or a range it cannot have (409), or the store's trouble (503, details in the log).
fn fallback_error(leases: &FallbackLeases, error: StoreError) -> ApiError {
    let range = leases.range();
    let conflict = |code, message: String| ApiError::new(StatusCode::CONFLICT, code, message);
    match &error {
        StoreError::InvalidInput(message) => ApiError::bad_parameter(message.clone()),
        StoreError::LeaseLost { .. } => conflict("fallback_lease_lost", error.to_string()),
        StoreError::NoFreeWorkerId { .. } => conflict(
            "fallback_range_full",
            format!(
                "every fallback worker id of {range} is leased by a live client: retry once one \
                 is released or expires, or widen `worker.fallback_range` on every server"
            ),
        ),
        StoreError::WorkerRangeConflict {
            other, other_range, ..
        } => conflict(
            "fallback_range_refused",
            format!(
                "this server's `worker.fallback_range` {range} overlaps {other_range}, which the \
                 store records for the {other} assigner: set `worker.fallback_range` on every \
                 server to ids no assigner uses"
            ),
        ),
        StoreError::WorkerRangeChanged { recorded, .. } => conflict(
            "fallback_range_refused",
            format!(
                "the store records the fallback range as {recorded}, but this server is \
                 configured with `worker.fallback_range` {range}: every server must lease from \
                 one range; set it to {recorded} (or change the row by hand once every server \
                 agrees)"
            ),
        ),
        StoreError::Worker(uidgen_worker::WorkerError::WorkerRangeOutsideLayout { .. }) => conflict(
            "fallback_range_refused",
            format!(
                "this server's `worker.fallback_range` {range} does not fit its layout; {SEE_LOG}"
            ),
        )
        .with_cause(error.to_string()),
        StoreError::LeaseContention { .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "lease_contention",
            error.to_string(),
        ),
        _ => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("fallback lease store unavailable; {SEE_LOG}"),
        )
        .with_cause(error.to_string()),
    }
}
