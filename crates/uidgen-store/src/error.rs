//! The one error type of `uidgen-store`.

use uidgen_core::UidError;

/// `Result` with [`StoreError`] as the default error.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Everything that can go wrong in `uidgen-store`. Messages name the database by its URL with
/// the password redacted (`mysql://root:***@db/uid`), never the password itself.
///
/// ```
/// use uidgen_store::StoreError;
/// let error = StoreError::WorkerIdsExhausted { id: 1024, max: 1023 };
/// assert_eq!(
///     error.to_string(),
///     "worker ids exhausted: 1024 exceeds the layout's maximum 1023; widen worker bits or archive worker_node rows"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL's scheme names no supported database.
    #[error(
        "unsupported database URL `{url}`: use sqlite://PATH, mysql:// (or mariadb://) or postgres:// (or postgresql://)"
    )]
    UnsupportedUrl {
        /// The URL, password redacted.
        url: String,
    },

    /// The URL has a supported scheme but could not be parsed.
    #[error("invalid database URL `{url}`: {reason}")]
    InvalidUrl {
        /// The URL, password redacted.
        url: String,
        /// What the driver said.
        reason: String,
    },

    /// The database could not be reached (refused, timed out, TLS failure, pool closed).
    #[error("cannot reach database at {url}: {reason}")]
    Unreachable {
        /// The URL, password redacted.
        url: String,
        /// The cause in a few words, e.g. "connection refused".
        reason: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },

    /// The database answered with an error.
    #[error("database error at {url} while {action}: {source}")]
    Database {
        /// The URL, password redacted.
        url: String,
        /// What the store was doing, e.g. "claiming a segment".
        action: &'static str,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },

    /// A schema migration failed. On SQLite and PostgreSQL its transaction rolls back and the
    /// database stays at the previous version; on MySQL/MariaDB every DDL statement commits
    /// implicitly, so the migration may be partly applied (the files are idempotent: fix the
    /// cause and start again, and the rest is applied and recorded).
    #[error("migration {version} ({description}) failed at {url}: {source}")]
    Migration {
        /// The migration's version, e.g. 2.
        version: i64,
        /// The migration's description, e.g. "worker_lease".
        description: &'static str,
        /// The URL, password redacted.
        url: String,
        /// The driver's error.
        #[source]
        source: sqlx::Error,
    },

    /// The lock that serialises concurrent migrators could not be taken (MySQL/MariaDB's
    /// `GET_LOCK` timed out or failed); nothing was migrated.
    #[error("cannot lock the schema for migration at {url}: {reason}")]
    MigrationLock {
        /// The URL, password redacted.
        url: String,
        /// Why, e.g. "another migrator held the lock for 60 s".
        reason: String,
    },

    /// Only one of [`ENV_HOST`](crate::ENV_HOST) / [`ENV_PORT`](crate::ENV_PORT) is set: a
    /// container must name both, a plain host neither (Baidu rejects the same half-set pair).
    #[error(
        "{set} is set but {missing} is not: set both (a container's host and port) or neither (this host's IP is used)"
    )]
    IncompleteNodeEnv {
        /// The variable that is set.
        set: &'static str,
        /// The variable that is missing or empty.
        missing: &'static str,
    },

    /// A disposable worker id does not fit the layout's worker field.
    #[error(
        "worker ids exhausted: {id} exceeds the layout's maximum {max}; widen worker bits or archive worker_node rows"
    )]
    WorkerIdsExhausted {
        /// The id the database handed out.
        id: u64,
        /// The layout's largest worker id.
        max: u64,
    },

    /// A configured (static) worker id does not fit the layout's worker field.
    #[error("worker id {id} is out of range: the layout allows 0 to {max}")]
    WorkerIdOutOfRange {
        /// The configured id.
        id: u64,
        /// The layout's largest worker id.
        max: u64,
    },

    /// Every worker id of the layout is held by a live lease.
    #[error(
        "no free worker id: all {count} worker ids (0 to {max}) are leased by live holders; wait for a lease to expire or widen worker bits"
    )]
    NoFreeWorkerId {
        /// The layout's largest worker id.
        max: u64,
        /// How many ids the layout has.
        count: u64,
    },

    /// Every attempt to claim a worker id lost a race to another claimant (free ids exist, but
    /// others took each one first). Retrying is safe.
    #[error("lost the race for a worker id {attempts} times to other claimants; retry the claim")]
    LeaseContention {
        /// How many rounds were lost.
        attempts: u32,
    },

    /// [`LeaseOptions`](crate::LeaseOptions) that cannot keep a lease valid (e.g. a heartbeat
    /// slower than the ttl).
    #[error("invalid lease options: {0}")]
    InvalidLeaseOptions(String),

    /// A reused worker id was last used up to a time this clock has not reached, and waiting for
    /// it would take longer than allowed.
    #[error(
        "worker id {worker_id} was used until {until_ms} ms but this clock reads {now_ms} ms: waiting {wait_ms} ms exceeds the allowed {max_wait_ms} ms; refusing to issue IDs (check the clock)"
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

    /// The lease on the worker id was lost or released; IDs must no longer be issued with it.
    #[error(
        "lease on worker id {worker_id} lost: {reason}; stopped issuing IDs to avoid duplicates"
    )]
    LeaseLost {
        /// The worker id.
        worker_id: u64,
        /// Why, e.g. "taken over by another holder".
        reason: String,
    },

    /// The local worker-id cache file could not be used.
    #[error("local worker id cache {path}: {reason}")]
    Cache {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },

    /// A Leaf biz tag that has no `leaf_alloc` row.
    #[error("unknown biz tag `{0}`: no leaf_alloc row; create it first")]
    UnknownTag(String),

    /// A Leaf biz tag whose next segment would pass `i64::MAX`; the row is left unchanged.
    #[error(
        "biz tag `{tag}` is exhausted: max_id {max_id} plus step {step} would pass the largest 64-bit ID; no segment can be claimed (use a new tag)"
    )]
    TagExhausted {
        /// The tag.
        tag: String,
        /// The stored `max_id`.
        max_id: i64,
        /// The step the claim asked for.
        step: i64,
    },

    /// An argument was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A generator could not be built.
    #[error(transparent)]
    Generator(#[from] UidError),

    /// A test database could not be set up (see [`testing`](crate#testing)).
    #[error("{0}")]
    TestDatabase(String),
}

