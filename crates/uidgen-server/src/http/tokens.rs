//! The admin API of caller tokens: create (the token is shown once), list (never a secret),
//! revoke. Reached only with the admin token (the admin sub-router's layer checks it). A token
//! made or revoked here takes effect on this server at once, on the others within
//! `auth.refresh_secs`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use uidgen_store::{CallerToken, Revoked, StoreError, TokenScopes};
use utoipa::ToSchema;

use super::extract::{Body, PathParam};
use crate::service::callers::{Callers, check_scopes};
use crate::service::error::{ApiError, SEE_LOG};
use crate::service::state::AppState;

/// Body of `POST /v1/admin/tokens`. A list left out allows nothing of its kind; `*` in a list
/// allows anything.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// The caller's name: 1 to 64 of `[A-Za-z0-9._-]`, unique (a revoked token's name too).
    /// Its metrics are labelled with it.
    #[schema(min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9._-]{1,64}$")]
    name: String,
    /// Route families: `ids`, `segments`, `sharded`, `fallback`, `spaces`, or `*`.
    #[serde(default)]
    #[schema(max_items = 256)]
    routes: Vec<String>,
    /// Segment tags, or `*`.
    #[serde(default)]
    #[schema(max_items = 256)]
    tags: Vec<String>,
    /// Sharded app ids (decimal), or `*`.
    #[serde(default)]
    #[schema(max_items = 256)]
    apps: Vec<String>,
    /// Space names, or `*`.
    #[serde(default)]
    #[schema(max_items = 256)]
    spaces: Vec<String>,
    /// When the token stops being accepted, ms since the Unix epoch; it must lie in the
    /// future. Absent (and without `ttl_secs`): never.
    expires_ms: Option<i64>,
    /// When the token stops being accepted, in seconds from now (instead of `expires_ms`).
    #[schema(minimum = 1, maximum = 315_360_000)]
    ttl_secs: Option<u64>,
}

/// The longest `ttl_secs`: ten years, beyond any use and far from overflowing ms.
const MAX_TTL_SECS: u64 = 315_360_000;

impl NewToken {
    /// The expiry asked for, in ms since the Unix epoch: `expires_ms`, or `ttl_secs` from
    /// `now_ms`; never both.
    fn expiry(&self, now_ms: i64) -> Result<Option<i64>, ApiError> {
        match (self.expires_ms, self.ttl_secs) {
            (Some(_), Some(_)) => Err(ApiError::bad_parameter(
                "give expires_ms (an instant) or ttl_secs (a duration), not both",
            )),
            (_, Some(ttl)) if ttl == 0 || ttl > MAX_TTL_SECS => Err(ApiError::bad_parameter(
                format!("ttl_secs must be between 1 and {MAX_TTL_SECS}"),
            )),
            (None, Some(ttl)) => {
                // At most ten years of ms: far inside i64.
                let ms = i64::try_from(ttl.saturating_mul(1000)).unwrap_or(i64::MAX);
                Ok(Some(now_ms.saturating_add(ms)))
            }
            (at, None) => Ok(at),
        }
    }
}

/// A token as listed: no secret, no hash.
#[derive(Serialize, ToSchema)]
pub struct TokenView {
    /// The id `DELETE /v1/admin/tokens/{id}` takes.
    id: i64,
    name: String,
    routes: Vec<String>,
    tags: Vec<String>,
    apps: Vec<String>,
    spaces: Vec<String>,
    /// When it was made, ms since the Unix epoch.
    created_ms: i64,
    /// When it was revoked, ms since the Unix epoch; absent while valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    revoked_at_ms: Option<i64>,
    /// When it stops (or stopped) being accepted, ms since the Unix epoch; absent for never.
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_ms: Option<i64>,
}

impl From<CallerToken> for TokenView {
    fn from(token: CallerToken) -> Self {
        let TokenScopes {
            routes,
            tags,
            apps,
            spaces,
        } = token.scopes;
        Self {
            id: token.id,
            name: token.name,
            routes,
            tags,
            apps,
            spaces,
            created_ms: token.created_ms,
            revoked_at_ms: token.revoked_at_ms,
            expires_ms: token.expires_ms,
        }
    }
}

