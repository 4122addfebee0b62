//! The state both adapters share, as one `Arc`: the default space's generator and what keeps
//! it, each named space's, and the modes, limits and metrics every handler reads.

use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use uidgen_core::UidGenerator;
use uidgen_worker::WorkerKeeper;

use super::callers::Callers;
use super::padding::PaddingSignal;
use super::readiness::{ReadinessBoard, ReadinessCheck, always_ready};
use crate::config::DEFAULT_BATCH_CAP;
use crate::config::ring::EmptyRing;
use crate::metrics::Metrics;

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
    pub callers: Option<Arc<Callers>>,
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
    /// The ordered tags and their leads, when segment mode runs on a store (issue 35).
    pub ordered: Option<Arc<crate::ordered::OrderedTags>>,
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
    /// (`runway_warning_days`; [`runway`](crate::service::runway)).
    pub runway_warning: std::time::Duration,
    /// This host's clock against the store's: while fenced, no time-stamped ID is issued
    /// ([`clock_watch`](super::clock_watch)); never fenced unless a watch runs.
    pub clock: Arc<super::clock_watch::ClockWatch>,
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
            ordered: None,
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
            clock: Arc::default(),
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

/// One named space's generator and what keeps its worker id.
pub struct Space {
    /// The space's name.
    pub name: String,
    /// Its generator, guarded by its keeper.
    pub generator: Arc<dyn UidGenerator>,
    /// The worker id it stamps (its own claim: no other space's).
    pub worker_id: u64,
    /// What requests waiting for its ring await.
    pub padded: PaddingSignal,
    /// What keeps its worker id (its own lease and fence); readiness and status read it.
    pub keeper: Option<Arc<dyn WorkerKeeper>>,
    /// The generator kind (`cached`, `default`, `snowflake`).
    pub generator_kind: &'static str,
    /// `uidgen_space_ids_issued_total{space=...}`.
    pub issued: Counter,
    /// The server's clock watch, as [`AppState::clock`].
    pub clock: Arc<super::clock_watch::ClockWatch>,
}

impl std::fmt::Debug for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Space")
            .field("name", &self.name)
            .field("worker_id", &self.worker_id)
            .field("layout", self.generator.layout())
            .finish_non_exhaustive()
    }
}

impl Space {
    /// The space `name` serving `generator` on `worker_id`, its keeper `keeper`, counted in
    /// `state`'s metrics.
    pub fn new(
        state: &AppState,
        name: &str,
        generator: Arc<dyn UidGenerator>,
        worker_id: u64,
        keeper: Option<Arc<dyn WorkerKeeper>>,
        generator_kind: &'static str,
    ) -> Self {
        Self {
            name: name.to_owned(),
            generator,
            worker_id,
            padded: PaddingSignal::default(),
            keeper,
            generator_kind,
            issued: state.metrics.space_counter(name),
            clock: Arc::clone(&state.clock),
        }
    }
}
