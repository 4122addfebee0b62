//! Worker-id assigners: how a process gets the worker id its generator stamps into IDs.

use std::future::Future;
use std::pin::Pin;

use uidgen_core::Layout;

use crate::error::{Result, StoreError};
use crate::lease_guard::LeaseGuard;
use crate::store::Store;
use crate::worker_node::WorkerNode;

/// A boxed, `Send` future: what [`WorkerIdAssigner::assign`] returns, so that assigners can
/// be held as `Arc<dyn WorkerIdAssigner>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a worker id was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssignmentKind {
    /// A fresh `worker_node` row (Baidu's disposable worker id).
    Disposable,
    /// A configured number.
    Static,
    /// A lease in `worker_lease`, renewed by a heartbeat.
    Leased,
    /// The local cache file, because the database was unreachable at start-up: a lease valid
    /// for one ttl that its renewals claim in the database once it answers (or end, if another
    /// holder had the id meanwhile).
    LocalCache,
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
}

impl WorkerAssignment {
    /// An assignment that needs no upkeep.
    pub fn fixed(worker_id: u64, kind: AssignmentKind) -> Self {
        Self {
            worker_id,
            kind,
            lease: None,
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
/// let assigner: Arc<dyn WorkerIdAssigner> = Arc::new(StaticWorkerIdAssigner::new(7));
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

/// Baidu's `DisposableWorkerIdAssigner`: every start inserts a `worker_node` row and its id is
/// the worker id, so a restarted process never reuses its earlier life's id (which is what lets
/// a cached generator borrow future seconds safely).
///
/// An id wider than the layout's worker field is [`StoreError::WorkerIdsExhausted`].
///
/// ```no_run
/// # async fn demo() -> uidgen_store::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_store::{DisposableWorkerIdAssigner, Store, WorkerIdAssigner};
/// let store = Store::connect("sqlite://uidgen.db").await?;
/// let assignment = DisposableWorkerIdAssigner::new(store).assign(&Layout::baidu_default()?).await?;
/// println!("worker id {}", assignment.worker_id);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct DisposableWorkerIdAssigner {
    store: Store,
    node: Option<WorkerNode>,
}

impl DisposableWorkerIdAssigner {
    /// Describe this process with [`WorkerNode::try_detect`] on every assignment (a half-set
    /// [`ENV_HOST`](crate::ENV_HOST) / [`ENV_PORT`](crate::ENV_PORT) pair is an error).
    pub fn new(store: Store) -> Self {
        Self { store, node: None }
    }

    /// Describe this process with a given node.
    pub fn with_node(store: Store, node: WorkerNode) -> Self {
        Self {
            store,
            node: Some(node),
        }
    }
}

impl WorkerIdAssigner for DisposableWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            let node = match &self.node {
                Some(node) => node.clone(),
                None => WorkerNode::try_detect()?,
            };
            let id = self.store.insert_worker_node(&node).await?;
            let max = layout.max_worker_id();
            if id > max {
                return Err(StoreError::WorkerIdsExhausted { id, max });
            }
            tracing::info!(worker_id = id, host = %node.host_name, port = %node.port, "assigned a disposable worker id");
            Ok(WorkerAssignment::fixed(id, AssignmentKind::Disposable))
        })
    }
}

/// A configured worker id, range-checked against the layout. The operator guarantees that no
/// two live processes share it.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_store::{StaticWorkerIdAssigner, StoreError, WorkerIdAssigner};
/// let layout = Layout::snowflake()?;
/// assert_eq!(StaticWorkerIdAssigner::new(1023).assign_blocking(&layout)?.worker_id, 1023);
/// assert!(matches!(
///     StaticWorkerIdAssigner::new(1024).assign_blocking(&layout),
///     Err(StoreError::WorkerIdOutOfRange { id: 1024, max: 1023 })
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StaticWorkerIdAssigner {
    worker_id: u64,
}

impl StaticWorkerIdAssigner {
    /// Always assign `worker_id`.
    pub fn new(worker_id: u64) -> Self {
        Self { worker_id }
    }
}

impl WorkerIdAssigner for StaticWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        let max = layout.max_worker_id();
        let id = self.worker_id;
        Box::pin(async move {
            if id > max {
                return Err(StoreError::WorkerIdOutOfRange { id, max });
            }
            Ok(WorkerAssignment::fixed(id, AssignmentKind::Static))
        })
    }
}
