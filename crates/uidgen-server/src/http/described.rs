//! The routing table's parts: each route is added by the operationId of its description in
//! `paths.json`, the one source of every route's path, method, parameters and answers, so no
//! route can be served without being described, and the path and method are written once.
//!
//! Why a checked-in description rather than one attribute per handler (issue 34): the
//! attributes repeated the same frame on every handler, and the server's library compiles 3.8 %
//! fewer LLVM lines without them and utoipa-axum (docs/BENCHMARKS.md). The bodies' schemas are
//! still derived from their types (`ToSchema`), so a body cannot drift from its description.
//! What the file holds is checked against the router by tests: every description is taken by a
//! route and every route's is there ([`Source::unserved`], [`Source::undescribed`]), and
//! schemathesis compares the answers with it.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use serde_json::{Map, Value};

use crate::service::state::AppState;

/// The routes' descriptions (the document's `paths`), as checked in.
const PATHS_JSON: &str = include_str!("paths.json");

/// The document's `paths`: by pattern, each method's operation. Kept as JSON: nothing here reads
/// more of an operation than a few fields, and deserialising utoipa's model of it would compile
/// a deserialiser for every type of OpenAPI (2 % of the server's code) to read one file.
pub(super) type Paths = Map<String, Value>;

/// One described operation: where it is served, and how it is described.
struct Described {
    path: String,
    method: String,
    filter: MethodFilter,
    operation: Value,
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
        Self::parse(PATHS_JSON)
    }

    /// The descriptions of `paths`, the text of a document's `paths` object.
    fn parse(paths: &str) -> Self {
        let paths: Value = serde_json::from_str(paths).unwrap_or_else(|error| {
            tracing::error!(%error, "src/http/paths.json does not parse; no route is served");
            Value::Null
        });
        let mut waiting = BTreeMap::new();
        for (path, item) in paths.as_object().into_iter().flatten() {
            for (method, operation) in item.as_object().into_iter().flatten() {
                let Some(filter) = method_filter(method) else {
                    tracing::error!(path, method, "paths.json: not a method a route takes");
                    continue;
                };
                // An id given twice (or none) is kept under a name no route asks for, so that
                // it is reported unserved rather than lost.
                let mut id = operation["operationId"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                while id.is_empty() || waiting.contains_key(&id) {
                    id.push_str(" (again)");
                }
                let described = Described {
                    path: path.clone(),
                    method: method.clone(),
                    filter,
                    operation: operation.clone(),
                };
                waiting.insert(id, described);
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

    /// The described operations no route took: described but not served. An operationId the
    /// file gives twice is listed here as `id (again)`, one with none as ` (again)`.
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
            paths: Paths::new(),
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
        let handler = on(described.filter, handler);
        self.router = self.router.route(&described.path, handler);
        describe(
            &mut self.paths,
            described.path,
            described.method,
            described.operation,
        );
        self
    }

    /// These routes and `other`'s.
    pub(super) fn merge(mut self, other: Routes<'_>) -> Self {
        self.router = self.router.merge(other.router);
        for (path, item) in other.paths {
            let Value::Object(operations) = item else {
                continue;
            };
            for (method, operation) in operations {
                describe(&mut self.paths, path.clone(), method, operation);
            }
        }
        self
    }

    /// The descriptions of these routes, by pattern.
    pub(super) fn paths(&self) -> &Paths {
        &self.paths
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

/// The route filter of an OpenAPI method (`get`, ...); `None` for one no route here takes.
fn method_filter(method: &str) -> Option<MethodFilter> {
    Some(match method {
        "get" => MethodFilter::GET,
        "put" => MethodFilter::PUT,
        "post" => MethodFilter::POST,
        "delete" => MethodFilter::DELETE,
        "patch" => MethodFilter::PATCH,
        _ => return None,
    })
}

/// Describe `operation` in `paths`, as `method` of `path`.
fn describe(paths: &mut Paths, path: String, method: String, operation: Value) {
    let item = paths
        .entry(path)
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(operations) = item {
        operations.insert(method, operation);
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
        let served: usize = paths
            .values()
            .filter_map(Value::as_object)
            .map(Map::len)
            .sum();
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
        assert_eq!(paths.keys().collect::<Vec<_>>(), ["/healthz"]);
        // What no route took is reported too: here everything but `healthz`.
        let unserved = source.unserved();
        assert_eq!(unserved.len() + 1, source.paths.len());
        assert!(!unserved.iter().any(|id| id == "healthz"));
    }

    #[test]
    fn an_operation_id_given_twice_is_reported_not_lost() {
        let source = Source::parse(
            r#"{"/a": {"get": {"operationId": "x"}}, "/b": {"get": {"operationId": "x"}},
                "/c": {"post": {}}}"#,
        );
        let (_, paths) = Routes::new(&source).add("x", || async {}).into_parts();
        assert_eq!(paths.keys().collect::<Vec<_>>(), ["/a"]);
        assert_eq!(source.unserved(), [" (again)", "x (again)"]);
    }
}
