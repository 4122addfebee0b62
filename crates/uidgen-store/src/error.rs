//! The one error type of `uidgen-store`.

use uidgen_worker::{WorkerError, WorkerIdRange};

/// `Result` with [`StoreError`] as the default error.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What every public call of the store returns: its future, boxed, awaited like an `async fn`.
///
/// Boxed so that the call's state machine, and sqlx's code under it, is compiled once, here. An
/// `async fn`'s future is compiled again in every crate that awaits it (release builds do not
/// share generic code between crates): the segment and the sharded crates each carried a copy of
/// the store and of sqlx, half of their compiled code, and the server a seventh of its own (issue
/// 34, docs/BENCHMARKS.md).
/// One allocation per call costs nothing beside the database round trip it waits on.
///
/// ```
/// # async fn run() -> uidgen_store::Result<()> {
/// let store = uidgen_store::Store::connect("sqlite::memory:").await?;
/// let call: uidgen_store::StoreFuture<'_, ()> = store.ping();
/// call.await?;
/// # Ok(()) }
/// ```
pub type StoreFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<T>> + Send + 'a>>;

/// Everything that can go wrong in `uidgen-store`. Messages name the database by its URL with
/// the password redacted (`mysql://root:***@db/uid`), never the password itself.
///
/// ```
/// use uidgen_store::StoreError;
/// let error = StoreError::WorkerIdsExhausted { id: 1024, max: 1023 };
/// assert_eq!(
///     error.to_string(),
///     "worker ids exhausted: 1024 exceeds the layout's maximum 1023; widen worker bits or \
///      archive worker_node rows"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The URL's scheme names no supported database.
    #[error(
        "unsupported database URL `{url}`: use sqlite://PATH, mysql:// (or mariadb://) or \
         postgres:// (or postgresql://)"
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

    /// The database refused the credentials of the URL (SQLSTATE class 28: a wrong password,
    /// an unknown user, or no rule admitting the user from this host). Retrying cannot help.
    #[error(
        "authentication failed for user {user} at {url}: {message}; check the user name and \
         password in the store URL"
    )]
    AuthenticationFailed {
        /// The URL, password redacted.
        url: String,
        /// The user the URL names, quoted (`'root'`), or "(default)" when it names none.
        user: String,
        /// The server's own words, once (e.g. "Access denied for user 'root'@'10.0.0.7'
        /// (using password: YES)").
        message: String,
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

    /// A migration recorded as applied has another text in this build than when it was
    /// applied: a landed migration was edited. Nothing later was migrated.
    #[error(
        "migration {version:04}_{description} at {url} was changed after it was applied \
         (recorded checksum {recorded}, this build's {embedded}); a landed migration is never \
         edited: restore its file and put the change in a new migration"
    )]
    MigrationChanged {
        /// The migration's version, e.g. 2.
        version: i64,
        /// The migration's description, e.g. "worker_lease".
        description: &'static str,
        /// The URL, password redacted.
        url: String,
        /// The checksum recorded, in hex: sqlx's SHA-384 in `_sqlx_migrations`, or, while a
        /// database an older uidgen migrated is adopted, the SHA-256 in its
        /// `uidgen_schema_migrations`.
        recorded: String,
        /// The same checksum of the file this build embeds.
        embedded: String,
    },

    /// The lock that serialises concurrent migrators on MySQL/MariaDB could not be taken
    /// (`GET_LOCK` timed out or failed); nothing was migrated.
    #[error("cannot lock the schema for migration at {url}: {reason}")]
    MigrationLock {
        /// The URL, password redacted.
        url: String,
        /// Why, e.g. "another migrator held the lock for 60 s".
        reason: String,
    },

    /// Only one of [`ENV_HOST`](uidgen_worker::ENV_HOST) / [`ENV_PORT`](uidgen_worker::ENV_PORT) is set: a
    /// container must name both, a plain host neither (Baidu rejects the same half-set pair).
    #[error(
        "{set} is set but {missing} is not: set both (a container's host and port) or neither \
         (this host's IP is used)"
    )]
    IncompleteNodeEnv {
        /// The variable that is set.
        set: &'static str,
        /// The variable that is missing or empty.
        missing: &'static str,
    },

    /// A disposable worker id does not fit the layout's worker field (the top of the disposable
    /// range, unless `worker.range` ends lower: then it is
    /// [`StoreError::WorkerRangeExhausted`]).
    #[error(
        "worker ids exhausted: {id} exceeds the layout's maximum {max}; widen worker bits or \
         archive worker_node rows"
    )]
    WorkerIdsExhausted {
        /// The id the database handed out.
        id: u64,
        /// The layout's largest worker id.
        max: u64,
    },

    /// A disposable worker id past the top of the assigner's configured range, which ends
    /// below the layout's maximum (at the maximum it is [`StoreError::WorkerIdsExhausted`]).
    #[error(
        "worker ids exhausted: {id} is past the disposable range {range}; widen `worker.range` \
         (the same for every disposable service on this store) or archive worker_node rows"
    )]
    WorkerRangeExhausted {
        /// The worker id the new `worker_node` row maps to.
        id: u64,
        /// The disposable assigner's range.
        range: WorkerIdRange,
    },

    /// Every worker id of the assigner's range is held by a live lease.
    #[error(
        "no free worker id: all {count} worker ids ({} to {max}) are leased by live holders; the \
         first of those leases ends in {} unless its holder renews it (a crashed holder's lease \
         runs its ttl, plus `worker.cache_reserve_secs` with a cache file): retry then, or widen \
         `worker.range` or the worker bits",
        first_of(.max, .count),
        seconds(*.retry_in_ms)
    )]
    NoFreeWorkerId {
        /// The largest worker id of the range (the layout's, by default).
        max: u64,
        /// How many ids the range has.
        count: u64,
        /// How long until the first of the leases expires by the claimant's clock (ms), unless
        /// renewed: the earliest a retry can succeed.
        retry_in_ms: u64,
    },

    /// Every attempt to claim a worker id lost a race to another claimant (free ids exist, but
    /// others took each one first). Retrying is safe.
    #[error("lost the race for a worker id {attempts} times to other claimants; retry the claim")]
    LeaseContention {
        /// How many rounds were lost.
        attempts: u32,
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

    /// A plain segment claim of an ordered tag: only its leader claims its segments
    /// (`Store::claim_ordered_segment`); the other servers forward its calls to the leader.
    #[error(
        "biz tag `{0}` is ordered: only its leader claims its segments; forward its calls to \
         the leader"
    )]
    TagOrdered(String),

    /// A leader's call for a tag that is not (or no longer) ordered.
    #[error("biz tag `{0}` is not ordered (or was unmarked): it has no leader")]
    NotOrdered(String),

    /// An ordered tag's leader whose term ended or whose lease ran out, by the database's
    /// clock: it claims nothing more and must stop issuing.
    #[error(
        "the lead of ordered biz tag `{tag}` in term {term} is lost (the current term is \
         {current}, or the lease ran out): nothing was claimed"
    )]
    LeadLost {
        /// The tag.
        tag: String,
        /// The caller's term.
        term: i64,
        /// The tag's current term.
        current: i64,
    },

    /// A Leaf biz tag whose next segment would pass `i64::MAX`; the row is left unchanged.
    #[error(
        "biz tag `{tag}` is exhausted: max_id {max_id} plus step {step} would pass the largest \
         64-bit ID; no segment can be claimed (use a new tag)"
    )]
    TagExhausted {
        /// The tag.
        tag: String,
        /// The stored `max_id`.
        max_id: i64,
        /// The step the claim asked for.
        step: i64,
    },

    /// A `leaf_alloc` row already holds another residue than the group asked for.
    #[error(
        "biz tag `{tag}` in {url} already holds remainder {stored} where its group wants \
         {wanted}: the group's databases disagree; fix the rows by hand (every database's max_id \
         past every number served) or correct the group's list of stores"
    )]
    ResidueMismatch {
        /// The tag.
        tag: String,
        /// The database (password redacted).
        url: String,
        /// What the row holds.
        stored: crate::residue::Residue,
        /// What the group asked for.
        wanted: crate::residue::Residue,
    },

    /// A `leaf_alloc` row whose `delta`/`remainder` make no residue (edited by hand).
    #[error(
        "biz tag `{tag}` holds delta {delta} and remainder {remainder}: delta must be 1 to 1024 \
         and remainder 0 to delta - 1; fix the row"
    )]
    InvalidResidue {
        /// The tag.
        tag: String,
        /// The stored delta.
        delta: i64,
        /// The stored remainder.
        remainder: i64,
    },

    /// No `id_alloc` row for this app and shard (the app was never created, or its rows were
    /// deleted).
    #[error(
        "no id_alloc row for app {app_id} shard {shard_id}: create the app first (its 64 shards \
         are created with it)"
    )]
    UnknownAppShard {
        /// The app id.
        app_id: u8,
        /// The shard.
        shard_id: u8,
    },

    /// An `id_alloc` shard whose next segment would start above its ceiling: `max_limit_id`,
    /// the largest index the caller can represent, or what fits below `i64::MAX`. The row is
    /// left unchanged.
    #[error(
        "app {app_id} shard {shard_id} is exhausted: its next index {max_id} is above the largest \
         allowed, {ceiling}; raise max_limit_id or move to a new app id"
    )]
    AppShardExhausted {
        /// The app id.
        app_id: u8,
        /// The shard.
        shard_id: u8,
        /// The stored `max_id` (the next segment's first index).
        max_id: i64,
        /// The largest index the shard may hand out.
        ceiling: i64,
    },

    /// An assigner's worker id range overlaps the range another assigner recorded on the same
    /// store: both could hand out one worker id. Nothing was recorded.
    #[error(
        "worker id range {range} of the {assigner} assigner overlaps {other_range}, recorded on \
         this store for the {other} assigner: both could hand out the same worker id; set \
         `worker.range` so that the ranges are disjoint (every {assigner} service on this store \
         alike)"
    )]
    WorkerRangeConflict {
        /// The assigner that asked, e.g. `"leased"`.
        assigner: String,
        /// The range it asked for.
        range: WorkerIdRange,
        /// The assigner whose recorded range it overlaps.
        other: String,
        /// That assigner's recorded range.
        other_range: WorkerIdRange,
    },

    /// An assigner asked for another range than the one recorded for it on this store: all
    /// its services must use one range (a disposable id maps to `low + row - 1`, so two ranges
    /// could map two rows to one worker id).
    #[error(
        "the {assigner} assigner's worker id range is recorded on this store as {recorded}, but \
         this service asks for {requested}: every {assigner} service on one store must use the \
         same range. Set `worker.range = \"{recorded}\"`; or, to change the range, reconfigure \
         every {assigner} service, then update the row by hand (UPDATE worker_id_range SET low = \
         {}, high = {} WHERE assigner = '{assigner}') and restart them",
        .requested.low(),
        .requested.high()
    )]
    WorkerRangeChanged {
        /// The assigner, e.g. `"disposable"`.
        assigner: String,
        /// The range recorded for it.
        recorded: WorkerIdRange,
        /// The range this service asked for.
        requested: WorkerIdRange,
    },

    /// The lock that serialises worker id range registrations could not be taken
    /// (MySQL/MariaDB's `GET_LOCK` timed out or failed); nothing was recorded.
    #[error("cannot lock worker_id_range at {url} to register a worker id range: {reason}")]
    WorkerRangeLock {
        /// The URL, password redacted.
        url: String,
        /// Why, e.g. "another registration held it for 30 s".
        reason: String,
    },

    /// An argument was rejected before reaching the database.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// A peer's table (Baidu's, Vesta's, Tinyid's) holds what a takeover cannot continue
    /// without losing uniqueness, or a takeover's step failed; the message says what to do.
    #[error("takeover refused: {0}")]
    Takeover(String),

    /// A caller token of this name exists (valid or revoked: a name is never reused, so the
    /// metrics labelled by it always mean one token).
    #[error("a caller token named `{0}` exists already; pick another name")]
    CallerTokenNameTaken(String),

    /// The operating system's random source could not be read, so no token was made.
    #[error("cannot read the operating system's random source: {0}")]
    RandomUnavailable(String),

    /// A test database could not be set up (see [`testing`](crate#testing)).
    #[error("{0}")]
    TestDatabase(String),

    /// A worker id could not be taken or kept without the database's doing: a range that is
    /// no range or does not fit the layout, a clock behind where the id's earlier holders
    /// stopped, a local state file, a static or machine id's own refusal. See
    /// [`WorkerError`]; its messages are the ones shown.
    #[error(transparent)]
    Worker(WorkerError),
}

