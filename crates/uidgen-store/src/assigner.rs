//! Worker-id assigners: how a process gets the worker id its generator stamps into IDs.

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Clock, Layout, TimeFence};

use crate::cache::CacheLock;
use crate::container::ContainerProbe;
use crate::error::{Result, StoreError};
use crate::exact_lease::lease_exact;
use crate::lease_guard::LeaseGuard;
use crate::lease_options::LeaseOptions;
use crate::mark::{MarkFence, MarkTiming};
use crate::store::Store;
use crate::worker_node::WorkerNode;
use crate::worker_range::WorkerIdRange;

/// A boxed, `Send` future: what [`WorkerIdAssigner::assign`] returns, so that assigners can
/// be held as `Arc<dyn WorkerIdAssigner>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a worker id was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentKind {
    /// A fresh `worker_node` row (Baidu's disposable worker id).
    Disposable,
    /// A configured number, kept apart from its earlier lives by a local reserved-until mark
    /// (and, with a store, leased there so that no other live process holds it).
    Static,
    /// A lease in `worker_lease`, renewed by a heartbeat.
    Leased,
    /// The local cache file, because the database was unreachable at start-up: a lease valid
    /// for one ttl that its renewals claim in the database once it answers (or end, if another
    /// holder had the id meanwhile).
    LocalCache,
    /// A forever node in ZooKeeper (uidgen-zk), kept by a report every few seconds; or that
    /// node's id from the local cache, when ZooKeeper was unreachable at start-up.
    ZooKeeper,
    /// A claim key in etcd (uidgen-etcd) under a lease kept alive, fenced by the id's mark.
    Etcd,
    /// A machine part hashed from the host's identity and a process part from the process id
    /// (the `machine` assigner): leased in the store when it has one (unique among every
    /// process sharing it), unique among the processes sharing its state directory, and kept
    /// apart from earlier holders by a reserved-until mark, as a static id is.
    Machine,
}

impl AssignmentKind {
    /// The kind's name as the service reports it (`GET /v1/status`).
    ///
    /// ```
    /// use uidgen_store::AssignmentKind;
    /// assert_eq!(AssignmentKind::LocalCache.name(), "local_cache");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::Disposable => "disposable",
            Self::Static => "static",
            Self::Leased => "leased",
            Self::LocalCache => "local_cache",
            Self::ZooKeeper => "zookeeper",
            Self::Etcd => "etcd",
            Self::Machine => "machine",
        }
    }
}

/// The worker id a process may use, and what keeps it valid.
#[derive(Debug, Clone)]
pub struct WorkerAssignment {
    /// The worker id.
    pub worker_id: u64,
    /// How it was obtained.
    pub kind: AssignmentKind,
    /// For [`AssignmentKind::Leased`] and [`AssignmentKind::LocalCache`]: the lease, whose
    /// [`LeaseGuard::check`] must pass before issuing; release it on clean shutdown.
    pub lease: Option<LeaseGuard>,
    /// For a worker id that is reused (leased, static): the bound on the time units its
    /// generator may stamp. Give it to the generator ([`GeneratorBuilder`](crate::GeneratorBuilder)
    /// does); a generator without it may repeat another holder's IDs.
    pub fence: Option<Arc<dyn TimeFence>>,
}

impl WorkerAssignment {
    /// An assignment that needs no upkeep and no fence: a worker id nobody else ever uses.
    pub fn fixed(worker_id: u64, kind: AssignmentKind) -> Self {
        Self {
            worker_id,
            kind,
            lease: None,
            fence: None,
        }
    }

    /// An assignment kept by `lease`, which is also its fence.
    pub fn leased(lease: LeaseGuard, kind: AssignmentKind) -> Self {
        Self {
            worker_id: lease.worker_id(),
            kind,
            fence: Some(Arc::new(lease.clone())),
            lease: Some(lease),
        }
    }

    /// `Ok` while IDs may be issued with this worker id (always, unless a lease was lost).
    pub fn check(&self) -> Result<()> {
        self.lease.as_ref().map_or(Ok(()), LeaseGuard::check)
    }
}

/// A source of worker ids. Object safe: a service holds an `Arc<dyn WorkerIdAssigner>`
/// chosen by configuration.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
/// use std::sync::Arc;
/// use uidgen_core::Layout;
/// use uidgen_store::{StaticWorkerIdAssigner, WorkerIdAssigner};
/// let dir = tempfile::tempdir().expect("a temporary directory");
/// let assigner: Arc<dyn WorkerIdAssigner> =
///     Arc::new(StaticWorkerIdAssigner::new(7, dir.path().join("worker-7.state")));
/// let assignment = assigner.assign(&Layout::snowflake()?).await?;
/// assert_eq!(assignment.worker_id, 7);
/// # Ok(()) }
/// ```
pub trait WorkerIdAssigner: Send + Sync + std::fmt::Debug {
    /// Obtain a worker id that fits `layout`.
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>>;

