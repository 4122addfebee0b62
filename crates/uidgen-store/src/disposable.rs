//! Baidu's disposable worker ids: a fresh `worker_node` row per start.

use uidgen_core::Layout;
use uidgen_worker::{
    AssignmentKind, BoxFuture, WorkerAssignment, WorkerError, WorkerIdAssigner, WorkerIdRange,
};

use crate::error::{StoreError, StoreFuture};
use crate::store::Store;
use crate::worker_node::WorkerNode;

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
/// use uidgen_store::{DisposableWorkerIdAssigner, Store};
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

    /// The range it registers unless given one: `1-max` (worker_node ids start at 1).
    ///
    /// ```
    /// assert_eq!(uidgen_store::DisposableWorkerIdAssigner::default_range().to_string(), "1-max");
    /// ```
    pub fn default_range() -> WorkerIdRange {
        WorkerIdRange::from_low(1)
    }

    /// Its assignments' kind: a fresh `worker_node` row (Baidu's disposable worker id).
    pub const KIND: AssignmentKind = AssignmentKind::new("disposable");

    /// Describe this process with [`WorkerNode::try_detect`] on every assignment (a half-set
    /// [`ENV_HOST`](uidgen_worker::ENV_HOST) / [`ENV_PORT`](uidgen_worker::ENV_PORT) pair is an error).
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
    /// use uidgen_store::DisposableWorkerIdAssigner;
    /// use uidgen_worker::WorkerIdRange;
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

    /// The range to register: the configured one, or [`Self::default_range`].
    fn registered_range(&self) -> WorkerIdRange {
        self.range.unwrap_or_else(Self::default_range)
    }
}

impl DisposableWorkerIdAssigner {
    /// [`WorkerIdAssigner::assign`] with the store's own error: insert a `worker_node` row
    /// and map its id into the range.
    ///
    /// Errors: [`StoreError::WorkerIdsExhausted`], [`StoreError::WorkerRangeExhausted`],
    /// [`StoreError::IncompleteNodeEnv`], the range's registration's, database errors.
    pub fn assign<'a>(&'a self, layout: &'a Layout) -> StoreFuture<'a, WorkerAssignment> {
        Box::pin(async move {
            {
                let registered = self.registered_range();
                let max = layout.max_worker_id();
                let range = registered
                    .within(layout)
                    .map_err(|error| match self.range {
                        Some(_) => StoreError::from(error),
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
                Ok(WorkerAssignment::fixed(id, Self::KIND))
            }
        })
    }
}

/// The worker crate's trait for a store assigner, through its inherent `assign`, whose error
/// is the store's (a caller holding the concrete type matches [`StoreError`] variants; one
/// holding `dyn WorkerIdAssigner` gets them inside [`WorkerError::Backend`]).
///
/// Both store assigners hand a process several worker ids (issue 30), each through its own
/// inherent `assign_extra`.
macro_rules! assign_through_store {
    ($assigner:ty) => {
        impl WorkerIdAssigner for $assigner {
            fn assign<'a>(
                &'a self,
                layout: &'a Layout,
            ) -> BoxFuture<'a, uidgen_worker::Result<WorkerAssignment>> {
                Box::pin(async move {
                    <$assigner>::assign(self, layout)
                        .await
                        .map_err(WorkerError::from)
                })
            }

            fn holds_several(&self) -> bool {
                true
            }

            fn assign_extra<'a>(
                &'a self,
                layout: &'a Layout,
                _index: u32,
            ) -> BoxFuture<'a, uidgen_worker::Result<WorkerAssignment>> {
                Box::pin(async move {
                    <$assigner>::assign_extra(self, layout)
                        .await
                        .map_err(WorkerError::from)
                })
            }
        }
    };
}
pub(crate) use assign_through_store;

impl DisposableWorkerIdAssigner {
    /// One more worker id for this process (issue 30): another fresh `worker_node` row, exactly
    /// as [`assign`](Self::assign) takes the first. Disposable ids are never reused, so each
    /// extra claim uses a row up for good: see docs/OPERATIONS.md ("Throughput and borrowing")
    /// for how long the worker field lasts at the rate a server claims them.
    pub fn assign_extra<'a>(&'a self, layout: &'a Layout) -> StoreFuture<'a, WorkerAssignment> {
        self.assign(layout)
    }
}

assign_through_store!(DisposableWorkerIdAssigner);
