//! Leaf segment routes: Leaf's text route, the JSON batch and monitor routes, and the admin route
//! that creates or updates a biz tag.

use crate::metrics::waits::waited;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use uidgen_segment::{GroupState, SegmentState, TagState};
use utoipa::ToSchema;

use super::error::TextError;
use super::extract::{Body, LeafPath, PathParam, QueryParams};
use super::observe::{Answered, Issued, decimal};
use crate::ordered::OrderedView;
use crate::service::error::{ApiError, SEE_LOG};
use crate::service::segments::{STORE_UNAVAILABLE, numbers, ordered, segment_error, service};
use crate::service::state::AppState;

/// `GET /api/segment/get/{key}` (Leaf): the next ID of a biz tag as a bare decimal.
pub async fn leaf_segment(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): LeafPath<String>,
    headers: HeaderMap,
) -> Result<Issued<String>, TextError> {
    let service = service(&state)?;
    if ordered(&state, &tag).is_some() {
        let ids = numbers(&state, &tag, 1, authorization(&headers)).await?;
        return ids
            .first()
            .map(|&id| decimal(id))
            .ok_or_else(|| TextError(ApiError::internal("the leader sent no ID")));
    }
    Ok(decimal(
        waited(service.get_async(&tag))
            .await
            .map_err(segment_error)?,
    ))
}

/// The caller's `Authorization` header, passed on when an ordered tag's call is forwarded.
pub(crate) fn authorization(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
}

/// [`leaf_segment`] without the router, when the tag's current segment has an ID
/// ([`super::App`]'s direct answers).
pub(super) fn leaf_segment_now(state: &AppState, params: &matchit::Params) -> Option<Answered> {
    let tag = params.get("key")?;
    // An ordered tag's IDs come from its leader only: through the router.
    if ordered(state, tag).is_some() {
        return None;
    }
    let ready = service(state).and_then(|service| service.try_get(tag).map_err(segment_error));
    Answered::now(ready.map(|id| id.map(decimal)).map_err(TextError))
}

/// `{"tag": ..., "ids": [...]}`.
#[derive(Serialize, ToSchema)]
pub struct SegmentBatch {
    tag: String,
    ids: Vec<i64>,
}

/// `GET /v1/segments/{tag}?count=N`: a batch of a tag's IDs.
pub async fn batch(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): PathParam<String>,
    query: QueryParams,
    headers: HeaderMap,
) -> Result<Issued<Json<SegmentBatch>>, ApiError> {
    service(&state)?;
    let count = query.count(state.batch_cap)?;
    let ids = numbers(&state, &tag, count, authorization(&headers)).await?;
    Ok(Issued(ids.len() as u64, Json(SegmentBatch { tag, ids })))
}

/// A tag's buffer state as the monitor route shows it: [`TagState`] with the last load error
/// (database text) replaced by a flag and a fixed sentence; the error itself is in the log.
#[derive(Serialize, ToSchema)]
pub struct TagView {
    tag: String,
    init: bool,
    next_ready: bool,
    loading: bool,
    pos: usize,
    step: i64,
    min_step: i64,
    /// Both segments of the double buffer, indexed as `pos` (Leaf's `segments`).
    #[schema(value_type = Vec<SegmentView>, min_items = 2, max_items = 2)]
    segments: [SegmentState; 2],
    /// The last load failed and no load has succeeded since.
    load_failing: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    /// For a tag of a segment group (`[[segment.groups]]`): its group and each database's
    /// row, read live; absent for a tag served from the main store.
    #[serde(skip_serializing_if = "Option::is_none")]
    group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    databases: Option<Vec<DatabaseView>>,
    /// For an ordered tag (issue 35): its leader, term and forwarded calls; absent for a
    /// plain tag.
    #[serde(skip_serializing_if = "Option::is_none")]
    ordered: Option<OrderedView>,
}

/// One database of a segment group, as `GET /v1/segments` shows it for each of the group's
/// tags. Its address is not shown (it is in the configuration and the log).
#[derive(Serialize, ToSchema)]
pub struct DatabaseView {
    /// Its position in the group's `stores` list.
    index: usize,
    /// `sqlite`, `mysql` or `postgres`.
    kind: String,
    /// It answered just now (within the group's attempt timeout).
    reachable: bool,
    /// Segments are claimed here first: the database that answered last.
    preferred: bool,
    /// It has the tag's row.
    exists: bool,
    /// The row's `max_id` (0 when unreachable or absent).
    max_id: i64,
    /// The row's stored step.
    step: i64,
    /// The row's `delta`: the number of databases serving the tag.
    delta: i64,
    /// The row's `remainder`: this database hands out the numbers `≡ remainder (mod delta)`.
    remainder: i64,
}

/// One segment of a tag's double buffer (uidgen-segment's `SegmentState`, described here for
/// the OpenAPI document); all zero before the slot is first loaded.
#[derive(ToSchema)]
#[allow(dead_code)] // Only its schema is used: the response serialises `SegmentState` itself.
pub struct SegmentView {
    /// The next ID this segment would hand out (`max` once used up).
    value: i64,
    /// Exclusive end of the segment.
    max: i64,
    /// The segment's length.
    step: i64,
    /// IDs left (`max - value`).
    idle: i64,
}

impl From<TagState> for TagView {
    fn from(t: TagState) -> Self {
        let load_failing = t.last_error.is_some();
        Self {
            tag: t.tag,
            init: t.init,
            next_ready: t.next_ready,
            loading: t.loading,
            pos: t.pos,
            step: t.step,
            min_step: t.min_step,
            segments: t.segments,
            load_failing,
            last_error: load_failing.then(|| format!("{STORE_UNAVAILABLE}; {SEE_LOG}")),
            group: None,
            databases: None,
            ordered: None,
        }
    }
}

