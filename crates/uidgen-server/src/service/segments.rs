//! Segment mode as the service sees it: the segment service when enabled, and its failures as
//! [`ApiError`]s, the same over HTTP and gRPC.

use crate::metrics::waits::waited;
use std::sync::Arc;

use axum::http::StatusCode;
use uidgen_core::calendar::CivilDate;
use uidgen_segment::{SegmentError, SegmentService, day_tag};

use super::error::{ApiError, ECHO_CHARS, SEE_LOG, clip};
use super::state::AppState;

/// What a client is told when the segment store fails; the cause goes to the log.
pub(crate) const STORE_UNAVAILABLE: &str = "segment store unavailable";

/// Map a segment failure to a status: the client's fault (400/404) or the service's (503).
///
/// The service's failures carry database text (the store URL, the driver's message): that is
/// the error's cause, for the log, and the client gets a fixed sentence. Input the store refused
/// is the client's fault and its message names the field ("description is 300 characters long;
/// at most 256 fit"). Leaf's clients know its codes (-1 not initialised, -2 unknown tag, -3 not
/// ready), so every message ends with one.
pub fn segment_error(err: SegmentError) -> ApiError {
    let code = err.code();
    // The service's own failures, whose text (database URL, driver message) only the log sees.
    let mut log_cause = false;
    let (status, kind, message) = match &err {
        SegmentError::UnknownTag(tag) => (
            StatusCode::NOT_FOUND,
            "unknown_tag",
            format!(
                "unknown biz tag `{}`: create it with `PUT /v1/admin/segments/{{tag}}` (other \
                 servers see it after their next tag sync)",
                clip(tag, ECHO_CHARS)
            ),
        ),
        SegmentError::InvalidTag { .. }
        | SegmentError::InvalidCount { .. }
        | SegmentError::InvalidStep { .. }
        | SegmentError::InvalidLeaseSize { .. }
        | SegmentError::InvalidInput(_) => {
            let kind = match &err {
                SegmentError::InvalidTag { .. } => "invalid_tag",
                SegmentError::InvalidCount { .. } => "invalid_count",
                SegmentError::InvalidLeaseSize { .. } => "invalid_size",
                SegmentError::InvalidStep { .. } => "invalid_step",
                _ => "invalid_parameter",
            };
            (StatusCode::BAD_REQUEST, kind, err.to_string())
        }
        SegmentError::NotInitialised { .. } => {
            log_cause = true;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                format!("segment mode is not initialised: {STORE_UNAVAILABLE}; {SEE_LOG}"),
            )
        }
        SegmentError::BothSegmentsNotReady { tag, .. } => {
            log_cause = true;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "segments_not_ready",
                format!(
                    "both segments of biz tag `{}` are used up and the next did not load in time; \
                     {SEE_LOG}",
                    clip(tag, ECHO_CHARS)
                ),
            )
        }
        SegmentError::TagExhausted { tag, .. } => {
            log_cause = true;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "tag_exhausted",
                format!(
                    "biz tag `{}` has used up the 63-bit ID range; no further segment can be \
                     claimed",
                    clip(tag, ECHO_CHARS)
                ),
            )
        }
        SegmentError::Shutdown => (
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            err.to_string(),
        ),
        SegmentError::LeaseOfGroupTag { .. } => (
            StatusCode::BAD_REQUEST,
            "group_tag_not_leasable",
            err.to_string(),
        ),
        SegmentError::GroupInconsistent { tag, group, .. } => {
            log_cause = true;
            (
                StatusCode::CONFLICT,
                "group_inconsistent",
                format!(
                    "the databases of segment group `{}` disagree about biz tag `{}` (delta or \
                     remainder); nothing was changed; {SEE_LOG}",
                    clip(group, ECHO_CHARS),
                    clip(tag, ECHO_CHARS)
                ),
            )
        }
        _ => {
            log_cause = true;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "store_unavailable",
                format!("{STORE_UNAVAILABLE}; {SEE_LOG}"),
            )
        }
    };
    let error = ApiError::new(status, kind, format!("{message} (leaf code {code})"));
    if log_cause {
        error.with_cause(err.to_string())
    } else {
        error
    }
}

/// The segment service, or `404 segments_disabled` when segment mode is off.
pub fn service(state: &AppState) -> Result<&Arc<SegmentService>, ApiError> {
    state.segments.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_FOUND,
            "segments_disabled",
            "segment mode is disabled on this server (segment.enabled = false)",
        )
    })
}

/// The step a day's tag is created with: small, since a restart skips the rest of a segment
/// and a day's numbers are few (dynamic step grows it for a busy tag; an admin may set it with
/// `PUT /v1/admin/segments/{day tag}`).
pub const DAY_TAG_STEP: i64 = 100;

/// `n` numbers of `tag` for `date`, from its day tag, created on the first request of the day
/// on this server (`tag` must be listed in `segment.dated_tags`). The numbers restart at 1
/// each day, since each day's tag starts at `max_id` 1, and never repeat within a day: they
/// are a segment tag's IDs.
pub async fn dated_numbers(
    state: &AppState,
    tag: &str,
    date: CivilDate,
    n: usize,
) -> Result<(String, Vec<i64>), ApiError> {
    let service = service(state)?;
    if !state.dated_tags.iter().any(|t| t == tag) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "unknown_tag",
            format!(
                "biz tag `{}` is not dated on this server: list it in `segment.dated_tags`",
                clip(tag, ECHO_CHARS)
            ),
        ));
    }
    let day = day_tag(tag, date);
    if matches!(service.tag(&day), Err(SegmentError::UnknownTag(_))) {
        // Idempotent: an existing row (created by another server, or by a request racing this
        // one) keeps its `max_id`, so no number is handed out twice.
        service
            .upsert_tag(
                &day,
                DAY_TAG_STEP,
                Some(&format!("dated numbers of `{tag}`")),
            )
            .await
            .map_err(segment_error)?;
    }
    let ids = waited(service.get_batch_async(&day, n))
        .await
        .map_err(segment_error)?;
    Ok((day, ids))
}
