//! The one error type of `uidgen-worker`.

use uidgen_core::UidError;

use crate::range::WorkerIdRange;

/// `Result` with [`WorkerError`] as the default error.
pub type Result<T, E = WorkerError> = std::result::Result<T, E>;

/// Everything that can go wrong while taking or keeping a worker id without a database: a
/// configured or machine id, its local state file, its clock, its range. The implementations
/// of this crate's traits that live elsewhere (the store's leased ids, ZooKeeper, etcd) carry
/// their own typed errors in [`WorkerError::Backend`].
///
/// ```
/// use uidgen_worker::WorkerError;
/// let error = WorkerError::WorkerIdOutOfRange { id: 1024, max: 1023 };
/// assert_eq!(error.to_string(), "worker id 1024 is out of range: the layout allows 0 to 1023");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// An assigner that holds one worker id per process was asked for another
    /// ([`WorkerIdAssigner::assign_extra`](crate::WorkerIdAssigner::assign_extra)).
    #[error(
        "{assigner} holds one worker id per process: this process serves one worker id's IDs \
         per time unit; for more, run more processes or use an assigner that hands out several \
         (disposable, leased, etcd, zookeeper)"
    )]
    OneIdPerProcess {
        /// The assigner's type.
        assigner: String,
    },

    /// A configured (static) worker id does not fit the layout's worker field.
    #[error("worker id {id} is out of range: the layout allows 0 to {max}")]
    WorkerIdOutOfRange {
        /// The configured id.
        id: u64,
        /// The layout's largest worker id.
        max: u64,
    },

    /// A configured (static) worker id outside the static assigner's range.
    #[error(
        "worker id {id} is outside the static range {range}: configure a worker id within {range}, \
         or change `worker.range`"
    )]
    WorkerIdNotInRange {
        /// The configured id.
        id: u64,
        /// The static assigner's range.
        range: WorkerIdRange,
    },

    /// [`LeaseOptions`](crate::LeaseOptions) that cannot keep a lease valid (e.g. a heartbeat
    /// slower than the ttl).
    #[error("invalid lease options: {0}")]
    InvalidLeaseOptions(String),

    /// A reused worker id was last used up to a time this clock has not reached, and waiting for
    /// it would take longer than allowed.
    #[error(
        "worker id {worker_id} was used until {until_ms} ms but this clock reads {now_ms} ms: \
         waiting {wait_ms} ms exceeds the allowed {max_wait_ms} ms; refusing to issue IDs (check \
         the clock)"
    )]
    ClockBehindLastIssued {
        /// The worker id.
        worker_id: u64,
        /// The time (ms since the Unix epoch) the id was used until.
        until_ms: u64,
        /// This process's clock.
        now_ms: u64,
        /// How long it would have to wait.
        wait_ms: u64,
        /// The allowed wait.
        max_wait_ms: u64,
    },

    /// The local worker-id cache file could not be used.
    #[error("local worker id cache {path}: {reason}")]
    Cache {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// Text or numbers that are not a worker id range (`LO-HI` with `LO <= HI`), or a
    /// `worker_id_range` row edited into one.
    #[error("invalid worker id range `{input}`: {reason}")]
    InvalidWorkerRange {
        /// What was given, e.g. `"199-100"`.
        input: String,
        /// What is wrong and how to write it.
        reason: String,
    },

    /// A worker id range reaching past the layout's worker field.
    #[error(
        "worker id range {range} does not fit the layout, whose worker ids go up to {max}: set \
         `worker.range` within 0-{max}, or widen the worker bits"
    )]
    WorkerRangeOutsideLayout {
        /// The range.
        range: WorkerIdRange,
        /// The layout's largest worker id.
        max: u64,
    },

    /// The `machine` assigner found every process value of this host's machine part locked
    /// by other live processes sharing its state directory.
    #[error(
        "all {count} process values of machine part {machine} are in use by other processes \
         sharing the state directory {state_dir}: stop one of them, or give this process another \
         assigner (a separate `worker.state_dir` would let two processes on this host take the \
         same worker id)"
    )]
    MachineProcessValuesTaken {
        /// The host's machine part.
        machine: u64,
        /// How many process values there are (32).
        count: u64,
        /// The shared state directory.
        state_dir: String,
    },

    /// The `machine` assigner registered in a shared store found every process value of this
    /// host's machine part held: by live leases in the store (other hosts or containers whose
    /// machine part is the same) or by processes sharing its state directory.
    #[error(
        "all {count} process values of machine part {machine} are held: {held}; stop one of \
         those processes or wait for its lease to expire, or give this process another assigner"
    )]
    MachineProcessValuesHeld {
        /// The host's machine part.
        machine: u64,
        /// How many process values there are (32).
        count: u64,
        /// Who holds them, e.g. "30 by leases in the store (e.g. `10.0.0.7/1#…`), 2 by
        /// processes sharing /var/lib/uidgen/machine".
        held: String,
    },

    /// A `static` worker id is leased in the shared store by another live process: two
    /// processes configured with one worker id would issue equal IDs.
    #[error(
        "static worker id {worker_id} is held by `{holder}` in the store's worker_lease table \
         (its lease runs another {expires_in_ms} ms): another process uses this worker id; give \
         this one another `worker.id`, or stop the other (its lease then ends at once, or at its \
         expiry if it crashed)"
    )]
    WorkerIdHeld {
        /// The configured worker id.
        worker_id: u64,
        /// The live holder's string (its name, `#`, its claim token).
        holder: String,
        /// How long its lease still runs without renewal.
        expires_in_ms: u64,
    },

    /// A worker id that is only unique per host (`machine`, `static`, or `disposable` and
    /// `leased` on a store of the container's own) was asked for inside a container with
    /// nothing shared to register it in: its siblings would take the same id.
    #[error(
        "refusing the {assigner} assigner inside a container ({evidence}) without a shared \
         store: containers started from one image share pid numbers, state files and often \
         the machine part, so they would issue equal IDs. {remedy}"
    )]
    UncoordinatedInContainer {
        /// `machine`, `static`, `disposable` or `leased`.
        assigner: &'static str,
        /// What says this is a container.
        evidence: String,
        /// What to set instead.
        remedy: String,
    },

    /// A layout whose worker field cannot hold the `machine` assigner's worker ids
    /// (`machine << 5 | process`, 0 to 1023), or splits it otherwise.
    #[error("the machine assigner cannot serve layout `{layout}`: {reason}")]
    MachineLayoutUnfit {
        /// The layout's name.
        layout: String,
        /// What does not fit, and which preset would.
        reason: String,
    },

    /// An argument was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A generator could not be built.
    #[error(transparent)]
    Generator(#[from] UidError),

    /// An implementation of one of this crate's traits that lives in another crate (the
    /// store's assigners and registries, uidgen-zk, uidgen-etcd) failed: its own typed error,
    /// which callers may downcast (`source.downcast_ref`), or convert back with that crate's
    /// `From<WorkerError>`.
    #[error(transparent)]
    Backend(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl WorkerError {
    /// Carry another crate's error, unwrapping a [`WorkerError`] it only passed through (so
    /// that a round trip through a backend's error type gives back the variant it started as).
    ///
    /// ```
    /// use uidgen_worker::WorkerError;
    /// let io = std::io::Error::other("disk full");
    /// assert!(matches!(WorkerError::backend(io), WorkerError::Backend(_)));
    /// ```
    pub fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        let boxed: Box<dyn std::error::Error + Send + Sync + 'static> = Box::new(error);
        match boxed.downcast::<WorkerError>() {
            Ok(inner) => *inner,
            Err(other) => Self::Backend(other),
        }
    }

    /// The backend's error of type `E`, if this is one (see [`WorkerError::Backend`]).
    pub fn downcast_backend<E: std::error::Error + 'static>(&self) -> Option<&E> {
        match self {
            Self::Backend(source) => source.downcast_ref::<E>(),
            _ => None,
        }
    }
}