    /// [`assign`](Self::assign) for code that is not async: runs on uidgen-store's own
    /// background runtime (see [`crate::blocking`]). Do not call it from inside a tokio runtime.
    fn assign_blocking(&self, layout: &Layout) -> Result<WorkerAssignment> {
        crate::blocking::block_on_result(self.assign(layout))
    }
}

/// Baidu's `DisposableWorkerIdAssigner`: every start inserts a `worker_node` row and its id
/// picks the worker id, so a restarted process never reuses its earlier life's id (which is
/// what lets a cached generator borrow future seconds safely).
///
/// The worker id is `range.low + (row id - 1)` within its [range](Self::with_range), by
/// default `1-max` (1 to the layout's maximum), where the worker id is the row id as in
/// Baidu's. The range is registered in the store first (see [`Store::register_worker_range`]),
/// so another assigner on the same store cannot hand out the same ids. An id past the range is
/// [`StoreError::WorkerIdsExhausted`] (or [`StoreError::WorkerRangeExhausted`] for a range
/// that ends below the layout's maximum).
///
/// ```no_run
/// # async fn demo() -> uidgen_store::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_store::{DisposableWorkerIdAssigner, Store, WorkerIdAssigner};
/// let store = Store::connect("sqlite://uidgen.db").await?;
/// let assignment = DisposableWorkerIdAssigner::new(store)
///     .assign(&Layout::baidu_default()?)
///     .await?;
/// println!("worker id {}", assignment.worker_id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DisposableWorkerIdAssigner {
    store: Store,
    node: Option<WorkerNode>,
    range: Option<WorkerIdRange>,
}

impl DisposableWorkerIdAssigner {
    /// The name its range is recorded under in `worker_id_range`.
    pub const REGISTRY_NAME: &'static str = "disposable";

    /// Describe this process with [`WorkerNode::try_detect`] on every assignment (a half-set
    /// [`ENV_HOST`](crate::ENV_HOST) / [`ENV_PORT`](crate::ENV_PORT) pair is an error).
    pub fn new(store: Store) -> Self {
        Self {
            store,
            node: None,
            range: None,
        }
    }

    /// Describe this process with a given node.
    pub fn with_node(store: Store, node: WorkerNode) -> Self {
        Self {
            store,
            node: Some(node),
            range: None,
        }
    }

    /// Hand out worker ids from `range` only: row 1 gets `range.low()`, row 2 the next id, and
    /// so on. Every disposable service on one store must use the same range.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_core::Layout;
    /// use uidgen_store::{DisposableWorkerIdAssigner, WorkerIdAssigner, WorkerIdRange};
    /// let range: WorkerIdRange = "1000-max".parse()?;
    /// let assigner = DisposableWorkerIdAssigner::new(store).with_range(range);
    /// assert!(assigner.assign(&Layout::baidu_default()?).await?.worker_id >= 1000);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_range(mut self, range: WorkerIdRange) -> Self {
        self.range = Some(range);
        self
    }

    /// The range to register: the configured one, or `1-max` (worker_node ids start at 1).
    fn registered_range(&self) -> WorkerIdRange {
        self.range.unwrap_or_else(|| WorkerIdRange::from_low(1))
    }
}

impl WorkerIdAssigner for DisposableWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            let registered = self.registered_range();
            let max = layout.max_worker_id();
            let range = registered
                .within(layout)
                .map_err(|error| match self.range {
                    Some(_) => error,
                    // Without worker bits not even the first row fits.
                    None => StoreError::WorkerIdsExhausted { id: 1, max },
                })?;
            let node = match &self.node {
                Some(node) => node.clone(),
                None => WorkerNode::try_detect()?,
            };
            self.store
                .register_worker_range(Self::REGISTRY_NAME, registered)
                .await?;
            let row = self.store.insert_worker_node(&node).await?;
            debug_assert!(row >= 1, "worker_node ids start at 1");
            // Row 1 takes the range's lowest id: the default range 1-max keeps worker id ==
            // row id (Baidu's rule), and row ids never repeat, so neither do worker ids.
            let id = range.low().saturating_add(row.saturating_sub(1));
            if !range.contains(id) {
                return Err(if range.high() == max {
                    StoreError::WorkerIdsExhausted { id, max }
                } else {
                    StoreError::WorkerRangeExhausted { id, range }
                });
            }
            tracing::info!(
                worker_id = id,
                worker_node = row,
                %range,
                host = %node.host_name,
                port = %node.port,
                "assigned a disposable worker id"
            );
            Ok(WorkerAssignment::fixed(id, AssignmentKind::Disposable))
        })
    }
}

