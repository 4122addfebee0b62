//! Segment mode as the service sees it: the segment service when enabled, and its failures as
//! [`ApiError`]s, the same over HTTP and gRPC.

use crate::metrics::waits::waited;
use std::sync::Arc;

use axum::http::StatusCode;
use uidgen_core::calendar::CivilDate;
use uidgen_segment::{SegmentError, SegmentService, day_tag};
use uidgen_store::StoreError;

use super::error::{ApiError, ECHO_CHARS, SEE_LOG, clip};
use super::state::AppState;
use crate::ordered::{OrderedError, OrderedTags};

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
        SegmentError::Store(StoreError::TagOrdered(tag)) => (
            StatusCode::CONFLICT,
            "ordered_tag",
            format!(
                "biz tag `{}` is ordered: its IDs come from its leader only, and its ranges are \
                 never leased",
                clip(tag, ECHO_CHARS)
            ),
        ),
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

/// `n` numbers of `tag`: from the tag's leader when it is ordered (issue 35; forwarded with
/// the caller's `authorization` when another server leads it), else from this server's own
/// segments. Every route that hands out a tag's numbers goes through here, so none of them can
/// serve an ordered tag from its own segments.
pub async fn numbers(
    state: &AppState,
    tag: &str,
    n: usize,
    auth: Option<&str>,
) -> Result<Vec<i64>, ApiError> {
    let service = service(state)?;
    if let Some(ordered) = ordered(state, tag) {
        match ordered.take(tag, n, auth).await {
            // Unmarked meanwhile: a plain tag again.
            Err(OrderedError::Store(StoreError::NotOrdered(_))) => {}
            taken => return taken.map_err(ordered_error),
        }
    }
    match waited(service.get_batch_async(tag, n)).await {
        Ok(ids) => Ok(ids),
        Err(error) => {
            // A tag marked ordered since this server last read the list: the store refuses its
            // segments to all but the leader. Read the list now, and go to the leader.
            if let Some(ordered) = &state.ordered {
                ordered.refresh_soon().await;
                if ordered.is_ordered(tag) {
                    return ordered.take(tag, n, auth).await.map_err(ordered_error);
                }
            }
            Err(segment_error(error))
        }
    }
}

/// The ordered tags, when `tag` is one of them.
pub fn ordered<'a>(state: &'a AppState, tag: &str) -> Option<&'a OrderedTags> {
    state
        .ordered
        .as_deref()
        .filter(|ordered| ordered.is_ordered(tag))
}

/// Map an ordered tag's failure to a status.
pub fn ordered_error(err: OrderedError) -> ApiError {
    match err {
        OrderedError::NotLeading(tag) => ApiError::new(
            StatusCode::CONFLICT,
            "not_leader",
            format!(
                "this server does not lead ordered biz tag `{}`: ask it without forwarding, \
                 or ask the leader",
                clip(&tag, ECHO_CHARS)
            ),
        ),
        OrderedError::NoLeader { ref tag, .. } => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ordered_leader_unavailable",
            format!(
                "no leader of ordered biz tag `{}` answered in time (a leader died and its \
                 lease has not run out, or the store does not answer); retry; {SEE_LOG}",
                clip(tag, ECHO_CHARS)
            ),
        )
        .with_cause(err.to_string()),
        OrderedError::Store(store) => segment_error(match store {
            StoreError::UnknownTag(tag) => SegmentError::UnknownTag(tag),
            StoreError::TagExhausted { tag, max_id, .. } => {
                SegmentError::TagExhausted { tag, max_id }
            }
            other => SegmentError::Store(other),
        }),
        OrderedError::Refused(status) => {
            let (code, kind) = match status.code() {
                tonic::Code::InvalidArgument => (StatusCode::BAD_REQUEST, "invalid_parameter"),
                tonic::Code::NotFound => (StatusCode::NOT_FOUND, "unknown_tag"),
                tonic::Code::Unauthenticated => (StatusCode::UNAUTHORIZED, "unauthorized"),
                tonic::Code::PermissionDenied => (StatusCode::FORBIDDEN, "forbidden"),
                _ => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ordered_leader_unavailable",
                ),
            };
            ApiError::new(code, kind, format!("the leader: {}", status.message()))
        }
        OrderedError::Stopping => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            err.to_string(),
        ),
        // `OrderedError` is non-exhaustive for other crates only; kept for its future kinds.
        #[allow(unreachable_patterns)]
        _ => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "ordered_leader_unavailable",
            format!("{STORE_UNAVAILABLE}; {SEE_LOG}"),
        )
        .with_cause(err.to_string()),
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
    let ids = numbers(state, &day, n, None).await?;
    Ok((day, ids))
}
