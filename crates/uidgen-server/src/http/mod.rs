//! The HTTP API, an adapter over [`crate::service`] (a sibling of `crate::grpc`): the routing
//! table, the extractors, errors as responses, and the layers around the routes (admin
//! authentication, caller tokens, metrics and logging). The service's state and functions are
//! the service's own: `crate::service::state::AppState`, not a second name here.

mod admission;
pub mod auth;
mod bounds;
mod callers;
mod console;
mod dated;
mod described;
pub(crate) mod error;
mod extract;
mod fallback;
mod gates;
mod ids;
mod integer;
mod leaf_monitor;
mod lease;
mod make;
pub mod observe;
mod openapi;
mod ops;
mod segments;
mod sharded;
mod shown;
mod spaces;
pub mod starting;
mod status;
mod tinyid;
mod tokens;

use std::sync::Arc;

use crate::service::callers::RouteFamily;
use crate::service::state::AppState;
use described::{Routes, Source};
use gates::Gates;
use observe::App;

/// The service: the routing table, then the fallbacks, and around all of it (as one service,
/// not a layer on each route) the body limit and the metrics ([`App`]).
pub fn app(state: Arc<AppState>) -> App {
    gated_app(state, &|_, routes, _| routes)
}

/// A route family's sub-router put behind further gates, beyond its caller-token check: none
/// in the service; a test adds one to see both ways to a route obey it.
type ExtraGates<'a> = &'a dyn for<'s> Fn(RouteFamily, Routes<'s>, &mut Gates) -> Routes<'s>;

/// [`app`], with `extra` gates on the route families.
fn gated_app(state: Arc<AppState>, extra: ExtraGates<'_>) -> App {
    let source = Source::checked_in();
    let mut gates = Gates::default();
    let (router, paths) = routes(&source, &state, &mut gates, extra).into_parts();
    // Both are found by the tests (`described.rs`); a release that had one would serve less.
    for operation in source.undescribed() {
        tracing::error!(
            operation,
            "a route with no description in paths.json is not served"
        );
    }
    for operation in source.unserved() {
        tracing::error!(
            operation,
            "paths.json describes an operation that no route serves"
        );
    }
    openapi::publish(&paths);
    let router = router
        .fallback(ops::not_found)
        // After every route: it applies to the routes registered before it.
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(Arc::clone(&state));
    // The document's paths are the routing table's: each route was added with its own.
    App::new(
        router,
        &paths,
        &direct_answers(&source),
        &issuing_routes(&source),
        &gates,
        state,
    )
}

/// [`app`] with the gate `layer` in front of every route of `family`.
#[cfg(test)]
fn app_with_gate<L>(state: Arc<AppState>, family: RouteFamily, layer: L) -> App
where
    L: tower::Layer<axum::routing::Route> + Clone + Send + Sync + 'static,
    L::Service: tower::Service<axum::extract::Request> + Clone + Send + Sync + 'static,
    <L::Service as tower::Service<axum::extract::Request>>::Response:
        axum::response::IntoResponse + 'static,
    <L::Service as tower::Service<axum::extract::Request>>::Error:
        Into<std::convert::Infallible> + 'static,
    <L::Service as tower::Service<axum::extract::Request>>::Future: Send + 'static,
{
    gated_app(state, &move |of, routes, gates| {
        if of == family {
            gates.install(routes, layer.clone())
        } else {
            routes
        }
    })
}

/// The routes whose `GET` hands out IDs, by pattern: they answer `HEAD` without taking any
/// (`admission.rs`). `tests/router/routes.rs` sends `HEAD` to every `GET` route of the document and
/// checks that none took an ID, so a route missing here is found.
fn issuing_routes(source: &Source) -> Vec<String> {
    [
        "leaf_snowflake",
        "vesta_genid",
        "id_batch",
        "leaf_segment",
        "segment_batch",
        "dated",
        "space_id_batch",
        "original_get",
        "sharded_batch",
        "tinyid_next_id",
        "tinyid_next_id_simple",
        "tinyid_next_segment_id",
        "tinyid_next_segment_id_simple",
    ]
    .into_iter()
    .filter_map(|operation| source.path_of(operation))
    .collect()
}

/// The routes that answer a plain `GET` without the router when they can at once ([`App`]'s
/// direct answers), by pattern: the single-ID text routes, where the router is most of the
/// work. The patterns are the routes' own (`paths.json`), as in the routing table. [`App`]
/// drops the direct answer of any pattern a gate covers (`gates.rs`): caller tokens, when
/// required.
fn direct_answers(source: &Source) -> Vec<(String, observe::Direct)> {
    let answers: [(&str, observe::Direct); 3] = [
        ("leaf_snowflake", ids::leaf_snowflake_now),
        ("vesta_genid", ids::vesta_genid_now),
        ("leaf_segment", segments::leaf_segment_now),
    ];
    answers
        .into_iter()
        .filter_map(|(operation, answer)| Some((source.path_of(operation)?, answer)))
        .collect()
}

