//! `GET /openapi.json`: the OpenAPI 3.1 description of every route, generated from the handlers'
//! `#[utoipa::path]` attributes and their types.
//!
//! The routing table ([`super::app`]) adds each route together with its description
//! (utoipa-axum's `routes!`), so a route cannot be served without being described; a test
//! checks that the table has no other way in.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::ErrorBody;

/// The parts of the document no handler carries: its title, the tags, the shared error
/// schema and the admin token's security scheme.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "uidgen",
        description = "Distributed unique 64-bit IDs: Leaf- and Vesta-compatible routes, a JSON \
                       API, and the web console's routes. Every JSON error has the `Error` body \
                       (`code`, `message`, and for bad request fields `fields`); a route asked \
                       with a method it does not take answers 405, and a path no route matches \
                       answers 404, both with that body (as bare text under `/api/`). See \
                       docs/API.md.",
        license(name = "MIT OR Apache-2.0")
    ),
    components(schemas(ErrorBody)),
    modifiers(&AdminToken),
    tags(
        (name = "ids", description = "IDs of the served layout: batches, decode, make"),
        (name = "segments", description = "Leaf's segment mode"),
        (name = "sharded", description = "The sharded mode: app id and shard inside each ID"),
        (
            name = "fallback",
            description = "Worker ids leased to clients' embedded fallback generators"
        ),
        (name = "leaf", description = "Leaf's routes, answering bare text"),
        (name = "vesta", description = "Vesta's REST routes"),
        (name = "admin", description = "Behind `Authorization: Bearer <admin_token>`"),
        (name = "operations", description = "Health, readiness, metrics, status"),
        (name = "console", description = "The web console's static files")
    )
)]
pub(super) struct ApiDoc;

/// The bearer token of the admin routes.
struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document as JSON text, made once: it depends only on the handlers' types, never on the
/// state, so one copy serves every router in the process.
static DOCUMENT: OnceLock<String> = OnceLock::new();

/// Keep the document the routing table produced, for `GET /openapi.json`.
pub(super) fn publish(document: &utoipa::openapi::OpenApi) {
    DOCUMENT.get_or_init(|| {
        // Serialising plain data cannot fail; an empty object would show that it did.
        document.to_json().unwrap_or_else(|_| "{}".to_owned())
    });
}

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((
        status = 200,
        description = "The OpenAPI 3.1 description of every route",
        content_type = "application/json",
        body = Object
    ))
)]
pub async fn document() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT.get().map_or("{}", String::as_str),
    )
}
