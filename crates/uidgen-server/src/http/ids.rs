//! ID routes: Leaf's snowflake route, Vesta's REST routes, and the JSON API.

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Serialize;
use uidgen_core::{DecodedUid, FieldKind, GenMethod, Layout, UidParts};
use utoipa::ToSchema;

use super::error::TextError;
use super::extract::{LeafPath, PathParam, QueryParams};
use super::observe::{Answered, Issued, decimal};
use super::shown::{Shown, param_form, param_zone};
use crate::service::callers::{Caller, RouteFamily, Scoped};
use crate::service::error::{ApiError, ECHO_CHARS, clip};
use crate::service::forms::Form;
use crate::service::generate;
use crate::service::generate::{Source, batch_count};
use crate::service::state::AppState;

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

/// `GET /api/snowflake/get/{key}` (Leaf): one ID as a bare decimal. Leaf's snowflake mode
/// ignores the key; here a key naming a space (`[spaces.<name>]`) takes from that space, and
/// any other key from the default space, as Leaf would.
pub async fn leaf_snowflake(
    State(state): State<Arc<AppState>>,
    caller: Option<Extension<Arc<Caller>>>,
    PathParam(key, _): LeafPath<String>,
) -> Result<Issued<String>, TextError> {
    let caller = caller.as_ref().map(|Extension(caller)| &**caller);
    let source = leaf_source(&state, &key, caller)?;
    Ok(decimal(generate::one_from(source, GenMethod::Rest).await?))
}

/// [`leaf_snowflake`] without the router, when the ring holds an ID now ([`super::App`]'s
/// direct answers, which run only while caller tokens are not required).
pub(super) fn leaf_snowflake_now(state: &AppState, params: &matchit::Params) -> Option<Answered> {
    let ready = leaf_source(state, params.get("key")?, None)
        .and_then(|source| generate::one_ready(source, GenMethod::Rest));
    Answered::now(ready.map(|id| id.map(decimal)).map_err(TextError))
}

/// Where Leaf's snowflake route takes from: the space `key` names, if one does (and `caller`,
/// when tokens are required, may use it), else the default space.
fn leaf_source<'a>(
    state: &'a AppState,
    key: &str,
    caller: Option<&Caller>,
) -> Result<Source<'a>, ApiError> {
    match state.space(key) {
        Some(space) => {
            // A key that names a space is that space's scope, as `/v1/spaces/{space}` is.
            if let Some(caller) = caller {
                caller.check(RouteFamily::Ids, &[Scoped::Space(key)])?;
            }
            Ok(Source::of_space(space, state.empty_ring))
        }
        None => Ok(state.source()),
    }
}

/// `GET /genid` (Vesta): one ID as a bare decimal.
pub async fn vesta_genid(State(state): State<Arc<AppState>>) -> Result<Issued<String>, ApiError> {
    Ok(decimal(generate::one(&state).await?))
}

/// [`vesta_genid`] without the router, when the ring holds an ID now ([`super::App`]'s direct
/// answers).
pub(super) fn vesta_genid_now(state: &AppState, _: &matchit::Params) -> Option<Answered> {
    Answered::now(generate::one_ready(state.source(), GenMethod::Rest).map(|id| id.map(decimal)))
}

/// Vesta's field names for an explained ID. On a layout that splits its worker field
/// (`keyworker`), `machine` is the machine part and `process` the process part; elsewhere
/// `machine` is the whole worker field, as in Vesta.
/// `genMethod`, `type` and `version` appear only on layouts that have them (the Vesta presets),
/// under Vesta's names.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct VestaExplained {
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
    let zone = param_zone(&params)?;
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
        timestamp: d.timestamp_in(&zone),
    })
    .into_response())
}

/// Build an ID from client-supplied parts, with range errors as 400.
pub(super) fn make_id(layout: &Layout, parts: &UidParts) -> Result<u64, ApiError> {
    layout.compose(parts).map_err(ApiError::input)
}

