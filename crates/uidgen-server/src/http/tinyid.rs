//! Tinyid's HTTP API (`IdContronller` under Tinyid's `server.context-path=/tinyid`), so its
//! clients switch to uidgen by changing a host name: `/tinyid/id/nextId`, `nextIdSimple`,
//! `nextSegmentId` and `nextSegmentIdSimple`, with `bizType`, `batchSize` and `token` in the
//! query, by `GET` or `POST` (Tinyid's client posts an empty form).
//!
//! A biz type is a segment tag (`uidgen takeover tinyid` moves Tinyid's `tiny_id_info` rows to
//! `leaf_alloc`, above every number Tinyid handed out): `nextId` takes numbers from the tag's
//! segments as `/v1/segments/{tag}` does, `nextSegmentId` leases a range of the tag's stored
//! step as `POST /v1/segments/{tag}/lease` does, shown as Tinyid's `SegmentId` (`(currentId,
//! maxId]`, of which the client uses the numbers `≡ remainder (mod delta)`).
//!
//! The token is Tinyid's `token` parameter (or a bearer token), checked as a caller token when
//! `auth.required` is on (`uidgen takeover tinyid` imports Tinyid's tokens as caller tokens
//! allowed the segment routes and their biz types), and not asked for when it is off, as no ID
//! route asks for one then. Answers keep Tinyid's shapes: `{"data", "code", "message"}` with
//! code 200, 5 (`token is error`) or 6 (an error), always HTTP 200; the `Simple` routes answer
//! the bare text, or nothing on any error.
//!
//! A request no Tinyid client sends is refused before Tinyid's own checks, with 400 and
//! uidgen's JSON error: no `bizType`, one no tag can be, a `batchSize` that is not an integer
//! from 1 to 2^31 - 1 (Spring answers 400 to an `Integer` it cannot read; Tinyid answered an
//! empty list below 1), or an empty `token`. So the document's bounds are the route's.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use serde::Serialize;
use uidgen_store::Residue;
use utoipa::ToSchema;

use super::extract::QueryParams;
use super::observe::Issued;
use crate::service::callers::{Caller, RouteFamily, Scoped, bearer_token};
use crate::service::error::ApiError;
use crate::service::segments::{numbers, segment_error, service};
use crate::service::state::AppState;

/// Tinyid's code for a token it refuses.
const TOKEN_ERR: i32 = 5;
/// Tinyid's code for any other failure.
const SYS_ERR: i32 = 6;
/// Tinyid's code for success.
const OK: i32 = 200;
/// Tinyid's `Constants.LOADING_PERCENT`: a client loads its next segment after this share.
const LOADING_PERCENT: i64 = 20;

/// Tinyid's `Response`: `data` on success, else a code and a message.
#[derive(Debug, Serialize, ToSchema)]
pub struct TinyidResponse<T> {
    /// The IDs, or the segment; `null` on failure.
    data: Option<T>,
    /// 200, 5 (token refused) or 6 (failure).
    code: i32,
    /// Empty on success.
    message: String,
}

impl<T> TinyidResponse<T> {
    fn ok(data: T) -> Self {
        Self {
            data: Some(data),
            code: OK,
            message: String::new(),
        }
    }

    fn failed(code: i32, message: String) -> Self {
        Self {
            data: None,
            code,
            message,
        }
    }
}

/// Tinyid's `SegmentId`: the client hands out the numbers of `(currentId, maxId]` that are
/// `≡ remainder (mod delta)`, and loads its next segment past `loadingId`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TinyidSegment {
    max_id: i64,
    loading_id: i64,
    current_id: i64,
    delta: i64,
    remainder: i64,
}

/// A refused or failed request: Tinyid's code and message.
type Failure = (i32, String);

/// The largest `batchSize` a Tinyid client can send (its `Integer`); more than `batch_cap` is
/// cut to `batch_cap`, as Tinyid's `checkBatchSize` cuts to `batch.size.max`.
pub(super) const MAX_BATCH_SIZE: u64 = i32::MAX.unsigned_abs() as u64;

/// A Tinyid route's query, read: the biz type and how many IDs (1 when absent).
struct Asked {
    biz: String,
    batch: usize,
}

