//! What a request must be before a route sees it (issue 32), checked by [`App`](super::App) from
//! the route's OpenAPI description, so the document and the server cannot disagree:
//!
//! - **Known query parameters.** A name the route's operations do not declare is a 400 naming
//!   it (with the closest known name), as an unknown `UIDGEN_…` variable is refused: ignoring
//!   `?cuont=5` would answer one ID to a caller who asked for five. The routes of the systems
//!   uidgen stands in for (Leaf's, Vesta's, Tinyid's, the sharded service's `/api/…`) are left
//!   as the originals are: Spring MVC ignores parameters it does not bind, and their callers
//!   may send some (a cache-busting `_=`); their own parameters are read as before.
//! - **`HEAD` takes no ID.** axum answers `HEAD` with the `GET` handler, which on the routes
//!   that hand out IDs would take them and throw them away. Those routes answer `HEAD` here:
//!   200 with the `GET` success's content type and no body, checking nothing else (no tag,
//!   count or token: each would need the `GET`'s work).

use axum::extract::{Query, Request};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::service::error::{ApiError, ECHO_CHARS, clip};

/// The tags of the routes that keep their original's leniency (see the module docs).
const COMPATIBLE_TAGS: [&str; 3] = ["leaf", "vesta", "tinyid"];

/// What one route pattern admits.
#[derive(Debug, Default)]
pub(super) struct Admission {
    /// The query parameters its operations declare, sorted; `None` where any is taken.
    query: Option<Box<[String]>>,
    /// For a route whose `GET` hands out IDs: the content type of the `GET`'s success, which
    /// `HEAD` answers with.
    head: Option<HeaderValue>,
}

impl Admission {
    /// The rules of `pattern`, described by `item`; `issuing` when its `GET` hands out IDs.
    pub(super) fn of(pattern: &str, item: &Value, issuing: bool) -> Self {
        // An item holds only operations, by method (`described.rs`).
        let operations: Vec<&Value> = item
            .as_object()
            .into_iter()
            .flatten()
            .map(|(_, op)| op)
            .collect();
        let compatible = pattern.starts_with("/api/")
            || operations.iter().any(|op| {
                let tags = op["tags"].as_array().into_iter().flatten();
                tags.filter_map(Value::as_str)
                    .any(|tag| COMPATIBLE_TAGS.contains(&tag))
            });
        let query = (!compatible).then(|| {
            let mut names: Vec<String> = operations
                .iter()
                .filter_map(|op| op["parameters"].as_array())
                .flatten()
                .filter(|p| p["in"] == "query")
                .filter_map(|p| p["name"].as_str().map(str::to_owned))
                .collect();
            names.sort_unstable();
            names.dedup();
            names.into_boxed_slice()
        });
        let head = issuing.then(|| success_type(&item["get"])).flatten();
        Self { query, head }
    }

    /// The answer to give in the route's place, if `request` is not for the route.
    pub(super) fn check(&self, request: &Request) -> Option<Response> {
        if let Some(content_type) = &self.head
            && request.method() == Method::HEAD
        {
            return Some(
                (
                    StatusCode::OK,
                    [
                        (header::CONTENT_TYPE, content_type.clone()),
                        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
                    ],
                )
                    .into_response(),
            );
        }
        let known = self.query.as_deref()?;
        request.uri().query()?;
        // A malformed query string is the route's to refuse, with its own message.
        let Ok(Query(pairs)) = Query::<Vec<(String, String)>>::try_from_uri(request.uri()) else {
            return None;
        };
        let unknown = pairs
            .iter()
            .find(|(name, _)| known.binary_search(name).is_err())?;
        Some(unknown_parameter(&unknown.0, known).into_response())
    }
}

/// The content type of `get`'s 200 answer, as the document states it.
fn success_type(get: &Value) -> Option<HeaderValue> {
    let content = get["responses"]["200"]["content"].as_object()?;
    let (content_type, _) = content.iter().next()?;
    HeaderValue::from_str(content_type).ok()
}

/// 400 for the query parameter `name`, which the route does not take.
#[cold]
fn unknown_parameter(name: &str, known: &[String]) -> ApiError {
    let limit = name.chars().count().div_ceil(3).max(2);
    let closest = known
        .iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .min()
        .filter(|&(distance, _)| distance <= limit);
    let hint = match (closest, known.is_empty()) {
        (Some((_, k)), _) => format!("did you mean `{k}`?"),
        (None, true) => "this route takes no query parameters".to_owned(),
        (None, false) => format!("this route takes {}", list(known)),
    };
    ApiError::bad_parameter(format!(
        "unknown query parameter `{}`; {hint}",
        clip(name, ECHO_CHARS)
    ))
}

/// `names` as "`a`, `b`".
fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
