//! Segment leases (Tinyid's client-side segments): `POST /v1/segments/{tag}/lease?size=N` hands
//! the caller a whole range of a biz tag, claimed in the database for it alone.
//!
//! The gRPC `LeaseSegment` call goes through [`lease`] too, so both channels check, claim, count
//! and fail the same way, with the same sentences.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::extract::{PathParam, QueryParams};
use super::ids::param_u64;
use super::segments::{segment_error, service};
use super::{ApiError, AppState, ErrorBody};

/// A leased range: the caller's numbers are `start, start + 1, ..., end - 1`.
///
/// ```
/// let lease = uidgen_server::http::SegmentLease { tag: "order".into(), start: 4001, end: 14001 };
/// assert_eq!(serde_json::to_string(&lease).unwrap(), r#"{"tag":"order","start":4001,"end":14001}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SegmentLease {
    /// The biz tag.
    pub tag: String,
    /// First number of the range.
    pub start: i64,
    /// One past the last number of the range.
    pub end: i64,
}

/// Lease `size` numbers of `tag` through `channel` (`http` or `grpc`, for the metrics).
///
/// The claim is committed before this returns (see `SegmentService::lease`): a leased range
/// never overlaps this or any server's own segments, or another lease.
pub(crate) async fn lease(
    state: &AppState,
    tag: &str,
    size: u64,
    channel: &'static str,
) -> Result<SegmentLease, ApiError> {
    let range = service(state)?
        .lease(tag, size)
        .await
        .map_err(segment_error)?;
    state.metrics.segment_lease(channel, size);
    Ok(SegmentLease {
        tag: tag.to_owned(),
        start: range.start,
        end: range.end,
    })
}

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
