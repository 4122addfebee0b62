//! Sharded-mode routes: the original service's route (a bare number), the JSON batch, the app
//! list, decoding (`/v1/ids/{id}?layout=sharded`), and the admin route that creates or updates
//! an app with its 64 shards.
//!
//! Every error, on the original's route too, is `{"code", "message"}` JSON with a status, as
//! the original service answered its error codes; causes on the service's side (Redis, the
//! database) reach the log only.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use uidgen_sharded::{AppInfo, ShardedError, ShardedId, ShardedService, shard_of};
use uidgen_store::AppSpec;
use utoipa::ToSchema;

use super::extract::{Body, PathParam, QueryParams};
use super::observe::{Issued, decimal};
use crate::service::error::{ApiError, ECHO_CHARS, SEE_LOG, clip};
use crate::service::state::AppState;

/// Map a sharded-mode failure to a status: the client's fault (400/404), the app's limit
/// (409 `app_exhausted`), or the service's (503, fixed sentence, cause to the log).
///
/// An exhausted app is a 409, not a 503: nothing on the server's side is down, retrying (here
/// or on another server) never helps, and what resolves it is a change to the app (a higher
/// `max_limit_id`), which is what 409 Conflict says (RFC 9110, section 15.5.10).
pub fn sharded_error(err: ShardedError) -> ApiError {
    use ShardedError as E;
    let (status, code, message) = match &err {
        E::AppNotFound { .. } => (StatusCode::NOT_FOUND, "app_not_found", err.to_string()),
        E::ShardNotFound { .. } => (StatusCode::NOT_FOUND, "shard_not_found", err.to_string()),
        E::AppExhausted { .. } => (StatusCode::CONFLICT, "app_exhausted", err.to_string()),
        E::EmptyGatePass => (
            StatusCode::BAD_REQUEST,
            "invalid_gate_pass",
            err.to_string(),
        ),
        E::InvalidCount { .. } => (StatusCode::BAD_REQUEST, "invalid_count", err.to_string()),
        E::MalformedId { .. } => (StatusCode::BAD_REQUEST, "malformed_id", err.to_string()),
        E::ShardOutOfRange { .. }
        | E::IndexOutOfRange { .. }
        | E::InvalidInput(_)
        | E::InvalidOption { .. } => (
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            err.to_string(),
        ),
        E::NotInitialised { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "not_initialised",
            format!(
                "sharded mode is not initialised: the app list has not loaded from the database \
                 yet; {SEE_LOG}"
            ),
        ),
        E::QueueEmpty { app_id, shard, .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "queue_empty",
            format!(
                "the ID queue of app {app_id} shard {shard} is empty and was not refilled in time; \
                 retry, and {SEE_LOG}"
            ),
        ),
        E::Redis { .. } => (
            StatusCode::SERVICE_UNAVAILABLE,
            "redis_unavailable",
            format!("the sharded ID queues (Redis) are unavailable; {SEE_LOG}"),
        ),
        E::Shutdown => (
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            err.to_string(),
        ),
        _ => (
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the sharded mode's database is unavailable; {SEE_LOG}"),
        ),
    };
    let error = ApiError::new(status, code, message);
    if err.is_service_fault() {
        error.with_cause(err.to_string())
    } else {
        error
    }
}

fn service(state: &AppState) -> Result<&Arc<ShardedService>, ApiError> {
    state.sharded.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "sharded_disabled",
            "sharded mode is disabled on this server (sharded.enabled = false)",
        )
    })
}

/// An app id from the path: a decimal 0 to 255 (the low 8 bits of its IDs).
fn app_id(raw: &str) -> Result<u8, ApiError> {
    let invalid = |why: String| ApiError::new(StatusCode::BAD_REQUEST, "invalid_app", why);
    let trimmed = raw.trim();
    if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid(format!(
            "app id {:?} is not a number; app ids are 0 to 255",
            clip(raw, ECHO_CHARS)
        )));
    }
    trimmed.parse::<u8>().map_err(|_| {
        invalid(format!(
            "app id {} is out of range; app ids are 0 to 255",
            clip(trimmed, ECHO_CHARS)
        ))
    })
}

/// The gate pass (user name, phone, e-mail) from query parameter `name`: required, not empty.
fn gate_pass<'a>(query: &'a QueryParams, name: &str) -> Result<&'a str, ApiError> {
    match query.get(name) {
        None => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_gate_pass",
            format!(
                "missing query parameter `{name}`: the user name, phone number or e-mail that \
                 picks the shard"
            ),
        )),
        Some(value) if value.is_empty() => Err(sharded_error(ShardedError::EmptyGatePass)),
        Some(value) => Ok(value),
    }
}

/// What a request for one shard's IDs names: the service (sharded mode on), the app id from
/// the path and the gate pass from query parameter `gate`, checked in that order.
fn shard_request<'a>(
    state: &'a AppState,
    raw_app: &str,
    query: &'a QueryParams,
    gate: &str,
) -> Result<(&'a Arc<ShardedService>, u8, &'a str), ApiError> {
    Ok((service(state)?, app_id(raw_app)?, gate_pass(query, gate)?))
}

