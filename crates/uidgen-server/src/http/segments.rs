//! Leaf segment routes: Leaf's text route, the JSON batch and monitor routes, and the admin route
//! that creates or updates a biz tag.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use serde::{Deserialize, Serialize};
use subtle::ConstantTimeEq;
use uidgen_segment::{SegmentError, SegmentService, TagState};

use super::{ApiError, AppState, TextError};

/// Map a segment failure to a status: the client's fault (400/404) or the service's (503).
pub fn segment_error(err: SegmentError) -> ApiError {
    let (status, code) = match &err {
        SegmentError::UnknownTag(_) => (StatusCode::NOT_FOUND, "unknown_tag"),
        SegmentError::InvalidTag { .. } => (StatusCode::BAD_REQUEST, "invalid_tag"),
        SegmentError::InvalidCount { .. } => (StatusCode::BAD_REQUEST, "invalid_count"),
        SegmentError::InvalidStep { .. } => (StatusCode::BAD_REQUEST, "invalid_step"),
        SegmentError::NotInitialised { .. } => (StatusCode::SERVICE_UNAVAILABLE, "not_ready"),
        SegmentError::BothSegmentsNotReady { .. } => {
            (StatusCode::SERVICE_UNAVAILABLE, "segments_not_ready")
        }
        _ => (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable"),
    };
    // Leaf's clients know its codes (-1 not initialised, -2 unknown tag, -3 not ready).
    ApiError::new(status, code, format!("{err} (leaf code {})", err.code()))
}

fn service(state: &AppState) -> Result<&Arc<SegmentService>, ApiError> {
    state.segments.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "segments_disabled",
            "segment mode is disabled on this server (segment.enabled = false)",
        )
    })
}

/// `GET /api/segment/get/{key}` (Leaf): the next ID of a biz tag as a bare decimal.
pub async fn leaf_segment(
    State(state): State<Arc<AppState>>,
    Path(tag): Path<String>,
) -> Result<String, TextError> {
    let service = service(&state)?;
    let id = service.get_async(&tag).await.map_err(segment_error)?;
    state.metrics.issued("/api/segment/get/{key}", 1);
    Ok(id.to_string())
}

/// `{"tag": ..., "ids": [...]}`.
#[derive(Serialize)]
pub struct SegmentBatch {
    tag: String,
    ids: Vec<i64>,
}

/// `?count=N` for segment batches.
#[derive(Deserialize)]
pub struct CountQuery {
    count: Option<String>,
}

/// `GET /v1/segments/{tag}?count=N`: a batch of a tag's IDs.
pub async fn batch(
    State(state): State<Arc<AppState>>,
    Path(tag): Path<String>,
    Query(query): Query<CountQuery>,
) -> Result<Json<SegmentBatch>, ApiError> {
    let service = service(&state)?;
    let count = match query.count.as_deref().map(str::trim) {
        None => 1,
        Some(raw) => raw
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=state.batch_cap).contains(n))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_count",
                    format!(
                        "count {:?} is out of range; ask for 1 to {} IDs",
                        raw.chars().take(32).collect::<String>(),
                        state.batch_cap
                    ),
                )
            })?,
    };
    let ids = service
        .get_batch_async(&tag, count)
        .await
        .map_err(segment_error)?;
    state.metrics.issued("/v1/segments/{tag}", ids.len() as u64);
    Ok(Json(SegmentBatch { tag, ids }))
}

/// `GET /v1/segments`: every tag's buffer state (Leaf's `/cache` page).
pub async fn monitor(State(state): State<Arc<AppState>>) -> Result<Json<Vec<TagState>>, ApiError> {
    Ok(Json(service(&state)?.monitor()))
}

/// Body of `PUT /v1/admin/segments/{tag}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TagUpdate {
    step: i64,
    description: Option<String>,
}

/// A tag's row as stored.
#[derive(Serialize)]
pub struct TagRow {
    tag: String,
    max_id: i64,
    step: i64,
    description: Option<String>,
}

/// Check `Authorization: Bearer <token>` against the configured admin token in constant time:
/// 404 when no token is configured (the admin API does not exist), 401 without credentials, 403
/// with wrong ones.
fn authorise(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(expected) = &state.admin_token else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "admin_disabled",
            "the admin API is disabled; set admin_token to enable it",
        ));
    };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send the admin token as `Authorization: Bearer <token>`",
            )
        })?;
    if bool::from(given.as_bytes().ct_eq(expected.as_bytes())) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the admin token is wrong",
        ))
    }
}

/// `PUT /v1/admin/segments/{tag}` `{"step": N, "description": "..."}`: create a biz tag or change
/// its step and description. Usable at once here, and on other servers after their next sync.
pub async fn upsert_tag(
    State(state): State<Arc<AppState>>,
    Path(tag): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<TagRow>, ApiError> {
    authorise(&state, &headers)?;
    let service = service(&state)?;
    let update: TagUpdate = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_parameter(format!("invalid JSON body: {e}")))?;
    let row = service
        .upsert_tag(&tag, update.step, update.description.as_deref())
        .await
        .map_err(segment_error)?;
    Ok(Json(TagRow {
        tag: row.biz_tag,
        max_id: row.max_id,
        step: row.step,
        description: row.description,
    }))
}