/// `GET /v1/segments`: every tag's buffer state (Leaf's `/cache` page).
pub async fn monitor(State(state): State<Arc<AppState>>) -> Result<Json<Vec<TagView>>, ApiError> {
    let service = service(&state)?;
    let mut views: Vec<TagView> = service.monitor().into_iter().map(TagView::from).collect();
    for group in service.groups().await {
        for view in views.iter_mut().filter(|v| group.tags.contains(&v.tag)) {
            view.group = Some(group.name.clone());
            view.databases = Some(database_views(&group, &view.tag));
        }
    }
    if let Some(ordered) = &state.ordered {
        for (tag, lead) in ordered.views().await {
            if let Some(view) = views.iter_mut().find(|v| v.tag == tag) {
                view.ordered = Some(lead);
            }
        }
    }
    Ok(Json(views))
}

/// Each database of `group` as it holds `tag`.
fn database_views(group: &GroupState, tag: &str) -> Vec<DatabaseView> {
    group
        .databases
        .iter()
        .enumerate()
        .map(|(index, db)| {
            let row = db.tags.iter().find(|r| r.tag == tag);
            DatabaseView {
                index,
                kind: db.url.split("://").next().unwrap_or_default().to_owned(),
                reachable: db.reachable,
                preferred: db.preferred,
                exists: row.is_some_and(|r| r.exists),
                max_id: row.map_or(0, |r| r.max_id),
                step: row.map_or(0, |r| r.step),
                delta: row.map_or(0, |r| r.delta),
                remainder: row.map_or(0, |r| r.remainder),
            }
        })
        .collect()
}

/// Body of `PUT /v1/admin/segments/{tag}`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TagUpdate {
    #[serde(deserialize_with = "super::integer::i64")]
    step: i64,
    description: Option<String>,
    /// `true`: the tag's IDs strictly increase across the cluster (one leader issues them,
    /// the other servers forward to it; issue 35); `false`: a plain tag again; absent: as it
    /// was.
    ordered: Option<bool>,
}

/// A tag's row as stored (for a tag of a segment group: the first database's row; every
/// database holds the same step, its own remainder).
#[derive(Serialize, ToSchema)]
pub struct TagRow {
    tag: String,
    max_id: i64,
    step: i64,
    description: Option<String>,
    /// How many databases serve the tag (Tinyid's `delta`; 1 outside segment groups).
    delta: i64,
    /// This row's database hands out the numbers `≡ remainder (mod delta)`.
    remainder: i64,
    /// The tag is ordered (issue 35): its IDs strictly increase across the cluster.
    ordered: bool,
}

/// `PUT /v1/admin/segments/{tag}` `{"step": N, "description": "..."}`: create a biz tag or change
/// its step and description. Usable at once here, and on other servers after their next sync.
/// Reached only with the admin token (the admin sub-router's layer checks it).
pub async fn upsert_tag(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): PathParam<String>,
    body: Body,
) -> Result<Json<TagRow>, ApiError> {
    let service = service(&state)?;
    let update: TagUpdate = body.json()?;
    let row = service
        .upsert_tag(&tag, update.step, update.description.as_deref())
        .await
        .map_err(segment_error)?;
    let ordered = set_ordered(&state, &tag, update.ordered).await?;
    // Who: the admin token is the only way in (one identity); what: the row as it now is.
    tracing::info!(
        by = "admin token",
        tag = %row.biz_tag,
        step = row.step,
        max_id = row.max_id,
        description = row.description.as_deref().unwrap_or(""),
        "admin set the segment tag `{}` (step {})",
        row.biz_tag,
        row.step
    );
    Ok(Json(TagRow {
        tag: row.biz_tag,
        max_id: row.max_id,
        step: row.step,
        description: row.description,
        delta: row.residue.delta,
        remainder: row.residue.remainder,
        ordered,
    }))
}

/// Mark `tag` ordered (`Some(true)`) or plain (`Some(false)`), or leave it (`None`); whether
/// it is ordered now. The other servers see the change at their next look at the list (a
/// third of `ordered.lease_ms`); the first leader begins two looks after the mark.
async fn set_ordered(state: &AppState, tag: &str, wanted: Option<bool>) -> Result<bool, ApiError> {
    let Some(ordered) = &state.ordered else {
        return match wanted {
            Some(true) => Err(ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "ordered_unavailable",
                "this server runs no ordered tags (segment mode needs its store)",
            )),
            _ => Ok(false),
        };
    };
    let store = ordered.store();
    let changed = match wanted {
        Some(true) => store.mark_ordered(tag).await.map(|_| ()),
        Some(false) => store.unmark_ordered(tag).await.map(|_| ()),
        None => Ok(()),
    };
    changed.map_err(|error| match error {
        uidgen_store::StoreError::InvalidInput(reason) => ApiError::new(
            axum::http::StatusCode::BAD_REQUEST,
            "invalid_parameter",
            reason,
        ),
        other => crate::service::segments::ordered_error(other.into()),
    })?;
    if let Some(wanted) = wanted {
        tracing::info!(
            by = "admin token",
            tag,
            ordered = wanted,
            "admin marked the segment tag `{tag}` {}",
            if wanted { "ordered" } else { "plain" }
        );
        ordered.refresh().await;
    }
    Ok(ordered.is_ordered(tag))
}
