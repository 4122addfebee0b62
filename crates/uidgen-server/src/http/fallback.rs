//! Fallback worker ids for clients (`uidgen-client`'s embedded fallback): `POST
//! /v1/fallback/leases` leases a worker id of the embedded range (`worker.fallback_range`)
//! through the store, `.../{worker_id}/renew` extends it, `.../{worker_id}/release` gives it
//! back. The rules are the store's ([`uidgen_store::FallbackLeases`]): one winner per claim,
//! an expiry that only rises, a takeover only after expiry, a successor's floor above its
//! predecessor's limit and recorded issued-until time.
//!
//! The gRPC calls (`ClaimFallbackLease`, `RenewFallbackLease`, `ReleaseFallbackLease`) go
//! through [`claim`], [`renew`] and [`release`] too, so both channels check, lease and fail
//! the same way, with the same sentences.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::extract::{Body, PathParam};
use super::status::LayoutInfo;
use crate::service::error::ApiError;
use crate::service::fallback::{claim, release, renew};
use crate::service::state::AppState;

/// `POST /v1/fallback/leases` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimFallbackRequest {
    /// Who asks, e.g. `<host>/<pid>`; the server appends `#` and a random token.
    #[schema(min_length = 1, max_length = 111, example = "api-1/4242")]
    holder: String,
    /// How long the lease lasts without renewal, in ms.
    #[schema(minimum = 1000, maximum = 86_400_000, example = 600_000)]
    #[serde(deserialize_with = "super::integer::u64")]
    ttl_ms: u64,
}

/// `POST /v1/fallback/leases/{worker_id}/renew` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RenewFallbackRequest {
    /// The holder string the claim returned.
    #[schema(
        min_length = 3,
        max_length = 128,
        example = "api-1/4242#00ab34cd56ef7890"
    )]
    holder: String,
    /// How long from now the lease lasts, in ms.
    #[schema(minimum = 1000, maximum = 86_400_000, example = 600_000)]
    #[serde(deserialize_with = "super::integer::u64")]
    ttl_ms: u64,
    /// Every ID the caller issued with the worker id lies before this instant (ms since the
    /// Unix epoch; 0 or absent: none yet).
    #[serde(default, deserialize_with = "super::integer::u64")]
    issued_until_ms: u64,
}

/// `POST /v1/fallback/leases/{worker_id}/release` body.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReleaseFallbackRequest {
    /// The holder string the claim returned.
    #[schema(
        min_length = 3,
        max_length = 128,
        example = "api-1/4242#00ab34cd56ef7890"
    )]
    holder: String,
    /// Every ID the caller issued with the worker id lies before this instant: the next
    /// holder starts above it.
    #[serde(default, deserialize_with = "super::integer::u64")]
    issued_until_ms: u64,
}

/// A fallback lease: the caller's embedded generator may stamp IDs with `worker_id` in time
/// units that end after `floor_ms` and by `valid_until_ms`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FallbackLease {
    /// The leased worker id, from the embedded range.
    worker_id: u64,
    /// The holder string renewals and the release must name.
    holder: String,
    /// The lease's expiry (ms since the Unix epoch): the fallback's limit.
    valid_until_ms: u64,
    /// Where earlier holders of the id stopped (ms since the Unix epoch): the fallback's floor.
    floor_ms: u64,
    /// The ttl granted, in ms.
    ttl_ms: u64,
    /// The layout this server issues, which the fallback must issue too.
    layout: LayoutInfo,
}

/// A renewed fallback lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct FallbackRenewal {
    /// The worker id.
    worker_id: u64,
    /// The lease's new expiry, accepted by the store.
    valid_until_ms: u64,
}

/// A released fallback lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct FallbackRelease {
    /// The worker id.
    worker_id: u64,
    /// False when the holder did not hold the lease (any more).
    released: bool,
}

/// `POST /v1/fallback/leases`: lease a worker id of the embedded range to the caller's
/// embedded fallback.
pub async fn claim_route(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Json<FallbackLease>, ApiError> {
    let request: ClaimFallbackRequest = body.json()?;
    let grant = claim(&state, &request.holder, request.ttl_ms).await?;
    Ok(Json(FallbackLease {
        worker_id: grant.worker_id,
        holder: grant.holder,
        valid_until_ms: grant.valid_until_ms,
        floor_ms: grant.floor_ms,
        ttl_ms: request.ttl_ms,
        layout: LayoutInfo::of(state.generator.layout(), true),
    }))
}

/// `POST /v1/fallback/leases/{worker_id}/renew`: extend a fallback lease.
pub async fn renew_route(
    State(state): State<Arc<AppState>>,
    PathParam(worker_id, _): PathParam<u64>,
    body: Body,
) -> Result<Json<FallbackRenewal>, ApiError> {
    let request: RenewFallbackRequest = body.json()?;
    let valid_until_ms = renew(
        &state,
        worker_id,
        &request.holder,
        request.ttl_ms,
        request.issued_until_ms,
    )
    .await?;
    Ok(Json(FallbackRenewal {
        worker_id,
        valid_until_ms,
    }))
}

/// `POST /v1/fallback/leases/{worker_id}/release`: give a fallback lease back.
pub async fn release_route(
    State(state): State<Arc<AppState>>,
    PathParam(worker_id, _): PathParam<u64>,
    body: Body,
) -> Result<Json<FallbackRelease>, ApiError> {
    let request: ReleaseFallbackRequest = body.json()?;
    let released = release(&state, worker_id, &request.holder, request.issued_until_ms).await?;
    Ok(Json(FallbackRelease {
        worker_id,
        released,
    }))
}
