//! The client's one error type.

/// What went wrong in a client call. Every variant says what to change or what to wait for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No peer answered within the retries and no embedded fallback is configured.
    #[error(
        "every uidgen server is down or failing ({peers}); last error: {last_error}. Configure a \
         fallback (ClientBuilder::fallback) to keep issuing IDs through outages"
    )]
    AllPeersDown {
        /// The peers tried, comma separated.
        peers: String,
        /// The last failure seen.
        last_error: String,
    },
    /// Every peer is down and the request cannot be served locally (segment numbers need
    /// the database behind the servers; the fallback only issues snowflake-style IDs).
    #[error(
        "every uidgen server is down or failing ({peers}) and segment tag `{tag}` has no local \
         fallback: segment numbers come only from the database; last error: {last_error}"
    )]
    SegmentPeersDown {
        /// The tag asked for.
        tag: String,
        /// The peers tried, comma separated.
        peers: String,
        /// The last failure seen.
        last_error: String,
    },
    /// A server refused the request itself (a bad argument, an unknown tag, a mode that is
    /// off): asking another server would get the same answer.
    #[error("{peer} refused the request: {message}")]
    Refused {
        /// The peer that answered.
        peer: String,
        /// The server's message.
        message: String,
    },
    /// A server answered with something the client cannot use (malformed JSON, a lease with
    /// negative numbers, an empty batch).
    #[error("{peer} answered with something unusable: {reason}")]
    BadResponse {
        /// The peer that answered.
        peer: String,
        /// What was wrong.
        reason: String,
    },
    /// A server's layout or epoch differs from the fallback's: the fallback's IDs could
    /// repeat the servers' ones, so the client refuses to use either until they agree.
    #[error(
        "{peer} issues layout `{server}` but the fallback is configured with `{fallback}`: \
         configure the fallback with the servers' layout and epoch"
    )]
    LayoutMismatch {
        /// The peer whose layout differs.
        peer: String,
        /// The server's layout: name, field widths, epoch.
        server: String,
        /// The fallback's layout, in the same form.
        fallback: String,
    },
    /// A server stamps the fallback's worker id: the fallback would repeat its IDs.
    #[error(
        "{peer} stamps worker id {worker_id}, the fallback's own: keep every server's \
         `worker.range` apart from the embedded range the fallback's ids come from (see \
         docs/OPERATIONS.md, \"Servers and clients\")"
    )]
    FallbackWorkerConflict {
        /// The peer that stamps it.
        peer: String,
        /// The worker id both use.
        worker_id: u64,
    },
    /// Every peer is down and the leased fallback holds no lease to issue under: no server
    /// has granted one since the client started (or the last one was lost or refused), and
    /// the state directory held no unexpired lease this process could continue within the
    /// call's wait. `reason` says which: none there, one whose file another process holds
    /// (naming the worker id, the file and its `valid_until`), or one being continued once
    /// the clock passes its mark (naming the mark and how far off it is).
    #[error(
        "every uidgen server is down or failing ({peers}; last error: {last_error}) and the \
         embedded fallback holds no lease: {reason}. A leased fallback issues only under a \
         worker id a server leased to it, and takes one as soon as a server answers"
    )]
    NoFallbackLease {
        /// The peers tried, comma separated.
        peers: String,
        /// The last failure seen.
        last_error: String,
        /// Why there is no lease.
        reason: String,
    },
    /// Every peer is down and the fallback's lease ran out: no server renewed it before its
    /// `valid_until`, after which another client may hold the worker id.
    #[error(
        "every uidgen server is down or failing ({peers}) and the embedded fallback's lease on \
         worker id {worker_id} ran out at {valid_until_ms} ms with no server to renew it: no IDs \
         until a server answers (a longer lease, FallbackOptions::ttl, rides out longer outages)"
    )]
    FallbackLeaseExpired {
        /// The peers tried, comma separated.
        peers: String,
        /// The lease's worker id.
        worker_id: u64,
        /// The lease's last confirmed expiry (ms since the Unix epoch).
        valid_until_ms: u64,
    },
    /// The client's configuration cannot work (no peers, a malformed address, a zero size).
    #[error("invalid client option `{name}`: {reason}")]
    InvalidOption {
        /// The option.
        name: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The embedded fallback could not be set up (an explicit id's state file is locked by
    /// another process, its clock is behind the mark of its earlier life, ...).
    #[error("embedded fallback: {0}")]
    Fallback(#[from] uidgen_worker::WorkerError),
    /// The embedded fallback could not issue (its fence's limit, a clock moved back, ...).
    #[error("embedded fallback could not issue: {0}")]
    FallbackIssue(#[from] uidgen_core::UidError),
    /// An empty buffer was not refilled in time, though no peer reported a failure (peers
    /// that are slow rather than down). Raise `ClientBuilder::wait` or the batch size.
    #[error(
        "no numbers arrived within {waited_ms} ms: the servers answer too slowly for this demand"
    )]
    Starved {
        /// How long the call waited.
        waited_ms: u64,
    },
    /// The client was shut down.
    #[error("the uidgen client was shut down")]
    Closed,
}

/// The client's result type.
pub type Result<T, E = ClientError> = std::result::Result<T, E>;

/// An [`ClientError::InvalidOption`], built off the hot path.
#[cold]
pub(crate) fn invalid(name: &'static str, reason: impl Into<String>) -> ClientError {
    ClientError::InvalidOption {
        name,
        reason: reason.into(),
    }
}

impl ClientError {
    /// A copy for another caller: the refill tasks keep their last failure and hand a copy to
    /// every caller that finds the buffer empty (the store's and core's errors are not
    /// `Clone`, so those come back as their message).
    pub(crate) fn replay(&self) -> ClientError {
        match self {
            Self::AllPeersDown { peers, last_error } => Self::AllPeersDown {
                peers: peers.clone(),
                last_error: last_error.clone(),
            },
            Self::SegmentPeersDown {
                tag,
                peers,
                last_error,
            } => Self::SegmentPeersDown {
                tag: tag.clone(),
                peers: peers.clone(),
                last_error: last_error.clone(),
            },
            Self::Refused { peer, message } => Self::Refused {
                peer: peer.clone(),
                message: message.clone(),
            },
            Self::BadResponse { peer, reason } => Self::BadResponse {
                peer: peer.clone(),
                reason: reason.clone(),
            },
            Self::LayoutMismatch {
                peer,
                server,
                fallback,
            } => Self::LayoutMismatch {
                peer: peer.clone(),
                server: server.clone(),
                fallback: fallback.clone(),
            },
            Self::FallbackWorkerConflict { peer, worker_id } => Self::FallbackWorkerConflict {
                peer: peer.clone(),
                worker_id: *worker_id,
            },
            Self::InvalidOption { name, reason } => Self::InvalidOption {
                name,
                reason: reason.clone(),
            },
            Self::NoFallbackLease {
                peers,
                last_error,
                reason,
            } => Self::NoFallbackLease {
                peers: peers.clone(),
                last_error: last_error.clone(),
                reason: reason.clone(),
            },
            Self::FallbackLeaseExpired {
                peers,
                worker_id,
                valid_until_ms,
            } => Self::FallbackLeaseExpired {
                peers: peers.clone(),
                worker_id: *worker_id,
                valid_until_ms: *valid_until_ms,
            },
            Self::Starved { waited_ms } => Self::Starved {
                waited_ms: *waited_ms,
            },
            Self::Closed => Self::Closed,
            Self::Fallback(_) | Self::FallbackIssue(_) => Self::BadResponse {
                peer: "embedded fallback".to_owned(),
                reason: self.to_string(),
            },
        }
    }
}
