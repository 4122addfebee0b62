//! Test support shared by the crates that test against real databases (feature `testing`).
//!
//! [`fresh_store`] gives every call its own empty, migrated database, so tests run in parallel:
//! SQLite gets a new temporary file; MariaDB/MySQL and PostgreSQL get
//! `CREATE DATABASE uidgen_t_<unix seconds>_<random>` on the server named by
//! `UIDGEN_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`) or
//! `UIDGEN_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`). Databases
//! left by runs more than an hour old are dropped on the way. An unreachable server is an error
//! naming the service and the variable, never a silently skipped test. [`proxy::Proxy`] cuts
//! or silences a test's connections to a server that keeps running for the others.
//!
//! ```no_run
//! # async fn demo() -> uidgen_store::Result<()> {
//! use uidgen_store::testing::{all_dbs, fresh_store};
//! for db in all_dbs() {
//!     let (store, url) = fresh_store(db).await?;
//!     store.upsert_tag("order", 100, None).await?;
//!     println!("{db:?} at {url}");
//! }
//! # Ok(()) }
//! ```

pub mod peers;
pub mod proxy;

use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{Connection, Executor};
use uidgen_core::{Clock, SystemClock};

use crate::error::{Result, StoreError};
use crate::store::{Store, StoreOptions};
use crate::url::redact_url;

/// Define a test whose body runs once per database: `name::sqlite`, `name::mysql`,
/// `name::postgres`, each a multi-threaded tokio test on its own fresh database (the body
/// calls [`fresh_store`] with the `TestDb` it is given). The calling module must have
/// [`TestDb`] in scope: the test module reaches it through `use super::*`.
///
/// ```ignore
/// uidgen_store::per_db! {
///     async fn tags_round_trip(db: TestDb) {
///         let (store, _url) = uidgen_store::testing::fresh_store(db).await.unwrap();
///         store.upsert_tag("order", 100, None).await.unwrap();
///     }
/// }
/// ```
#[macro_export]
macro_rules! per_db {
    ($(#[$meta:meta])* async fn $name:ident($db:ident: TestDb) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn body($db: TestDb) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                body(TestDb::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                body(TestDb::MySql).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                body(TestDb::Postgres).await;
            }
        }
    };
}

/// The MariaDB/MySQL server tests use.
pub const MYSQL_URL_VAR: &str = "UIDGEN_TEST_MYSQL_URL";
/// The PostgreSQL server tests use.
pub const POSTGRES_URL_VAR: &str = "UIDGEN_TEST_POSTGRES_URL";
/// Default of [`MYSQL_URL_VAR`].
pub const DEFAULT_MYSQL_URL: &str = "mysql://root@127.0.0.1:3306/test";
/// Default of [`POSTGRES_URL_VAR`].
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Test databases older than this are dropped by later runs.
const STALE_AFTER_SECS: u64 = 3600;

/// A kind of database to test against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestDb {
    /// A temporary SQLite file.
    Sqlite,
    /// A fresh database on the MariaDB/MySQL test server.
    MySql,
    /// A fresh database on the PostgreSQL test server.
    Postgres,
}

/// Every kind, for tests whose body runs once per database.
///
/// ```
/// assert_eq!(uidgen_store::testing::all_dbs().len(), 3);
/// ```
pub fn all_dbs() -> [TestDb; 3] {
    [TestDb::Sqlite, TestDb::MySql, TestDb::Postgres]
}

/// The server URL a kind uses (from its environment variable, else the local default);
/// `None` for SQLite.
pub fn server_url(kind: TestDb) -> Option<String> {
    let (var, default) = match kind {
        TestDb::Sqlite => return None,
        TestDb::MySql => (MYSQL_URL_VAR, DEFAULT_MYSQL_URL),
        TestDb::Postgres => (POSTGRES_URL_VAR, DEFAULT_POSTGRES_URL),
    };
    Some(std::env::var(var).unwrap_or_else(|_| default.to_owned()))
}

/// A new, empty, migrated database of `kind`, and its URL (to hand to other processes).
pub async fn fresh_store(kind: TestDb) -> Result<(Store, String)> {
    fresh_store_with(kind, StoreOptions::default()).await
}

/// [`fresh_store`] with explicit store options.
pub async fn fresh_store_with(kind: TestDb, options: StoreOptions) -> Result<(Store, String)> {
    let url = fresh_url(kind).await?;
    let store = Store::connect_with(&url, options).await?;
    Ok((store, url))
}

