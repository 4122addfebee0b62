//! The one error type of `uidgen-zk`.

use uidgen_worker::{WorkerError, WorkerIdRange};

/// `Result` with [`ZkError`] as the default error.
pub type Result<T, E = ZkError> = std::result::Result<T, E>;

/// Everything that can go wrong while taking, keeping or reclaiming a worker id in ZooKeeper.
/// Messages say what to change.
///
/// ```
/// use uidgen_worker::WorkerIdRange;
/// use uidgen_zk::ZkError;
/// let error = ZkError::RangeUsedUp {
///     range: WorkerIdRange::new(924, 1023)?,
///     root: "/snowflake/order".into(),
/// };
/// assert!(error.to_string().starts_with("range used up: every worker id of 924-1023"));
/// # Ok::<(), uidgen_worker::WorkerError>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ZkError {
    /// [`ZkOptions`](crate::ZkOptions) that cannot work (a report slower than the outage
    /// allowance, a reclaim threshold below it, an empty name).
    #[error("invalid ZooKeeper options: {0}")]
    InvalidOptions(String),

    /// No session could be established with the ensemble.
    #[error("cannot reach ZooKeeper at {connect}: {reason}")]
    Unreachable {
        /// The connect string.
        connect: String,
        /// What the client said, e.g. "timeout".
        reason: String,
    },

    /// ZooKeeper answered with an error, or the connection broke during a request.
    #[error("ZooKeeper at {connect} failed while {action}: {source}")]
    ZooKeeper {
        /// The connect string.
        connect: String,
        /// What we were doing, e.g. "claiming a worker id".
        action: &'static str,
        /// The client's error.
        #[source]
        source: zookeeper_client::Error,
    },

    /// Every worker id of the range has a forever node (or a claim) under the namespace.
    #[error(
        "range used up: every worker id of {range} has a forever node under {root}; a stopped \
         holder's id can be reclaimed once it has been silent for longer than the reservation, \
         not sooner (`uidgen zk reclaim --older-than` the reservation, or \
         `zookeeper.auto_reclaim_after_secs`); or widen `worker.range` or the layout's worker \
         bits"
    )]
    RangeUsedUp {
        /// The range the assigner hands ids from.
        range: WorkerIdRange,
        /// `/snowflake/{name}`.
        root: String,
    },

    /// This process's own forever node (its ip:port) holds a worker id outside the range
    /// (Vesta: "ZooKeeper assigns an id outside the release mode's range: refuse to start").
    #[error(
        "worker id {id} of this process's forever node {node} is outside the range {range}: set \
         `worker.range` to include it (a Leaf namespace used ids from 0), or reclaim that node and \
         start again"
    )]
    OutsideRange {
        /// The node's worker id.
        id: u64,
        /// The range.
        range: WorkerIdRange,
        /// The node's path.
        node: String,
    },

    /// This address's forever node carries the same worker id as another address's node:
    /// Java Leaf created one while ZooKeeper's sequence counter stood below an id uidgen held
    /// (a tree from a uidgen before issue 31). Both would stamp one worker id.
    #[error(
        "worker id {worker_id} of forever node {node} is also the id of {others:?}, created by          another process (Java Leaf numbering its node with ZooKeeper's sequence counter):          refusing to stamp a worker id another process holds. Stop the process of that node,          then reclaim one of the two (`uidgen zk reclaim`) or delete this node once its          reservation has passed, and start again"
    )]
    SequenceTaken {
        /// The worker id.
        worker_id: u64,
        /// This address's node.
        node: String,
        /// The other nodes with that id.
        others: Vec<String>,
    },

    /// A forever node's worker id does not fit the layout's worker field.
    #[error(
        "worker id {id} of forever node {node} exceeds the layout's maximum {max}; widen the \
         worker bits or use another `zookeeper.name`"
    )]
    OutsideLayout {
        /// The node's worker id.
        id: u64,
        /// The layout's largest worker id.
        max: u64,
        /// The node's path.
        node: String,
    },

    /// The worker id was used up to a time this clock has not reached, and waiting for it
    /// would take longer than allowed (Leaf: "the clock went back across a restart").
    #[error(
        "worker id {worker_id}: {what} is {until_ms} ms but this clock reads {now_ms} ms, {} ms \
         behind (more than the {max_wait_ms} ms a start may wait); refusing to issue IDs: check \
         the clock (NTP)",
        .until_ms.saturating_sub(*.now_ms)
    )]
    ClockBehind {
        /// The worker id.
        worker_id: u64,
        /// What recorded the time, e.g. "its forever node's last report".
        what: &'static str,
        /// The recorded time (ms since the Unix epoch).
        until_ms: u64,
        /// This clock.
        now_ms: u64,
        /// How long a start may wait.
        max_wait_ms: u64,
    },

    /// This clock is too far from the average of the other live holders' recent reports
    /// (Meituan's check; not in Leaf's code).
    #[error(
        "this clock reads {now_ms} ms but the {peers} other live holders reported {peers_avg_ms} \
         ms on average (their reports are up to one report interval old): off by {skew_ms} ms, \
         more than `zookeeper.max_peer_skew_ms` = {max_skew_ms}; refusing to start: fix the clock \
         (NTP)"
    )]
    PeerSkew {
        /// This clock.
        now_ms: u64,
        /// The average reported time of the other live holders.
        peers_avg_ms: u64,
        /// How many live holders reported.
        peers: usize,
        /// How far off this clock is, beyond what report staleness explains.
        skew_ms: u64,
        /// The allowed skew.
        max_skew_ms: u64,
    },

    /// Another session holds the worker id's live node and did not let it go within the
    /// session timeout: another process with the same ip:port is running.
    #[error(
        "worker id {worker_id} ({node}) is held by a live process (its node {live} belongs to \
         another ZooKeeper session): is another process running with the same ip:port? give each \
         its own port (`UIDGEN_PORT`)"
    )]
    Live {
        /// The worker id.
        worker_id: u64,
        /// The forever node.
        node: String,
        /// The live node.
        live: String,
    },

    /// ZooKeeper is unreachable at start-up and the local cache cannot stand in for it.
    #[error(
        "cannot reach ZooKeeper at {connect} ({zk_reason}) and cannot start from the local cache \
         {cache}: {reason}; start ZooKeeper (a start from the cache needs the file this address's \
         last run wrote, within the reservation of its last accepted report: keep \
         `zookeeper.cache_file` on disk that survives restarts)"
    )]
    NoUsableCache {
        /// The connect string.
        connect: String,
        /// Why ZooKeeper could not be reached.
        zk_reason: String,
        /// The cache file.
        cache: String,
        /// Why it cannot be used.
        reason: String,
    },

    /// Another process on this host holds the local cache file.
    #[error(
        "the local cache {path} is in use by another process on this host (it holds worker id \
         {worker_id} with the same ip:port?); give each process its own `zookeeper.cache_file` and \
         port"
    )]
    CacheInUse {
        /// The cache file.
        path: String,
        /// The worker id it was opened for.
        worker_id: u64,
    },

    /// No worker id can be claimed yet: ZooKeeper holds no record of this namespace's ids from
    /// before its namespace record (a new namespace, or one whose data ZooKeeper lost), and
    /// that record fences them until `floor_ms`.
    #[error(
        "no worker id under {root} can be claimed before {floor_ms} ms ({} s from now): \
         {reason}; a holder of an id ZooKeeper no longer records may still be issuing IDs until \
         then. If this namespace is new (it never issued an ID), declare it once with `uidgen \
         zk init` and start again; otherwise start again after that time",
        .floor_ms.saturating_sub(*.now_ms).div_ceil(1000)
    )]
    NamespaceFenced {
        /// `/snowflake/{name}`.
        root: String,
        /// Why the namespace record fences
        /// ([`NamespaceRecord::fence_reason`](uidgen_worker::NamespaceRecord::fence_reason)).
        reason: String,
        /// The namespace record's origin.
        origin: uidgen_worker::Origin,
        /// Until when (ms since the Unix epoch).
        floor_ms: u64,
        /// This clock.
        now_ms: u64,
    },

    /// `uidgen zk init` on a namespace that is not new.
    #[error("{root} is not a new namespace: {reason}")]
    NotNew {
        /// `/snowflake/{name}`.
        root: String,
        /// What shows it, and what to do instead.
        reason: String,
    },

    /// A node's data is not what uidgen or Leaf writes.
    #[error("ZooKeeper node {path} is not a worker id node: {reason}")]
    InvalidNode {
        /// The node.
        path: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The worker id was taken from this holder (its forever node was reclaimed or written by
    /// someone else): no ID may be issued with it any more.
    #[error("worker id {worker_id} lost: {reason}; stopped issuing IDs to avoid duplicates")]
    Lost {
        /// The worker id.
        worker_id: u64,
        /// Why.
        reason: String,
    },

    /// Every attempt to claim a free id lost a race to other claimants. Retrying is safe.
    #[error("lost the race for a free worker id {attempts} times to other processes; start again")]
    Contention {
        /// How many rounds were lost.
        attempts: u32,
    },

    /// A reclaim threshold below the reservation: a holder cut off from ZooKeeper may still be
    /// issuing IDs with an id silent for less.
    #[error(
        "reclaim threshold {threshold_secs} s is below the reservation \
         `zookeeper.reservation_secs` = {reservation_secs} s: a holder cut off from ZooKeeper keeps \
         issuing that long after its last report, so its id cannot be freed earlier"
    )]
    ReclaimThreshold {
        /// The threshold asked for.
        threshold_secs: u64,
        /// The reservation.
        reservation_secs: u64,
    },

    /// The local state file, the range or the clock wait failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

