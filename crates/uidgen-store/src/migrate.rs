//! The schema: migrations embedded from `sql/<dialect>/NNNN_name.sql`, applied once each and
//! recorded in `uidgen_schema_migrations(version, description, applied_at)`.
//!
//! The files use idempotent DDL (`CREATE TABLE IF NOT EXISTS`), so a DBA may also run them by
//! hand, in order, and a later [`Store::migrate`] merely records them.

use sqlx::{Connection, Executor};

use crate::error::{Result, StoreError};
use crate::store::{BEGIN_WRITE, Sql, Store, with_pool};
use crate::url::Dialect;

/// One schema change.
///
/// ```
/// use uidgen_store::{Dialect, migrations};
/// let all = migrations(Dialect::Postgres);
/// assert_eq!(all[0].version, 1);
/// assert_eq!(all[0].description, "worker_node");
/// assert!(all[0].sql.contains("CREATE TABLE IF NOT EXISTS worker_node"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migration {
    /// Applied in ascending order; the file's `NNNN` prefix.
    pub version: i64,
    /// The file's name after the prefix.
    pub description: &'static str,
    /// The DDL.
    pub sql: &'static str,
}

/// Every dialect's migrations, from `sql/<dialect>/NNNN_<description>.sql`: one list, so a new
/// migration is one line here plus its three files.
macro_rules! migrations_in {
    ($dialect:literal) => {
        &[
            migration!($dialect, 1, "0001", "worker_node"),
            migration!($dialect, 2, "0002", "worker_lease"),
            migration!($dialect, 3, "0003", "leaf_alloc"),
            migration!($dialect, 4, "0004", "worker_id_range"),
            migration!($dialect, 5, "0005", "id_alloc"),
        ]
    };
}

macro_rules! migration {
    ($dialect:literal, $version:literal, $prefix:literal, $description:literal) => {
        Migration {
            version: $version,
            description: $description,
            sql: include_str!(concat!(
                "../../../sql/",
                $dialect,
                "/",
                $prefix,
                "_",
                $description,
                ".sql"
            )),
        }
    };
}

const SQLITE: &[Migration] = migrations_in!("sqlite");
const MYSQL: &[Migration] = migrations_in!("mysql");
const POSTGRES: &[Migration] = migrations_in!("postgres");

/// The embedded migrations of a dialect, in the order they apply.
pub fn migrations(dialect: Dialect) -> &'static [Migration] {
    match dialect {
        Dialect::Sqlite => SQLITE,
        Dialect::MySql => MYSQL,
        Dialect::Postgres => POSTGRES,
    }
}

const CREATE_MIGRATIONS_TABLE: Sql = Sql {
    sqlite: "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (
        version BIGINT PRIMARY KEY,
        description VARCHAR(128) NOT NULL,
        applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    mysql: "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (
        version BIGINT NOT NULL PRIMARY KEY,
        description VARCHAR(128) NOT NULL,
        applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
        ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
    postgres: "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (
        version BIGINT PRIMARY KEY,
        description VARCHAR(128) NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP)",
};

const IS_APPLIED: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM uidgen_schema_migrations WHERE version = ?1",
    mysql: "SELECT COUNT(*) FROM uidgen_schema_migrations WHERE version = ?",
    postgres: "SELECT COUNT(*) FROM uidgen_schema_migrations WHERE version = $1",
};

const RECORD: Sql = Sql {
    sqlite: "INSERT INTO uidgen_schema_migrations (version, description) VALUES (?1, ?2)",
    mysql: "INSERT INTO uidgen_schema_migrations (version, description) VALUES (?, ?)",
    postgres: "INSERT INTO uidgen_schema_migrations (version, description) VALUES ($1, $2)",
};