/// The URL of a new, empty database of `kind` (not yet migrated).
pub async fn fresh_url(kind: TestDb) -> Result<String> {
    let secs = SystemClock.now_millis() / 1000;
    let name = format!("uidgen_t_{secs}_{:08x}", fastrand::u32(..));
    match kind {
        TestDb::Sqlite => {
            let dir = std::env::temp_dir().join("uidgen-store-tests");
            std::fs::create_dir_all(&dir).map_err(|e| {
                StoreError::TestDatabase(format!("cannot create {}: {e}", dir.display()))
            })?;
            drop_stale_files(&dir, secs);
            Ok(format!("sqlite://{}/{name}.db", dir.display()))
        }
        TestDb::MySql | TestDb::Postgres => {
            let server = server_url(kind).unwrap_or_default();
            server_database(kind, &server, &name).await
        }
    }
}

/// The URL of a new, empty database on the given MySQL or PostgreSQL `server` (not migrated).
pub async fn fresh_url_on(kind: TestDb, server: &str) -> Result<String> {
    let secs = SystemClock.now_millis() / 1000;
    let name = format!("uidgen_t_{secs}_{:08x}", fastrand::u32(..));
    server_database(kind, server, &name).await
}

/// Run a SQL script (several statements, no binds) as it stands, e.g. a migration file the
/// way a DBA would.
pub async fn run_script(store: &Store, script: &str) -> Result<()> {
    let script = script.to_owned();
    crate::store::with_pool!(
        store,
        pool,
        sqlx::raw_sql(sqlx::AssertSqlSafe(script))
            .execute(pool)
            .await
            .map(|_| ())
            .map_err(|e| store.err("running a script", e))
    )
}

/// The first column of every row `query` answers, as text (`NULL` reads as "NULL"): for
/// comparing two databases' catalogues and bookkeeping. The query casts what is not text.
pub async fn text_column(store: &Store, query: &str) -> Result<Vec<String>> {
    use sqlx::Row;
    let query = sqlx::AssertSqlSafe(query.to_owned());
    crate::store::with_pool!(store, pool, {
        let rows = sqlx::query(query)
            .fetch_all(pool)
            .await
            .map_err(|e| store.err("reading a column as text", e))?;
        Ok(rows
            .iter()
            .map(|row| {
                // MySQL answers some catalogue text as binary strings.
                row.try_get::<Option<String>, _>(0)
                    .or_else(|_| {
                        row.try_get::<Option<Vec<u8>>, _>(0)
                            .map(|bytes| bytes.map(|b| String::from_utf8_lossy(&b).into_owned()))
                    })
                    .ok()
                    .flatten()
                    .unwrap_or_else(|| "NULL".to_owned())
            })
            .collect())
    })
}

/// Run a peer's statements (Leaf's, Baidu's, Tinyid's, the sharded service's), written out as
/// the peer sends them with its values in place, in one transaction on one connection of
/// `store`, and answer each statement's first row as integers (`None` for a statement that
/// returns no row; a column that is not an integer reads as `i64::MIN`). The transaction is
/// the peer's own kind (`BEGIN`, on SQLite `BEGIN IMMEDIATE`, as a writer that reads first
/// must), so a peer's read-then-write claim runs exactly as it would.
///
/// ```no_run
/// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
/// // Leaf's segment claim: its UPDATE, then its SELECT, committed together.
/// let rows = uidgen_store::testing::peer_transaction(&store, &[
///     "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 'order'",
///     "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = 'order'",
/// ]).await?;
/// let (max_id, step) = (rows[1].as_ref().unwrap()[1], rows[1].as_ref().unwrap()[2]);
/// # Ok(()) }
/// ```
pub async fn peer_transaction(store: &Store, statements: &[&str]) -> Result<Vec<Option<Vec<i64>>>> {
    use sqlx::Row;
    let dialect = store.dialect();
    let failed = |e| store.err("running a peer's statements", e);
    crate::store::with_pool!(store, pool, {
        let mut tx = crate::session::Session::begin_write(pool, dialect)
            .await
            .map_err(failed)?;
        let mut answers = Vec::with_capacity(statements.len());
        for statement in statements {
            let statement = sqlx::AssertSqlSafe((*statement).to_owned());
            let row = sqlx::query(statement)
                .fetch_optional(&mut *tx)
                .await
                .map_err(failed)?;
            answers.push(row.map(|row| {
                (0..row.len())
                    .map(|i| {
                        row.try_get::<i64, _>(i)
                            .or_else(|_| row.try_get::<i32, _>(i).map(i64::from))
                            .unwrap_or(i64::MIN)
                    })
                    .collect()
            }));
        }
        tx.commit().await.map_err(failed)?;
        Ok(answers)
    })
}

