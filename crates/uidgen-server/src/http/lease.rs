//! Segment leases (Tinyid's client-side segments): `POST /v1/segments/{tag}/lease?size=N` hands
//! the caller a whole range of a biz tag, claimed in the database for it alone.
//!
//! The gRPC `LeaseSegment` call goes through [`lease`] too, so both channels check, claim, count
//! and fail the same way, with the same sentences.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::extract::{PathParam, QueryParams};
use super::ids::param_u64;
use crate::service::error::ApiError;
use crate::service::lease::{SegmentLease, lease};
use crate::service::state::AppState;

/// `POST /v1/segments/{tag}/lease?size=N`: `{"tag": ..., "start": ..., "end": ...}`, the range
/// `[start, end)` of `tag`, `size` numbers long (1 to `segment.max_lease_size`).
pub async fn lease_route(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): PathParam<String>,
    params: QueryParams,
) -> Result<Json<SegmentLease>, ApiError> {
    let size = param_u64(&params, "size")?
        .ok_or_else(|| ApiError::bad_parameter("missing query parameter `size`"))?;
    Ok(Json(lease(&state, &tag, size, "http").await?))
}