/// A configured worker id, range-checked against the layout. The operator guarantees that no
/// two live processes share it; the assigner guarantees that no two *lives* of this process
/// stamp the same time unit with it.
///
/// It keeps a local state file (locked while in use, so a second process on the host is
/// refused) with a reserved-until mark: no ID at or past the mark is issued before the mark
/// is synced to disk, a background thread keeps it a step ahead of the clock, and a start
/// waits until its clock has passed the previous life's mark (up to
/// [`max_start_wait`](Self::max_start_wait), else [`StoreError::ClockBehindLastIssued`]). Its
/// assignment carries the mark as the generator's fence; a cached generator's borrowing is
/// bounded by [`max_borrow`](Self::max_borrow), which is also about the longest a restart
/// waits.
///
/// [Registered in a store](Self::registered_in), it records its range (by default `0-max`,
/// every id of the layout; see [`with_range`](Self::with_range)) before anything else, so that a
/// disposable or leased assigner on the same store cannot hand out ids in it, and refuses a
/// worker id outside the range ([`StoreError::WorkerIdNotInRange`]). It then leases the worker
/// id itself there (an exact-id lease, renewed by a heartbeat): a second live process
/// configured with the same id, on any host sharing the store, is refused at start-up with
/// [`StoreError::WorkerIdHeld`], naming the holder; the lease's recorded issued-until time is
/// a floor as the local mark is. Without a store it records nothing, and uniqueness across
/// hosts is the operator's;
/// [`refuse_uncoordinated_in_container`](Self::refuse_uncoordinated_in_container) makes it
/// refuse to start in a container then.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_store::{StaticWorkerIdAssigner, StoreError, WorkerIdAssigner};
/// let dir = tempfile::tempdir().map_err(|e| StoreError::InvalidInput(e.to_string()))?;
/// let layout = Layout::snowflake()?;
/// let assigner = StaticWorkerIdAssigner::new(1023, dir.path().join("worker-1023.state"));
/// let assignment = assigner.assign(&layout).await?;
/// assert_eq!(assignment.worker_id, 1023);
/// assert!(assignment.fence.is_some());
/// assert!(matches!(
///     StaticWorkerIdAssigner::new(1024, dir.path().join("w.state")).assign(&layout).await,
///     Err(StoreError::WorkerIdOutOfRange { id: 1024, max: 1023 })
/// ));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StaticWorkerIdAssigner {
    worker_id: u64,
    state_path: PathBuf,
    timing: MarkTiming,
    store: Option<Store>,
    /// Whether `store` is seen by every host (see `MachineWorkerIdAssigner::with_store_shared`).
    store_shared: bool,
    range: Option<WorkerIdRange>,
    lease: LeaseOptions,
    /// When set, an uncoordinated start in a container this probe finds is refused.
    container_check: Option<ContainerProbe>,
}

impl StaticWorkerIdAssigner {
    /// The longest a start waits for its clock to pass the previous life's mark, by default.
    pub const DEFAULT_MAX_START_WAIT: Duration = Duration::from_secs(15);
    /// How far ahead of the clock a cached generator may borrow, by default.
    pub const DEFAULT_MAX_BORROW: Duration = Duration::from_secs(10);

    /// The name its range is recorded under in `worker_id_range`.
    pub const REGISTRY_NAME: &'static str = "static";

    /// Always assign `worker_id`, keeping its reserved-until mark in `state_path` (one file
    /// per worker id; its directory is created).
    pub fn new(worker_id: u64, state_path: impl Into<PathBuf>) -> Self {
        Self {
            worker_id,
            state_path: state_path.into(),
            timing: MarkTiming::new(Self::DEFAULT_MAX_START_WAIT, Self::DEFAULT_MAX_BORROW),
            store: None,
            store_shared: true,
            range: None,
            lease: LeaseOptions::default(),
            container_check: None,
        }
    }

    /// Register the static range in `store` at every assignment, so that the other assigners
    /// sharing it keep out of that range (and a range overlapping theirs is refused).
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_core::Layout;
    /// use uidgen_store::{StaticWorkerIdAssigner, WorkerIdAssigner, WorkerIdRange};
    /// let assigner = StaticWorkerIdAssigner::new(1000, "/var/lib/uidgen/worker-1000.state")
    ///     .registered_in(store)
    ///     .with_range(WorkerIdRange::new(1000, 1023)?);
    /// assert_eq!(assigner.assign(&Layout::snowflake()?).await?.worker_id, 1000);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn registered_in(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    crate::exact_lease::exact_lease_setters!();

