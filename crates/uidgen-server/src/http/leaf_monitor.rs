//! Leaf's monitor routes (`LeafMonitorController`), as a Leaf operator's bookmarks and scripts
//! know them: `/cache` (every tag's double buffer, Leaf's `segment.ftl` table), `/db` (the
//! `leaf_alloc` rows, its `db.ftl` table) and `/decodeSnowflakeId?snowflakeId=` (an ID's time,
//! worker and sequence as Leaf's JSON of strings). uidgen's own JSON forms are `/v1/segments` and
//! `/v1/ids/{id}`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Html;

use super::extract::QueryParams;
use crate::service::error::ApiError;
use crate::service::segments::{segment_error, service};
use crate::service::state::AppState;

/// The layout Leaf's `decodeSnowflakeId` reads: 41 bits of ms above a 10-bit worker and a
/// 12-bit sequence. The epoch is this server's when its layout has those bits (a `leaf` or
/// `snowflake` layout with its twepoch), else Twitter's, as Leaf's route has it fixed.
fn snowflake_layout(state: &AppState) -> Result<uidgen_core::Layout, ApiError> {
    let served = state.generator.layout();
    let leaf = uidgen_core::Layout::leaf().map_err(ApiError::input)?;
    Ok(
        if served.fields() == leaf.fields() && served.unit() == leaf.unit() {
            served.clone()
        } else {
            leaf
        },
    )
}

/// Text for an HTML page: `&`, `<`, `>`, `"` and `'` escaped (a tag may hold any of them).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A page of one table, Leaf's templates' shape.
fn page(headers: &[&str], rows: &[Vec<String>]) -> Html<String> {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html>\n<head>\n<meta http-equiv=\"Content-Type\" \
         content=\"text/html; charset=UTF-8\">\n<title>Leaf</title>\n</head>\n<body>\n\
         <table class=\"table table-hover\">\n<thead>\n<tr>\n",
    );
    for header in headers {
        // Writing to a String cannot fail.
        let _ = writeln!(html, "<th>{header}</th>");
    }
    html.push_str("</tr>\n</thead>\n<tbody>\n");
    for row in rows {
        html.push_str("<tr>\n");
        for cell in row {
            let _ = writeln!(html, "<td>{}</td>", escape(cell));
        }
        html.push_str("</tr>\n");
    }
    html.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    Html(html)
}

/// `GET /cache` (Leaf): every tag's double buffer as an HTML table, Leaf's columns (`name`,
/// `init`, `next`, `pos`, `value0`, `max0`, `step0`, `value1`, `max1`, `step1`).
pub async fn cache(State(state): State<Arc<AppState>>) -> Result<Html<String>, ApiError> {
    let service = service(&state)?;
    let rows: Vec<Vec<String>> = service
        .monitor()
        .into_iter()
        .map(|tag| {
            let [a, b] = &tag.segments;
            vec![
                tag.tag.clone(),
                tag.init.to_string(),
                tag.next_ready.to_string(),
                tag.pos.to_string(),
                a.value.to_string(),
                a.max.to_string(),
                a.step.to_string(),
                b.value.to_string(),
                b.max.to_string(),
                b.step.to_string(),
            ]
        })
        .collect();
    Ok(page(
        &[
            "name", "init", "next", "pos", "value0", "max0", "step0", "value1", "max1", "step1",
        ],
        &rows,
    ))
}

/// `GET /db` (Leaf): the `leaf_alloc` rows as an HTML table, Leaf's columns (`tag`, `max`,
/// `step`, `update`).
pub async fn db(State(state): State<Arc<AppState>>) -> Result<Html<String>, ApiError> {
    service(&state)?;
    // The server's one store, which its caller tokens are read from too.
    let store = state
        .callers
        .as_ref()
        .map(|c| c.store().clone())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "segments_disabled",
                "this server has no store to read leaf_alloc from",
            )
        })?;
    let unavailable =
        |e: uidgen_store::StoreError| segment_error(uidgen_segment::SegmentError::from(e));
    let mut rows = Vec::new();
    for tag in store.list_tags().await.map_err(unavailable)? {
        if let Some(row) = store.get_tag(&tag).await.map_err(unavailable)? {
            let update = row
                .update_time_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .map_or_else(String::new, uidgen_core::calendar::format_baidu);
            rows.push(vec![
                row.biz_tag,
                row.max_id.to_string(),
                row.step.to_string(),
                update,
            ]);
        }
    }
    Ok(page(&["tag", "max", "step", "update"], &rows))
}

/// `GET /decodeSnowflakeId?snowflakeId=` (Leaf): an ID's `timestamp` (`ms(yyyy-MM-dd
/// HH:mm:ss.SSS)`, UTC), `workerId` and `sequenceId`, as strings; a text that is not an ID
/// answers `errorMsg`, as Leaf's does (with status 200). No `snowflakeId`, or an empty one, is
/// refused with 400 (Spring refuses the first; no client sends the second).
pub async fn decode_snowflake_id(
    State(state): State<Arc<AppState>>,
    query: QueryParams,
) -> Result<Json<BTreeMap<String, String>>, ApiError> {
    let raw = query
        .get("snowflakeId")
        .filter(|raw| !raw.is_empty())
        .ok_or_else(|| {
            ApiError::bad_parameter("the query needs `snowflakeId`, the ID".to_owned())
        })?;
    let layout = snowflake_layout(&state)?;
    let mut answer = BTreeMap::new();
    match raw
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|id| layout.decode(id).ok())
    {
        Some(decoded) => {
            let ms = decoded.timestamp_ms;
            let shown = uidgen_core::calendar::format_iso8601(ms)
                .trim_end_matches('Z')
                .replacen('T', " ", 1);
            answer.insert("timestamp".to_owned(), format!("{ms}({shown})"));
            answer.insert("workerId".to_owned(), decoded.parts.worker.to_string());
            answer.insert("sequenceId".to_owned(), decoded.parts.sequence.to_string());
        }
        None => {
            answer.insert(
                "errorMsg".to_owned(),
                "snowflake Id反解析发生异常!".to_owned(),
            );
        }
    }
    Ok(Json(answer))
}