impl StoreError {
    /// Whether the error means the database could not be reached at all (as opposed to a
    /// database that answered with an error): the case in which a leased assigner may fall back
    /// to its local cache.
    ///
    /// ```
    /// use uidgen_store::StoreError;
    /// assert!(!StoreError::UnknownTag("order".into()).is_unreachable());
    /// ```
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Self::Unreachable { .. })
    }
}

/// Whether a driver error means "could not talk to the database".
pub(crate) fn is_connectivity(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
    )
}

/// A short human reason for a connectivity error ("connection refused").
pub(crate) fn reason_of(error: &sqlx::Error) -> String {
    match error {
        sqlx::Error::Io(io) => match io.kind() {
            std::io::ErrorKind::ConnectionRefused => "connection refused".to_owned(),
            std::io::ErrorKind::TimedOut => "connection timed out".to_owned(),
            _ => io.to_string(),
        },
        sqlx::Error::PoolTimedOut => "timed out waiting for a connection".to_owned(),
        sqlx::Error::PoolClosed => "the store was closed".to_owned(),
        other => other.to_string(),
    }
}

/// Map a driver error: connectivity problems become [`StoreError::Unreachable`], the rest
/// [`StoreError::Database`].
pub(crate) fn map_db(url: &str, action: &'static str, source: sqlx::Error) -> StoreError {
    if is_connectivity(&source) {
        StoreError::Unreachable {
            url: url.to_owned(),
            reason: reason_of(&source),
            source,
        }
    } else {
        StoreError::Database {
            url: url.to_owned(),
            action,
            source,
        }
    }
}
