//! The schema: migrations embedded from the workspace's top-level `sql/<dialect>/NNNN_name.sql`,
//! applied by sqlx's [`Migrator`] (one per dialect) and recorded in sqlx's `_sqlx_migrations`.
//!
//! The files use idempotent DDL (`CREATE TABLE IF NOT EXISTS`), so a DBA may also run them by
//! hand, in order, and a later [`Store::migrate`] merely records them. The few that cannot guard
//! themselves (they add columns or list rows) are probed first ([`RUN_ONCE`]): found in
//! place, they are recorded with sqlx's [`Migrator::skip`] instead of run.
//!
//! A landed migration is never edited: sqlx records each with the SHA-384 of its text, and every
//! start compares the recorded checksum with the embedded file's. A difference is refused with
//! [`StoreError::MigrationChanged`] before anything else runs
//! (<https://docs.rs/sqlx/0.9.0/sqlx/migrate/struct.Migrator.html>): a database migrated by one
//! text and a build carrying another would disagree about the schema silently.
//!
//! Invariants:
//! - One migrator at a time per database, across processes, held over the adoption and every
//!   migration. PostgreSQL: sqlx's own advisory lock (`pg_advisory_lock`, keyed by the
//!   database's name). MySQL/MariaDB: a `GET_LOCK` keyed by the database's name with a 60 s
//!   timeout ([`MYSQL_LOCK`]: sqlx's does not lock on MariaDB; the name is the older runner's,
//!   so an older uidgen migrating beside this one waits too). SQLite, where sqlx's lock is a
//!   no-op: the whole run is one `BEGIN IMMEDIATE` transaction, which takes the file's write
//!   lock before the first read, so a second process queues on the busy timeout and then reads
//!   what the first recorded.
//! - A database an older uidgen migrated (its own bookkeeping, `uidgen_schema_migrations`) is
//!   adopted, never migrated again: while `_sqlx_migrations` is empty, each recorded version is
//!   copied into it with the checksum sqlx computes, in one transaction, after its recorded
//!   SHA-256 (if any) was checked against the embedded file. The old table is left as it was:
//!   an older uidgen started on the database during a rolling switch or after a rollback finds
//!   its own bookkeeping as it left it (complete, on a current database) rather than an empty
//!   table that would send it through every file again. A DBA may drop it once no older uidgen
//!   will start again.
//!
//! Cancel safety: the run holds a lock (or SQLite's transaction) on one pooled connection;
//! dropped at any await, that connection is closed rather than pooled
//! ([`Session`](crate::session::Session)), which ends the lock and rolls back what was
//! uncommitted. A migration whose commit was in flight may or may not be recorded; the next run
//! sees which.

use std::collections::HashMap;
use std::ops::Deref;
use std::pin::Pin;

use sqlx::Acquire;
use sqlx::migrate::{Migrate, MigrateError, Migrator};

use crate::error::{Result, StoreError, StoreFuture};
use crate::session::Session;
use crate::store::{DbPool, Sql, Store};
use crate::url::Dialect;

pub(crate) mod catalog;
mod legacy;

use catalog::{hex, migrations};

/// sqlx's bookkeeping table (its default name, so sqlx's CLI reads it too).
const TABLE: &str = "_sqlx_migrations";

/// sqlx's migrator over a dialect's migrations. Its own locking is off because [`run`] holds
/// one lock per database from before the adoption to the end; unknown
/// versions are ignored as before, so an older build still starts on a database a newer one
/// migrated.
fn migrator(dialect: Dialect) -> Migrator {
    let mut migrator = Migrator::with_migrations(
        migrations(dialect)
            .iter()
            .map(|migration| migration.to_sqlx())
            .collect(),
    );
    migrator.set_locking(false).set_ignore_missing(true);
    migrator
}

/// sqlx refuses to run past a row whose migration failed half-way (`success = false`), which
/// only MySQL/MariaDB leaves behind (each DDL statement commits implicitly). Those files are
/// idempotent or probed ([`RUN_ONCE`]), so, as before sqlx, the failed one is retried.
const DELETE_FAILED: &str = "DELETE FROM _sqlx_migrations WHERE success = FALSE";

