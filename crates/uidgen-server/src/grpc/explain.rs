//! `ExplainId` and `MakeId`: an ID taken apart, or put together, as the proto's `Field` list:
//! only the fields the layout has, most significant first.

use uidgen_core::calendar::format_iso8601;
use uidgen_core::{DecodedUid, FieldKind, Layout, UidParts};
use uidgen_proto::v1::{ExplainIdResponse, Field, MakeIdRequest};

use crate::service::error::{ApiError, FieldErrors};
use crate::service::forms::Form;
use crate::service::make::misfits;

/// The layout's fields, most significant first, with their values in `decoded` (zeros without
/// one). A worker field the layout splits (`keyworker`) shows as its machine and process parts.
pub(super) fn fields(layout: &Layout, decoded: Option<&DecodedUid>) -> Vec<Field> {
    let parts = decoded.map(|d| d.parts).unwrap_or_default();
    let mut out = Vec::with_capacity(layout.fields().len() + 1);
    for &(kind, bits) in layout.fields() {
        let Some(shift) = layout.shift(kind).filter(|_| bits > 0) else {
            continue;
        };
        if kind == FieldKind::Worker
            && let Some(split) = layout.worker_split()
        {
            let worker = split.split(parts.worker);
            // In the order the layout places them (keyworker: process above machine).
            for part in split.spans() {
                let value = if part.name == "machine" {
                    worker.machine
                } else {
                    worker.process
                };
                out.push(field(part.name, value, part.bits, shift + part.offset));
            }
            continue;
        }
        out.push(field(kind.name(), parts.get(kind), bits, shift));
    }
    out
}

fn field(name: &str, value: u64, bits: u32, shift: u32) -> Field {
    Field {
        name: name.to_owned(),
        value,
        bits,
        shift,
    }
}

fn response(layout: &Layout, decoded: &DecodedUid, text: String) -> ExplainIdResponse {
    ExplainIdResponse {
        id: decoded.id,
        layout: decoded.layout.clone(),
        fields: fields(layout, Some(decoded)),
        timestamp_ms: decoded.timestamp_ms,
        timestamp: format_iso8601(decoded.timestamp_ms),
        text,
    }
}

/// `ExplainId`: the ID in `text`, written in `form` (decimal when `None`), decoded with the
/// server's layout; a malformed one is the same 400 (here INVALID_ARGUMENT) as
/// `GET /v1/ids/{id}` gives. The answer's `text` is the ID in `form`.
pub(super) fn explain(
    layout: &Layout,
    text: &str,
    form: Option<Form<'_>>,
) -> Result<ExplainIdResponse, ApiError> {
    let decoded = match form {
        Some(form) if !form.is_decimal() => form.read(layout, text),
        _ => layout.decode_str(text),
    }
    .map_err(ApiError::input)?;
    let shown = form
        .map(|form| form.write(layout, decoded.id))
        .transpose()
        .map_err(ApiError::input)?
        .unwrap_or_default();
    Ok(response(layout, &decoded, shown))
}

/// `MakeId`: the ID with the requested fields (nothing is issued), decoded back. Every bad
/// field is named at once, each with its own sentence, as `POST /v1/ids/make` does.
pub(super) fn make(
    layout: &Layout,
    request: &MakeIdRequest,
) -> Result<ExplainIdResponse, ApiError> {
    let mut bad = FieldErrors::new();
    let time = match (request.time, request.timestamp_ms) {
        (Some(time), None) => time,
        (None, Some(ms)) => layout.time_of(ms).unwrap_or_else(|e| {
            bad.insert("timestamp_ms".to_owned(), e.to_string());
            0
        }),
        _ => {
            bad.insert(
                "time".to_owned(),
                "give exactly one of `time` (units since the epoch) or `timestamp_ms`".to_owned(),
            );
            0
        }
    };
    let parts = UidParts {
        time,
        worker: request.worker,
        sequence: request.sequence,
        version: request.version,
        kind: request.r#type.unwrap_or_else(|| layout.parts(0, 0, 0).kind),
        method: request.method,
        // The served layout's own datacenter unless another is asked for (0 on a layout
        // without the field, where `misfits` refuses any other).
        datacenter: request.datacenter.unwrap_or_else(|| layout.datacenter_id()),
    };
    for (name, why) in misfits(layout, &parts) {
        bad.entry(name).or_insert(why);
    }
    if !bad.is_empty() {
        return Err(ApiError::bad_fields(bad));
    }
    let id = layout.compose(&parts).map_err(ApiError::input)?;
    let decoded = layout.decode(id).map_err(ApiError::input)?;
    Ok(response(layout, &decoded, String::new()))
}
