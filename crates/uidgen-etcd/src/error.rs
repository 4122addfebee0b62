//! The one error type of `uidgen-etcd`.

use uidgen_worker::{WorkerError, WorkerIdRange};

/// `Result` with [`EtcdError`] as the default error.
pub type Result<T, E = EtcdError> = std::result::Result<T, E>;

/// Everything that can go wrong while taking or keeping a worker id in etcd. Messages say what
/// to change.
///
/// ```
/// use uidgen_etcd::EtcdError;
/// let error = EtcdError::Unreachable {
///     endpoints: "http://127.0.0.1:2379".into(),
///     reason: "connection refused".into(),
/// };
/// assert!(error.is_unreachable());
/// assert!(error.to_string().starts_with("cannot reach etcd at http://127.0.0.1:2379"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EtcdError {
    /// [`EtcdOptions`](crate::EtcdOptions) that cannot work (a reservation shorter than the
    /// lease, an empty prefix).
    #[error("invalid etcd options: {reason}")]
    InvalidOptions {
        /// The option at fault: `endpoints`, `prefix`, `lease_ttl`, `reservation` or
        /// `request_timeout` (the field of [`EtcdOptions`](crate::EtcdOptions)).
        field: &'static str,
        /// Why, and what to change.
        reason: String,
    },

    /// No endpoint answered.
    #[error(
        "cannot reach etcd at {endpoints}: {reason}; start etcd or fix `etcd.endpoints` (the v3 \
         JSON gateway, http://host:2379)"
    )]
    Unreachable {
        /// The endpoints tried, comma-separated.
        endpoints: String,
        /// What the last one said.
        reason: String,
    },

    /// etcd answered with an error, or with something this client cannot read.
    #[error("etcd at {endpoint} failed while {action}: {reason}")]
    Etcd {
        /// The endpoint that answered.
        endpoint: String,
        /// What we were doing, e.g. "claiming a worker id".
        action: &'static str,
        /// What etcd said.
        reason: String,
    },

    /// Every worker id of the range is held, or still reserved by a holder that stopped less
    /// than a reservation ago.
    #[error(
        "range used up: every worker id of {range} under {prefix} is held ({held}) or still \
         reserved by its last holder ({reserved}); wait for the reservations to pass, or widen \
         `worker.range` or the layout's worker bits"
    )]
    RangeUsedUp {
        /// The range the assigner hands ids from.
        range: WorkerIdRange,
        /// The key prefix.
        prefix: String,
        /// How many ids have a live claim.
        held: usize,
        /// How many free ids are still inside their last holder's reservation.
        reserved: usize,
    },

    /// No worker id can be claimed yet: etcd holds no record of this namespace's ids from
    /// before its namespace record (a new namespace, or one whose data etcd lost), and that
    /// record fences them until `floor_ms`.
    #[error(
        "no worker id under {prefix} can be claimed before {floor_ms} ms ({} s from now): \
         {reason}; a holder of an id etcd no longer records may still be issuing IDs until then. \
         If this namespace is new (it never issued an ID), declare it once with `uidgen etcd \
         init` and start again; otherwise start again after that time",
        .floor_ms.saturating_sub(*.now_ms).div_ceil(1000)
    )]
    NamespaceFenced {
        /// The key prefix.
        prefix: String,
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

    /// `uidgen etcd init` on a namespace that is not new.
    #[error("{prefix} is not a new namespace: {reason}")]
    NotNew {
        /// The key prefix.
        prefix: String,
        /// What shows it, and what to do instead.
        reason: String,
    },

    /// Other starts kept winning the claim of every free id.
    #[error(
        "could not claim a worker id after {attempts} rounds of contention with other starts; \
         start again"
    )]
    Contention {
        /// Rounds tried.
        attempts: u32,
    },

    /// The worker id was used up to a time this clock has not reached, and waiting for it
    /// would take longer than allowed.
    #[error(
        "worker id {worker_id}: its last holder reserved it until {until_ms} ms but this clock \
         reads {now_ms} ms, {} ms behind (more than the {max_wait_ms} ms a start may wait); \
         refusing to issue IDs: check the clock (NTP)",
        .until_ms.saturating_sub(*.now_ms)
    )]
    ClockBehind {
        /// The worker id.
        worker_id: u64,
        /// The recorded time (ms since the Unix epoch).
        until_ms: u64,
        /// This clock.
        now_ms: u64,
        /// How long a start may wait.
        max_wait_ms: u64,
    },

    /// The held worker id can issue no more IDs: its claim was lost, or etcd accepted no
    /// keep-alive within the reservation of the last one.
    #[error("etcd worker id {worker_id} cannot issue IDs: {reason}")]
    Lost {
        /// The worker id.
        worker_id: u64,
        /// Why.
        reason: String,
    },

    /// The range did not fit the layout, or the clock wait failed.
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

impl EtcdError {
    /// Whether the error means etcd could not be reached (as opposed to one that answered).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }
}

/// The worker crate's traits speak its error: carry ours inside it (callers downcast with
/// [`WorkerError::downcast_backend`]), unwrapping a worker error we only passed through.
impl From<EtcdError> for WorkerError {
    fn from(error: EtcdError) -> Self {
        match error {
            EtcdError::Worker(inner) => inner,
            other => WorkerError::Backend(Box::new(other)),
        }
    }
}
