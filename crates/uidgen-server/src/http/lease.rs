//! Segment leases (Tinyid's client-side segments): `POST /v1/segments/{tag}/lease?size=N` hands
//! the caller a whole range of a biz tag, claimed in the database for it alone.
//!
//! The gRPC `LeaseSegment` call goes through [`lease`] too, so both channels check, claim, count
//! and fail the same way, with the same sentences.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::error::ErrorBody;
use super::extract::{PathParam, QueryParams};
use super::ids::param_u64;
use crate::service::error::ApiError;
use crate::service::lease::{SegmentLease, lease};
use crate::service::state::AppState;

/// `POST /v1/segments/{tag}/lease?size=N`: `{"tag": ..., "start": ..., "end": ...}`, the range
/// `[start, end)` of `tag`, `size` numbers long (1 to `segment.max_lease_size`).
#[utoipa::path(
    post,
    path = "/v1/segments/{tag}/lease",
    tag = "segments",
    params(
        ("tag" = String, Path, description = "The biz tag"),
        ("size" = u64, Query, description = "How many numbers: 1 to `segment.max_lease_size`"),
    ),
    responses(
        (
            status = 200,
            description = "The range [start, end), claimed in the database for the caller alone",
            body = SegmentLease
        ),
        (
            status = 400,
            description = "A malformed tag, a size of 0 or above the cap (`invalid_size`), or \
                a tag of a segment group (`group_tag_not_leasable`)",
            body = ErrorBody
        ),
        (
            status = 404,
            description = "Unknown tag (`unknown_tag`) or segment mode off (`segments_disabled`)",
            body = ErrorBody
        ),
        (
            status = 409,
            description = "An ordered tag (`ordered_tag_not_leasable`): its IDs are issued by \
                its leader only",
            body = ErrorBody
        ),
        (status = 503, description = "The store is down or the tag is exhausted", body = ErrorBody),
    )
)]
pub async fn lease_route(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): PathParam<String>,
    params: QueryParams,
) -> Result<Json<SegmentLease>, ApiError> {
    let size = param_u64(&params, "size")?
        .ok_or_else(|| ApiError::bad_parameter("missing query parameter `size`"))?;
    Ok(Json(lease(&state, &tag, size, "http").await?))
}
