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

use super::error::ErrorBody;
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

/// What every fallback route may answer besides its own refusals, described once for all of
/// them.
#[derive(utoipa::IntoResponses)]
#[allow(dead_code)] // Only described: the answers themselves are `ApiError`s.
enum FallbackFailures {
    #[response(
        status = 404,
        description = "This server leases no fallback ids (`fallback_disabled`)"
    )]
    Disabled(ErrorBody<'static>),
    #[response(status = 413, description = "The body is too large")]
    TooLarge(ErrorBody<'static>),
    #[response(status = 503, description = "The store is down; try another server")]
    Unavailable(ErrorBody<'static>),
}

/// `POST /v1/fallback/leases`: lease a worker id of the embedded range to the caller's
/// embedded fallback.
#[utoipa::path(
    post,
    path = "/v1/fallback/leases",
    tag = "fallback",
    request_body = ClaimFallbackRequest,
    responses(
        (status = 200, description = "The lease, claimed in the store", body = FallbackLease),
        (
            status = 400,
            description = "A bad body, holder or ttl (`invalid_parameter`)",
            body = ErrorBody
        ),
        (
            status = 409,
            description = "Every fallback id is held (`fallback_range_full`), or the store refuses \
                           the range (`fallback_range_refused`)",
            body = ErrorBody
        ),
        FallbackFailures,
    )
)]
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
#[utoipa::path(
    post,
    path = "/v1/fallback/leases/{worker_id}/renew",
    tag = "fallback",
    params(("worker_id" = u64, Path, description = "The leased worker id")),
    request_body = RenewFallbackRequest,
    responses(
        (status = 200, description = "The new expiry, accepted by the store", body = FallbackRenewal),
        (
            status = 400,
            description = "A bad body, holder, ttl or worker id (`invalid_parameter`)",
            body = ErrorBody
        ),
        (
            status = 409,
            description = "The lease is not the holder's any more (`fallback_lease_lost`): stop \
                           using the worker id",
            body = ErrorBody
        ),
        FallbackFailures,
    )
)]
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
#[utoipa::path(
    post,
    path = "/v1/fallback/leases/{worker_id}/release",
    tag = "fallback",
    params(("worker_id" = u64, Path, description = "The leased worker id")),
    request_body = ReleaseFallbackRequest,
    responses(
        (status = 200, description = "Whether the holder's lease was released", body = FallbackRelease),
        (
            status = 400,
            description = "A bad body, holder or worker id (`invalid_parameter`)",
            body = ErrorBody
        ),
        FallbackFailures,
    )
)]
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
