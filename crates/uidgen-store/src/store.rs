//! [`Store`]: one handle over a SQLite, MySQL/MariaDB or PostgreSQL connection pool.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};

use crate::error::{Result, StoreError, StoreFuture, map_db, reason_of};
use crate::url::{Dialect, redact_url, user_of};

/// How long SQLite waits for another process's write lock before failing with "database is
/// locked": several uidgen processes may share one file.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How a [`Store`] connects.
///
/// ```
/// use std::time::Duration;
/// use uidgen_store::StoreOptions;
/// let options = StoreOptions { max_connections: 4, ..StoreOptions::default() };
/// assert_eq!(options.connect_timeout, Duration::from_secs(5));
/// assert!(options.migrate);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreOptions {
    /// The most connections the pool opens (default 10).
    pub max_connections: u32,
    /// How long connecting, or waiting for a pooled connection, may take (default 5 s).
    pub connect_timeout: Duration,
    /// Apply the embedded migrations on connect (default true).
    pub migrate: bool,
    /// How long the database lets one of this store's sessions sit idle inside a transaction
    /// before it ends the session (default 2 s; zero: never). A process frozen mid-transaction
    /// (SIGSTOP, a VM pause, a debugger) would otherwise hold its row locks, and every other
    /// server's claims of those rows, until it woke: the ended session rolls back and frees
    /// them. PostgreSQL's `idle_in_transaction_session_timeout` (to the millisecond),
    /// MariaDB's `idle_transaction_timeout` (whole seconds, rounded up); MySQL has no such
    /// setting and SQLite is one host's file: neither gets one. Our transactions send their
    /// statements back to back, so only a frozen or cut-off process reaches it.
    pub idle_transaction_timeout: Duration,
}

impl Default for StoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            connect_timeout: Duration::from_secs(5),
            migrate: true,
            idle_transaction_timeout: Duration::from_secs(2),
        }
    }
}

/// The pool of one dialect.
#[derive(Debug, Clone)]
pub(crate) enum DbPool {
    Sqlite(SqlitePool),
    MySql(MySqlPool),
    Postgres(PgPool),
}

