//! The service both adapters serve: the shared [`AppState`], taking IDs ([`generate`]),
//! readiness ([`ready`]), segment leases ([`mod@lease`]), fallback leases ([`fallback`]), building
//! IDs from fields ([`make`]), the forms IDs are written in ([`forms`]) and every failure as an [`ApiError`] mapped from the domain's
//! errors ([`error`]). `crate::http` and `crate::grpc` are sibling adapters over it: neither
//! imports the other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use uidgen_core::UidGenerator;
use uidgen_worker::WorkerKeeper;

pub mod callers;
pub mod error;
pub mod fallback;
pub mod forms;
pub mod generate;
pub mod lease;
pub mod make;
pub mod ready;
pub mod runway;
pub mod segments;
pub mod spaces;

pub use error::{ApiError, FieldErrors, SEE_LOG};
pub use generate::{
    PaddingSignal, Source, batch_count, batch_size, many_as, many_from, one_as, one_from,
};
pub use lease::{SegmentLease, lease};
pub use make::misfits;
pub use ready::{
    Mode, ModeCheck, READY_TIMEOUT, Readiness, ReadinessBoard, check as check_readiness, check_mode,
};
pub use segments::{segment_error, service as segment_service};
pub use spaces::{Space, unknown_space};

pub use crate::config::DEFAULT_BATCH_CAP;
use crate::config::EmptyRing;
use crate::metrics::Metrics;

/// What a request to a starting server is told, over HTTP and gRPC alike.
pub const STARTING_MESSAGE: &str =
    "the server is starting and cannot issue IDs yet; ask another server or retry shortly";

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
    /// What handlers waiting for the generator's ring await (connected to it on the first
    /// wait).
    pub padded: PaddingSignal,
    /// What a request does while the ring holds fewer IDs than it asked for
    /// (`ring.take_rejection`, `ring.take_wait_ms`).
    pub empty_ring: EmptyRing,
    /// The most IDs one request may ask for.
    pub batch_cap: usize,
    /// Bearer token for admin routes; `None` disables them.
    pub admin_token: Option<String>,
    /// The caller tokens (`[auth]`), when the server has a store: checked on every ID route
    /// when `auth.required`, managed through the admin API either way.
    pub callers: Option<Arc<callers::Callers>>,
    /// Metrics.
    pub metrics: Metrics,
    /// What keeps the generator's worker id, when it is held from an authority (a lease, a
    /// ZooKeeper or etcd holder): readiness, `/v1/status` and metrics read its status, of every
    /// kind alike. Set it with [`AppState::kept_by`].
    pub keeper: Option<Arc<dyn WorkerKeeper>>,
    /// Whether the store answers: segment mode's readiness.
    pub store_check: ReadinessCheck,
    /// The last readiness of every mode, for `GET /v1/status`.
    pub readiness: ReadinessBoard,
    /// Leaf segment mode, when enabled.
    pub segments: Option<Arc<uidgen_segment::SegmentService>>,
    /// Segment tags whose numbers restart every day (`segment.dated_tags`).
    pub dated_tags: Vec<String>,
    /// The sharded mode (IDs with app id and shard inside, from Redis lists), when enabled.
    pub sharded: Option<Arc<uidgen_sharded::ShardedService>>,
    /// Leases worker ids of the embedded range to clients' fallbacks, when this server has
    /// one (`worker.fallback_range`).
    pub fallback: Option<Arc<uidgen_store::FallbackLeases>>,
    /// When the state was made, for the uptime `/v1/status` reports.
    pub started: std::time::Instant,
    /// The configured generator kind (`cached`, `default`, `snowflake`), for `/v1/status`;
    /// `None` when embedded.
    pub generator_kind: Option<&'static str>,
    /// How the worker id was assigned (`leased`, `zookeeper`, ...), for `/v1/status`; `None`
    /// when embedded.
    pub assigner: Option<&'static str>,
    /// The named spaces (`[spaces.<name>]`), by name; the fields above are the default space's.
    pub spaces: std::collections::BTreeMap<String, Space>,
    /// The worker ids the default space's generator holds beyond its first, and what they
    /// sustain (issue 30); `None` when embedded.
    pub pool: Option<Arc<crate::workers::WorkerPool>>,
    /// Whether each HTTP request gets an access-log line (`log.access`).
    pub access_log: bool,
    /// The keys of the masked form (`[mask]`); `None`: `?form=masked` is refused.
    pub masker: Option<Arc<uidgen_core::Masker>>,
    /// Below this much time left in a space's time field the log warns
    /// (`runway_warning_days`; [`runway`]).
    pub runway_warning: std::time::Duration,
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
    /// State with no store behind it (every check passes) and no keeper: for the embedded CLI
    /// and tests. A generator with a ring is taken from without waiting, however built.
    pub fn embedded(generator: Arc<dyn UidGenerator>, worker_id: u64) -> Self {
        Self {
            generator,
            worker_id,
            padded: PaddingSignal::default(),
            empty_ring: EmptyRing::default(),
            batch_cap: DEFAULT_BATCH_CAP,
            admin_token: None,
            callers: None,
            metrics: Metrics::new(),
            keeper: None,
            store_check: always_ready(),
            readiness: ReadinessBoard::default(),
            segments: None,
            dated_tags: Vec::new(),
            sharded: None,
            fallback: None,
            started: std::time::Instant::now(),
            generator_kind: None,
            assigner: None,
            spaces: std::collections::BTreeMap::new(),
            pool: None,
            access_log: false,
            masker: None,
            runway_warning: uidgen_core::layout::DEFAULT_RUNWAY_WARNING,
        }
    }

    /// Serve IDs on a worker id kept by `keeper` (none: nothing to keep): readiness and status
    /// check it, and the figures of its time reports, when it publishes them, become metrics.
    #[must_use]
    pub fn kept_by(mut self, keeper: Option<Arc<dyn WorkerKeeper>>) -> Self {
        if let Some(reports) = keeper.as_ref().and_then(|k| k.status().reports) {
            self.metrics.register_reports(&reports);
        }
        self.keeper = keeper;
        self
    }
}
