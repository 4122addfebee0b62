//! The HTTP API: routing table, shared state, and the layers around the routes (admin
//! authentication, metrics and logging).

mod auth;
mod bounds;
mod console;
mod error;
mod extract;
mod fallback;
mod generate;
mod ids;
mod integer;
mod lease;
mod make;
mod observe;
mod openapi;
mod ops;
mod ready;
mod segments;
mod sharded;
mod starting;
mod status;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use uidgen_core::UidGenerator;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::ct_eq;
pub use error::{ApiError, ErrorBody, ErrorReport, FieldErrors, SEE_LOG, TextError};
pub(crate) use fallback::{
    claim as claim_fallback, release as release_fallback, renew as renew_fallback,
};
pub use generate::{PaddingSignal, ReadyRing, many_as, one_as};
pub(crate) use ids::{batch_count, batch_size};
pub use lease::SegmentLease;
pub(crate) use lease::lease;
pub(crate) use make::misfits;
pub use ready::{
    Mode, ModeCheck, READY_TIMEOUT, Readiness, ReadinessBoard, check as check_readiness, check_mode,
};
pub use segments::segment_error;
pub(crate) use segments::service as segment_service;
pub use sharded::sharded_error;
pub use starting::{GatedApp, STARTING_MESSAGE, STARTING_RETRY_AFTER_SECS, StartGate};

use crate::metrics::Metrics;

/// A point-in-time view of the ring buffer, for metrics.
#[derive(Debug, Clone, Copy, Default)]
pub struct RingSnapshot {
    /// Slots.
    pub capacity: u64,
    /// IDs ready to take.
    pub available: u64,
    /// Padding runs since start.
    pub padding_runs: u64,
    /// Time units ahead of the clock.
    pub borrowed_units: u64,
}

/// A boxed future, for the readiness probe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Why a mode is not ready: a sentence safe for clients, and the details for the log (which
/// may name the database and quote its driver).
#[derive(Debug, Clone)]
pub struct NotReady {
    /// The error code a probe of the mode answers with: `not_ready`, or `exhausted` when the
    /// layout's time bits have run out.
    pub code: &'static str,
    /// What the client is told, e.g. "the store does not answer".
    pub public: &'static str,
    /// What the log is told.
    pub detail: String,
}

/// Checks that something a mode depends on answers (the store, the worker lease).
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<Result<(), NotReady>> + Send + Sync>;

/// A [`ReadinessCheck`] that always passes: nothing to depend on.
pub fn always_ready() -> ReadinessCheck {
    Arc::new(|| Box::pin(async { Ok(()) }))
}

/// Everything a handler needs, shared as one `Arc`.
pub struct AppState {
    /// The generator behind `/v1/ids`, `/genid` and `/api/snowflake/get`.
    pub generator: Arc<dyn UidGenerator>,
    /// The worker id the generator stamps.
    pub worker_id: u64,
    /// The same generator's ring buffer, when it has one: the inline fast path, readiness and
    /// metrics read it.
    pub ring: Option<Arc<dyn ReadyRing>>,
    /// What handlers waiting for the ring await (connected to `ring` on the first wait).
    pub padded: PaddingSignal,
    /// The most IDs one request may ask for.
    pub batch_cap: usize,
    /// Bearer token for admin routes; `None` disables them.
    pub admin_token: Option<String>,
    /// Metrics.
    pub metrics: Metrics,
    /// What the ID generator depends on besides itself: the worker id's lease, if leased.
    pub worker_check: ReadinessCheck,
    /// Whether the store answers: segment mode's readiness.
    pub store_check: ReadinessCheck,
    /// The last readiness of every mode, for `GET /v1/status`.
    pub readiness: ReadinessBoard,
    /// Leaf segment mode, when enabled.
    pub segments: Option<Arc<uidgen_segment::SegmentService>>,
    /// The sharded mode (IDs with app id and shard inside, from Redis lists), when enabled.
    pub sharded: Option<Arc<uidgen_sharded::ShardedService>>,
    /// Leases worker ids of the embedded range to clients' fallbacks, when this server has
    /// one (`worker.fallback_range`).
    pub fallback: Option<Arc<uidgen_store::FallbackLeases>>,
    /// The ZooKeeper holder of the worker id, when it comes from ZooKeeper: readiness and
    /// metrics read its status.
    pub zk: Option<uidgen_zk::ZkHolder>,
    /// When the state was made, for the uptime `/v1/status` reports.
    pub started: std::time::Instant,
    /// The configured generator kind (`cached`, `default`, `snowflake`), for `/v1/status`;
    /// `None` when embedded.
    pub generator_kind: Option<&'static str>,
    /// How the worker id was assigned (`leased`, `zookeeper`, ...), for `/v1/status`; `None`
    /// when embedded.
    pub assigner: Option<&'static str>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("worker_id", &self.worker_id)
            .field("layout", self.generator.layout())
            .field("batch_cap", &self.batch_cap)
            .field("admin", &self.admin_token.is_some())
            .finish_non_exhaustive()
    }
}