/// Run `$body` with `$pool` bound to the store's concrete pool; the body is compiled once per
/// dialect, so it may use dialect-specific SQL selected by `$store.dialect()`.
macro_rules! with_pool {
    ($store:expr, $pool:ident, $body:expr) => {
        match &$store.pool {
            $crate::store::DbPool::Sqlite($pool) => $body,
            $crate::store::DbPool::MySql($pool) => $body,
            $crate::store::DbPool::Postgres($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// Run one dialect-keyed [`Sql`] statement on the store's pool: `sqlx::$kind` (`query`,
/// `query_as`, `query_scalar`) with its parameters bound in order, run by `$run` (`execute`,
/// `fetch_all`, ...), a failure becoming the store's error for `$what`; `then rows_affected`
/// reads the count inside, where each dialect's result type is known. The one way a plain
/// query runs, so each binds its values (never splices them) and says what it was doing.
macro_rules! run_sql {
    (
        $store:expr, $run:ident, $kind:ident($sql:expr), [$($bind:expr),* $(,)?], $what:expr
        $(, then $after:ident)?
    ) => {
        $crate::store::with_pool!(
            $store,
            pool,
            sqlx::$kind($sql.get($store.dialect()))
                $(.bind($bind))*
                .$run(pool)
                .await
                .map_err(|e| $store.err($what, e))?
                $(.$after())?
        )
    };
}
pub(crate) use run_sql;

/// Like [`with_pool!`], for queries that read their result back with `RETURNING` on SQLite and
/// PostgreSQL (one body, their pools differ only in type) and another way on MySQL.
macro_rules! with_pool_returning {
    ($store:expr, $pool:ident, mysql => $mysql:expr, returning => $returning:expr) => {
        match &$store.pool {
            $crate::store::DbPool::MySql($pool) => $mysql,
            $crate::store::DbPool::Sqlite($pool) => $returning,
            $crate::store::DbPool::Postgres($pool) => $returning,
        }
    };
}
pub(crate) use with_pool_returning;

/// SQL text that differs by dialect; each query names what it does.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sql {
    pub(crate) sqlite: &'static str,
    pub(crate) mysql: &'static str,
    pub(crate) postgres: &'static str,
}

impl Sql {
    /// The same text for every dialect.
    pub(crate) const fn same(text: &'static str) -> Self {
        Self {
            sqlite: text,
            mysql: text,
            postgres: text,
        }
    }

    pub(crate) fn get(self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Sqlite => self.sqlite,
            Dialect::MySql => self.mysql,
            Dialect::Postgres => self.postgres,
        }
    }
}

/// A handle on the uidgen database: SQLite, MySQL/MariaDB or PostgreSQL, chosen by URL.
///
/// Cheap to clone (clones share one pool). Every table's queries are methods of `Store`
/// (`insert_worker_node`, `claim_segment`, ...), written once per dialect where SQL differs.
///
/// ```no_run
/// # async fn demo() -> uidgen_store::Result<()> {
/// use uidgen_store::{Dialect, Store};
/// let store = Store::connect("sqlite://uidgen.db").await?; // created if missing; migrated
/// assert_eq!(store.dialect(), Dialect::Sqlite);
/// store.ping().await?;
/// store.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    pub(crate) pool: DbPool,
    url: Arc<str>,
}

impl Store {
    /// Connect with [`StoreOptions::default`] (5 s connect timeout) and apply the migrations.
    ///
    /// URLs: `sqlite://PATH` (the file is created if missing and opened in WAL mode with a 5 s
    /// busy timeout, so several processes can share it), `mysql://` or `mariadb://`,
    /// `postgres://` or `postgresql://`. An unreachable database is
    /// [`StoreError::Unreachable`] naming the URL with its password redacted.
    pub fn connect(url: &str) -> StoreFuture<'_, Self> {
        Self::connect_with(url, StoreOptions::default())
    }

    /// Connect with explicit options.
    ///
    /// ```no_run
    /// # async fn demo() -> uidgen_store::Result<()> {
    /// use uidgen_store::{Store, StoreOptions};
    /// let options = StoreOptions { max_connections: 2, migrate: false, ..Default::default() };
    /// let store = Store::connect_with("postgres://postgres@127.0.0.1/test", options).await?;
    /// store.migrate().await?;
    /// # Ok(()) }
    /// ```
    pub fn connect_with(url: &str, options: StoreOptions) -> StoreFuture<'_, Self> {
        Box::pin(async move {
            let store = Self::open(url, &options, true).await?;
            if options.migrate {
                store.migrate().await?;
            }
            Ok(store)
        })
    }

    /// A store that connects on first use: no I/O now, no migrations. For a service that must
    /// start while its database is down (a leased assigner then falls back to its local cache).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
    /// let url = "postgres://app:pw@127.0.0.1:1/uid";
    /// let store = uidgen_store::Store::connect_lazy(url, Default::default())?;
    /// assert_eq!(store.redacted_url(), "postgres://app:***@127.0.0.1:1/uid");
    /// # Ok(()) }
    /// ```
    pub fn connect_lazy(url: &str, options: StoreOptions) -> Result<Self> {
        let redacted = redact_url(url);
        let pool = match Dialect::from_url(url)? {
            Dialect::Sqlite => DbPool::Sqlite(
                sqlite_pool_options(url, &options).connect_lazy_with(sqlite_options(url)?),
            ),
            Dialect::MySql => DbPool::MySql(
                MySqlPoolOptions::new()
                    .max_connections(options.max_connections.max(1))
                    .acquire_timeout(options.connect_timeout)
                    .after_connect({
                        let set = idle_timeout_statement(Dialect::MySql, &options);
                        move |conn, _meta| {
                            Box::pin(set_idle_timeout::<sqlx::MySql>(conn, set.clone()))
                        }
                    })
                    .connect_lazy_with(mysql_options(url)?),
            ),
            Dialect::Postgres => DbPool::Postgres(
                PgPoolOptions::new()
                    .max_connections(options.max_connections.max(1))
                    .acquire_timeout(options.connect_timeout)
                    .after_connect({
                        let set = idle_timeout_statement(Dialect::Postgres, &options);
                        move |conn, _meta| {
                            Box::pin(set_idle_timeout::<sqlx::Postgres>(conn, set.clone()))
                        }
                    })
                    .connect_lazy_with(pg_options(url)?),
            ),
        };
        Ok(Self {
            pool,
            url: redacted.into(),
        })
    }

    /// Connect without migrating; `probe` opens one connection first so that an unreachable
    /// database is reported with its real cause rather than a pool timeout.
    async fn open(url: &str, options: &StoreOptions, probe: bool) -> Result<Self> {
        let store = Self::connect_lazy(url, options.clone())?;
        if probe {
            let timeout = options.connect_timeout;
            let attempt = async {
                match Dialect::from_url(url)? {
                    Dialect::Sqlite => probe_sqlite(url, timeout).await?,
                    Dialect::MySql => probe_with(mysql_options(url)?, timeout).await,
                    Dialect::Postgres => probe_with(pg_options(url)?, timeout).await,
                }
                .map_err(|source| connect_error(&store.url, source))
            };
            attempt.await?;
        }
        Ok(store)
    }

    /// Check that the database answers.
    pub fn ping(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            with_pool!(self, pool, {
                let mut conn = pool.acquire().await.map_err(|e| self.err("pinging", e))?;
                conn.ping().await.map_err(|e| self.err("pinging", e))
            })
        })
    }

    /// The dialect chosen by the URL.
    pub fn dialect(&self) -> Dialect {
        match self.pool {
            DbPool::Sqlite(_) => Dialect::Sqlite,
            DbPool::MySql(_) => Dialect::MySql,
            DbPool::Postgres(_) => Dialect::Postgres,
        }
    }

    /// The URL with its password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.url
    }

    /// Close every connection; later calls fail with [`StoreError::Unreachable`].
    pub async fn close(&self) {
        with_pool!(self, pool, pool.close().await);
    }

    /// Map a driver error raised while doing `action`.
    pub(crate) fn err(&self, action: &'static str, source: sqlx::Error) -> StoreError {
        map_db(&self.url, action, source)
    }
}