/// Serialises concurrent migrators of one database; answers 1 once the lock is held.
///
/// PostgreSQL's advisory locks are already scoped to the current database. MySQL's named locks
/// are server-wide, so the name carries the schema (`DATABASE()`): migrators of different
/// databases (parallel tests) do not wait for each other. Names longer than 64 characters are
/// refused by MySQL, so a long schema name is cut, which at worst makes two such databases
/// share a lock. `GET_LOCK` answers 0 on timeout and NULL on error: both are failures (see
/// [`run`]). SQLite's `BEGIN IMMEDIATE` takes the file's write lock per migration instead.
const LOCK: Sql = Sql {
    sqlite: "SELECT 1",
    mysql: "SELECT GET_LOCK(CONCAT('uidgen_migrate:', LEFT(COALESCE(DATABASE(), ''), 49)), 60)",
    postgres: "SELECT CAST(1 AS BIGINT) FROM pg_advisory_lock(7302149117)",
};

/// How long [`LOCK`] waits on MySQL, for the error message.
const MYSQL_LOCK_WAIT_SECS: u32 = 60;

const UNLOCK: Sql = Sql {
    sqlite: "SELECT 1",
    mysql: "SELECT RELEASE_LOCK(CONCAT('uidgen_migrate:', LEFT(COALESCE(DATABASE(), ''), 49)))",
    postgres: "SELECT pg_advisory_unlock(7302149117)",
};

pub(crate) async fn run(store: &Store) -> Result<()> {
    let dialect = store.dialect();
    let url = store.redacted_url().to_owned();
    with_pool!(store, pool, {
        let mut conn = pool
            .acquire()
            .await
            .map_err(|e| store.err("migrating", e))?;
        // Lock first: even CREATE TABLE IF NOT EXISTS races with itself on PostgreSQL.
        let granted: Option<i64> = sqlx::query_scalar(LOCK.get(dialect))
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| store.err("locking the schema for migration", e))?;
        // Migrating unlocked would let two processes run the same DDL at once; refuse instead.
        match granted {
            Some(1) => {}
            Some(_) => {
                return Err(StoreError::MigrationLock {
                    url,
                    reason: format!(
                        "another migrator held the lock for {MYSQL_LOCK_WAIT_SECS} s; try again \
                         once it has finished"
                    ),
                });
            }
            None => {
                return Err(StoreError::MigrationLock {
                    url,
                    reason:
                        "the server answered NULL to GET_LOCK (out of memory or the thread was \
                             killed)"
                            .to_owned(),
                });
            }
        }
        // In a writing transaction: on SQLite (whose LOCK is a no-op) an autocommit DDL reads
        // the schema first and then upgrades to a write lock, and that upgrade fails at once with
        // SQLITE_BUSY, without the busy timeout, when another migrator committed in between;
        // `BEGIN IMMEDIATE` takes the write lock up front, where the busy timeout applies.
        let created = async {
            let mut tx = conn.begin_with(BEGIN_WRITE.get(dialect)).await?;
            sqlx::raw_sql(CREATE_MIGRATIONS_TABLE.get(dialect))
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        }
        .await
        .map_err(|e| store.err("creating uidgen_schema_migrations", e));
        let mut outcome = created.map(|_| ());
        for migration in migrations(dialect) {
            if outcome.is_err() {
                break;
            }
            let applied = async {
                let mut tx = conn.begin_with(BEGIN_WRITE.get(dialect)).await?;
                let count: i64 = sqlx::query_scalar(IS_APPLIED.get(dialect))
                    .bind(migration.version)
                    .fetch_one(&mut *tx)
                    .await?;
                if count == 0 {
                    sqlx::raw_sql(migration.sql).execute(&mut *tx).await?;
                    sqlx::query(RECORD.get(dialect))
                        .bind(migration.version)
                        .bind(migration.description)
                        .execute(&mut *tx)
                        .await?;
                    tracing::info!(
                        version = migration.version,
                        description = migration.description,
                        %url,
                        "applied migration"
                    );
                }
                tx.commit().await
            };
            if let Err(source) = applied.await {
                outcome = Err(StoreError::Migration {
                    version: migration.version,
                    description: migration.description,
                    url: url.clone(),
                    source,
                });
                break;
            }
        }
        // Unlocking is best effort: the lock also ends with the session.
        let _ = conn.execute(UNLOCK.get(dialect)).await;
        outcome
    })
}