/// `GET /makeid?time=&seq=[&machine=&genMethod=&type=&version=]` (Vesta): the ID with these
/// fields, as a bare decimal. `time` is in the layout's units since its epoch, as `/expid`
/// reports it. On a layout that splits its worker field (`keyworker`), `machine` is the machine
/// part and `process=` is required with it, as `/expid` reports them.
///
/// A field left out is the serving instance's, as Vesta's `makeId(time, seq)` fills it: the
/// worker id this server stamps, genMethod 2 (REST, what this route's own IDs carry), and the
/// layout's type and version. So `/expid`'s `time` and `seq` alone give back an ID this server
/// served over HTTP.
pub async fn vesta_makeid(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<String, ApiError> {
    let layout = state.generator.layout();
    let worker = match (param_u64(&params, "machine")?, layout.worker_split()) {
        (None, _) if params.get("process").is_some() => {
            return Err(ApiError::bad_parameter(
                "`process` without `machine`: give both, or neither for this server's worker",
            ));
        }
        (None, _) => state.worker_id,
        (Some(machine), Some(split)) => split
            .join(machine, required_u64(&params, "process")?)
            .map_err(ApiError::input)?,
        (Some(machine), None) => machine,
    };
    // The layout's defaults: its type and version, its datacenter (0 on layouts without one).
    let own = layout.parts(0, 0, 0);
    let method = if layout.has(FieldKind::Method) {
        GenMethod::Rest.value()
    } else {
        0
    };
    let parts = UidParts {
        time: required_u64(&params, "time")?,
        sequence: required_u64(&params, "seq")?,
        worker,
        method: param_u64(&params, "genMethod")?.unwrap_or(method),
        kind: param_u64(&params, "type")?.unwrap_or(own.kind),
        version: param_u64(&params, "version")?.unwrap_or(own.version),
        datacenter: own.datacenter,
    };
    Ok(make_id(layout, &parts)?.to_string())
}

/// `GET /transtime?time=[&tz=]` (Vesta): a time field value as readable time, in UTC or the
/// zone `tz` names; the text names its zone (`Z`, an offset, `[Asia/Shanghai]`).
pub async fn vesta_transtime(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<String, ApiError> {
    let layout = state.generator.layout();
    let time = required_u64(&params, "time")?;
    let zone = param_zone(&params)?;
    layout.check_time(time).map_err(ApiError::input)?;
    Ok(zone.format_iso8601(layout.millis_of(time)))
}

#[derive(Serialize, ToSchema)]
/// `{"ids": [...]}`.
pub struct IdBatch {
    ids: IdList,
}

/// IDs as JSON numbers, or as strings in the form `?form=` asked for.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum IdList {
    /// Without `form`: numbers, as the API has always answered.
    Numbers(Vec<u64>),
    /// With `form`: strings (exact in JavaScript above 2^53, whatever the form).
    Texts(Vec<String>),
}

impl IdBatch {
    /// `ids` as numbers, or as texts in `form` (a radix form as wide as `layout`'s largest
    /// ID, the masked form with the server's current key).
    pub(super) fn of(
        ids: Vec<u64>,
        form: Option<Form<'_>>,
        layout: &Layout,
    ) -> Result<Self, ApiError> {
        let ids = match form {
            None => IdList::Numbers(ids),
            Some(form) => IdList::Texts(form.write_all(layout, ids).map_err(ApiError::input)?),
        };
        Ok(Self { ids })
    }
}

/// `GET /v1/ids?count=N`: a batch of IDs as JSON (`count` defaults to 1, capped by config).
pub async fn batch(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
) -> Result<Issued<Json<IdBatch>>, ApiError> {
    batch_from(&state, state.source(), &params).await
}

/// A batch of `source`'s IDs as `count` and `form` in `params` ask: `/v1/ids` for the default
/// space, `/v1/spaces/{space}/ids` for any.
pub(super) async fn batch_from(
    state: &AppState,
    source: Source<'_>,
    params: &QueryParams,
) -> Result<Issued<Json<IdBatch>>, ApiError> {
    let count = param_u64(params, "count")?.unwrap_or(1);
    let n = batch_count(count, state.batch_cap)?;
    let form = param_form(params, state.masker.as_deref())?;
    let ids = generate::many_from(source, n, GenMethod::Rest).await?;
    let batch = IdBatch::of(ids, form, source.generator.layout())?;
    Ok(Issued(count, Json(batch)))
}

/// An ID taken apart, as the JSON API reports it.
#[derive(Serialize, ToSchema)]
pub struct Decoded {
    id: u64,
    /// The ID in the form `?form=` asked for; absent without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<String>,
    layout: String,
    /// ISO-8601 in `zone`: `Z` for UTC, else the offset (and an IANA zone's name in brackets).
    timestamp: String,
    /// The zone `timestamp` is shown in: `UTC` unless `?tz=` named another.
    zone: String,
    timestamp_ms: u64,
    time: u64,
    /// The datacenter id, on a layout with a datacenter field (`layout.datacenter_bits`).
    #[serde(skip_serializing_if = "Option::is_none")]
    datacenter: Option<u64>,
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

/// What the decode route answers: a layout's fields, or a sharded ID's parts (for the OpenAPI
/// document; the handler serialises either directly).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[allow(dead_code)]
pub enum DecodedAny {
    /// Decoded with the served layout or a preset.
    Layout(Decoded),
    /// Decoded with `layout=sharded`.
    Sharded(super::sharded::DecodedSharded),
}

pub(super) fn decoded(layout: &Layout, d: DecodedUid, shown: &Shown) -> Result<Decoded, ApiError> {
    let has = |k| layout.has(k);
    let text = shown
        .form
        .map(|form| form.write(layout, d.id))
        .transpose()
        .map_err(ApiError::input)?;
    Ok(Decoded {
        id: d.id,
        text,
        timestamp: d.timestamp_in(&shown.zone),
        zone: shown.zone.name().to_owned(),
        timestamp_ms: d.timestamp_ms,
        time: d.parts.time,
        datacenter: d.datacenter,
        worker: d.parts.worker,
        machine: d.worker_parts.map(|p| p.machine),
        process: d.worker_parts.map(|p| p.process),
        sequence: d.parts.sequence,
        version: has(FieldKind::Version).then_some(d.parts.version),
        kind: has(FieldKind::Type).then_some(d.parts.kind),
        method: has(FieldKind::Method).then_some(d.parts.method),
        layout: d.layout,
    })
}

/// `GET /v1/ids/{id}[?layout=<name>&form=&tz=]`: decode an ID with the served layout, with any
/// preset (`GET /v1/layouts` lists them), or as a sharded-mode ID (app id, shard, index). The
/// ID is decimal unless `form` names its form: no form is guessed, since a fixed-width base36
/// text of digits only (`0000000000123`) is also a decimal number.
pub async fn decode(
    State(state): State<Arc<AppState>>,
    PathParam(text, _): PathParam<String>,
    params: QueryParams,
) -> Result<Response, ApiError> {
    let name = params.get("layout").map(String::as_str);
    let shown = Shown::from_params(&params, state.masker.as_deref())?;
    if name == Some("sharded") {
        canonical(&text, None)?;
        return Ok(super::sharded::decode(&text)?.into_response());
    }
    let layout = super::status::pick_layout(&state, name).map_err(|_| {
        ApiError::bad_parameter(format!(
            "unknown layout {:?}; use `sharded`, `{}` (served here) or a preset: {} (see GET \
             /v1/layouts)",
            clip(name.unwrap_or_default(), ECHO_CHARS),
            state.generator.layout().name(),
            uidgen_core::layout::PRESET_NAMES.join(", ")
        ))
    })?;
    Ok(Json(decode_shown(&layout, &text, &shown)?).into_response())
}

/// 400 (`malformed_id`) unless `text` is an ID written the one way `form` writes it: nothing
/// around it, and in decimal no sign and no leading zero. Otherwise `5`, `%205` and `05` would
/// all name one ID, and a cache or a log keyed by the path would count three (issue 32). A
/// base36 or base62 text keeps its leading zeros: it has the fixed width of its layout.
pub(super) fn canonical(text: &str, form: Option<Form<'_>>) -> Result<(), ApiError> {
    let reason = if text.trim() != text {
        Some("spaces around the ID; send it alone")
    } else if form.is_none_or(|form| form.is_decimal())
        && text.len() > 1
        && text.starts_with('0')
        && text.bytes().all(|b| b.is_ascii_digit())
    {
        Some("a leading zero; write the ID in decimal without one")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(ApiError::input(uidgen_core::UidError::MalformedId {
            id: clip(text, ECHO_CHARS).into_owned(),
            reason,
        })),
        None => Ok(()),
    }
}

/// `text` decoded under `layout`, read in the form `shown` names and answered in its zone.
pub(super) fn decode_shown(
    layout: &Layout,
    text: &str,
    shown: &Shown,
) -> Result<Decoded, ApiError> {
    canonical(text, shown.form)?;
    // The decimal form reads as the route always has (with its messages).
    let d = match shown.form {
        Some(form) if !form.is_decimal() => form.read(layout, text).map_err(ApiError::input)?,
        _ => decode_text(layout, text)?,
    };
    decoded(layout, d, shown)
}