async fn probe_with<O>(options: O, timeout: Duration) -> std::result::Result<(), sqlx::Error>
where
    O: ConnectOptions,
    O::Connection: Sized,
{
    let connect = options.connect();
    match tokio::time::timeout(timeout, connect).await {
        Ok(Ok(conn)) => {
            // Closing politely is best effort: the probe has done its job.
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connection timed out after {} ms", timeout.as_millis()),
        ))),
    }
}

/// [`probe_with`] for SQLite, retried while the file is busy. Switching a new file to WAL
/// mode needs an exclusive lock, and SQLite answers `SQLITE_BUSY` at once, without the busy
/// timeout, when another process opening the same new file holds a lock at that moment; once
/// the file is in WAL mode the switch is a no-op, so a retry soon succeeds.
async fn probe_sqlite(
    url: &str,
    timeout: Duration,
) -> Result<std::result::Result<(), sqlx::Error>> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let outcome = probe_with(sqlite_options(url)?, timeout).await;
        let busy =
            matches!(&outcome, Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("5"));
        if !busy || tokio::time::Instant::now() >= deadline {
            return Ok(outcome);
        }
        tokio::time::sleep(Duration::from_millis(10 + fastrand::u64(0..40))).await;
    }
}

fn invalid(url: &str, e: &sqlx::Error) -> StoreError {
    StoreError::InvalidUrl {
        url: redact_url(url),
        reason: e.to_string(),
    }
}

fn sqlite_options(url: &str) -> Result<SqliteConnectOptions> {
    let options = SqliteConnectOptions::from_str(url).map_err(|e| invalid(url, &e))?;
    // The file is created if missing, its folder is not: a folder that does not exist is far
    // more often a typo in the URL than a wish for a new directory tree.
    if let Some(parent) = options.get_filename().parent()
        && !parent.as_os_str().is_empty()
        && !url.contains(":memory:")
        && !parent.is_dir()
    {
        return Err(StoreError::InvalidUrl {
            url: redact_url(url),
            reason: format!(
                "the folder {} does not exist; create it first, or fix the path (only the \
                 database file is created)",
                parent.display()
            ),
        });
    }
    // WAL lets readers run beside one writer and several processes share the file; the busy
    // timeout makes a writer wait for another process's lock instead of failing at once.
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(SQLITE_BUSY_TIMEOUT))
}

fn sqlite_pool_options(url: &str, options: &StoreOptions) -> SqlitePoolOptions {
    // An in-memory database lives in one connection: a second one would see another database.
    let max = if url.contains(":memory:") {
        1
    } else {
        options.max_connections.max(1)
    };
    SqlitePoolOptions::new()
        .max_connections(max)
        .acquire_timeout(options.connect_timeout)
}