    /// Refuse to start without a shared store when `probe` finds a container
    /// ([`StoreError::UncoordinatedInContainer`]): a recreated container starts with a fresh
    /// state file, and its siblings from one image are configured with the same id. For a
    /// caller whose operator has not stated that the id is unique to this state file (the
    /// service sets it unless `worker.state_file` is an explicit absolute path).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
    /// use uidgen_core::Layout;
    /// use uidgen_store::{ContainerProbe, StaticWorkerIdAssigner, StoreError, WorkerIdAssigner};
    /// let dir = tempfile::tempdir().map_err(|e| StoreError::InvalidInput(e.to_string()))?;
    /// let io = |e: std::io::Error| StoreError::InvalidInput(e.to_string());
    /// std::fs::write(dir.path().join(".dockerenv"), "").map_err(io)?;
    /// let assigner = StaticWorkerIdAssigner::new(5, dir.path().join("worker-5.state"))
    ///     .refuse_uncoordinated_in_container(ContainerProbe::at(dir.path(), None));
    /// let refused = assigner.assign(&Layout::snowflake()?).await.unwrap_err();
    /// assert!(matches!(refused, StoreError::UncoordinatedInContainer { assigner: "static", .. }));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn refuse_uncoordinated_in_container(mut self, probe: ContainerProbe) -> Self {
        self.container_check = Some(probe);
        self
    }

    /// The range static worker ids come from on this store (default `0-max`: every id of the
    /// layout); the configured worker id must lie in it. Checked even without a store.
    #[must_use]
    pub fn with_range(mut self, range: WorkerIdRange) -> Self {
        self.range = Some(range);
        self
    }

    crate::mark::mark_fence_setters!();
}

impl WorkerIdAssigner for StaticWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            let (id, max) = (self.worker_id, layout.max_worker_id());
            if id > max {
                return Err(StoreError::WorkerIdOutOfRange { id, max });
            }
            if self.store.is_some() || self.range.is_some() {
                let registered = self.range.unwrap_or_else(|| WorkerIdRange::from_low(0));
                if !registered.within(layout)?.contains(id) {
                    return Err(StoreError::WorkerIdNotInRange {
                        id,
                        range: registered,
                    });
                }
                // Before the state file is taken: a refused range takes nothing.
                if let Some(store) = &self.store {
                    store
                        .register_worker_range(Self::REGISTRY_NAME, registered)
                        .await?;
                }
            }
            let coordinated = self.store.is_some() && self.store_shared;
            if !coordinated
                && let Some(evidence) = self.container_check.as_ref().and_then(|p| p.detect())
            {
                return Err(StoreError::UncoordinatedInContainer {
                    assigner: "static",
                    evidence: evidence.to_string(),
                    remedy: "Configure a store that every container shares (`store = \
                             \"postgres://...\"`), where the worker id is leased; or state that \
                             this id is unique to this container's volume by setting \
                             `worker.state_file` to an absolute path on it \
                             (UIDGEN_WORKER_STATE_FILE=/data/uidgen-worker.state)."
                        .to_owned(),
                });
            }
            let path = &self.state_path;
            let Some(cache) = CacheLock::try_acquire(path)? else {
                return Err(StoreError::Cache {
                    path: path.display().to_string(),
                    reason: format!(
                        "another process on this host uses it, so static worker id {id} is live \
                         here already"
                    ),
                });
            };
            if let Some(store) = &self.store {
                let guard =
                    match lease_exact(store, &self.lease, &self.timing, layout, id, cache).await? {
                        Ok(guard) => guard,
                        Err(live) => {
                            return Err(StoreError::WorkerIdHeld {
                                worker_id: id,
                                holder: live.holder,
                                expires_in_ms: live.expires_in_ms,
                            });
                        }
                    };
                let scope = if self.store_shared {
                    "no other live process sharing it holds this id"
                } else {
                    "the store is this host's own, so that no other host uses this id is the \
                     operator's to ensure"
                };
                tracing::info!(
                    worker_id = id,
                    holder = %guard.holder(),
                    state = %path.display(),
                    "static worker id, leased in the store: {scope}"
                );
                return Ok(WorkerAssignment::leased(guard, AssignmentKind::Static));
            }
            let fence = MarkFence::continue_from(cache, id, layout, &self.timing).await?;
            tracing::info!(
                worker_id = id,
                state = %path.display(),
                "static worker id; its reserved-until mark is kept in the state file. No store \
                 is shared: that no other host uses this id is the operator's to ensure"
            );
            Ok(WorkerAssignment {
                fence: Some(Arc::new(fence)),
                ..WorkerAssignment::fixed(id, AssignmentKind::Static)
            })
        })
    }
}
