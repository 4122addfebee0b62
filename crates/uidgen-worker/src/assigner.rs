//! Worker-id assigners: how a process gets the worker id its generator stamps into IDs.

use std::fmt;
use std::sync::Arc;

use uidgen_core::{Layout, TimeFence};

use crate::error::Result;
use crate::future::BoxFuture;
use crate::keeper::WorkerKeeper;

/// How a worker id was obtained, by name (`GET /v1/status` reports it).
///
/// Open: each assigner names its own kinds where it is defined, so that this crate never
/// names the crates that implement its traits. The two assigners of this crate have theirs
/// here ([`STATIC`](Self::STATIC), [`MACHINE`](Self::MACHINE)); the store's, ZooKeeper's and
/// etcd's are constants of their assigners.
///
/// ```
/// use uidgen_worker::AssignmentKind;
/// const LEASED: AssignmentKind = AssignmentKind::new("leased");
/// assert_eq!(LEASED.name(), "leased");
/// assert_eq!(AssignmentKind::STATIC.to_string(), "static");
/// assert_ne!(LEASED, AssignmentKind::STATIC);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AssignmentKind(&'static str);

impl AssignmentKind {
    /// A configured number, kept apart from its earlier lives by a local reserved-until mark
    /// (and, with a store, leased there so that no other live process holds it).
    pub const STATIC: Self = Self::new("static");

    /// A machine part hashed from the host's identity and a process part from the process id
    /// (the `machine` assigner): leased in the store when it has one, unique among the
    /// processes sharing its state directory, and fenced by a reserved-until mark.
    pub const MACHINE: Self = Self::new("machine");

    /// A kind named `name` (lower case, `snake_case`, as the service reports it).
    pub const fn new(name: &'static str) -> Self {
        Self(name)
    }

    /// The kind's name as the service reports it.
    pub fn name(self) -> &'static str {
        self.0
    }
}

impl fmt::Display for AssignmentKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

/// The worker id a process may use, and what keeps it valid.
#[derive(Debug, Clone)]
pub struct WorkerAssignment {
    /// The worker id.
    pub worker_id: u64,
    /// How it was obtained.
    pub kind: AssignmentKind,
    /// For a worker id held from an authority (a lease in a store, a node in ZooKeeper, a key
    /// in etcd): what keeps it, whose [`check`](WorkerKeeper::check) must pass before issuing;
    /// [`release`](WorkerKeeper::release) it on clean shutdown.
    pub keeper: Option<Arc<dyn WorkerKeeper>>,
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
            keeper: None,
            fence: None,
        }
    }

    /// An assignment kept by `keeper`, which is also its fence (a lease: IDs only up to its
    /// expiry).
    pub fn kept<K: WorkerKeeper + TimeFence + 'static>(
        keeper: Arc<K>,
        kind: AssignmentKind,
    ) -> Self {
        Self {
            worker_id: keeper.worker_id(),
            kind,
            fence: Some(Arc::clone(&keeper) as Arc<dyn TimeFence>),
            keeper: Some(keeper),
        }
    }

    /// `Ok` while IDs may be issued with this worker id (always, unless its keeper lost it).
    pub fn check(&self) -> Result<()> {
        self.keeper.as_ref().map_or(Ok(()), |keeper| keeper.check())
    }
}

/// A source of worker ids. Object safe: a service holds an `Arc<dyn WorkerIdAssigner>`
/// chosen by configuration.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use std::sync::Arc;
/// use uidgen_core::Layout;
/// use uidgen_worker::{StaticWorkerIdAssigner, WorkerIdAssigner};
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

    /// [`assign`](Self::assign) for code that is not async: runs on this crate's own
    /// background runtime (see [`crate::blocking`]). Do not call it from inside a tokio runtime.
    fn assign_blocking(&self, layout: &Layout) -> Result<WorkerAssignment> {
        crate::blocking::block_on_result(self.assign(layout))
    }

    /// Whether this assigner hands one process several worker ids at once
    /// ([`assign_extra`](Self::assign_extra)): a service then pads one generator from as many
    /// as its load needs (issue 30). `false` for an assigner whose process holds one id (a
    /// configured one, a machine's, a pod's ordinal).
    fn holds_several(&self) -> bool {
        false
    }

    /// One more worker id for this process, beside those it holds already: claimed, fenced
    /// and kept exactly as [`assign`](Self::assign)'s, through the same path (a fresh
    /// `worker_node` row, a lease, a coordinator's claim). `index` (1 up) tells the extras of
    /// one process apart for an assigner that names a holder per id (ZooKeeper's node per
    /// ip:port); a restart asks with the same numbers. Refused
    /// ([`WorkerError::OneIdPerProcess`](crate::error::WorkerError::OneIdPerProcess)) unless
    /// [`holds_several`](Self::holds_several).
    fn assign_extra<'a>(
        &'a self,
        layout: &'a Layout,
        index: u32,
    ) -> BoxFuture<'a, Result<WorkerAssignment>> {
        let _ = (layout, index);
        let name = std::any::type_name::<Self>();
        let assigner = name.rsplit("::").next().unwrap_or(name).to_owned();
        Box::pin(async move { Err(crate::error::WorkerError::OneIdPerProcess { assigner }) })
    }
}
