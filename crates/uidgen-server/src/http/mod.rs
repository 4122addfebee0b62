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

use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::service::callers::RouteFamily;
use crate::service::state::AppState;
use gates::Gates;
use observe::App;

/// The service: the routing table, then the fallbacks, and around all of it (as one service,
/// not a layer on each route) the body limit and the metrics ([`App`]).
pub fn app(state: Arc<AppState>) -> App {
    gated_app(state, &|_, routes, _| routes)
}

/// A route family's sub-router put behind further gates, beyond its caller-token check: none
/// in the service; a test adds one to see both ways to a route obey it.
type ExtraGates<'a> = &'a dyn Fn(
    RouteFamily,
    OpenApiRouter<Arc<AppState>>,
    &mut Gates,
) -> OpenApiRouter<Arc<AppState>>;

/// [`app`], with `extra` gates on the route families.
fn gated_app(state: Arc<AppState>, extra: ExtraGates<'_>) -> App {
    let mut gates = Gates::default();
    let (router, document) = routes(&state, &mut gates, extra).split_for_parts();
    openapi::publish(&document);
    let router = router
        .fallback(ops::not_found)
        // After every route: it applies to the routes registered before it.
        .method_not_allowed_fallback(ops::method_not_allowed)
        .with_state(Arc::clone(&state));
    // The document's paths are the routing table's: `routes!` adds each route with its own.
    App::new(
        router,
        &document.paths,
        &direct_answers(),
        &issuing_routes(),
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

/// `routes`, all of `family`, behind the family's gates: the caller-token check
/// (`callers.rs`), then any `extra`.
fn family(
    family: RouteFamily,
    routes: OpenApiRouter<Arc<AppState>>,
    state: &Arc<AppState>,
    gates: &mut Gates,
    extra: ExtraGates<'_>,
) -> OpenApiRouter<Arc<AppState>> {
    let routes = callers::callers_only(family, routes, state, gates);
    extra(family, routes, gates)
}

/// The routes whose `GET` hands out IDs, by pattern: they answer `HEAD` without taking any
/// (`admission.rs`). `tests/router/routes.rs` sends `HEAD` to every `GET` route of the document and
/// checks that none took an ID, so a route missing here is found.
fn issuing_routes() -> Vec<String> {
    use utoipa::Path;
    vec![
        ids::__path_leaf_snowflake::path(),
        ids::__path_vesta_genid::path(),
        ids::__path_batch::path(),
        segments::__path_leaf_segment::path(),
        segments::__path_batch::path(),
        dated::__path_dated::path(),
        spaces::__path_space_batch::path(),
        sharded::__path_original_get::path(),
        sharded::__path_batch::path(),
        tinyid::__path_next_id::path(),
        tinyid::__path_next_id_simple::path(),
        tinyid::__path_next_segment_id::path(),
        tinyid::__path_next_segment_id_simple::path(),
    ]
}

/// The routes that answer a plain `GET` without the router when they can at once ([`App`]'s
/// direct answers), by pattern: the single-ID text routes, where the router is most of the
/// work. The patterns are the routes' own (`#[utoipa::path]`), as in the routing table. [`App`]
/// drops the direct answer of any pattern a gate covers (`gates.rs`): caller tokens, when
/// required.
fn direct_answers() -> Vec<(String, observe::Direct)> {
    vec![
        (
            <ids::__path_leaf_snowflake as utoipa::Path>::path(),
            ids::leaf_snowflake_now as observe::Direct,
        ),
        (
            <ids::__path_vesta_genid as utoipa::Path>::path(),
            ids::vesta_genid_now,
        ),
        (
            <segments::__path_leaf_segment as utoipa::Path>::path(),
            segments::leaf_segment_now,
        ),
    ]
}

/// The routing table. Each route comes with its OpenAPI description (`routes!` reads the
/// handler's `#[utoipa::path]`, path and method included), so none can go undescribed: add
/// routes here only through `routes!` (a test rejects any other way in).
fn routes(
    state: &Arc<AppState>,
    gates: &mut Gates,
    extra: ExtraGates<'_>,
) -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        // The web console and this API's description.
        .routes(routes!(console::index))
        .routes(routes!(console::ui))
        .routes(routes!(console::script))
        .routes(routes!(console::style))
        .routes(routes!(openapi::document))
        // The ID routes, by family, each family behind the caller-token check when
        // `auth.required` is on (`callers.rs`).
        .merge(family(
            RouteFamily::Ids,
            OpenApiRouter::new()
                // Leaf-compatible: bare decimal IDs as text/plain.
                .routes(routes!(ids::leaf_snowflake))
                // Vesta-compatible.
                .routes(routes!(ids::vesta_genid))
                .routes(routes!(ids::vesta_expid))
                .routes(routes!(ids::vesta_makeid))
                .routes(routes!(ids::vesta_transtime))
                // JSON API.
                .routes(routes!(ids::batch))
                .routes(routes!(make::make))
                .routes(routes!(ids::decode))
                // Leaf's monitor route that decodes an ID.
                .routes(routes!(leaf_monitor::decode_snowflake_id)),
            state,
            gates,
            extra,
        ))
        .merge(family(
            RouteFamily::Segments,
            OpenApiRouter::new()
                .routes(routes!(segments::leaf_segment))
                .routes(routes!(segments::monitor))
                .routes(routes!(segments::batch))
                .routes(routes!(lease::lease_route))
                // Dated numbers: each day's from the tag's day tag.
                .routes(routes!(dated::dated))
                // Leaf's monitor pages.
                .routes(routes!(leaf_monitor::cache))
                .routes(routes!(leaf_monitor::db)),
            state,
            gates,
            extra,
        ))
        // Tinyid's API: its `token` parameter is checked as a caller token by the routes.
        .routes(routes!(tinyid::next_id, tinyid::next_id_post))
        .routes(routes!(tinyid::next_id_simple, tinyid::next_id_simple_post))
        .routes(routes!(
            tinyid::next_segment_id,
            tinyid::next_segment_id_post
        ))
        .routes(routes!(
            tinyid::next_segment_id_simple,
            tinyid::next_segment_id_simple_post
        ))
        // Named ID spaces (`[spaces.<name>]`): the `space` path parameter is scoped.
        .merge(family(
            RouteFamily::Spaces,
            OpenApiRouter::new()
                .routes(routes!(spaces::list_spaces))
                .routes(routes!(spaces::space_batch))
                .routes(routes!(spaces::space_decode)),
            state,
            gates,
            extra,
        ))
        // Worker ids leased to clients' embedded fallbacks.
        .merge(family(
            RouteFamily::Fallback,
            OpenApiRouter::new()
                .routes(routes!(fallback::claim_route))
                .routes(routes!(fallback::renew_route))
                .routes(routes!(fallback::release_route)),
            state,
            gates,
            extra,
        ))
        // Sharded mode: the original service's text route, and JSON.
        .merge(family(
            RouteFamily::Sharded,
            OpenApiRouter::new()
                .routes(routes!(sharded::original_get))
                .routes(routes!(sharded::list_apps))
                .routes(routes!(sharded::batch)),
            state,
            gates,
            extra,
        ))
        .routes(routes!(status::layouts))
        // Reads a dated number's text back: issues nothing, names no tag.
        .routes(routes!(dated::parse))
        // Admin: a sub-router behind the bearer-token check, which runs before the route's
        // extractors.
        .merge(auth::admin_only(
            OpenApiRouter::new()
                .routes(routes!(segments::upsert_tag))
                .routes(routes!(sharded::upsert_app))
                .routes(routes!(tokens::create_token, tokens::list_tokens))
                .routes(routes!(tokens::revoke_token)),
            state,
            gates,
        ))
        // Operations.
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(status::status))
}