/// Read `bizType`, `batchSize` and `token` as the document bounds them (see the module docs).
fn asked(state: &AppState, query: &QueryParams) -> Result<Asked, ApiError> {
    let biz = query
        .get("bizType")
        .ok_or_else(|| ApiError::bad_parameter("the query needs `bizType`, the biz type"))?;
    uidgen_core::check_biz_tag(biz)
        .map_err(|e| ApiError::bad_parameter(format!("`bizType`: {e}")))?;
    if query.get("token").is_some_and(String::is_empty) {
        return Err(ApiError::bad_parameter(
            "`token` is empty: leave it out, or give a caller token",
        ));
    }
    let batch = match query.get("batchSize") {
        None => 1,
        Some(raw) => raw
            .parse::<u64>()
            .ok()
            .filter(|n| (1..=MAX_BATCH_SIZE).contains(n))
            .map(|n| {
                usize::try_from(n)
                    .unwrap_or(usize::MAX)
                    .min(state.batch_cap)
            })
            .ok_or_else(|| {
                ApiError::bad_parameter(format!(
                    "`batchSize` {raw:?} is not an integer from 1 to {MAX_BATCH_SIZE}"
                ))
            })?,
    };
    Ok(Asked {
        biz: biz.clone(),
        batch,
    })
}

fn token_error() -> Failure {
    (TOKEN_ERR, "token is error".to_owned())
}

/// The biz type, once the request may use it: Tinyid's `canVisit` (a biz type is needed) and,
/// while `auth.required` is on, a caller token of `token` (or `Authorization`) allowed the
/// segment routes and that tag.
fn visit(
    state: &AppState,
    headers: &HeaderMap,
    query: &QueryParams,
    biz: &str,
) -> Result<Option<Arc<Caller>>, Failure> {
    let Some(callers) = state.callers.as_ref().filter(|c| c.required()) else {
        return Ok(None);
    };
    let token = query.get("token").map(|t| format!("Bearer {t}"));
    let authorization = token.as_deref().or_else(|| {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .filter(|v| bearer_token(v).is_some())
    });
    let caller = callers
        .authenticate(authorization)
        .map_err(|_| token_error())?;
    caller
        .check(RouteFamily::Segments, &[Scoped::Tag(biz)])
        .map_err(|_| token_error())?;
    caller.counters.requests.inc();
    Ok(Some(caller))
}

fn failure(error: &ApiError) -> Failure {
    (SYS_ERR, error.message.clone())
}

/// The IDs of one `nextId`.
async fn next_ids(
    state: &AppState,
    headers: &HeaderMap,
    query: &QueryParams,
    asked: &Asked,
) -> Result<Vec<i64>, Failure> {
    let caller = visit(state, headers, query, &asked.biz)?;
    let auth = super::segments::authorization(headers);
    let ids = numbers(state, &asked.biz, asked.batch, auth)
        .await
        .map_err(|e| failure(&e))?;
    if let Some(caller) = caller {
        caller.counters.ids.inc_by(ids.len() as u64);
    }
    Ok(ids)
}

/// One `nextSegmentId`: a range of the tag's stored step, leased.
async fn next_segment(
    state: &AppState,
    headers: &HeaderMap,
    query: &QueryParams,
    asked: &Asked,
) -> Result<TinyidSegment, Failure> {
    visit(state, headers, query, &asked.biz)?;
    let biz = &asked.biz;
    let store = state
        .callers
        .as_ref()
        .map(|c| c.store().clone())
        .ok_or_else(|| (SYS_ERR, "this server has no store to lease from".to_owned()))?;
    let row = store
        .get_tag(biz)
        .await
        .map_err(|e| failure(&segment_error(e.into())))?
        .ok_or_else(|| (SYS_ERR, format!("can not find biztype:{biz}")))?;
    let size = u64::try_from(row.step).unwrap_or(1);
    let range = if row.residue == Residue::SINGLE {
        let lease = crate::service::lease::lease(state, biz, size, "http")
            .await
            .map_err(|e| failure(&e))?;
        lease.start..lease.end
    } else {
        // A biz type Tinyid served with its own delta and remainder (`test_odd`): the client
        // hands out only that residue of the segment, as Tinyid's does, so the segment is
        // claimed whole from this store. A tag of a segment group is served by the group's
        // databases only.
        let service = service(state).map_err(|e| failure(&e))?;
        if service.groups().await.iter().any(|g| g.tags.contains(biz)) {
            return Err((SYS_ERR, format!("biz type {biz} is a segment group's tag")));
        }
        let claim = store
            .claim_segment_with_step(biz, row.step)
            .await
            .map_err(|e| failure(&segment_error(e.into())))?;
        claim.range()
    };
    // Tinyid's segments are (currentId, maxId]; ours are [start, end).
    let current = range.start - 1;
    Ok(TinyidSegment {
        max_id: range.end - 1,
        loading_id: current + (range.end - range.start) * LOADING_PERCENT / 100,
        current_id: current,
        delta: row.residue.delta,
        remainder: row.residue.remainder,
    })
}

