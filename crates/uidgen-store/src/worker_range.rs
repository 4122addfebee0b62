//! The `worker_id_range` table: which worker ids each assigner sharing a store may hand out.
//!
//! The disposable, leased and static assigners draw from one worker-id space without knowing
//! about each other (a disposable row id 3 and a leased id 3 are the same worker id). Each
//! therefore registers the [`WorkerIdRange`] it hands ids from, with
//! [`Store::register_worker_range`], before it takes an id. Invariants:
//!
//! - The recorded ranges of different assigners never overlap: a registration that would
//!   overlap is refused ([`StoreError::WorkerRangeConflict`]) and records nothing.
//! - An assigner has one range per store: every service of it must register the same one
//!   ([`StoreError::WorkerRangeChanged`] otherwise). A row changes only by hand, because
//!   changing it is only safe once every service of that assigner has been reconfigured.
//! - Registrations are serialised across processes (see [`Store::register_worker_range`]), so
//!   two overlapping ranges registered at the same moment cannot both be recorded.
//!
//! These are also the ranges Vesta's embedded/server machine-id split needs.

use uidgen_worker::{WorkerError, WorkerIdRange};

use crate::error::{Result, StoreError, StoreFuture};
use crate::session::Session;
use crate::store::{Sql, Store, run_sql, with_pool};
use crate::url::Dialect;
use crate::worker_node::check_len;

/// The longest assigner name the `worker_id_range.assigner` column holds.
const MAX_ASSIGNER_NAME_LEN: usize = 32;

/// How long a registration waits on MySQL/MariaDB for another one to finish.
const MYSQL_LOCK_WAIT_SECS: i32 = 30;

/// A `worker_id_range` row: the range an assigner registered on this store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRangeRow {
    /// The assigner's name, e.g. `"leased"`.
    pub assigner: String,
    /// Its worker ids.
    pub range: WorkerIdRange,
}

const SELECT_RANGES: Sql =
    Sql::same("SELECT assigner, low, high FROM worker_id_range ORDER BY low, assigner");

const INSERT_RANGE: Sql = Sql {
    sqlite: "INSERT INTO worker_id_range (assigner, low, high, updated)
             VALUES (?1, ?2, ?3, CURRENT_TIMESTAMP)",
    mysql: "INSERT INTO worker_id_range (assigner, low, high, updated)
            VALUES (?, ?, ?, CURRENT_TIMESTAMP)",
    postgres: "INSERT INTO worker_id_range (assigner, low, high, updated)
               VALUES ($1, $2, $3, CURRENT_TIMESTAMP)",
};

/// PostgreSQL, first statement of the transaction: EXCLUSIVE mode conflicts with itself (and
/// with every write), so registrations queue here until the one ahead commits; plain reads
/// elsewhere are not blocked. The lock ends with the transaction. Under READ COMMITTED the
/// SELECT that follows takes a fresh snapshot, so it sees the row just committed.
const POSTGRES_LOCK_RANGES: &str = "LOCK TABLE worker_id_range IN EXCLUSIVE MODE";

/// MySQL/MariaDB, before the transaction: a named lock per database (the name carries the
/// schema, as the migration lock does; MySQL refuses names over 64 characters). InnoDB's
/// `SELECT ... FOR UPDATE` would not serialise two registrations into an empty or gap-free
/// table: gap locks do not conflict with each other (the two inserts then deadlock), and under
/// READ COMMITTED there are none at all. `GET_LOCK` serialises whatever the isolation level.
/// It waits up to [`MYSQL_LOCK_WAIT_SECS`] (bound as the parameter) and answers 1 when granted,
/// 0 on timeout and NULL on error.
const MYSQL_LOCK_RANGES: &str =
    "SELECT GET_LOCK(CONCAT('uidgen_worker_range:', LEFT(COALESCE(DATABASE(), ''), 44)), ?)";

const MYSQL_UNLOCK_RANGES: &str =
    "SELECT RELEASE_LOCK(CONCAT('uidgen_worker_range:', LEFT(COALESCE(DATABASE(), ''), 44)))";

type RangeTuple = (String, i64, i64);