fn mysql_options(url: &str) -> Result<MySqlConnectOptions> {
    // sqlx parses `mysql://`; MariaDB speaks the same protocol.
    let normalised = match url.get(..10) {
        Some(prefix) if prefix.eq_ignore_ascii_case("mariadb://") => {
            format!("mysql://{}", &url[10..])
        }
        _ => url.to_owned(),
    };
    MySqlConnectOptions::from_str(&normalised).map_err(|e| invalid(url, &e))
}

fn pg_options(url: &str) -> Result<PgConnectOptions> {
    PgConnectOptions::from_str(url).map_err(|e| invalid(url, &e))
}

/// The MariaDB error for `SET` of a variable the server does not have: MySQL's answer to
/// `idle_transaction_timeout`.
const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// [`StoreOptions::idle_transaction_timeout`] as the statement each new session runs (`None`
/// for zero): PostgreSQL's `idle_in_transaction_session_timeout` to the millisecond, MariaDB's
/// `idle_transaction_timeout` in whole seconds rounded up (a shorter wait than asked for could
/// end a live session). A `SET` on the session rather than a startup parameter, which
/// connection poolers such as PgBouncer refuse unless told to ignore it.
fn idle_timeout_statement(dialect: Dialect, options: &StoreOptions) -> Option<Arc<str>> {
    let timeout = options.idle_transaction_timeout;
    if timeout.is_zero() {
        return None;
    }
    let text = match dialect {
        Dialect::Postgres => format!(
            "SET idle_in_transaction_session_timeout = {}",
            timeout.as_millis()
        ),
        Dialect::MySql => format!(
            "SET SESSION idle_transaction_timeout = {}",
            timeout.as_millis().div_ceil(1000)
        ),
        Dialect::Sqlite => return None,
    };
    Some(text.into())
}

/// Run [`idle_timeout_statement`]'s statement on a new session. MySQL does not know MariaDB's
/// variable: its sessions go without (docs/OPERATIONS.md, "A server frozen in a transaction").
async fn set_idle_timeout<DB: sqlx::Database>(
    conn: &mut DB::Connection,
    set: Option<Arc<str>>,
) -> std::result::Result<(), sqlx::Error>
where
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    let Some(set) = set else {
        return Ok(());
    };
    match sqlx::raw_sql(sqlx::AssertSqlSafe(set.to_string()))
        .execute(conn)
        .await
    {
        Ok(_) => Ok(()),
        Err(sqlx::Error::Database(error))
            if error
                .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|e| e.number() == ER_UNKNOWN_SYSTEM_VARIABLE) =>
        {
            Ok(())
        }
        Err(error) => Err(error),
    }
}

impl Store {
    /// [`Store::connect_with`] for code that is not async: runs on `uidgen-worker`'s background
    /// runtime ([`uidgen_worker::blocking`]), which keeps the pool's connections alive after
    /// the call.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("uidgen-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap(); // the file is created, its folder is not
    /// let url = format!("sqlite://{}/blocking.db", dir.display());
    /// let store = uidgen_store::Store::connect_blocking(&url, Default::default())?;
    /// assert_eq!(store.dialect(), uidgen_store::Dialect::Sqlite);
    /// # Ok::<(), uidgen_store::StoreError>(())
    /// ```
    pub fn connect_blocking(url: &str, options: StoreOptions) -> Result<Store> {
        uidgen_worker::blocking::block_on_result(Store::connect_with(url, options))
    }
}

/// The error of a first connection: refused credentials become
/// [`StoreError::AuthenticationFailed`], other answers from the server (an unknown database)
/// [`StoreError::Database`], and everything else [`StoreError::Unreachable`].
fn connect_error(url: &str, source: sqlx::Error) -> StoreError {
    match &source {
        sqlx::Error::Database(db) => {
            // SQLSTATE class 28, "invalid authorization specification", in both MySQL/MariaDB
            // (1045 is 28000) and PostgreSQL (28P01 invalid_password, 28000):
            // https://www.postgresql.org/docs/current/errcodes-appendix.html
            if db.code().is_some_and(|code| code.starts_with("28")) {
                return StoreError::AuthenticationFailed {
                    url: url.to_owned(),
                    user: user_of(url)
                        .map_or_else(|| "(default)".to_owned(), |user| format!("'{user}'")),
                    message: db.message().to_owned(),
                };
            }
            StoreError::Database {
                url: url.to_owned(),
                action: "connecting",
                source,
            }
        }
        _ => StoreError::Unreachable {
            url: url.to_owned(),
            reason: reason_of(&source),
            source,
        },
    }
}
