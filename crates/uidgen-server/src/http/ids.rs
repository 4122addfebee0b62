//! ID routes: Leaf's snowflake route, Vesta's REST routes, and the JSON API.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use uidgen_core::calendar::{format_iso8601, parse_epoch_ms};
use uidgen_core::{DecodedUid, FieldKind, Layout, UidParts};

use super::error::{ECHO_CHARS, clip};
use super::extract::{Body, LeafPath, PathParam, QueryParams};
use super::observe::Issued;
use super::{ApiError, AppState, TextError, generate};

/// A query parameter as an unsigned integer; `None` when absent.
pub(super) fn param_u64(params: &QueryParams, name: &str) -> Result<Option<u64>, ApiError> {
    let Some(raw) = params.get(name) else {
        return Ok(None);
    };
    let raw = raw.trim();
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ApiError::bad_parameter(format!(
            "`{name}` must be a non-negative integer, got {:?}",
            clip(raw, ECHO_CHARS)
        )));
    }
    raw.parse()
        .map(Some)
        .map_err(|_| ApiError::bad_parameter(format!("`{name}` is larger than 64 bits")))
}

fn required_u64(params: &QueryParams, name: &str) -> Result<u64, ApiError> {
    param_u64(params, name)?
        .ok_or_else(|| ApiError::bad_parameter(format!("missing query parameter `{name}`")))
}

/// One new ID as a bare decimal, as Leaf's and Vesta's routes answer it.
async fn one_id(state: &AppState) -> Result<Issued<String>, ApiError> {
    let id = generate::one(state).await?;
    Ok(Issued(1, id.to_string()))
}

/// `GET /api/snowflake/get/{key}` (Leaf): one ID as a bare decimal. Leaf's snowflake mode
/// ignores the key; so do we.
pub async fn leaf_snowflake(
    State(state): State<Arc<AppState>>,
    _key: LeafPath<String>,
) -> Result<Issued<String>, TextError> {
    Ok(one_id(&state).await?)
}

/// `GET /genid` (Vesta): one ID as a bare decimal.
pub async fn vesta_genid(State(state): State<Arc<AppState>>) -> Result<Issued<String>, ApiError> {
    one_id(&state).await
}

/// Vesta's field names for an explained ID. On a layout that splits its worker field
/// (`keyworker`), `machine` is the machine part and `process` the process part; elsewhere
/// `machine` is the whole worker field, as in Vesta.
/// `genMethod`, `type` and `version` appear only on layouts that have them (the Vesta presets),
/// under Vesta's names.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VestaExplained {
    #[serde(skip_serializing_if = "Option::is_none")]
    gen_method: Option<u64>,
    machine: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<u64>,
    seq: u64,
    time: u64,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    timestamp: String,
}

fn decode_text(layout: &Layout, text: &str) -> Result<DecodedUid, ApiError> {
    layout.decode_str(text).map_err(ApiError::input)
}

/// `GET /expid?id=` (Vesta): the fields of an ID.
pub async fn vesta_expid(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<Response, ApiError> {
    let text = params
        .get("id")
        .ok_or_else(|| ApiError::bad_parameter("missing query parameter `id`"))?;
    let layout = state.generator.layout();
    let d = decode_text(layout, text)?;
    let has = |k| layout.has(k);
    Ok(Json(VestaExplained {
        gen_method: has(FieldKind::Method).then_some(d.parts.method),
        machine: d.worker_parts.map_or(d.parts.worker, |p| p.machine),
        process: d.worker_parts.map(|p| p.process),
        seq: d.parts.sequence,
        time: d.parts.time,
        kind: has(FieldKind::Type).then_some(d.parts.kind),
        version: has(FieldKind::Version).then_some(d.parts.version),
        timestamp: d.timestamp_iso8601(),
    })
    .into_response())
}

/// Build an ID from client-supplied parts, with range errors as 400.
fn make_id(layout: &Layout, parts: &UidParts) -> Result<u64, ApiError> {
    layout.compose(parts).map_err(ApiError::input)
}

/// `GET /makeid?time=&seq=&machine=[&genMethod=&type=&version=]` (Vesta): the ID with these
/// fields, as a bare decimal. `time` is in the layout's units since its epoch, as `/expid`
/// reports it. On a layout that splits its worker field (`keyworker`), `machine` is the machine
/// part and `process=` is required too, as `/expid` reports them.
pub async fn vesta_makeid(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<String, ApiError> {
    let layout = state.generator.layout();
    let machine = required_u64(&params, "machine")?;
    let worker = match layout.worker_split() {
        Some(split) => split
            .join(machine, required_u64(&params, "process")?)
            .map_err(ApiError::input)?,
        None => machine,
    };
    let parts = UidParts {
        time: required_u64(&params, "time")?,
        sequence: required_u64(&params, "seq")?,
        worker,
        method: param_u64(&params, "genMethod")?.unwrap_or(0),
        kind: param_u64(&params, "type")?.unwrap_or_else(|| layout.parts(0, 0, 0).kind),
        version: param_u64(&params, "version")?.unwrap_or(0),
    };
    Ok(make_id(layout, &parts)?.to_string())
}

/// `GET /transtime?time=` (Vesta): a time field value as readable UTC time.
pub async fn vesta_transtime(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<String, ApiError> {
    let layout = state.generator.layout();
    let time = required_u64(&params, "time")?;
    layout.check_time(time).map_err(ApiError::input)?;
    Ok(format_iso8601(layout.millis_of(time)))
}

#[derive(Serialize)]
/// `{"ids": [...]}`.
pub struct IdBatch {
    ids: Vec<u64>,
}

/// `count` as a batch size, 1 to `cap` (HTTP's `count`, gRPC's `count` and `batch_size`).
pub(crate) fn batch_count(count: u64, cap: usize) -> Result<usize, ApiError> {
    usize::try_from(count)
        .ok()
        .filter(|&n| (1..=cap).contains(&n))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_count",
                format!("count {count} is out of range; ask for 1 to {cap} IDs"),
            )
        })
}