/// A token just made: its row and the bearer token itself, shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedToken {
    /// Send as `Authorization: Bearer <token>`; only its SHA-256 is stored, so it cannot be
    /// shown again.
    token: String,
    #[serde(flatten)]
    view: TokenView,
}

/// Every token, valid and revoked.
#[derive(Serialize, ToSchema)]
pub struct TokenList {
    tokens: Vec<TokenView>,
}

/// The answer of `DELETE /v1/admin/tokens/{id}`.
#[derive(Serialize, ToSchema)]
pub struct RevokedToken {
    id: i64,
    /// `true` when this call revoked it, `false` when it had been revoked before.
    revoked_now: bool,
}

fn callers(state: &AppState) -> Result<&Arc<Callers>, ApiError> {
    state.callers.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "tokens_disabled",
            "this server has no store for caller tokens",
        )
    })
}

/// A store failure as the client sees it: its own mistake (400, 409) in full, the store's
/// trouble as a fixed sentence with the details in the log.
fn token_error(error: StoreError) -> ApiError {
    match error {
        StoreError::InvalidInput(message) => ApiError::bad_parameter(message),
        StoreError::CallerTokenNameTaken(_) => {
            ApiError::new(StatusCode::CONFLICT, "token_name_taken", error.to_string())
        }
        other => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            format!("the caller token store is unavailable; {SEE_LOG}"),
        )
        .with_cause(other.to_string()),
    }
}

/// Read the tokens again after a change, so this server applies it at once; a failure only
/// delays it to the next refresh.
async fn apply_now(callers: &Callers) {
    if let Err(error) = callers.reload().await {
        tracing::warn!(%error, "cannot re-read the caller tokens; the next refresh will");
    }
}

/// `POST /v1/admin/tokens`: make a caller token; the answer carries it, once.
pub async fn create_token(
    State(state): State<Arc<AppState>>,
    body: Body,
) -> Result<Json<CreatedToken>, ApiError> {
    let callers = callers(&state)?;
    let request: NewToken = body.json()?;
    let expires_ms = request.expiry(crate::service::callers::now_ms())?;
    let scopes = TokenScopes {
        routes: request.routes,
        tags: request.tags,
        apps: request.apps,
        spaces: request.spaces,
    };
    check_scopes(&scopes)?;
    let created = callers
        .store()
        .create_caller_token(&request.name, &scopes, expires_ms)
        .await
        .map_err(token_error)?;
    apply_now(callers).await;
    // Who: the admin token, the one admin identity; what: the token's id and name, never its
    // secret.
    tracing::info!(by = "admin token", id = created.token.id, name = %created.token.name,
        "caller token created");
    Ok(Json(CreatedToken {
        token: created.secret,
        view: created.token.into(),
    }))
}

/// `GET /v1/admin/tokens`: every caller token, valid and revoked, without secrets.
pub async fn list_tokens(State(state): State<Arc<AppState>>) -> Result<Json<TokenList>, ApiError> {
    let callers = callers(&state)?;
    let tokens = callers
        .store()
        .list_caller_tokens()
        .await
        .map_err(token_error)?;
    Ok(Json(TokenList {
        tokens: tokens.into_iter().map(TokenView::from).collect(),
    }))
}

/// `DELETE /v1/admin/tokens/{id}`: revoke a caller token, for good.
pub async fn revoke_token(
    State(state): State<Arc<AppState>>,
    PathParam(id, _): PathParam<i64>,
) -> Result<Json<RevokedToken>, ApiError> {
    let callers = callers(&state)?;
    let revoked = callers
        .store()
        .revoke_caller_token(id)
        .await
        .map_err(token_error)?;
    let revoked_now = match revoked {
        Revoked::Now => true,
        Revoked::Already => false,
        Revoked::Unknown => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_token",
                format!("no caller token has id {id}"),
            ));
        }
    };
    apply_now(callers).await;
    tracing::info!(by = "admin token", id, revoked_now, "caller token revoked");
    Ok(Json(RevokedToken { id, revoked_now }))
}