/// Every connection of a store's pool, held by a test: while it lives, queries on that store
/// wait the store's `connect_timeout` for a connection and fail with
/// [`StoreError::Unreachable`] ("timed out waiting for a connection"), exactly as when the
/// database is down; dropping it brings the database "back". See [`occupy_pool`].
pub struct OccupiedPool {
    _held: Vec<Box<dyn std::any::Any + Send>>,
}

impl std::fmt::Debug for OccupiedPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OccupiedPool({} connections)", self._held.len())
    }
}

/// Take every connection of `store`'s pool (connecting as needed) so the store behaves as if
/// its database were unreachable until the result is dropped. Use a store with a small pool
/// and a short `connect_timeout` (e.g. [`Store::connect_lazy`] with one connection and
/// 200 ms), so that each "unreachable" query fails quickly.
pub async fn occupy_pool(store: &Store) -> Result<OccupiedPool> {
    let mut held: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
    crate::store::with_pool!(store, pool, {
        for _ in 0..pool.options().get_max_connections() {
            let conn = pool
                .acquire()
                .await
                .map_err(|e| store.err("occupying the pool", e))?;
            held.push(Box::new(conn));
        }
    });
    Ok(OccupiedPool { _held: held })
}

/// How many of `store`'s pooled connections sit inside a transaction, asked of each connection
/// itself: the check that a cancelled call left no session half-way (issue 36, point 5).
///
/// Waits (up to 10 s) for connections being handed back to settle in the pool, then holds every
/// idle one at once, so each is asked exactly once: PostgreSQL refuses a `SAVEPOINT` outside a
/// transaction block (the probe releases its own one inside); MariaDB answers
/// `@@in_transaction`; SQLite refuses a `BEGIN` inside a transaction (the probe rolls its own
/// one back). Use it while nothing else uses the store.
pub async fn pooled_sessions_in_transaction(store: &Store) -> Result<usize> {
    let failed = |e| {
        store.err(
            "asking a pooled connection whether it is in a transaction",
            e,
        )
    };
    let mut open = 0;
    match &store.pool {
        crate::store::DbPool::Sqlite(pool) => {
            for mut conn in settled_connections(pool).await.map_err(failed)? {
                match conn.execute("BEGIN").await {
                    Ok(_) => {
                        conn.execute("ROLLBACK").await.map_err(failed)?;
                    }
                    Err(sqlx::Error::Database(e))
                        if e.message().contains("within a transaction") =>
                    {
                        open += 1;
                    }
                    Err(e) => return Err(failed(e)),
                }
            }
        }
        crate::store::DbPool::MySql(pool) => {
            for mut conn in settled_connections(pool).await.map_err(failed)? {
                let inside: i64 = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(failed)?;
                open += usize::from(inside != 0);
            }
        }
        crate::store::DbPool::Postgres(pool) => {
            for mut conn in settled_connections(pool).await.map_err(failed)? {
                match conn.execute("SAVEPOINT uidgen_probe").await {
                    Ok(_) => {
                        open += 1;
                        conn.execute("RELEASE SAVEPOINT uidgen_probe")
                            .await
                            .map_err(failed)?;
                    }
                    // no_active_sql_transaction: "SAVEPOINT can only be used in transaction blocks"
                    Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("25P01") => {}
                    Err(e) => return Err(failed(e)),
                }
            }
        }
    }
    Ok(open)
}

/// Every connection of `pool`, held at once, once none is on its way back to the pool (a
/// returned connection is pinged, or closed, before it is idle again).
///
/// `num_idle()` alone cannot say so: sqlx 0.9 pushes a returned connection and frees its permit
/// before counting it idle, so a task that takes it meanwhile drives the count below zero for a
/// moment (it read `usize::MAX` under load, and acquiring that many waited out the pool's
/// timeout). The idle connections are taken without waiting, and the take counts only when it
/// holds all `size()` of them.
async fn settled_connections<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
) -> std::result::Result<Vec<sqlx::pool::PoolConnection<DB>>, sqlx::Error> {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let size = pool.size() as usize;
        let mut held = Vec::with_capacity(size);
        while held.len() < size {
            match pool.try_acquire() {
                Some(conn) => held.push(conn),
                None => break,
            }
        }
        if held.len() == size && pool.size() as usize == size {
            return Ok(held);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(sqlx::Error::PoolTimedOut);
        }
        drop(held);
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
}

