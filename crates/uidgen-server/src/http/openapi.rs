//! `GET /openapi.json`: the OpenAPI 3.1 description of every route: the routes' descriptions
//! (`paths.json`) and the schemas of their bodies, derived from the bodies' types.
//!
//! The routing table ([`super::app`]) adds each route by its description (`described.rs`), so a
//! route cannot be served without being described; a test checks that the table has no other
//! way in. Each parameter's and body field's bounds are filled in per server when the document
//! is served ([`super::bounds`]).

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::Value;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::dated::{DatedBatch, DatedParts};
use super::described::Paths;
use super::error::ErrorBody;
use super::fallback::{
    ClaimFallbackRequest, FallbackLease, FallbackRelease, FallbackRenewal, ReleaseFallbackRequest,
    RenewFallbackRequest,
};
use super::ids::{DecodedAny, IdBatch, VestaExplained};
use super::make::MakeRequest;
use super::segments::{SegmentBatch, TagRow, TagUpdate, TagView};
use super::sharded::{AppUpdate, AppView, ShardedBatch};
use super::status::{LayoutInfo, Status};
use super::tinyid::{TinyidResponse, TinyidSegment};
use super::tokens::{CreatedToken, NewToken, RevokedToken, TokenList};
use crate::service::lease::SegmentLease;
use crate::service::spaces::SpaceInfo;
use crate::service::state::AppState;

/// The parts of the document beside its paths: its title, the tags, the schemas the paths
/// name (each with the schemas it names in turn) and the security schemes.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "uidgen",
        description = "Distributed unique 64-bit IDs: Leaf- and Vesta-compatible routes, a JSON \
                       API, and the web console's routes. Every JSON error has the `Error` body \
                       (`code`, `message`, and for bad request fields `fields`); a route asked \
                       with a method it does not take answers 405, and a path no route matches \
                       answers 404, both with that body (as bare text under `/api/`). Every \
                       parameter and body field states its bounds; those that come from the \
                       configuration (`batch_cap`, `segment.max_lease_size`) or the served \
                       layout (field widths, the time range) are this server's. See docs/API.md.",
        license(name = "MIT OR Apache-2.0")
    ),
    components(schemas(
        AppUpdate,
        AppView,
        ClaimFallbackRequest,
        CreatedToken,
        DatedBatch,
        DatedParts,
        DecodedAny,
        ErrorBody,
        FallbackLease,
        FallbackRelease,
        FallbackRenewal,
        IdBatch,
        LayoutInfo,
        MakeRequest,
        NewToken,
        ReleaseFallbackRequest,
        RenewFallbackRequest,
        RevokedToken,
        SegmentBatch,
        SegmentLease,
        ShardedBatch,
        SpaceInfo,
        Status,
        TagRow,
        TagUpdate,
        TagView,
        TinyidResponse<TinyidSegment>,
        TinyidResponse<Vec<i64>>,
        TinyidSegment,
        TokenList,
        VestaExplained,
    )),
    modifiers(&AdminToken),
    tags(
        (name = "ids", description = "IDs of the served layout: batches, decode, make"),
        (name = "spaces", description = "Named ID spaces, each with its own layout and worker id"),
        (name = "segments", description = "Leaf's segment mode"),
        (name = "sharded", description = "The sharded mode: app id and shard inside each ID"),
        (
            name = "fallback",
            description = "Worker ids leased to clients' embedded fallback generators"
        ),
        (name = "leaf", description = "Leaf's routes, answering bare text"),
        (name = "vesta", description = "Vesta's REST routes"),
        (name = "tinyid", description = "Tinyid's API, its answers' shapes and its `token`"),
        (name = "admin", description = "Behind `Authorization: Bearer <admin_token>`"),
        (name = "operations", description = "Health, readiness, metrics, status"),
        (name = "console", description = "The web console's static files")
    )
)]
pub(super) struct ApiDoc;

/// The bearer tokens: the admin routes' and the callers'.
struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        // The ID routes' caller tokens, asked for only where `auth.required` is on.
        components.add_security_scheme(
            "caller_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// The document as the handlers' types describe it, made once: it depends on no state, so one
/// copy serves every router in the process; each server's bounds are filled in when served.
static DOCUMENT: OnceLock<Value> = OnceLock::new();

/// Keep the document of the routing table's `paths`, for `GET /openapi.json`.
pub(super) fn publish(paths: &Paths) {
    DOCUMENT.get_or_init(|| {
        // Serialising plain data cannot fail; an empty object would show that it did.
        let mut document = serde_json::to_value(ApiDoc::openapi())
            .unwrap_or_else(|_| Value::Object(Default::default()));
        if let Some(document) = document.as_object_mut() {
            document.insert("paths".to_owned(), Value::Object(paths.clone()));
        }
        document
    });
}

/// `GET /openapi.json`: this document.
pub async fn document(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    // Made per request (a fraction of a millisecond): the bounds are the state's, and the
    // document is read once by a console or a client generator, not on a hot path.
    let mut document = DOCUMENT.get().cloned().unwrap_or_default();
    super::bounds::describe(&mut document, &state);
    (
        [(header::CONTENT_TYPE, "application/json")],
        document.to_string(),
    )
}
