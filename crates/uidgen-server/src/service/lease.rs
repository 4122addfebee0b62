//! Segment leases (Tinyid's client-side segments): a caller takes a whole range of a biz
//! tag, claimed in the database for it alone. HTTP's `POST /v1/segments/{tag}/lease` and
//! gRPC's `LeaseSegment` both go through [`lease`], so both channels check, claim, count and
//! fail the same way, with the same sentences.

use serde::Serialize;
use utoipa::ToSchema;

use super::error::ApiError;
use super::segments::{segment_error, service};
use super::state::AppState;

/// A leased range: the caller's numbers are `start, start + 1, ..., end - 1`.
///
/// ```
/// use uidgen_server::service::lease::SegmentLease;
/// let lease = SegmentLease { tag: "order".into(), start: 4001, end: 14001 };
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
pub async fn lease(
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