/// A worker error, unwrapping a store error that only passed through the worker crate's
/// traits (a registration refused inside a static assigner's start comes back as the
/// store's own variant).
impl From<WorkerError> for StoreError {
    fn from(error: WorkerError) -> Self {
        match error {
            WorkerError::Backend(source) => match source.downcast::<StoreError>() {
                Ok(store) => *store,
                Err(other) => StoreError::Worker(WorkerError::Backend(other)),
            },
            other => StoreError::Worker(other),
        }
    }
}

/// A layout or generator refused (as [`WorkerError::Generator`]), for callers that build a
/// layout inside the store's `Result`.
impl From<uidgen_core::UidError> for StoreError {
    fn from(error: uidgen_core::UidError) -> Self {
        StoreError::Worker(WorkerError::Generator(error))
    }
}

/// The worker crate's traits speak its error: carry ours inside it, unwrapping a worker error
/// we only passed through.
impl From<StoreError> for WorkerError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Worker(inner) => inner,
            other => WorkerError::Backend(Box::new(other)),
        }
    }
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

    /// The database rolled the transaction back to break a deadlock or a serialization
    /// conflict (SQLSTATE `40001`, MySQL's 1213 among them, or PostgreSQL's `40P01`): the
    /// whole transaction is undone, so running it again is safe.
    pub(crate) fn is_lock_conflict(&self) -> bool {
        match self {
            Self::Database {
                source: sqlx::Error::Database(error),
                ..
            } => matches!(error.code().as_deref(), Some("40001" | "40P01")),
            _ => false,
        }
    }
}

/// The lowest id of a range of `count` ids ending at `max`, for [`StoreError::NoFreeWorkerId`].
fn first_of(max: &u64, count: &u64) -> u64 {
    max.saturating_add(1).saturating_sub(*count)
}

/// `ms` as seconds with one decimal ("87.3 s"), for messages that say how long to wait.
fn seconds(ms: u64) -> String {
    format!("{}.{} s", ms / 1_000, (ms % 1_000) / 100)
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