impl AppState {
    /// State with no store behind it (every check passes) and no ring: for the embedded CLI and
    /// tests.
    pub fn embedded(generator: Arc<dyn UidGenerator>, worker_id: u64) -> Self {
        Self {
            generator,
            worker_id,
            ring: None,
            padded: PaddingSignal::default(),
            batch_cap: DEFAULT_BATCH_CAP,
            admin_token: None,
            metrics: Metrics::new(),
            worker_check: always_ready(),
            store_check: always_ready(),
            readiness: ReadinessBoard::default(),
            segments: None,
            sharded: None,
            fallback: None,
            zk: None,
            started: std::time::Instant::now(),
            generator_kind: None,
            assigner: None,
        }
    }
}

pub use crate::config::DEFAULT_BATCH_CAP;

/// Requests larger than this are refused (413): no route takes more than a small JSON body.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The service: the routing table, then the fallbacks and the layers around every route.
pub fn app(state: Arc<AppState>) -> Router {
    let (router, document) = routes(&state).split_for_parts();
    openapi::publish(&document);
    router
        .fallback(ops::not_found)
        // After every route: it applies to the routes registered before it.
        .method_not_allowed_fallback(ops::method_not_allowed)
        // One `layer` call, not one per layer: axum boxes every route once more per call, and
        // each box costs an allocation and a dispatch on every request.
        .layer(
            tower::ServiceBuilder::new()
                .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
                .layer(observe::ObserveLayer::new(state.clone())),
        )
        .with_state(state)
}

/// The routing table. Each route comes with its OpenAPI description (`routes!` reads the
/// handler's `#[utoipa::path]`, path and method included), so none can go undescribed: add
/// routes here only through `routes!` (a test rejects any other way in).
fn routes(state: &Arc<AppState>) -> OpenApiRouter<Arc<AppState>> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        // The web console and this API's description.
        .routes(routes!(console::index))
        .routes(routes!(console::ui))
        .routes(routes!(console::script))
        .routes(routes!(console::style))
        .routes(routes!(openapi::document))
        // Leaf-compatible: bare decimal IDs as text/plain.
        .routes(routes!(segments::leaf_segment))
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
        .routes(routes!(status::layouts))
        .routes(routes!(segments::monitor))
        .routes(routes!(segments::batch))
        .routes(routes!(lease::lease_route))
        // Worker ids leased to clients' embedded fallbacks.
        .routes(routes!(fallback::claim_route))
        .routes(routes!(fallback::renew_route))
        .routes(routes!(fallback::release_route))
        // Sharded mode: the original service's text route, and JSON.
        .routes(routes!(sharded::original_get))
        .routes(routes!(sharded::list_apps))
        .routes(routes!(sharded::batch))
        // Admin: a sub-router behind the bearer-token check, which runs before the route's
        // extractors.
        .merge(auth::admin_only(
            OpenApiRouter::new()
                .routes(routes!(segments::upsert_tag))
                .routes(routes!(sharded::upsert_app)),
            state,
        ))
        // Operations.
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(status::status))
}
