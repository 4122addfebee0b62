//! The one error type of `uidgen-sharded`, with the original service's error codes.

use uidgen_store::StoreError;

/// `Result` with [`ShardedError`] as the default error.
pub type Result<T, E = ShardedError> = std::result::Result<T, E>;

/// Everything that can go wrong when taking sharded IDs.
///
/// The first four variants are the original service's errors (not initialised, app not found,
/// shard not found, queue empty); [`AppExhausted`](Self::AppExhausted) replaces its wrapping of
/// indexes past `max_limit_id`, which made duplicates.
///
/// ```
/// use uidgen_sharded::ShardedError;
/// let error = ShardedError::AppNotFound { app_id: 9 };
/// assert_eq!(
///     error.to_string(),
///     "app 9 not found: no id_alloc rows; create it with PUT /v1/admin/apps/9 (other servers see \
///      it after their next app sync)"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShardedError {
    /// The app list has not been loaded from the database yet: it was unreachable at start
    /// and the background sync has not succeeded since.
    #[error(
        "sharded mode not initialised: the app list could not be loaded from the database yet \
         ({reason}); it is retried in the background"
    )]
    NotInitialised {
        /// Why the last attempt failed.
        reason: String,
    },

    /// No `id_alloc` rows for this app (as of the last app sync).
    #[error(
        "app {app_id} not found: no id_alloc rows; create it with PUT /v1/admin/apps/{app_id} \
         (other servers see it after their next app sync)"
    )]
    AppNotFound {
        /// The app id.
        app_id: u8,
    },

    /// The app exists but has no row for this shard (rows deleted by hand).
    #[error(
        "shard {shard} of app {app_id} not found: its id_alloc row is missing; update the app (PUT \
         /v1/admin/apps/{app_id}) to re-create its shards"
    )]
    ShardNotFound {
        /// The app id.
        app_id: u8,
        /// The shard.
        shard: u8,
    },

    /// The shard's list stayed empty through the refill attempts (another server held the
    /// refill lock, or the refill failed: the reason says which).
    #[error("queue of app {app_id} shard {shard} is empty after {tries} refill attempts: {reason}")]
    QueueEmpty {
        /// The app id.
        app_id: u8,
        /// The shard.
        shard: u8,
        /// How many refills were tried.
        tries: u32,
        /// What the last attempt ran into.
        reason: String,
    },

    /// The shard has handed out every index up to its ceiling (the last whose ID stays at or
    /// below `max_limit_id`, or the 49 index bits). Nothing is wrapped: raise `max_limit_id`
    /// or move to a new app id.
    #[error(
        "app {app_id} shard {shard} is exhausted: every index up to {ceiling} is handed out \
         (max_limit_id or the 49 index bits); raise max_limit_id or move to a new app id"
    )]
    AppExhausted {
        /// The app id.
        app_id: u8,
        /// The shard.
        shard: u8,
        /// The largest index the shard may hand out.
        ceiling: u64,
    },

    /// An empty gate pass: the shard could not be chosen.
    #[error("gate pass is empty: give the user name, phone number or e-mail that picks the shard")]
    EmptyGatePass,

    /// A batch of zero or above the configured maximum.
    #[error("invalid count {count}: ask for 1 to {max} IDs")]
    InvalidCount {
        /// The requested count.
        count: usize,
        /// The configured maximum batch.
        max: usize,
    },

    /// A shard number above 63.
    #[error("shard {shard} is out of range: shards are 0 to 63")]
    ShardOutOfRange {
        /// The shard.
        shard: u8,
    },

    /// An index that does not fit the 49 index bits.
    #[error("index {index} does not fit the sharded layout's 49 index bits (at most {max})")]
    IndexOutOfRange {
        /// The index.
        index: u64,
        /// [`MAX_INDEX`](crate::MAX_INDEX).
        max: u64,
    },

    /// Text that is not a sharded ID.
    #[error("malformed sharded id {id:?}: {reason}")]
    MalformedId {
        /// The text (shortened).
        id: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// The store refused an argument before reaching the database (a name, step, limit or
    /// description out of range); the reason names the field.
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// An option that cannot work, or a Redis URL that does not parse.
    #[error("invalid sharded option `{option}`: {reason}")]
    InvalidOption {
        /// The [`ShardedOptions`](crate::ShardedOptions) field, e.g. `refill_ratio`.
        option: &'static str,
        /// What is wrong and what to use.
        reason: String,
    },

    /// A shard's list holds something that is not an index (written by something else).
    #[error("list {key} holds {value:?}, which is not an index; it was skipped")]
    CorruptEntry {
        /// The list.
        key: String,
        /// The entry (shortened).
        value: String,
    },

    /// Redis failed: unreachable, timed out, an error reply, or a server this service cannot
    /// trust yet (a replica, or too old for `LPOP` with a count).
    #[error("redis at {url} failed while {action}: {reason}")]
    Redis {
        /// The URL, password redacted.
        url: String,
        /// What the service was doing, e.g. "popping an ID".
        action: &'static str,
        /// The client's error, or why the server is not usable.
        reason: String,
    },

    /// Redis refused this service's credentials (a wrong password or user in the URL). Unlike
    /// a Redis that is down, retrying cannot help, so start-up fails on it.
    #[error(
        "redis at {url} refused the credentials: {reason}; check the user and password in \
         `redis.url`"
    )]
    RedisAuth {
        /// The URL, password redacted.
        url: String,
        /// What the client said.
        reason: String,
    },

    /// The database did not answer in time.
    #[error(
        "the database did not answer within {waited_ms} ms while {action}; is it paused or \
         unreachable?"
    )]
    TimedOut {
        /// What the service was doing.
        action: &'static str,
        /// How long it waited.
        waited_ms: u64,
    },

    /// The service was shut down.
    #[error("sharded service is shut down")]
    Shutdown,

    /// The store failed (unreachable database, SQL error, ...).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ShardedError {
    /// Whether the service, not the caller, is at fault: Redis, the database, a missing
    /// initialisation, an empty queue, or corrupt list contents. Those messages may name
    /// servers; callers that show errors to clients should show a fixed sentence instead.
    ///
    /// ```
    /// use uidgen_sharded::ShardedError;
    /// assert!(!ShardedError::EmptyGatePass.is_service_fault());
    /// assert!(ShardedError::Shutdown.is_service_fault());
    /// ```
    pub fn is_service_fault(&self) -> bool {
        !matches!(
            self,
            Self::AppNotFound { .. }
                | Self::ShardNotFound { .. }
                | Self::AppExhausted { .. }
                | Self::EmptyGatePass
                | Self::InvalidCount { .. }
                | Self::ShardOutOfRange { .. }
                | Self::IndexOutOfRange { .. }
                | Self::MalformedId { .. }
                | Self::InvalidInput(_)
                | Self::InvalidOption { .. }
        )
    }
}

/// Map the store's own errors about an app's rows onto ours, so callers match one variant
/// whichever layer noticed. Invalid input stays invalid input (the caller's mistake).
pub(crate) fn from_store(error: StoreError) -> ShardedError {
    match error {
        StoreError::UnknownAppShard { app_id, shard_id } => ShardedError::ShardNotFound {
            app_id,
            shard: shard_id,
        },
        StoreError::AppShardExhausted {
            app_id,
            shard_id,
            ceiling,
            ..
        } => ShardedError::AppExhausted {
            app_id,
            shard: shard_id,
            ceiling: ceiling.max(0).unsigned_abs(),
        },
        StoreError::InvalidInput(reason) => ShardedError::InvalidInput(reason),
        other => ShardedError::Store(other),
    }
}
