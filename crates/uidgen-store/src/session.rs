//! [`Session`]: the one way a store call opens a transaction or takes a session lock on a
//! pooled connection, so that a cancelled call never hands a connection back inside one.
//!
//! Issue 36, point 5: under load PostgreSQL logged "there is already a transaction in progress"
//! after cancelled segment claims (the segment crate wraps claims in `load_timeout_ms`, which
//! drops the claim's future wherever it is). sqlx 0.9's `Transaction` rolls back on drop only
//! once its `BEGIN` has been answered: PostgreSQL's and MySQL's transaction managers count the
//! transaction after the answer, and their drop guards roll back only a counted one
//! (`sqlx-postgres` `PgTransactionManager::begin`, `sqlx-mysql` `MySqlTransactionManager::begin`).
//! A claim dropped while its `BEGIN` was on the wire went back to the pool inside a transaction
//! the server had started: the next user's statements ran in it uncommitted, and on MariaDB an
//! `UPDATE` of a row left its lock held, so the next claim of that row waited out
//! `innodb_lock_wait_timeout` and failed. The same holds for a session lock (`GET_LOCK`,
//! `pg_advisory_lock`) dropped before its release.
//!
//! The rule, kept here once: a connection whose session is not known to be clean is never
//! handed back to the pool. [`Session`] marks the session open *before* it sends `BEGIN` (or a
//! lock), and clean only once `COMMIT` or `ROLLBACK` (or the unlock) has been answered. Dropped
//! while open (a cancelled future, an error returned with `?`, a panic), the connection is
//! closed instead of returned: ending the session makes the server roll the transaction back
//! and drop its locks, whatever was in flight. A closed connection costs a reconnect, and only
//! on a cancelled or failed call.
//!
//! Cancel safety: dropping a call that uses a [`Session`] at any await leaves no transaction
//! and no session lock behind on any pooled connection. Whether a transaction whose `COMMIT`
//! was in flight committed is unknown to the caller: a claim then skips its segment (never
//! repeats it), as after a crash.

use std::ops::{Deref, DerefMut};

use sqlx::pool::PoolConnection;
use sqlx::{Database, Executor, Pool};

use crate::store::Sql;
use crate::url::Dialect;

/// Opens every transaction that reads and then writes (claims, registrations, migrations). On
/// SQLite, `IMMEDIATE` takes the database's write lock before the first read, so a second writer
/// (in any process) queues on the busy timeout and then reads the first one's rows; a deferred
/// transaction would read first and fail to upgrade with `SQLITE_BUSY`. MySQL and PostgreSQL
/// lock rows as the statements reach them.
const BEGIN_WRITE: Sql = Sql {
    sqlite: "BEGIN IMMEDIATE",
    mysql: "BEGIN",
    postgres: "BEGIN",
};

/// [`BEGIN_WRITE`] in `dialect`.
#[cfg(feature = "testing")]
pub(crate) fn begin_write_sql(dialect: Dialect) -> &'static str {
    BEGIN_WRITE.get(dialect)
}

/// A pooled connection whose session state (an open transaction, a held session lock) is
/// tracked, and which is closed rather than returned to the pool while any is open. Derefs to
/// the connection, so statements run on `&mut *session`.
pub(crate) struct Session<DB: Database> {
    conn: PoolConnection<DB>,
    /// From just before `BEGIN` is sent until `COMMIT` or `ROLLBACK` is answered.
    in_transaction: bool,
    /// From just before a session lock is asked for until its release is answered.
    holds_lock: bool,
}

impl<DB: Database> Session<DB>
where
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    /// A connection from `pool`, with nothing open yet.
    pub(crate) async fn acquire(pool: &Pool<DB>) -> sqlx::Result<Self> {
        Ok(Self {
            conn: pool.acquire().await?,
            in_transaction: false,
            holds_lock: false,
        })
    }

    /// A connection from `pool` inside a writing transaction ([`BEGIN_WRITE`]).
    pub(crate) async fn begin_write(pool: &Pool<DB>, dialect: Dialect) -> sqlx::Result<Self> {
        let mut session = Self::acquire(pool).await?;
        session.begin(dialect).await?;
        Ok(session)
    }

    /// Open a writing transaction ([`BEGIN_WRITE`]) on this connection.
    pub(crate) async fn begin(&mut self, dialect: Dialect) -> sqlx::Result<()> {
        // Before the statement is sent: once it is, the server may start the transaction
        // whether or not this future lives to read the answer.
        self.in_transaction = true;
        self.run(BEGIN_WRITE.get(dialect)).await
    }

    /// Commit the open transaction. Failed or cancelled, the transaction counts as open and
    /// the connection is closed on drop (which ends it on the server).
    pub(crate) async fn commit(&mut self) -> sqlx::Result<()> {
        self.run("COMMIT").await?;
        self.in_transaction = false;
        Ok(())
    }

    /// Roll the open transaction back (a call that decided to change nothing).
    pub(crate) async fn rollback(&mut self) -> sqlx::Result<()> {
        self.run("ROLLBACK").await?;
        self.in_transaction = false;
        Ok(())
    }

    /// Call before asking for a session lock (`GET_LOCK`, `pg_advisory_lock`): from now until
    /// [`unlocked`](Self::unlocked), the connection is not handed back to the pool.
    pub(crate) fn locking(&mut self) {
        self.holds_lock = true;
    }

    /// Call once the session lock's release has been answered.
    pub(crate) fn unlocked(&mut self) {
        self.holds_lock = false;
    }

    /// One statement of transaction control, sent as text (no prepared statement).
    async fn run(&mut self, statement: &'static str) -> sqlx::Result<()> {
        sqlx::raw_sql(statement).execute(&mut *self.conn).await?;
        Ok(())
    }
}

impl<DB: Database> Deref for Session<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &Self::Target {
        &self.conn
    }
}

impl<DB: Database> DerefMut for Session<DB> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.conn
    }
}

impl<DB: Database> Drop for Session<DB> {
    fn drop(&mut self) {
        if self.in_transaction || self.holds_lock {
            // The pool closes it instead of pinging it back in; the server ends the session,
            // rolling back its transaction and releasing its locks.
            self.conn.close_on_drop();
        }
    }
}
