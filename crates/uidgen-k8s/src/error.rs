//! The one error type of `uidgen-k8s`.

use uidgen_worker::{WorkerError, WorkerIdRange};

/// `Result` with [`StatefulSetError`] as the default error.
pub type Result<T, E = StatefulSetError> = std::result::Result<T, E>;

/// Everything that can go wrong while taking a worker id from a pod's ordinal. Messages say
/// what to change.
///
/// ```
/// use uidgen_k8s::StatefulSetError;
/// let error = StatefulSetError::NoOrdinalInHostname { hostname: "web".into() };
/// assert!(error.to_string().contains("`web`"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatefulSetError {
    /// Neither `UIDGEN_POD_ORDINAL` nor `HOSTNAME` is set.
    #[error(
        "no pod ordinal: neither UIDGEN_POD_ORDINAL nor HOSTNAME is set; run in a StatefulSet \
         pod (its hostname is `<set>-<ordinal>`) or set UIDGEN_POD_ORDINAL"
    )]
    NoPodIdentity,

    /// The hostname does not end in `-<digits>`, as a StatefulSet pod's does.
    #[error(
        "no ordinal in the hostname `{hostname}`: a StatefulSet pod is named `<set>-<ordinal>` \
         (uidgen-3); run in a StatefulSet or set UIDGEN_POD_ORDINAL"
    )]
    NoOrdinalInHostname {
        /// The hostname read.
        hostname: String,
    },

    /// A variable that must hold a non-negative integer does not.
    #[error("{variable}={value:?} is not a pod ordinal: expected a non-negative integer")]
    MalformedOrdinal {
        /// The variable (`UIDGEN_POD_ORDINAL`).
        variable: &'static str,
        /// Its text.
        value: String,
    },

    /// Ordinal + offset lies past what the layout's worker field holds.
    #[error(
        "pod ordinal {ordinal} + offset {offset} is past the layout's largest worker id {max}; \
         lower `statefulset.offset`, scale the StatefulSet down, or pick a layout with a wider \
         worker field"
    )]
    OverWidth {
        /// The pod's ordinal.
        ordinal: u64,
        /// The configured offset.
        offset: u64,
        /// The layout's largest worker id.
        max: u64,
    },

    /// Ordinal + offset lies outside the configured worker id range.
    #[error(
        "pod ordinal {ordinal} + offset {offset} is outside the worker id range {range}; \
         lower `statefulset.offset`, scale the StatefulSet down, or widen `worker.range`"
    )]
    OverRange {
        /// The pod's ordinal.
        ordinal: u64,
        /// The configured offset.
        offset: u64,
        /// The configured range.
        range: WorkerIdRange,
    },

    /// No store shared by every pod is registered: a local fence keeps one host apart only.
    #[error(
        "the statefulset assigner needs a store every pod shares, where the worker id is \
         leased so that two pods with one ordinal are refused; configure one (`store = \
         \"postgres://...\"`, UIDGEN_STORE from a Secret): the zero-config SQLite file is one \
         host's own"
    )]
    NoSharedStore,

    /// The static assigner underneath refused (the id is held, the clock is behind, ...).
    #[error(transparent)]
    Worker(#[from] WorkerError),
}

/// A statefulset error as the assigner trait's error (found again with
/// [`WorkerError::downcast_backend`]), unwrapping a worker error we only passed through.
impl From<StatefulSetError> for WorkerError {
    fn from(error: StatefulSetError) -> Self {
        match error {
            StatefulSetError::Worker(inner) => inner,
            other => WorkerError::Backend(Box::new(other)),
        }
    }
}