/// A stored row as a range; a row edited by hand into something that is not a range is an
/// error naming it, never silently read as another range.
fn row_of((assigner, low, high): RangeTuple) -> Result<WorkerRangeRow> {
    let bad = |reason: String| WorkerError::InvalidWorkerRange {
        input: format!("worker_id_range row of assigner `{assigner}`: {low}-{high}"),
        reason,
    };
    let (Ok(low_id), Ok(high_id)) = (u64::try_from(low), u64::try_from(high)) else {
        return Err(bad("worker ids are never negative; fix the row".to_owned()).into());
    };
    let range = WorkerIdRange::new(low_id, high_id)
        .map_err(|_| bad("low is above high; fix the row".to_owned()))?;
    Ok(WorkerRangeRow { assigner, range })
}

fn to_db(value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| StoreError::InvalidInput(format!("worker id {value} does not fit a BIGINT")))
}

/// Whether `assigner` may record `range` next to `recorded`: `Ok(true)` when its row is still
/// to be inserted, `Ok(false)` when it is already there with this very range.
fn admit(assigner: &str, range: WorkerIdRange, recorded: &[WorkerRangeRow]) -> Result<bool> {
    let own = recorded.iter().find(|row| row.assigner == assigner);
    if let Some(own) = own
        && own.range != range
    {
        return Err(StoreError::WorkerRangeChanged {
            assigner: assigner.to_owned(),
            recorded: own.range,
            requested: range,
        });
    }
    // Checked even when our own row is already there: a row edited by hand may overlap.
    if let Some(other) = recorded
        .iter()
        .find(|row| row.assigner != assigner && row.range.overlaps(range))
    {
        return Err(StoreError::WorkerRangeConflict {
            assigner: assigner.to_owned(),
            range,
            other: other.assigner.clone(),
            other_range: other.range,
        });
    }
    Ok(own.is_none())
}

