//! [`StaticWorkerIdAssigner`]: a configured worker id, fenced by its local mark and, with a
//! shared store, leased there.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Clock, Layout};

use crate::assigner::{AssignmentKind, WorkerAssignment, WorkerIdAssigner};
use crate::cache::CacheLock;
use crate::container::ContainerProbe;
use crate::error::{Result, WorkerError};
use crate::future::BoxFuture;
use crate::lease_options::LeaseOptions;
use crate::mark::{MarkFence, MarkTiming};
use crate::range::WorkerIdRange;
use crate::registry::{ExactLease, ExactLeaseRegistry};

/// A configured worker id, range-checked against the layout. The operator guarantees that no
/// two live processes share it; the assigner guarantees that no two *lives* of this process
/// stamp the same time unit with it.
///
/// It keeps a local state file (locked while in use, so a second process on the host is
/// refused) with a reserved-until mark: no ID at or past the mark is issued before the mark
/// is synced to disk, a background thread keeps it a step ahead of the clock, and a start
/// waits until its clock has passed the previous life's mark (up to
/// [`max_start_wait`](Self::max_start_wait), else [`WorkerError::ClockBehindLastIssued`]). Its
/// assignment carries the mark as the generator's fence; a cached generator's borrowing is
/// bounded by [`max_borrow`](Self::max_borrow), which is also about the longest a restart
/// waits.
///
/// [Registered in a store](Self::registered_in), it records its range (by default `0-max`,
/// every id of the layout; see [`with_range`](Self::with_range)) before anything else, so that a
/// disposable or leased assigner on the same store cannot hand out ids in it, and refuses a
/// worker id outside the range ([`WorkerError::WorkerIdNotInRange`]). It then leases the worker
/// id itself there (an exact-id lease, renewed by a heartbeat): a second live process
/// configured with the same id, on any host sharing the store, is refused at start-up with
/// [`WorkerError::WorkerIdHeld`], naming the holder; the lease's recorded issued-until time is
/// a floor as the local mark is. Without a store it records nothing, and uniqueness across
/// hosts is the operator's;
/// [`refuse_uncoordinated_in_container`](Self::refuse_uncoordinated_in_container) makes it
/// refuse to start in a container then.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_worker::{StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner};
/// let dir = tempfile::tempdir().map_err(|e| WorkerError::InvalidInput(e.to_string()))?;
/// let layout = Layout::snowflake()?;
/// let assigner = StaticWorkerIdAssigner::new(1023, dir.path().join("worker-1023.state"));
/// let assignment = assigner.assign(&layout).await?;
/// assert_eq!(assignment.worker_id, 1023);
/// assert!(assignment.fence.is_some());
/// assert!(matches!(
///     StaticWorkerIdAssigner::new(1024, dir.path().join("w.state")).assign(&layout).await,
///     Err(WorkerError::WorkerIdOutOfRange { id: 1024, max: 1023 })
/// ));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StaticWorkerIdAssigner {
    worker_id: u64,
    state_path: PathBuf,
    timing: MarkTiming,
    store: Option<Arc<dyn ExactLeaseRegistry>>,
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

    /// The range it registers unless given one: `0-max`.
    ///
    /// ```
    /// assert_eq!(uidgen_worker::StaticWorkerIdAssigner::default_range().to_string(), "0-max");
    /// ```
    pub fn default_range() -> WorkerIdRange {
        WorkerIdRange::from_low(0)
    }

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
    /// # async fn demo(store: impl uidgen_worker::ExactLeaseRegistry + 'static) -> uidgen_worker::Result<()> {
    /// use uidgen_core::Layout;
    /// use uidgen_worker::{StaticWorkerIdAssigner, WorkerIdAssigner, WorkerIdRange};
    /// let assigner = StaticWorkerIdAssigner::new(1000, "/var/lib/uidgen/worker-1000.state")
    ///     .registered_in(store)
    ///     .with_range(WorkerIdRange::new(1000, 1023)?);
    /// assert_eq!(assigner.assign(&Layout::snowflake()?).await?.worker_id, 1000);
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn registered_in(self, store: impl ExactLeaseRegistry + 'static) -> Self {
        self.registered_in_shared(Arc::new(store))
    }

    crate::exact_lease_setters!();

    /// Refuse to start without a shared store when `probe` finds a container
    /// ([`WorkerError::UncoordinatedInContainer`]): a recreated container starts with a fresh
    /// state file, and its siblings from one image are configured with the same id. For a
    /// caller whose operator has not stated that the id is unique to this state file (the
    /// service sets it unless `worker.state_file` is an explicit absolute path).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
    /// use uidgen_core::Layout;
    /// use uidgen_worker::{ContainerProbe, StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner};
    /// let dir = tempfile::tempdir().map_err(|e| WorkerError::InvalidInput(e.to_string()))?;
    /// let io = |e: std::io::Error| WorkerError::InvalidInput(e.to_string());
    /// std::fs::write(dir.path().join(".dockerenv"), "").map_err(io)?;
    /// let assigner = StaticWorkerIdAssigner::new(5, dir.path().join("worker-5.state"))
    ///     .refuse_uncoordinated_in_container(ContainerProbe::at(dir.path(), None));
    /// let refused = assigner.assign(&Layout::snowflake()?).await.unwrap_err();
    /// assert!(matches!(refused, WorkerError::UncoordinatedInContainer { assigner: "static", .. }));
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
                return Err(WorkerError::WorkerIdOutOfRange { id, max });
            }
            if self.store.is_some() || self.range.is_some() {
                let registered = self.range.unwrap_or_else(Self::default_range);
                if !registered.within(layout)?.contains(id) {
                    return Err(WorkerError::WorkerIdNotInRange {
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
                return Err(WorkerError::UncoordinatedInContainer {
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
                return Err(WorkerError::Cache {
                    path: path.display().to_string(),
                    reason: format!(
                        "another process on this host uses it, so static worker id {id} is live \
                         here already"
                    ),
                });
            };
            if let Some(store) = &self.store {
                let request = ExactLease {
                    options: &self.lease,
                    timing: &self.timing,
                    layout,
                    worker_id: id,
                    cache,
                    kind: AssignmentKind::STATIC,
                };
                let assignment = match store.lease_exact(request).await? {
                    Ok(assignment) => assignment,
                    Err(live) => {
                        return Err(WorkerError::WorkerIdHeld {
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
                    state = %path.display(),
                    "static worker id, leased in the store: {scope}"
                );
                return Ok(assignment);
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
                ..WorkerAssignment::fixed(id, AssignmentKind::STATIC)
            })
        })
    }
}