/// Migrations that must run once and cannot guard themselves with `IF NOT EXISTS` (SQLite and
/// MySQL 8 have no `ADD COLUMN IF NOT EXISTS`; 0010 lists the rows present when it runs), with
/// what each leaves behind: when the catalogue shows it, a DBA already ran the file by hand, and
/// the runner only records it (as it does for the idempotent files).
const RUN_ONCE: &[(i64, Trace)] = &[
    (6, Trace::Column("leaf_alloc", "remainder")),
    (8, Trace::Column("worker_lease", "space")),
    (10, Trace::Table("id_alloc_exclusive")),
    (11, Trace::Column("caller_token", "expires_ms")),
];

/// What a run-once migration leaves in the catalogue.
#[derive(Debug, Clone, Copy)]
enum Trace {
    /// A column of a table: (table, column).
    Column(&'static str, &'static str),
    /// A table.
    Table(&'static str),
}

/// How many columns named `$2` the table `$1` of the current schema has.
const COLUMN_COUNT: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?",
    mysql: "SELECT COUNT(*) FROM information_schema.columns \
            WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
    postgres: "SELECT COUNT(*) FROM information_schema.columns \
               WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2",
};

/// How many tables named `$1` the current schema has.
const TABLE_COUNT: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
    mysql: "SELECT COUNT(*) FROM information_schema.tables \
            WHERE table_schema = DATABASE() AND table_name = ?",
    postgres: "SELECT COUNT(*) FROM information_schema.tables \
               WHERE table_schema = current_schema() AND table_name = $1",
};

impl Trace {
    /// The catalogue query counting it in `dialect`, with the table and the column it binds.
    fn query(self, dialect: Dialect) -> (&'static str, &'static str, Option<&'static str>) {
        match self {
            Self::Column(table, column) => (COLUMN_COUNT.get(dialect), table, Some(column)),
            Self::Table(table) => (TABLE_COUNT.get(dialect), table, None),
        }
    }
}

/// A migration one [`Store::migrate`] recorded: what `uidgen migrate` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Applied {
    /// The migration's version (its file's `NNNN`).
    pub version: i64,
    /// The migration's name (its file's name after the prefix).
    pub description: &'static str,
    /// Whether its changes were found already made (a DBA ran the file by hand, or the
    /// idempotent DDL met its tables), so it was only recorded.
    pub found_in_place: bool,
}

/// sqlx's migration error as a driver error: a statement's own error as it came, anything else
/// (a dirty or unknown version) wrapped.
fn driver_error(error: MigrateError) -> sqlx::Error {
    match error {
        MigrateError::Execute(source) | MigrateError::ExecuteMigration(source, _) => source,
        other => sqlx::Error::Migrate(Box::new(other)),
    }
}

/// Refuse a recorded migration whose embedded text changed, naming both checksums (sqlx would
/// refuse it too, but only by version, and only once it reaches that version).
fn check_recorded(dialect: Dialect, recorded: &HashMap<i64, Vec<u8>>, url: &str) -> Result<()> {
    for migration in migrations(dialect) {
        let embedded = migration.checksum();
        match recorded.get(&migration.version) {
            Some(recorded) if *recorded != embedded => {
                return Err(StoreError::MigrationChanged {
                    version: migration.version,
                    description: migration.description,
                    url: url.to_owned(),
                    recorded: hex(recorded),
                    embedded: hex(&embedded),
                });
            }
            _ => {}
        }
    }
    Ok(())
}

/// One migration through sqlx's migrator: applied, or only recorded when `found_in_place`.
/// Every earlier migration is recorded by then, so "up to `version`" is this one alone.
///
/// Boxed with the borrow's one lifetime named: awaited in place, the migrator's future over a
/// `&mut` connection fails the `Send` check for every lifetime at once ("`Acquire` is not
/// general enough", <https://github.com/transact-rs/sqlx/issues/954>).
fn step<'a, C>(
    migrator: &'a Migrator,
    conn: &'a mut C,
    version: i64,
    found_in_place: bool,
) -> Pin<Box<dyn Future<Output = Result<(), MigrateError>> + Send + 'a>>
where
    &'a mut C: Acquire<'a> + Send,
    <<&'a mut C as Acquire<'a>>::Connection as Deref>::Target: Migrate,
{
    if found_in_place {
        Box::pin(migrator.skip(conn, Some(version)))
    } else {
        Box::pin(migrator.run_to(version, conn))
    }
}