/// Create database `name` on the `server` of `kind`; return its URL.
async fn server_database(kind: TestDb, server: &str, name: &str) -> Result<String> {
    let server = server.to_owned();
    if kind == TestDb::Sqlite {
        return Err(StoreError::TestDatabase(
            "SQLite test databases are files; use fresh_url".to_owned(),
        ));
    }
    let (service, var) = match kind {
        TestDb::MySql => ("MariaDB/MySQL", MYSQL_URL_VAR),
        _ => ("PostgreSQL", POSTGRES_URL_VAR),
    };
    let unreachable = |e: &dyn std::fmt::Display| {
        StoreError::TestDatabase(format!(
            "{service} not reachable at {}; start it or set {var}: {e}",
            redact_url(&server)
        ))
    };
    let failed = |e: sqlx::Error| {
        StoreError::TestDatabase(format!(
            "cannot create test database {name} on {service} at {}: {e}",
            redact_url(&server)
        ))
    };
    // `name` is ours: letters, digits and underscores only. Identifiers cannot be bound.
    let create = match kind {
        TestDb::MySql => format!("CREATE DATABASE {name} CHARACTER SET utf8mb4"),
        _ => format!("CREATE DATABASE {name}"),
    };
    match kind {
        TestDb::MySql => {
            let mut conn: sqlx::MySqlConnection = connect_within(&server, unreachable).await?;
            drop_stale_mysql(&mut conn).await;
            conn.execute(sqlx::AssertSqlSafe(create))
                .await
                .map_err(failed)?;
            let _ = conn.close().await;
        }
        _ => {
            let mut conn: sqlx::PgConnection = connect_within(&server, unreachable).await?;
            drop_stale_pg(&mut conn).await;
            // Concurrent CREATE DATABASE may briefly find the template in use: retry.
            let mut attempt = 0;
            loop {
                match conn.execute(sqlx::AssertSqlSafe(create.clone())).await {
                    Ok(_) => break,
                    Err(error) if attempt < 5 => {
                        attempt += 1;
                        tracing::debug!(%error, "retrying CREATE DATABASE");
                        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                    }
                    Err(error) => return Err(failed(error)),
                }
            }
            let _ = conn.close().await;
        }
    }
    Ok(replace_database(&server, name))
}

/// An administrative connection to a test database server, given 5 s to answer; a server that
/// does not is `unreachable`.
async fn connect_within<C: sqlx::Connection>(
    server: &str,
    unreachable: impl Fn(&dyn std::fmt::Display) -> StoreError,
) -> Result<C> {
    tokio::time::timeout(std::time::Duration::from_secs(5), C::connect(server))
        .await
        .map_err(|e| unreachable(&e))?
        .map_err(|e| unreachable(&e))
}

/// Whether a test database name is from a run more than an hour old.
fn is_stale(name: &str, now_secs: u64) -> bool {
    name.strip_prefix("uidgen_t_")
        .and_then(|rest| rest.split('_').next())
        .and_then(|secs| secs.parse::<u64>().ok())
        .is_some_and(|secs| secs + STALE_AFTER_SECS < now_secs)
}