/// The routing table. Each route is added by its description's operationId (`paths.json`),
/// which gives its path and method, so none can go undescribed: add routes here only with
/// `add` (a test rejects any other way in).
fn routes<'s>(
    source: &'s Source,
    state: &Arc<AppState>,
    gates: &mut Gates,
    extra: ExtraGates<'_>,
) -> Routes<'s> {
    let routes = || Routes::new(source);
    // The ID routes, by family, each family behind its gates: the caller-token check when
    // `auth.required` is on (`callers.rs`), then any `extra`.
    let families = [
        (
            RouteFamily::Ids,
            routes()
                // Leaf-compatible: bare decimal IDs as text/plain.
                .add("leaf_snowflake", ids::leaf_snowflake)
                // Vesta-compatible.
                .add("vesta_genid", ids::vesta_genid)
                .add("vesta_expid", ids::vesta_expid)
                .add("vesta_makeid", ids::vesta_makeid)
                .add("vesta_transtime", ids::vesta_transtime)
                // JSON API.
                .add("id_batch", ids::batch)
                .add("make", make::make)
                .add("decode", ids::decode)
                // Leaf's monitor route that decodes an ID.
                .add("decode_snowflake_id", leaf_monitor::decode_snowflake_id),
        ),
        (
            RouteFamily::Segments,
            routes()
                .add("leaf_segment", segments::leaf_segment)
                .add("monitor", segments::monitor)
                .add("segment_batch", segments::batch)
                .add("lease_route", lease::lease_route)
                // Dated numbers: each day's from the tag's day tag.
                .add("dated", dated::dated)
                // Leaf's monitor pages.
                .add("cache", leaf_monitor::cache)
                .add("db", leaf_monitor::db),
        ),
        // Named ID spaces (`[spaces.<name>]`): the `space` path parameter is scoped.
        (
            RouteFamily::Spaces,
            routes()
                .add("list_spaces", spaces::list_spaces)
                .add("space_id_batch", spaces::space_batch)
                .add("space_decode", spaces::space_decode),
        ),
        // Worker ids leased to clients' embedded fallbacks.
        (
            RouteFamily::Fallback,
            routes()
                .add("claim_route", fallback::claim_route)
                .add("renew_route", fallback::renew_route)
                .add("release_route", fallback::release_route),
        ),
        // Sharded mode: the original service's text route, and JSON.
        (
            RouteFamily::Sharded,
            routes()
                .add("original_get", sharded::original_get)
                .add("list_apps", sharded::list_apps)
                .add("sharded_batch", sharded::batch),
        ),
    ];
    let mut table = routes()
        // The web console and this API's description.
        .add("index", console::index)
        .add("ui", console::ui)
        .add("script", console::script)
        .add("style", console::style)
        .add("document", openapi::document)
        // Tinyid's API: its `token` parameter is checked as a caller token by the routes.
        .add("tinyid_next_id", tinyid::next_id)
        .add("tinyid_next_id_post", tinyid::next_id_post)
        .add("tinyid_next_id_simple", tinyid::next_id_simple)
        .add("tinyid_next_id_simple_post", tinyid::next_id_simple_post)
        .add("tinyid_next_segment_id", tinyid::next_segment_id)
        .add("tinyid_next_segment_id_post", tinyid::next_segment_id_post)
        .add(
            "tinyid_next_segment_id_simple",
            tinyid::next_segment_id_simple,
        )
        .add(
            "tinyid_next_segment_id_simple_post",
            tinyid::next_segment_id_simple_post,
        )
        .add("layouts", status::layouts)
        // Reads a dated number's text back: issues nothing, names no tag.
        .add("parse", dated::parse)
        // Admin: a sub-router behind the bearer-token check, which runs before the route's
        // extractors.
        .merge(auth::admin_only(
            routes()
                .add("upsert_tag", segments::upsert_tag)
                .add("upsert_app", sharded::upsert_app)
                .add("create_token", tokens::create_token)
                .add("list_tokens", tokens::list_tokens)
                .add("revoke_token", tokens::revoke_token),
            state,
            gates,
        ))
        // Operations.
        .add("healthz", ops::healthz)
        .add("readyz", ops::readyz)
        .add("metrics", ops::metrics)
        .add("status", status::status);
    for (family, members) in families {
        let members = callers::callers_only(family, members, state, gates);
        table = table.merge(extra(family, members, gates));
    }
    table
}
