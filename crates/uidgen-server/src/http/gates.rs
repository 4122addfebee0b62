//! The gates in front of routes (the admin token, caller tokens): one list, [`Gates`], that
//! both ways to a route consult, so a direct answer cannot go round a gate.
//!
//! A request reaches a route's function in one of two ways: through the router, where the gates
//! are route layers, or as a direct answer ([`super::App`], `observe.rs`), which skips the
//! router for the single-ID routes. Until issue 34, only a comment tied the two: the direct
//! answers were turned off by hand whenever the caller-token layer was installed, and a gate
//! added later would have been skipped unless its author found that comment.
//!
//! Invariants:
//! - A route gets a gate only through [`Gates::install`], which records the patterns the gate
//!   covers as it installs it (a test rejects `route_layer` and `layer` anywhere else in the
//!   HTTP adapter).
//! - [`super::App`] gives a direct answer only for a pattern no installed gate covers. A gate
//!   that is not installed (caller tokens while `auth.required` is off) covers nothing and costs
//!   nothing.

use std::collections::BTreeSet;
use std::convert::Infallible;

use super::described::Routes;
use axum::extract::Request;
use axum::response::IntoResponse;
use axum::routing::Route;
use tower::{Layer, Service};

/// The route patterns some installed gate covers.
#[derive(Debug, Default)]
pub(super) struct Gates {
    covered: BTreeSet<String>,
}

impl Gates {
    /// Put every route of `routes` behind `layer` and record their patterns, so
    /// that no direct answer of theirs goes round it. A route layer, so a wrong method still
    /// gets the 405 every route gives, and the gate runs before the route's extractors.
    pub(super) fn install<'s, L>(&mut self, routes: Routes<'s>, layer: L) -> Routes<'s>
    where
        L: Layer<Route> + Clone + Send + Sync + 'static,
        L::Service: Service<Request> + Clone + Send + Sync + 'static,
        <L::Service as Service<Request>>::Response: IntoResponse + 'static,
        <L::Service as Service<Request>>::Error: Into<Infallible> + 'static,
        <L::Service as Service<Request>>::Future: Send + 'static,
    {
        self.covered.extend(routes.paths().keys().cloned());
        routes.map_router(|router| router.route_layer(layer))
    }

    /// Whether a gate stands in front of `pattern` (if not, a direct answer may serve it).
    pub(super) fn covers(&self, pattern: &str) -> bool {
        self.covered.contains(pattern)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use axum::middleware::{self, Next};
    use axum::response::{IntoResponse, Response};
    use tower::ServiceExt;
    use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock};

    use crate::service::callers::RouteFamily;
    use crate::service::state::AppState;

    async fn teapot(_: Request<Body>, _: Next) -> Response {
        StatusCode::IM_A_TEAPOT.into_response()
    }

    /// A ring holds IDs at once, so the single-ID routes can be answered directly.
    fn state() -> Arc<AppState> {
        let ring = CachedUidGenerator::new(
            Layout::baidu_default().unwrap(),
            1,
            SystemClock,
            CachedOptions::default(),
        );
        Arc::new(AppState::embedded(Arc::new(ring.unwrap()), 1))
    }

    async fn status(app: &super::super::observe::App, uri: &str) -> StatusCode {
        let request = Request::get(uri).body(Body::empty()).unwrap();
        app.clone().oneshot(request).await.unwrap().status()
    }

    #[tokio::test]
    async fn a_gate_added_to_a_family_holds_for_its_direct_answers_and_its_routed_ones() {
        let state = state();
        // Without the gate, `/genid` is answered directly and the batch route by the router.
        let plain = super::super::app(Arc::clone(&state));
        assert_eq!(status(&plain, "/genid").await, StatusCode::OK);
        assert_eq!(status(&plain, "/v1/ids?count=2").await, StatusCode::OK);
        // A gate in front of the ID routes: both ways obey it, and the other routes do not see
        // it.
        let gated =
            super::super::app_with_gate(state, RouteFamily::Ids, middleware::from_fn(teapot));
        for uri in ["/genid", "/api/snowflake/get/x", "/v1/ids?count=2"] {
            assert_eq!(status(&gated, uri).await, StatusCode::IM_A_TEAPOT, "{uri}");
        }
        assert_eq!(status(&gated, "/healthz").await, StatusCode::OK);
    }

    #[test]
    fn no_file_of_the_http_adapter_layers_routes_but_through_gates() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == "gates.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for way in [".route_layer(", ".layer("] {
                assert!(
                    !text.contains(way),
                    "{} calls `{way}`: install a gate with Gates::install, so the direct \
                     answers see it",
                    path.display()
                );
            }
        }
    }
}