impl Store {
    /// Record that `assigner` hands out worker ids from `range`, refusing a range that
    /// overlaps another assigner's ([`StoreError::WorkerRangeConflict`]) or differs from the one
    /// this assigner already recorded ([`StoreError::WorkerRangeChanged`]). Registering the
    /// recorded range again is a no-op, so every start of every service registers.
    ///
    /// The read and the insert run in one transaction that serialises registrations across
    /// processes: SQLite's `BEGIN IMMEDIATE`, PostgreSQL's `LOCK TABLE ... IN EXCLUSIVE MODE`,
    /// MySQL/MariaDB's `GET_LOCK` (which fails with [`StoreError::WorkerRangeLock`] after 30 s).
    ///
    /// Cancel safety: cancelling leaves nothing recorded or a complete row; a connection
    /// cancelled inside the transaction, or holding MySQL's named lock, is closed rather than
    /// returned to the pool, which ends both (`session.rs`).
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::StoreError;
    /// use uidgen_worker::WorkerIdRange;
    /// store.register_worker_range("leased", WorkerIdRange::new(0, 511)?).await?;
    /// store.register_worker_range("leased", WorkerIdRange::new(0, 511)?).await?; // the same: fine
    /// let overlapping = store
    ///     .register_worker_range("static", WorkerIdRange::new(500, 599)?)
    ///     .await;
    /// assert!(matches!(overlapping, Err(StoreError::WorkerRangeConflict { .. })));
    /// # Ok(()) }
    /// ```
    pub fn register_worker_range<'a>(
        &'a self,
        assigner: &'a str,
        range: WorkerIdRange,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if assigner.is_empty() {
                return Err(StoreError::InvalidInput(
                    "an assigner name must not be empty".to_owned(),
                ));
            }
            check_len("assigner name", assigner, MAX_ASSIGNER_NAME_LEN)?;
            let (low, high) = (to_db(range.low())?, to_db(range.high())?);
            let dialect = self.dialect();
            with_pool!(self, pool, {
                let mut conn = Session::acquire(pool)
                    .await
                    .map_err(|e| self.err("registering a worker id range", e))?;
                if dialect == Dialect::MySql {
                    // The named lock belongs to the session: until it is released, the session is
                    // not handed back to the pool, where it would keep the lock.
                    conn.locking();
                    let granted: Option<i64> = sqlx::query_scalar(MYSQL_LOCK_RANGES)
                        .bind(MYSQL_LOCK_WAIT_SECS)
                        .fetch_one(&mut *conn)
                        .await
                        .map_err(|e| self.err("locking worker_id_range", e))?;
                    if granted != Some(1) {
                        return Err(StoreError::WorkerRangeLock {
                            url: self.redacted_url().to_owned(),
                            reason: match granted {
                                Some(_) => format!(
                                    "another registration held it for {MYSQL_LOCK_WAIT_SECS} s; \
                                     start again once it has finished"
                                ),
                                None => {
                                    "the server answered NULL to GET_LOCK (out of memory or the \
                                     thread was killed)"
                                        .to_owned()
                                }
                            },
                        });
                    }
                }
                let registered = async {
                    conn.begin(dialect)
                        .await
                        .map_err(|e| self.err("locking worker_id_range", e))?;
                    if dialect == Dialect::Postgres {
                        sqlx::query(POSTGRES_LOCK_RANGES)
                            .execute(&mut *conn)
                            .await
                            .map_err(|e| self.err("locking worker_id_range", e))?;
                    }
                    let rows: Vec<RangeTuple> = sqlx::query_as(SELECT_RANGES.get(dialect))
                        .fetch_all(&mut *conn)
                        .await
                        .map_err(|e| self.err("reading worker_id_range", e))?;
                    let recorded = rows.into_iter().map(row_of).collect::<Result<Vec<_>>>()?;
                    if admit(assigner, range, &recorded)? {
                        sqlx::query(INSERT_RANGE.get(dialect))
                            .bind(assigner)
                            .bind(low)
                            .bind(high)
                            .execute(&mut *conn)
                            .await
                            .map_err(|e| self.err("inserting a worker_id_range row", e))?;
                        tracing::info!(assigner, %range, url = %self.redacted_url(),
                            "registered a worker id range");
                    }
                    conn.commit()
                        .await
                        .map_err(|e| self.err("registering a worker id range", e))
                }
                .await;
                if dialect == Dialect::MySql {
                    // Best effort: closing the connection (on drop) ends the lock anyway; releasing
                    // it now lets a waiting registration go on at once.
                    if sqlx::query(MYSQL_UNLOCK_RANGES)
                        .execute(&mut *conn)
                        .await
                        .is_ok()
                    {
                        conn.unlocked();
                    }
                }
                registered
            })
        })
    }

    /// Every recorded worker id range, lowest first.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// for row in store.worker_ranges().await? {
    ///     println!("{}: {}", row.assigner, row.range);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn worker_ranges(&self) -> StoreFuture<'_, Vec<WorkerRangeRow>> {
        Box::pin(async move {
            let rows: Vec<RangeTuple> = run_sql!(
                self,
                fetch_all,
                query_as(SELECT_RANGES),
                [],
                "reading worker_id_range"
            );
            rows.into_iter().map(row_of).collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: u64, high: u64) -> WorkerIdRange {
        WorkerIdRange::new(low, high).expect("low <= high")
    }

    fn row(assigner: &str, low: u64, high: u64) -> WorkerRangeRow {
        WorkerRangeRow {
            assigner: assigner.to_owned(),
            range: range(low, high),
        }
    }

    #[test]
    fn admit_inserts_a_new_range_accepts_the_same_and_refuses_changes_and_overlaps() {
        let recorded = [row("disposable", 1, 99), row("leased", 100, 199)];
        assert!(admit("static", range(200, 299), &recorded).is_ok_and(|insert| insert));
        assert!(admit("leased", range(100, 199), &recorded).is_ok_and(|insert| !insert));
        assert!(matches!(
            admit("leased", range(100, 150), &recorded),
            Err(StoreError::WorkerRangeChanged { .. })
        ));
        let error = admit("static", range(150, 250), &recorded).err();
        assert!(
            matches!(
                &error,
                Some(StoreError::WorkerRangeConflict { other, .. }) if other == "leased"
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_hand_edited_row_that_is_no_range_is_an_error_naming_it() {
        let error = row_of(("leased".to_owned(), 9, 3)).unwrap_err().to_string();
        assert!(error.contains("assigner `leased`: 9-3"), "{error}");
        assert!(row_of(("static".to_owned(), -1, 3)).is_err());
    }
}
