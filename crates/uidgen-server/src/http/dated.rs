//! Dated numbers (issue 21; Leaf issues #96 and #172): `ORD20261125-000123`, a prefix, the day
//! in a zone and a number that restarts every day, drawn from a segment tag per day; and the
//! parser that reads such a text back.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use uidgen_core::calendar::CivilDate;
use uidgen_core::{Clock, DatedForm};
use utoipa::ToSchema;

use super::error::ErrorBody;
use super::extract::{PathParam, QueryParams};
use super::ids::param_u64;
use super::observe::Issued;
use super::shown::param_zone;
use crate::service::error::ApiError;
use crate::service::segments::dated_numbers;
use crate::service::state::AppState;

/// The digits of a dated number when `digits` is absent.
const DEFAULT_DIGITS: u64 = 6;

/// `prefix` and `digits` of a request, as the library's form (whose `new` is the check).
fn form_of(params: &QueryParams) -> Result<DatedForm, ApiError> {
    let prefix = params.get("prefix").map_or("", String::as_str);
    // Absent is no prefix; an empty one given is more likely a client's bug than a choice.
    if params.get("prefix").is_some_and(String::is_empty) {
        return Err(ApiError::bad_parameter(
            "`prefix` is empty: leave it out for none",
        ));
    }
    let digits = param_u64(params, "digits")?.unwrap_or(DEFAULT_DIGITS);
    DatedForm::new(prefix, u32::try_from(digits).unwrap_or(u32::MAX)).map_err(ApiError::input)
}

/// `YYYY-MM-DD`.
fn iso_date(date: CivilDate) -> String {
    format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day())
}

/// `{"tag", "day_tag", "date", "ids": ["ORD20261125-000123", ...]}`.
#[derive(Serialize, ToSchema)]
pub struct DatedBatch {
    /// The dated tag asked for.
    tag: String,
    /// The segment tag the numbers came from: the tag and the day, `orders:20261125`.
    day_tag: String,
    /// The day, in the zone asked for: `2026-11-25`.
    date: String,
    /// The numbers, written in the form: prefix, `YYYYMMDD`, `-`, the zero-padded number.
    ids: Vec<String>,
}

/// `GET /v1/segments/{tag}/dated?prefix=&digits=&tz=&count=`: dated numbers of a tag listed in
/// `segment.dated_tags`, numbered from 1 each day (the day by the server's clock in `tz`).
#[utoipa::path(
    get,
    path = "/v1/segments/{tag}/dated",
    tag = "segments",
    params(
        ("tag" = String, Path, description = "A tag listed in `segment.dated_tags`"),
        (
            "prefix" = Option<String>,
            Query,
            description = "Up to 32 ASCII letters, digits or `_` before the date; none when \
                           absent"
        ),
        (
            "digits" = Option<u64>,
            Query,
            description = "How many digits the number has, zero-padded: 1 to 20 (default 6)"
        ),
        (
            "tz" = Option<String>,
            Query,
            description = "The zone whose day the number belongs to (UTC when absent)"
        ),
        (
            "count" = Option<u64>,
            Query,
            description = "How many numbers: 1 (default) to `batch_cap`"
        ),
    ),
    responses(
        (status = 200, description = "Dated numbers of the day", body = DatedBatch),
        (
            status = 400,
            description = "A bad prefix, digits, zone or count, or a number past the digits",
            body = ErrorBody
        ),
        (
            status = 404,
            description = "The tag is not dated here (`unknown_tag`), or segment mode is off",
            body = ErrorBody
        ),
        (status = 503, description = "Segments not ready or the store is down", body = ErrorBody),
    )
)]
pub async fn dated(
    State(state): State<Arc<AppState>>,
    PathParam(tag, _): PathParam<String>,
    params: QueryParams,
) -> Result<Issued<Json<DatedBatch>>, ApiError> {
    let form = form_of(&params)?;
    let zone = param_zone(&params)?;
    let n = params.count(state.batch_cap)?;
    let now = uidgen_core::SystemClock.now_millis();
    let date = zone.date_at(now).map_err(ApiError::input)?;
    let (day_tag, numbers) = dated_numbers(&state, &tag, date, n).await?;
    let ids = numbers
        .into_iter()
        .map(|number| {
            // A segment number is at least 1: never negative.
            let number = u64::try_from(number).unwrap_or(0);
            form.render(date, number).map_err(|e| {
                ApiError::bad_parameter(format!(
                    "`digits`: {e}; today's numbers of `{tag}` need more digits"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Issued(
        u64::try_from(ids.len()).unwrap_or(u64::MAX),
        Json(DatedBatch {
            tag,
            day_tag,
            date: iso_date(date),
            ids,
        }),
    ))
}

/// A dated number read back: its day and its number.
#[derive(Serialize, ToSchema)]
pub struct DatedParts {
    /// The day: `2026-11-25`.
    date: String,
    /// The number.
    number: u64,
}

/// `GET /v1/dated/{text}?prefix=&digits=`: a dated number taken apart, with the prefix and
/// digits it was made with.
#[utoipa::path(
    get,
    path = "/v1/dated/{text}",
    tag = "segments",
    params(
        ("text" = String, Path, description = "A dated number: `ORD20261125-000123`"),
        (
            "prefix" = Option<String>,
            Query,
            description = "The prefix it was made with; none when absent"
        ),
        (
            "digits" = Option<u64>,
            Query,
            description = "The digits it was made with: 1 to 20 (default 6)"
        ),
    ),
    responses(
        (status = 200, description = "The day and the number", body = DatedParts),
        (
            status = 400,
            description = "A text that is not of the form (`malformed_id`), or a bad prefix or \
                           digits",
            body = ErrorBody
        ),
    )
)]
pub async fn parse(
    PathParam(text, _): PathParam<String>,
    params: QueryParams,
) -> Result<Json<DatedParts>, ApiError> {
    let form = form_of(&params)?;
    let parts = form.parse(&text).map_err(ApiError::input)?;
    Ok(Json(DatedParts {
        date: iso_date(parts.date),
        number: parts.number,
    }))
}