/// `GET /api/shard/get/{app_id}?gatePass=…` (the original service's route): one ID of the app,
/// in the gate pass's shard, as a bare decimal.
pub async fn original_get(
    State(state): State<Arc<AppState>>,
    PathParam(raw_app, _): PathParam<String>,
    query: QueryParams,
) -> Result<Issued<String>, ApiError> {
    let (service, app_id, gate_pass) = shard_request(&state, &raw_app, &query, "gatePass")?;
    let id = service
        .get(app_id, gate_pass)
        .await
        .map_err(sharded_error)?;
    Ok(decimal(id))
}

/// `{"app_id": 7, "shard": 61, "ids": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct ShardedBatch {
    app_id: u8,
    shard: u8,
    ids: Vec<u64>,
}

/// `GET /v1/apps/{app_id}/ids?gate_pass=…&count=N`: `N` IDs (default 1, at most `batch_cap`)
/// of the app in the gate pass's shard, popped with one `LPOP key N`.
pub async fn batch(
    State(state): State<Arc<AppState>>,
    PathParam(raw_app, _): PathParam<String>,
    query: QueryParams,
) -> Result<Issued<Json<ShardedBatch>>, ApiError> {
    let (service, app_id, gate_pass) = shard_request(&state, &raw_app, &query, "gate_pass")?;
    let count = query.count(state.batch_cap)?;
    let ids = service
        .get_batch(app_id, gate_pass, count)
        .await
        .map_err(sharded_error)?;
    let shard = shard_of(gate_pass);
    Ok(Issued(
        ids.len() as u64,
        Json(ShardedBatch { app_id, shard, ids }),
    ))
}

/// An app as the JSON API shows it.
#[derive(Serialize, ToSchema)]
pub struct AppView {
    app_id: u8,
    name: String,
    step: i64,
    max_limit_id: i64,
    /// The largest ID the app may hand out: `max_limit_id` when set, else the largest its 49
    /// index bits, 64 shards and app id make. No ID of the app is larger; none is wrapped.
    largest_id: u64,
    shards: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

impl From<AppInfo> for AppView {
    fn from(app: AppInfo) -> Self {
        Self {
            app_id: app.app_id,
            name: app.name,
            step: app.step,
            max_limit_id: app.max_limit_id,
            largest_id: app.largest_id,
            shards: app.shards,
            description: app.description,
        }
    }
}

/// `GET /v1/apps`: every app, as stored.
pub async fn list_apps(State(state): State<Arc<AppState>>) -> Result<Json<Vec<AppView>>, ApiError> {
    let apps = service(&state)?.apps().await.map_err(sharded_error)?;
    Ok(Json(apps.into_iter().map(AppView::from).collect()))
}

/// Body of `PUT /v1/admin/apps/{app_id}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppUpdate {
    name: String,
    #[serde(default, deserialize_with = "super::integer::opt_i64")]
    step: Option<i64>,
    #[serde(default, deserialize_with = "super::integer::opt_i64")]
    max_limit_id: Option<i64>,
    description: Option<String>,
}

/// `PUT /v1/admin/apps/{app_id}` `{"name": ..., "step": 1000, "max_limit_id": 0}`: create the
/// app with its 64 shards, or change its name, step, limit and description. Answers the app
/// with the largest index its limit allows. Reached only with the admin token (the admin
/// sub-router's layer checks it).
pub async fn upsert_app(
    State(state): State<Arc<AppState>>,
    PathParam(raw_app, _): PathParam<String>,
    body: Body,
) -> Result<Json<AppView>, ApiError> {
    let service = service(&state)?;
    let app_id = app_id(&raw_app)?;
    let update: AppUpdate = body.json()?;
    let defaults = AppSpec::new(app_id, "");
    let spec = AppSpec {
        app_id,
        name: update.name,
        step: update.step.unwrap_or(defaults.step),
        max_limit_id: update.max_limit_id.unwrap_or(defaults.max_limit_id),
        description: update.description,
    };
    let app = service.upsert_app(&spec).await.map_err(sharded_error)?;
    // Who: the admin token is the only way in (one identity); what: the app as asked.
    tracing::info!(
        by = "admin token",
        app_id,
        name = %spec.name,
        step = spec.step,
        max_limit_id = spec.max_limit_id,
        "admin set the sharded app {app_id} (`{}`, step {})",
        spec.name,
        spec.step
    );
    Ok(Json(AppView::from(app)))
}

/// A sharded ID taken apart.
#[derive(Serialize, ToSchema)]
pub struct DecodedSharded {
    id: u64,
    layout: &'static str,
    app_id: u8,
    shard: u8,
    index: u64,
}

/// `GET /v1/ids/{id}?layout=sharded`: the app id, shard and index of a sharded ID. Needs no
/// Redis, so it answers with the mode disabled too.
pub(super) fn decode(text: &str) -> Result<Json<DecodedSharded>, ApiError> {
    let parts = ShardedId::decode_str(text).map_err(sharded_error)?;
    Ok(Json(DecodedSharded {
        id: parts.to_u64(),
        layout: "sharded",
        app_id: parts.app_id,
        shard: parts.shard,
        index: parts.index,
    }))
}