impl ZkError {
    /// Whether the error means ZooKeeper could not be reached (as opposed to one that
    /// answered): the case in which a start may fall back to the local cache.
    ///
    /// ```
    /// use uidgen_zk::ZkError;
    /// let down = ZkError::Unreachable { connect: "127.0.0.1:1".into(), reason: "timeout".into() };
    /// assert!(down.is_unreachable());
    /// assert!(!ZkError::InvalidOptions("name".into()).is_unreachable());
    /// ```
    pub fn is_unreachable(&self) -> bool {
        match self {
            Self::Unreachable { .. } => true,
            Self::ZooKeeper { source, .. } => is_connectivity(source),
            _ => false,
        }
    }
}

/// Whether a client error means "could not talk to ZooKeeper" rather than an answer.
pub(crate) fn is_connectivity(error: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as E;
    matches!(
        error,
        E::ConnectionLoss | E::Timeout | E::NoHosts | E::SessionExpired | E::ClientClosed
    )
}

/// The worker crate's traits speak its error: carry ours inside it (callers downcast with
/// [`WorkerError::downcast_backend`]), unwrapping a worker error we only passed through.
impl From<ZkError> for WorkerError {
    fn from(error: ZkError) -> Self {
        match error {
            ZkError::Worker(inner) => inner,
            other => WorkerError::Backend(Box::new(other)),
        }
    }
}
