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
    let service = service(state)?;
    // A leased range is handed out later, by the client, in no order with other servers'
    // IDs: an ordered tag's numbers are issued by its leader only.
    if crate::service::segments::ordered(state, tag).is_some() {
        return Err(not_leasable(tag));
    }
    let range = match service.lease(tag, size).await {
        Ok(range) => range,
        Err(error) => {
            // Marked ordered since this server last read the list: the store refused.
            if let Some(ordered) = &state.ordered {
                ordered.refresh_soon().await;
                if ordered.is_ordered(tag) {
                    return Err(not_leasable(tag));
                }
            }
            return Err(segment_error(error));
        }
    };
    state.metrics.segment_lease(channel, size);
    Ok(SegmentLease {
        tag: tag.to_owned(),
        start: range.start,
        end: range.end,
    })
}

/// `409 ordered_tag_not_leasable`.
fn not_leasable(tag: &str) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "ordered_tag_not_leasable",
        format!(
            "biz tag `{}` is ordered: its IDs are issued one call at a time by its leader, \
                 never leased",
            super::error::clip(tag, super::error::ECHO_CHARS)
        ),
    )
}
