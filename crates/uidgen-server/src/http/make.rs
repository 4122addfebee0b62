//! `POST /v1/ids/make`: an ID from its fields, every bad field named at once so a form (the
//! console's Make panel) can mark each with its own message.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use uidgen_core::calendar::parse_epoch_ms;
use uidgen_core::{Layout, UidParts};
use utoipa::ToSchema;

use super::extract::{Body, QueryParams};
use super::ids::{Decoded, decoded, make_id};
use super::integer;
use super::shown::Shown;
use crate::service::error::{ApiError, FieldErrors};
use crate::service::make::misfits;
use crate::service::state::AppState;

/// `POST /v1/ids/make` body: give either `time` (units since the epoch) or `timestamp`
/// (ISO-8601 or milliseconds since the Unix epoch), and the worker and sequence.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MakeRequest {
    /// Time units since the layout's epoch (give this or `timestamp`).
    #[serde(default, deserialize_with = "integer::opt_u64")]
    time: Option<u64>,
    /// ISO-8601 text (`"2026-01-01T00:00:00Z"`) or milliseconds since the Unix epoch (give this
    /// or `time`).
    #[schema(value_type = Option<String>)]
    timestamp: Option<serde_json::Value>,
    /// The worker id (required).
    #[serde(default, deserialize_with = "integer::opt_u64")]
    worker: Option<u64>,
    /// The sequence within the time unit (required).
    #[serde(default, deserialize_with = "integer::opt_u64")]
    sequence: Option<u64>,
    /// Vesta's version bit; 0 when absent.
    #[serde(default, deserialize_with = "integer::u64")]
    version: u64,
    /// Vesta's type bit; the layout's own when absent.
    #[serde(rename = "type", default, deserialize_with = "integer::opt_u64")]
    kind: Option<u64>,
    /// Vesta's genMethod; 0 when absent.
    #[serde(default, deserialize_with = "integer::u64")]
    method: u64,
    /// The datacenter id, on a layout with a datacenter field; the served one when absent.
    #[serde(default, deserialize_with = "integer::opt_u64")]
    datacenter: Option<u64>,
}

/// The time field a make request asks for, or why not.
fn make_time(layout: &Layout, req: &MakeRequest) -> Result<u64, (&'static str, String)> {
    match (req.time, &req.timestamp) {
        (Some(t), None) => Ok(t),
        (None, Some(ts)) => {
            let ms = match ts {
                serde_json::Value::Number(n) => integer::of(n),
                serde_json::Value::String(s) => parse_epoch_ms(s).ok(),
                _ => None,
            }
            .ok_or_else(|| {
                (
                    "timestamp",
                    "must be ISO-8601 (\"2026-01-01T00:00:00Z\") or milliseconds".to_owned(),
                )
            })?;
            layout.time_of(ms).map_err(|e| ("timestamp", e.to_string()))
        }
        _ => Err((
            "time",
            "give exactly one of `time` (units since the epoch) or `timestamp`".to_owned(),
        )),
    }
}

/// `POST /v1/ids/make[?form=&tz=]`: the ID with the given fields, and its decoded form, shown as
/// the decode route shows it. Every bad field is reported at once, each with its own message,
/// in the error's `fields`.
pub async fn make(
    State(state): State<Arc<AppState>>,
    params: QueryParams,
    Body(body): Body,
) -> Result<Json<Decoded>, ApiError> {
    let shown = Shown::from_params(&params, state.masker.as_deref())?;
    let layout = state.generator.layout();
    let req: MakeRequest =
        serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_slice(&body))
            .map_err(|e| {
                let field = e.path().to_string();
                let error = e.into_inner();
                // `.` is the whole body; `?` a place serde could not name (a cut-off body).
                if field == "." || field.starts_with('?') {
                    ApiError::bad_parameter(format!("invalid JSON body: {error}"))
                } else {
                    ApiError::bad_fields(FieldErrors::from([(field, error.to_string())]))
                }
            })?;
    let mut bad = FieldErrors::new();
    let mut need = |name: &str, value: Option<u64>| {
        if value.is_none() {
            bad.insert(
                name.to_owned(),
                "missing: this field is required".to_owned(),
            );
        }
        value.unwrap_or(0)
    };
    let worker = need("worker", req.worker);
    let sequence = need("sequence", req.sequence);
    let time = make_time(layout, &req).unwrap_or_else(|(field, why)| {
        bad.insert(field.to_owned(), why);
        0
    });
    let parts = UidParts {
        time,
        worker,
        sequence,
        version: req.version,
        kind: req.kind.unwrap_or_else(|| layout.parts(0, 0, 0).kind),
        method: req.method,
        // The served layout's own datacenter unless another is asked for (0 on a layout
        // without the field, where `misfits` refuses any other).
        datacenter: req.datacenter.unwrap_or_else(|| layout.datacenter_id()),
    };
    for (name, why) in misfits(layout, &parts) {
        bad.entry(name).or_insert(why);
    }
    if !bad.is_empty() {
        return Err(ApiError::bad_fields(bad));
    }
    let id = make_id(layout, &parts)?;
    let d = layout.decode(id).map_err(ApiError::input)?;
    Ok(Json(decoded(layout, d, &shown)?))
}