/// Once per process, delete SQLite test files (and their `-wal`/`-shm`) older than an hour.
fn drop_stale_files(dir: &std::path::Path, now_secs: u64) {
    static DONE: AtomicBool = AtomicBool::new(false);
    // Relaxed: a best-effort once-flag; a second sweep would be harmless.
    if DONE.swap(true, Ordering::Relaxed) {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if is_stale(&entry.file_name().to_string_lossy(), now_secs) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Whether this process already swept `kind`'s server for stale test databases.
fn first_sweep(kind: TestDb) -> bool {
    static MYSQL_DONE: AtomicBool = AtomicBool::new(false);
    static PG_DONE: AtomicBool = AtomicBool::new(false);
    let done = if kind == TestDb::MySql {
        &MYSQL_DONE
    } else {
        &PG_DONE
    };
    // Relaxed: a best-effort once-flag; a second sweep would be harmless.
    !done.swap(true, Ordering::Relaxed)
}

/// Once per process, drop MySQL test databases older than an hour (best effort).
async fn drop_stale_mysql(conn: &mut sqlx::MySqlConnection) {
    if !first_sweep(TestDb::MySql) {
        return;
    }
    let now = SystemClock.now_millis() / 1000;
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE \
         'uidgen\\_t\\_%'",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap_or_default();
    for name in names.into_iter().filter(|n| is_stale(n, now)) {
        let sql = sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS `{name}`"));
        let _ = conn.execute(sql).await;
    }
}

/// Once per process, drop PostgreSQL test databases older than an hour (best effort).
async fn drop_stale_pg(conn: &mut sqlx::PgConnection) {
    if !first_sweep(TestDb::Postgres) {
        return;
    }
    let now = SystemClock.now_millis() / 1000;
    let names: Vec<String> =
        sqlx::query_scalar("SELECT datname FROM pg_database WHERE datname LIKE 'uidgen\\_t\\_%'")
            .fetch_all(&mut *conn)
            .await
            .unwrap_or_default();
    for name in names.into_iter().filter(|n| is_stale(n, now)) {
        let sql = sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"));
        let _ = conn.execute(sql).await;
    }
}

/// The URL with its path (database name) replaced by `name`, query kept.
fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{name}", &base[..path_start]);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// A transaction left open on one of a store's own sessions, as a process frozen mid-claim
/// (SIGSTOP, a VM pause) leaves it: its statements ran, their row locks are held, and nothing
/// more is sent. Made by [`freeze_in_transaction`].
pub struct FrozenTransaction {
    conn: FrozenConn,
}

enum FrozenConn {
    Sqlite(sqlx::SqliteConnection),
    MySql(sqlx::MySqlConnection),
    Postgres(sqlx::PgConnection),
}

/// Open a writing transaction on a new session of `store`'s pool (with its options: what the
/// store sets on each session is set on this one), run `statements` in it, and leave it open.
///
/// ```no_run
/// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
/// let mut frozen = uidgen_store::testing::freeze_in_transaction(
///     &store,
///     &["UPDATE leaf_alloc SET step = step WHERE biz_tag = 'order'"],
/// )
/// .await?;
/// // ... another store's claims of 'order' wait for the lock ...
/// assert!(frozen.ended().await); // once the database ended the idle session
/// # Ok(()) }
/// ```
pub async fn freeze_in_transaction(
    store: &Store,
    statements: &[&str],
) -> Result<FrozenTransaction> {
    use crate::store::DbPool;
    let failed = |e| store.err("leaving a transaction open", e);
    let dialect = store.dialect();
    let conn = match &store.pool {
        DbPool::Sqlite(pool) => FrozenConn::Sqlite(
            open_frozen(pool, dialect, statements)
                .await
                .map_err(failed)?,
        ),
        DbPool::MySql(pool) => FrozenConn::MySql(
            open_frozen(pool, dialect, statements)
                .await
                .map_err(failed)?,
        ),
        DbPool::Postgres(pool) => FrozenConn::Postgres(
            open_frozen(pool, dialect, statements)
                .await
                .map_err(failed)?,
        ),
    };
    Ok(FrozenTransaction { conn })
}

/// A session of `pool` taken out of it (dropping it closes it), inside a transaction that ran
/// `statements`.
async fn open_frozen<DB: sqlx::Database>(
    pool: &sqlx::Pool<DB>,
    dialect: crate::Dialect,
    statements: &[&str],
) -> sqlx::Result<DB::Connection>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    let mut conn = pool.acquire().await?.detach();
    let begin = crate::session::begin_write_sql(dialect);
    sqlx::raw_sql(begin).execute(&mut conn).await?;
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe((*statement).to_owned()))
            .execute(&mut conn)
            .await?;
    }
    Ok(conn)
}

impl FrozenTransaction {
    /// Whether the database has ended the session (the next statement fails), which rolled its
    /// transaction back and freed its locks.
    pub async fn ended(&mut self) -> bool {
        match &mut self.conn {
            FrozenConn::Sqlite(conn) => sqlx::raw_sql("SELECT 1").execute(conn).await.is_err(),
            FrozenConn::MySql(conn) => sqlx::raw_sql("SELECT 1").execute(conn).await.is_err(),
            FrozenConn::Postgres(conn) => sqlx::raw_sql("SELECT 1").execute(conn).await.is_err(),
        }
    }
}
