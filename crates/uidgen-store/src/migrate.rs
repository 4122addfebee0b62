//! The schema: migrations embedded from the workspace's top-level `sql/<dialect>/NNNN_name.sql`,
//! applied once each and recorded in
//! `uidgen_schema_migrations(version, description, applied_at, checksum)`.
//!
//! The files use idempotent DDL (`CREATE TABLE IF NOT EXISTS`), so a DBA may also run them by
//! hand, in order, and a later [`Store::migrate`] merely records them.
//!
//! A landed migration is never edited: each is recorded with the SHA-256 of its text, and every
//! start compares the recorded checksum with the embedded file's. A difference is refused with
//! [`StoreError::MigrationChanged`] before anything else runs, as sqlx's own migrator does
//! (<https://docs.rs/sqlx/latest/sqlx/migrate/struct.Migrator.html>): a database migrated by
//! one text and a build carrying another would disagree about the schema silently. Rows
//! recorded before checksums existed (no checksum) take the embedded file's on their next start.

use sha2::{Digest, Sha256};
use sqlx::Executor;

use crate::error::{Result, StoreError};
use crate::session::Session;
use crate::store::{Sql, Store, with_pool};
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

impl Migration {
    /// The SHA-256 of [`sql`](Self::sql) in lowercase hex: what `uidgen_schema_migrations`
    /// records, so an edited landed migration is noticed.
    ///
    /// ```
    /// use uidgen_store::{Dialect, migrations};
    /// let checksum = migrations(Dialect::Sqlite)[0].checksum();
    /// assert_eq!(checksum.len(), 64);
    /// assert_ne!(checksum, migrations(Dialect::Sqlite)[1].checksum());
    /// ```
    pub fn checksum(&self) -> String {
        Sha256::digest(self.sql.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// Every dialect's migrations, from the top-level `sql/<dialect>/NNNN_<description>.sql`: one
/// list, so a new migration is one line here plus its three files.
macro_rules! migrations_in {
    ($dialect:literal) => {
        &[
            migration!($dialect, 1, "0001", "worker_node"),
            migration!($dialect, 2, "0002", "worker_lease"),
            migration!($dialect, 3, "0003", "leaf_alloc"),
            migration!($dialect, 4, "0004", "worker_id_range"),
            migration!($dialect, 5, "0005", "id_alloc"),
            migration!($dialect, 6, "0006", "leaf_alloc_residue"),
            migration!($dialect, 7, "0007", "caller_token"),
            migration!($dialect, 8, "0008", "worker_lease_space"),
            migration!($dialect, 9, "0009", "takeover"),
            migration!($dialect, 10, "0010", "id_alloc_exclusive"),
            migration!($dialect, 11, "0011", "caller_token_expiry"),
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
        applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
        checksum VARCHAR(64))",
    mysql: "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (
        version BIGINT NOT NULL PRIMARY KEY,
        description VARCHAR(128) NOT NULL,
        applied_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
        checksum VARCHAR(64)
        ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
    postgres: "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (
        version BIGINT PRIMARY KEY,
        description VARCHAR(128) NOT NULL,
        applied_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
        checksum VARCHAR(64))",
};

/// Tables created before checksums were recorded lack the column. MySQL 8 has no `ADD COLUMN
/// IF NOT EXISTS`, and a failed probe would abort PostgreSQL's transaction, so [`run`] asks the
/// catalogue first.
const HAS_CHECKSUM: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM pragma_table_info('uidgen_schema_migrations') \
             WHERE name = 'checksum'",
    mysql: "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = DATABASE() \
            AND table_name = 'uidgen_schema_migrations' AND column_name = 'checksum'",
    postgres: "SELECT COUNT(*) FROM information_schema.columns \
               WHERE table_schema = current_schema() \
               AND table_name = 'uidgen_schema_migrations' AND column_name = 'checksum'",
};
const ADD_CHECKSUM: &str = "ALTER TABLE uidgen_schema_migrations ADD COLUMN checksum VARCHAR(64)";

/// Migrations that must run once and cannot guard themselves with `IF NOT EXISTS` (SQLite and
/// MySQL 8 have no `ADD COLUMN IF NOT EXISTS`; 0010 lists the rows present when it runs): the
/// catalogue query answers non-zero when a DBA already ran the file by hand, and the runner then
/// only records it (as it does for the idempotent files).
const ADDS_COLUMNS: &[(i64, Sql)] = &[
    (
        6,
        Sql {
            sqlite: "SELECT COUNT(*) FROM pragma_table_info('leaf_alloc') \
                     WHERE name = 'remainder'",
            mysql: "SELECT COUNT(*) FROM information_schema.columns \
                    WHERE table_schema = DATABASE() AND table_name = 'leaf_alloc' \
                    AND column_name = 'remainder'",
            postgres: "SELECT COUNT(*) FROM information_schema.columns \
                       WHERE table_schema = current_schema() AND table_name = 'leaf_alloc' \
                       AND column_name = 'remainder'",
        },
    ),
    (
        8,
        Sql {
            sqlite: "SELECT COUNT(*) FROM pragma_table_info('worker_lease') WHERE name = 'space'",
            mysql: "SELECT COUNT(*) FROM information_schema.columns \
                    WHERE table_schema = DATABASE() AND table_name = 'worker_lease' \
                    AND column_name = 'space'",
            postgres: "SELECT COUNT(*) FROM information_schema.columns \
                       WHERE table_schema = current_schema() AND table_name = 'worker_lease' \
                       AND column_name = 'space'",
        },
    ),
    (
        10,
        Sql {
            sqlite: "SELECT COUNT(*) FROM sqlite_master \
                     WHERE type = 'table' AND name = 'id_alloc_exclusive'",
            mysql: "SELECT COUNT(*) FROM information_schema.tables \
                    WHERE table_schema = DATABASE() AND table_name = 'id_alloc_exclusive'",
            postgres: "SELECT COUNT(*) FROM information_schema.tables \
                       WHERE table_schema = current_schema() \
                       AND table_name = 'id_alloc_exclusive'",
        },
    ),
    (
        11,
        Sql {
            sqlite: "SELECT COUNT(*) FROM pragma_table_info('caller_token') \
                     WHERE name = 'expires_ms'",
            mysql: "SELECT COUNT(*) FROM information_schema.columns \
                    WHERE table_schema = DATABASE() AND table_name = 'caller_token' \
                    AND column_name = 'expires_ms'",
            postgres: "SELECT COUNT(*) FROM information_schema.columns \
                       WHERE table_schema = current_schema() AND table_name = 'caller_token' \
                       AND column_name = 'expires_ms'",
        },
    ),
];

/// The recorded checksum of a migration: no row when it was never applied, a NULL checksum
/// when it was recorded before checksums were.
const RECORDED: Sql = Sql {
    sqlite: "SELECT checksum FROM uidgen_schema_migrations WHERE version = ?1",
    mysql: "SELECT checksum FROM uidgen_schema_migrations WHERE version = ?",
    postgres: "SELECT checksum FROM uidgen_schema_migrations WHERE version = $1",
};

const RECORD: Sql = Sql {
    sqlite: "INSERT INTO uidgen_schema_migrations (version, description, checksum) \
             VALUES (?1, ?2, ?3)",
    mysql: "INSERT INTO uidgen_schema_migrations (version, description, checksum) \
            VALUES (?, ?, ?)",
    postgres: "INSERT INTO uidgen_schema_migrations (version, description, checksum) \
               VALUES ($1, $2, $3)",
};

const BACKFILL: Sql = Sql {
    sqlite: "UPDATE uidgen_schema_migrations SET checksum = ?1 WHERE version = ?2",
    mysql: "UPDATE uidgen_schema_migrations SET checksum = ? WHERE version = ?",
    postgres: "UPDATE uidgen_schema_migrations SET checksum = $1 WHERE version = $2",
};

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

/// What one migration's step found, decided inside its transaction.
enum Step {
    Done,
    Applied { found_in_place: bool },
    Changed { recorded: String, embedded: String },
}

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

pub(crate) async fn run(store: &Store) -> Result<Vec<Applied>> {
    let dialect = store.dialect();
    let url = store.redacted_url().to_owned();
    with_pool!(store, pool, {
        let mut conn = Session::acquire(pool)
            .await
            .map_err(|e| store.err("migrating", e))?;
        // Lock first: even CREATE TABLE IF NOT EXISTS races with itself on PostgreSQL. The lock
        // is the session's: until it is released, the connection is not handed back.
        conn.locking();
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
            conn.begin(dialect).await?;
            sqlx::raw_sql(CREATE_MIGRATIONS_TABLE.get(dialect))
                .execute(&mut *conn)
                .await?;
            let has_checksum: i64 = sqlx::query_scalar(HAS_CHECKSUM.get(dialect))
                .fetch_one(&mut *conn)
                .await?;
            if has_checksum == 0 {
                sqlx::raw_sql(ADD_CHECKSUM).execute(&mut *conn).await?;
            }
            conn.commit().await
        }
        .await
        .map_err(|e| store.err("creating uidgen_schema_migrations", e));
        let mut outcome = created.map(|_| Vec::new());
        for migration in migrations(dialect) {
            if outcome.is_err() {
                break;
            }
            let embedded = migration.checksum();
            let applied = async {
                conn.begin(dialect).await?;
                let recorded: Option<Option<String>> = sqlx::query_scalar(RECORDED.get(dialect))
                    .bind(migration.version)
                    .fetch_optional(&mut *conn)
                    .await?;
                let step = match recorded {
                    None => {
                        let probe = ADDS_COLUMNS
                            .iter()
                            .find(|(version, _)| *version == migration.version);
                        let by_hand = match probe {
                            Some((_, probe)) => {
                                let found: i64 = sqlx::query_scalar(probe.get(dialect))
                                    .fetch_one(&mut *conn)
                                    .await?;
                                found > 0
                            }
                            None => false,
                        };
                        if !by_hand {
                            sqlx::raw_sql(migration.sql).execute(&mut *conn).await?;
                        }
                        sqlx::query(RECORD.get(dialect))
                            .bind(migration.version)
                            .bind(migration.description)
                            .bind(&embedded)
                            .execute(&mut *conn)
                            .await?;
                        tracing::info!(
                            version = migration.version,
                            description = migration.description,
                            %url,
                            "applied migration"
                        );
                        Step::Applied {
                            found_in_place: by_hand,
                        }
                    }
                    Some(None) => {
                        sqlx::query(BACKFILL.get(dialect))
                            .bind(&embedded)
                            .bind(migration.version)
                            .execute(&mut *conn)
                            .await?;
                        Step::Done
                    }
                    Some(Some(recorded)) if recorded == embedded => Step::Done,
                    Some(Some(recorded)) => Step::Changed {
                        recorded,
                        embedded: embedded.clone(),
                    },
                };
                conn.commit().await.map(|()| step)
            };
            match applied.await {
                Ok(Step::Done) => {}
                Ok(Step::Applied { found_in_place }) => {
                    if let Ok(done) = &mut outcome {
                        done.push(Applied {
                            version: migration.version,
                            description: migration.description,
                            found_in_place,
                        });
                    }
                }
                Ok(Step::Changed { recorded, embedded }) => {
                    outcome = Err(StoreError::MigrationChanged {
                        version: migration.version,
                        description: migration.description,
                        url: url.clone(),
                        recorded,
                        embedded,
                    });
                    break;
                }
                Err(source) => {
                    outcome = Err(StoreError::Migration {
                        version: migration.version,
                        description: migration.description,
                        url: url.clone(),
                        source,
                    });
                    break;
                }
            }
        }
        // Unlocking is best effort: a connection whose unlock failed (or whose migration left
        // its transaction open) is closed on drop, which ends the lock with the session.
        if conn.execute(UNLOCK.get(dialect)).await.is_ok() {
            conn.unlocked();
        }
        outcome
    })
}
