//! The routing table's parts: each route is added by the operationId of its description in
//! `paths.json`, the one source of every route's path, method, parameters and answers, so no
//! route can be served without being described, and the path and method are written once.
//!
//! Why a checked-in description rather than one attribute per handler (issue 34): the
//! attributes repeated the same frame on every handler, and compiling them was a tenth of the
//! server's build. The bodies' schemas are still derived from their types (`ToSchema`), so a
//! body cannot drift from its description; what the file holds is checked against the router
//! by tests: every description is taken by a route, every route's description exists
//! ([`Source::unserved`], [`Source::undescribed`]), and schemathesis compares the answers
//! with it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use utoipa::openapi::path::{HttpMethod, Operation, Paths};

use crate::service::state::AppState;

/// The routes' descriptions (the document's `paths`), as checked in.
const PATHS_JSON: &str = include_str!("paths.json");

/// One described operation: where it is served, and how it is described.
struct Described {
    path: String,
    method: HttpMethod,
    operation: Operation,
}

/// The descriptions the routing table takes its routes from, each taken once.
pub(super) struct Source {
    /// The operations not yet taken by a route, by operationId.
    waiting: RefCell<BTreeMap<String, Described>>,
    /// Every operation's path, by operationId, taken or not: for the lists of routes kept by
    /// pattern (`issuing_routes`, `direct_answers`).
    paths: BTreeMap<String, String>,
    /// The operationIds routes were added under that no description has.
    undescribed: RefCell<Vec<String>>,
}

impl Source {
    /// The checked-in descriptions. A file that does not parse (a bad edit) describes nothing,
    /// so every route is reported undescribed and none is served.
    pub(super) fn checked_in() -> Self {
        let paths: Paths = serde_json::from_str(PATHS_JSON).unwrap_or_else(|error| {
            tracing::error!(%error, "src/http/paths.json does not parse; no route is served");
            Paths::default()
        });
        let mut waiting = BTreeMap::new();
        for (path, item) in paths.paths {
            let operations = [
                (HttpMethod::Get, item.get),
                (HttpMethod::Put, item.put),
                (HttpMethod::Post, item.post),
                (HttpMethod::Delete, item.delete),
                (HttpMethod::Patch, item.patch),
            ];
            for (method, operation) in operations {
                let Some(operation) = operation else { continue };
                let id = operation.operation_id.clone().unwrap_or_default();
                let path = path.clone();
                waiting.insert(
                    id,
                    Described {
                        path,
                        method,
                        operation,
                    },
                );
            }
        }
        let paths = waiting
            .iter()
            .map(|(id, d)| (id.clone(), d.path.clone()))
            .collect();
        Self {
            waiting: RefCell::new(waiting),
            paths,
            undescribed: RefCell::default(),
        }
    }

    /// The path operation `id` is served under, taken or not.
    pub(super) fn path_of(&self, id: &str) -> Option<String> {
        self.paths.get(id).cloned()
    }

    /// The described operations no route took: described but not served.
    pub(super) fn unserved(&self) -> Vec<String> {
        self.waiting.borrow().keys().cloned().collect()
    }

    /// The operationIds a route was asked for that nothing describes: not served.
    pub(super) fn undescribed(&self) -> Vec<String> {
        self.undescribed.borrow().clone()
    }
}

/// A part of the routing table: its routes, and the description of each.
pub(super) struct Routes<'s> {
    source: &'s Source,
    router: Router<Arc<AppState>>,
    paths: Paths,
}

impl<'s> Routes<'s> {
    /// No routes yet, taking their descriptions from `source`.
    pub(super) fn new(source: &'s Source) -> Self {
        Self {
            source,
            router: Router::new(),
            paths: Paths::default(),
        }
    }

    /// Serve `handler` as the operation `id` describes it (its path and method), with that
    /// description. An `id` nothing describes adds no route and is reported by
    /// [`Source::undescribed`].
    pub(super) fn add<H, T>(mut self, id: &str, handler: H) -> Self
    where
        H: Handler<T, Arc<AppState>>,
        T: 'static,
    {
        let Some(described) = self.source.waiting.borrow_mut().remove(id) else {
            self.source.undescribed.borrow_mut().push(id.to_owned());
            return self;
        };
        let filter = match described.method {
            HttpMethod::Get => MethodFilter::GET,
            HttpMethod::Put => MethodFilter::PUT,
            HttpMethod::Post => MethodFilter::POST,
            HttpMethod::Delete => MethodFilter::DELETE,
            // `checked_in` takes no other method.
            _ => MethodFilter::PATCH,
        };
        self.router = self.router.route(&described.path, on(filter, handler));
        self.paths
            .add_path_operation(&described.path, vec![described.method], described.operation);
        self
    }

    /// These routes and `other`'s.
    pub(super) fn merge(mut self, other: Routes<'_>) -> Self {
        self.router = self.router.merge(other.router);
        self.paths.merge(other.paths);
        self
    }

    /// The descriptions of these routes, to say what a layer in front of all of them does.
    pub(super) fn paths_mut(&mut self) -> &mut Paths {
        &mut self.paths
    }

    /// The router and the descriptions of its routes.
    pub(super) fn into_parts(self) -> (Router<Arc<AppState>>, Paths) {
        (self.router, self.paths)
    }

    /// These routes with `f` done to their router (a layer put in front), described as before.
    pub(super) fn map_router(
        mut self,
        f: impl FnOnce(Router<Arc<AppState>>) -> Router<Arc<AppState>>,
    ) -> Self {
        self.router = f(self.router);
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use uidgen_core::{DefaultUidGenerator, Layout, SystemClock};

    use super::*;
    use crate::http::gates::Gates;

    #[tokio::test]
    async fn every_description_is_served_and_every_route_is_described() {
        let generator = DefaultUidGenerator::new(Layout::baidu_default().unwrap(), 1, SystemClock);
        let state = Arc::new(AppState::embedded(Arc::new(generator.unwrap()), 1));
        let source = Source::checked_in();
        let routes = super::super::routes(&source, &state, &mut Gates::default(), &|_, r, _| r);
        assert_eq!(
            source.undescribed(),
            Vec::<String>::new(),
            "not in paths.json"
        );
        assert_eq!(
            source.unserved(),
            Vec::<String>::new(),
            "in paths.json, not routed"
        );
        // Every operation of the file is in the document, under its own path.
        let (_, paths) = routes.into_parts();
        let served: usize = paths.paths.values().map(operations).sum();
        assert_eq!(served, source.paths.len());
        assert!(served >= 49, "only {served} operations");
    }

    #[test]
    fn a_route_without_a_description_is_not_served_and_is_reported() {
        let source = Source::checked_in();
        let (_, paths) = Routes::new(&source)
            .add("healthz", || async { "ok" })
            .add("no_such_operation", || async { "never" })
            .into_parts();
        assert_eq!(source.undescribed(), ["no_such_operation"]);
        assert_eq!(paths.paths.keys().collect::<Vec<_>>(), ["/healthz"]);
        // What no route took is reported too: here everything but `healthz`.
        let unserved = source.unserved();
        assert_eq!(unserved.len() + 1, source.paths.len());
        assert!(!unserved.iter().any(|id| id == "healthz"));
    }

    fn operations(item: &utoipa::openapi::PathItem) -> usize {
        [&item.get, &item.put, &item.post, &item.delete, &item.patch]
            .iter()
            .filter(|op| op.is_some())
            .count()
    }
}