/// The run once one migrator holds the database (see the module's invariants), on the concrete
/// connection `$conn`: adopt an older uidgen's bookkeeping, check the recorded checksums, then
/// apply (or, found in place, only record) each pending migration through sqlx's migrator. A
/// macro, expanded per dialect on its concrete connection type, as [`with_pool`](crate::store)
/// does: over a generic one, every query would need a bound per type it binds and reads.
macro_rules! migrate_held {
    ($store:expr, $migrator:expr, $conn:expr) => {
        async {
            let store: &Store = $store;
            let migrator: &Migrator = $migrator;
            let conn = $conn;
            let dialect = store.dialect();
            let url = store.redacted_url();
            let migrate_err =
                |action: &'static str| move |e: MigrateError| store.err(action, driver_error(e));
            conn.ensure_migrations_table(TABLE)
                .await
                .map_err(migrate_err("creating _sqlx_migrations"))?;
            legacy::adopt!(store, conn, migrate_err);
            sqlx::raw_sql(DELETE_FAILED)
                .execute(&mut *conn)
                .await
                .map_err(|e| store.err("clearing a failed migration", e))?;
            let recorded: HashMap<i64, Vec<u8>> = conn
                .list_applied_migrations(TABLE)
                .await
                .map_err(migrate_err("reading _sqlx_migrations"))?
                .into_iter()
                .map(|applied| (applied.version, applied.checksum.into_owned()))
                .collect();
            check_recorded(dialect, &recorded, url)?;
            let mut done = Vec::new();
            for migration in migrations(dialect) {
                if recorded.contains_key(&migration.version) {
                    continue;
                }
                let failed = |source| StoreError::Migration {
                    version: migration.version,
                    description: migration.description,
                    url: url.to_owned(),
                    source,
                };
                let probe = RUN_ONCE.iter().find(|(v, _)| *v == migration.version);
                let found_in_place = match probe {
                    Some((_, trace)) => {
                        let (sql, table, column) = trace.query(dialect);
                        let mut probe = sqlx::query_scalar(sql).bind(table);
                        if let Some(column) = column {
                            probe = probe.bind(column);
                        }
                        let found: i64 = probe
                            .fetch_one(&mut *conn)
                            .await
                            .map_err(failed)?;
                        found > 0
                    }
                    None => false,
                };
                step(migrator, &mut *conn, migration.version, found_in_place)
                    .await
                    .map_err(|e| failed(driver_error(e)))?;
                tracing::info!(
                    version = migration.version,
                    description = migration.description,
                    %url,
                    found_in_place,
                    "applied migration"
                );
                done.push(Applied {
                    version: migration.version,
                    description: migration.description,
                    found_in_place,
                });
            }
            Ok::<_, StoreError>(done)
        }
    };
}

/// MySQL's and MariaDB's lock on the database's migrations; answers 1 once held.
///
/// Not sqlx's: its `GET_LOCK(name, -1)` waits forever on MySQL but answers NULL at once on
/// MariaDB, which takes no negative timeout (<https://github.com/mysqljs/mysql/issues/1912>),
/// and sqlx ignores the answer, so two MariaDB migrators would run side by side. Named locks are
/// server-wide, so the name carries the schema (`DATABASE()`): migrators of different databases
/// (parallel tests) do not wait for each other. Names longer than 64 characters are refused, so
/// a long schema name is cut, which at worst makes two such databases share a lock. `GET_LOCK`
/// answers 0 on timeout and NULL on error: both are failures.
const MYSQL_LOCK: &str =
    "SELECT GET_LOCK(CONCAT('uidgen_migrate:', LEFT(COALESCE(DATABASE(), ''), 49)), 60)";

/// How long [`MYSQL_LOCK`] waits, for the error message.
const MYSQL_LOCK_WAIT_SECS: u32 = 60;

