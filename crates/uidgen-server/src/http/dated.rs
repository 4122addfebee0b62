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
