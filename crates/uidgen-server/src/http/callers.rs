//! Caller tokens on the ID routes (`auth.required`): a layer on each route family's sub-router,
//! as [`super::auth`] does for the admin routes, so no ID route can forget the check.
//!
//! Invariants:
//! - The token is checked before any extractor of the route runs (a route layer): a caller
//!   without a valid token learns nothing from how its path or body would have been parsed.
//! - The family is fixed per sub-router ([`RouteFamily`]), and the scoped values a route names
//!   are read from its path parameters by name (`tag`/`key` in segment routes, `app_id` in
//!   sharded ones, `space` in space routes), never from a list of paths kept by hand.
//! - With `auth.required` off the layer is not installed at all: the zero-config service pays
//!   nothing. The OpenAPI document (one per process) says 401 and 403 either way, and that the
//!   bearer token is optional, which is true of both.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::header;
use axum::middleware::{self, Next};
use axum::response::Response;
use serde_json::json;

use super::auth::document_refusals;
use super::described::Routes;
use super::gates::Gates;
use crate::service::callers::{RouteFamily, Scoped};
use crate::service::error::ApiError;
use crate::service::state::AppState;

/// Put `routes` (all of `family`) behind the caller-token check when `auth.required` is on, and
/// describe the check in the OpenAPI document either way.
pub(super) fn callers_only<'s>(
    family: RouteFamily,
    mut routes: Routes<'s>,
    state: &Arc<AppState>,
    gates: &mut Gates,
) -> Routes<'s> {
    document_refusals(
        &mut routes,
        // Either requirement satisfies: no token where `auth.required` is off.
        json!([{ "caller_token": [] }, {}]),
        "`auth.required` is on and no caller token, or an unknown or revoked one, was sent \
         (`unauthorized`)",
        "The caller token may not use this route family, tag, app or space (`forbidden`)",
    );
    if tokens_required(state) {
        gates.install(
            routes,
            middleware::from_fn_with_state((Arc::clone(state), family), require_caller),
        )
    } else {
        routes
    }
}

/// Whether the ID routes check caller tokens (`auth.required`), and so have the gate
/// [`callers_only`] installs.
pub(super) fn tokens_required(state: &AppState) -> bool {
    state
        .callers
        .as_ref()
        .is_some_and(|callers| callers.required())
}

/// Let the request through only with a valid caller token allowed `family` and every scoped
/// value its path names; count it, and the IDs it was handed, under the token's name.
async fn require_caller(
    State((state, family)): State<(Arc<AppState>, RouteFamily)>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let Some(callers) = &state.callers else {
        return Ok(next.run(request).await);
    };
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let caller = callers.authenticate(authorization)?;
    let (mut parts, body) = request.into_parts();
    // A route without parameters has none to check; bad UTF-8 in one is the route's own 400.
    let params = RawPathParams::from_request_parts(&mut parts, &())
        .await
        .ok();
    let named: Vec<Scoped<'_>> = params
        .iter()
        .flat_map(|params| params.iter())
        .filter_map(|(key, value)| scoped(family, key, value))
        .collect();
    caller.check(family, &named)?;
    caller.counters.requests.inc();
    // For a route whose scoped value is not a path parameter of a fixed name (Leaf's snowflake
    // `{key}` names a space only when one is configured under it): the handler checks it.
    parts.extensions.insert(Arc::clone(&caller));
    let response = next.run(Request::from_parts(parts, body)).await;
    let issued = super::observe::issued_so_far();
    if issued > 0 {
        caller.counters.ids.inc_by(issued);
    }
    Ok(response)
}

/// What a path parameter of a `family` route names that a token's scopes may restrict.
fn scoped<'a>(family: RouteFamily, key: &str, value: &'a str) -> Option<Scoped<'a>> {
    match (family, key) {
        (RouteFamily::Segments, "tag" | "key") => Some(Scoped::Tag(value)),
        (RouteFamily::Sharded, "app_id") => Some(Scoped::App(value)),
        (_, "space") | (RouteFamily::Spaces, "name") => Some(Scoped::Space(value)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_parameters_name_what_each_family_scopes() {
        assert_eq!(
            scoped(RouteFamily::Segments, "tag", "order"),
            Some(Scoped::Tag("order"))
        );
        assert_eq!(
            scoped(RouteFamily::Segments, "key", "order"),
            Some(Scoped::Tag("order"))
        );
        assert_eq!(
            scoped(RouteFamily::Sharded, "app_id", "7"),
            Some(Scoped::App("7"))
        );
        assert_eq!(
            scoped(RouteFamily::Spaces, "name", "eu"),
            Some(Scoped::Space("eu"))
        );
        assert_eq!(
            scoped(RouteFamily::Ids, "space", "eu"),
            Some(Scoped::Space("eu"))
        );
        // Leaf's snowflake route ignores its key: it scopes nothing.
        assert_eq!(scoped(RouteFamily::Ids, "key", "anything"), None);
        assert_eq!(scoped(RouteFamily::Ids, "id", "12"), None);
    }
}