const MYSQL_UNLOCK: &str =
    "SELECT RELEASE_LOCK(CONCAT('uidgen_migrate:', LEFT(COALESCE(DATABASE(), ''), 49)))";

/// PostgreSQL's and MySQL's run: one lock per database around [`migrate_held`] (PostgreSQL:
/// sqlx's advisory lock; MySQL/MariaDB: [`MYSQL_LOCK`]). The lock is the session's: until its
/// release is answered, the connection is not handed back to the pool.
macro_rules! migrate_locked {
    ($store:expr, $migrator:expr, $pool:expr) => {{
        let store: &Store = $store;
        let url = store.redacted_url();
        let mut session = Session::acquire($pool)
            .await
            .map_err(|e| store.err("migrating", e))?;
        session.locking();
        let locking = "locking the schema for migration";
        if store.dialect() == Dialect::MySql {
            let granted: Option<i64> = sqlx::query_scalar(MYSQL_LOCK)
                .fetch_one(&mut *session)
                .await
                .map_err(|e| store.err(locking, e))?;
            // Migrating unlocked would let two processes run the same DDL at once.
            match granted {
                Some(1) => {}
                Some(_) => {
                    return Err(StoreError::MigrationLock {
                        url: url.to_owned(),
                        reason: format!(
                            "another migrator held the lock for {MYSQL_LOCK_WAIT_SECS} s; try \
                             again once it has finished"
                        ),
                    });
                }
                None => {
                    return Err(StoreError::MigrationLock {
                        url: url.to_owned(),
                        reason: "the server answered NULL to GET_LOCK (out of memory or the \
                                 thread was killed)"
                            .to_owned(),
                    });
                }
            }
        } else {
            session
                .lock()
                .await
                .map_err(|e| store.err(locking, driver_error(e)))?;
        }
        let outcome = migrate_held!(store, $migrator, &mut *session).await;
        // Unlocking is best effort: a connection whose unlock failed is closed on drop, which
        // ends the lock with the session.
        let unlocked = if store.dialect() == Dialect::MySql {
            sqlx::raw_sql(MYSQL_UNLOCK)
                .execute(&mut *session)
                .await
                .is_ok()
        } else {
            session.unlock().await.is_ok()
        };
        if unlocked {
            session.unlocked();
        }
        outcome
    }};
}

pub(crate) async fn run(store: &Store) -> Result<Vec<Applied>> {
    let migrator = migrator(store.dialect());
    match &store.pool {
        DbPool::Sqlite(pool) => {
            let mut session = Session::acquire(pool)
                .await
                .map_err(|e| store.err("migrating", e))?;
            // SQLite's lock is the file's write lock, held by this transaction: the session is
            // not clean until it has committed or rolled back.
            session.locking();
            let mut tx = sqlx::Connection::begin_with(&mut *session, "BEGIN IMMEDIATE")
                .await
                .map_err(|e| store.err("locking the schema for migration", e))?;
            let outcome = migrate_held!(store, &migrator, &mut *tx).await;
            let ended = match &outcome {
                Ok(_) => tx.commit().await,
                Err(_) => tx.rollback().await,
            };
            if ended.is_ok() {
                session.unlocked();
            }
            let applied = outcome?;
            ended.map_err(|e| store.err("committing the migrations", e))?;
            Ok(applied)
        }
        DbPool::MySql(pool) => migrate_locked!(store, &migrator, pool),
        DbPool::Postgres(pool) => migrate_locked!(store, &migrator, pool),
    }
}

impl Store {
    /// Apply, through sqlx's migrator, the embedded migrations not yet recorded in
    /// `_sqlx_migrations`; each runs once, in its own transaction (on SQLite, one transaction
    /// holds the whole run). A database an older uidgen migrated (`uidgen_schema_migrations`) is
    /// adopted first, without running anything again. Safe to call from several processes at
    /// once. Answers the migrations this call recorded, in order (none: the schema was up to
    /// date).
    pub fn migrate(&self) -> StoreFuture<'_, Vec<Applied>> {
        Box::pin(async move { run(self).await })
    }
}