/// `GET /v1/ids?count=N`: a batch of IDs as JSON (`count` defaults to 1, capped by config).
pub async fn batch(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<Issued<Json<IdBatch>>, ApiError> {
    let count = param_u64(&params, "count")?.unwrap_or(1);
    let n = batch_count(count, state.batch_cap)?;
    let ids = generate::many(&state, n).await?;
    Ok(Issued(count, Json(IdBatch { ids })))
}

/// An ID taken apart, as the JSON API reports it.
#[derive(Serialize)]
pub struct Decoded {
    id: u64,
    layout: String,
    timestamp: String,
    timestamp_ms: u64,
    time: u64,
    worker: u64,
    /// The worker's machine part, on a layout that splits it (`keyworker`).
    #[serde(skip_serializing_if = "Option::is_none")]
    machine: Option<u64>,
    /// The worker's process part, on a layout that splits it.
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<u64>,
    sequence: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<u64>,
}

fn decoded(layout: &Layout, d: DecodedUid) -> Decoded {
    let has = |k| layout.has(k);
    Decoded {
        id: d.id,
        timestamp: d.timestamp_iso8601(),
        timestamp_ms: d.timestamp_ms,
        time: d.parts.time,
        worker: d.parts.worker,
        machine: d.worker_parts.map(|p| p.machine),
        process: d.worker_parts.map(|p| p.process),
        sequence: d.parts.sequence,
        version: has(FieldKind::Version).then_some(d.parts.version),
        kind: has(FieldKind::Type).then_some(d.parts.kind),
        method: has(FieldKind::Method).then_some(d.parts.method),
        layout: d.layout,
    }
}

/// `GET /v1/ids/{id}[?layout=sharded]`: decode an ID with the configured layout, or as a
/// sharded-mode ID (app id, shard, index).
pub async fn decode(
    State(state): State<Arc<AppState>>,
    PathParam(text, _): PathParam<String>,
    params: QueryParams,
) -> Result<Response, ApiError> {
    let layout = state.generator.layout();
    match params.get("layout").map(String::as_str) {
        Some("sharded") => Ok(super::sharded::decode(&text)?.into_response()),
        Some(name) if name != layout.name() => Err(ApiError::bad_parameter(format!(
            "layout {:?} is not served here; use `sharded`, `{}`, or leave it out",
            clip(name, ECHO_CHARS),
            layout.name()
        ))),
        _ => Ok(Json(decoded(layout, decode_text(layout, &text)?)).into_response()),
    }
}

/// `POST /v1/ids/make` body: give either `time` (units since the epoch) or `timestamp`
/// (ISO-8601 or milliseconds since the Unix epoch).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MakeRequest {
    time: Option<u64>,
    timestamp: Option<serde_json::Value>,
    worker: u64,
    sequence: u64,
    #[serde(default)]
    version: u64,
    #[serde(rename = "type")]
    kind: Option<u64>,
    #[serde(default)]
    method: u64,
}

/// `POST /v1/ids/make`: the ID with the given fields, and its decoded form.
pub async fn make(
    State(state): State<Arc<AppState>>,
    Body(body): Body,
) -> Result<Json<Decoded>, ApiError> {
    let layout = state.generator.layout();
    let req: MakeRequest = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_parameter(format!("invalid JSON body: {e}")))?;
    let time = match (req.time, req.timestamp) {
        (Some(t), None) => t,
        (None, Some(ts)) => {
            let ms = match &ts {
                serde_json::Value::Number(n) => n.as_u64(),
                serde_json::Value::String(s) => parse_epoch_ms(s).ok(),
                _ => None,
            }
            .ok_or_else(|| {
                ApiError::bad_parameter(
                    "`timestamp` must be ISO-8601 (\"2026-01-01T00:00:00Z\") or milliseconds",
                )
            })?;
            layout.time_at(ms).map_err(ApiError::input)?
        }
        _ => {
            return Err(ApiError::bad_parameter(
                "give exactly one of `time` (units since the epoch) or `timestamp`",
            ));
        }
    };
    let parts = UidParts {
        time,
        worker: req.worker,
        sequence: req.sequence,
        version: req.version,
        kind: req.kind.unwrap_or_else(|| layout.parts(0, 0, 0).kind),
        method: req.method,
    };
    let id = make_id(layout, &parts)?;
    let d = layout.decode(id).map_err(ApiError::input)?;
    Ok(Json(decoded(layout, d)))
}