/// A Tinyid route's `GET` handler and its `POST` twin: Tinyid's client posts an empty form, the
/// parameters in the query. The handler names its arguments only (`state, headers, query,
/// asked`): every Tinyid route takes the same ones and reads the biz type asked for first, so the
/// macro writes them once.
macro_rules! tinyid_route {
    (
        $(#[doc = $get_doc:tt])*
        pub async fn $get:ident($state:ident, $headers:ident, $params:ident, $asked:ident)
            -> $ret:ty { $($body:tt)* }
        $(#[doc = $post_doc:tt])*
        post $post:ident
    ) => {
        $(#[doc = $get_doc])*
        pub async fn $get(
            State($state): State<Arc<AppState>>,
            $headers: HeaderMap,
            $params: QueryParams,
        ) -> $ret {
            let $asked = asked(&$state, &$params)?;
            $($body)*
        }
        $(#[doc = $post_doc])*
        pub async fn $post(
            state: State<Arc<AppState>>,
            headers: HeaderMap,
            query: QueryParams,
        ) -> $ret {
            $get(state, headers, query).await
        }
    };
}

tinyid_route! {
    /// `/tinyid/id/nextId?bizType=&batchSize=&token=` (Tinyid): `batchSize` IDs of the biz type.
    pub async fn next_id(state, headers, query, asked)
        -> Result<Issued<Json<TinyidResponse<Vec<i64>>>>, ApiError> {
        Ok(match next_ids(&state, &headers, &query, &asked).await {
            Ok(ids) => Issued(ids.len() as u64, Json(TinyidResponse::ok(ids))),
            Err((code, message)) => Issued(0, Json(TinyidResponse::failed(code, message))),
        })
    }
    /// `POST /tinyid/id/nextId`: [`next_id`] by `POST`, as Tinyid's client sends
    /// it (an empty form, the parameters in the query).
    post next_id_post
}

tinyid_route! {
    /// `/tinyid/id/nextIdSimple?bizType=&batchSize=&token=` (Tinyid): the IDs as text, separated by
    /// commas; nothing on any error.
    pub async fn next_id_simple(state, headers, query, asked)
        -> Result<Issued<String>, ApiError> {
        Ok(match next_ids(&state, &headers, &query, &asked).await {
            Ok(ids) => Issued(
                ids.len() as u64,
                ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","),
            ),
            Err(_) => Issued(0, String::new()),
        })
    }
    /// `POST /tinyid/id/nextIdSimple`: [`next_id_simple`] by `POST`, as Tinyid's client sends
    /// it (an empty form, the parameters in the query).
    post next_id_simple_post
}

tinyid_route! {
    /// `/tinyid/id/nextSegmentId?bizType=&token=` (Tinyid): a segment for the client to hand out.
    pub async fn next_segment_id(state, headers, query, asked)
        -> Result<Json<TinyidResponse<TinyidSegment>>, ApiError> {
        Ok(Json(
            match next_segment(&state, &headers, &query, &asked).await {
                Ok(segment) => TinyidResponse::ok(segment),
                Err((code, message)) => TinyidResponse::failed(code, message),
            },
        ))
    }
    /// `POST /tinyid/id/nextSegmentId`: [`next_segment_id`] by `POST`, as Tinyid's client sends
    /// it (an empty form, the parameters in the query).
    post next_segment_id_post
}

tinyid_route! {
    /// `/tinyid/id/nextSegmentIdSimple?bizType=&token=` (Tinyid, what its client calls):
    /// `currentId,loadingId,maxId,delta,remainder`; nothing on any error.
    pub async fn next_segment_id_simple(state, headers, query, asked)
        -> Result<String, ApiError> {
        Ok(match next_segment(&state, &headers, &query, &asked).await {
            Ok(s) => format!(
                "{},{},{},{},{}",
                s.current_id, s.loading_id, s.max_id, s.delta, s.remainder
            ),
            Err(_) => String::new(),
        })
    }
    /// `POST /tinyid/id/nextSegmentIdSimple`: [`next_segment_id_simple`] by `POST`, as Tinyid's client sends
    /// it (an empty form, the parameters in the query).
    post next_segment_id_simple_post
}
