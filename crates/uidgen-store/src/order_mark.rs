//! The `id_order_mark` table (migration 0014, issue 33 item 1, "order across restarts"): the
//! store as the keeper of order marks ([`OrderMarks`](uidgen_worker::OrderMarks)) that
//! uidgen-worker's [`OrderFence`](uidgen_worker::OrderFence) writes ahead of what its
//! generator stamps.
//!
//! The mark only rises: every write is `SET issued_until_ms = x WHERE issued_until_ms < x`,
//! so concurrent servers of one space never lower each other's marks. The fence's other
//! invariants are written in uidgen-worker's `order_fence.rs`.

use uidgen_worker::MarkRaise;

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql};
use crate::url::Dialect;
use crate::worker_lease::check_space;

const READ_MARK: Sql = Sql {
    sqlite: "SELECT issued_until_ms FROM id_order_mark WHERE space = ?1",
    mysql: "SELECT issued_until_ms FROM id_order_mark WHERE space = ?",
    postgres: "SELECT issued_until_ms FROM id_order_mark WHERE space = $1",
};

/// Raise-only: a lower value (another server is further ahead) changes nothing.
const RAISE_MARK: Sql = Sql {
    sqlite: "UPDATE id_order_mark SET issued_until_ms = ?1, holder = ?2, updated_ms = ?3
             WHERE space = ?4 AND issued_until_ms < ?1",
    mysql: "UPDATE id_order_mark SET issued_until_ms = ?, holder = ?, updated_ms = ?
            WHERE space = ? AND issued_until_ms < ?",
    postgres: "UPDATE id_order_mark SET issued_until_ms = $1, holder = $2, updated_ms = $3
               WHERE space = $4 AND issued_until_ms < $1",
};

/// The space's row, when it has none yet; a row another server inserted first wins (and the
/// raise that follows lifts it if it is lower).
const INSERT_MARK: Sql = Sql {
    sqlite: "INSERT OR IGNORE INTO id_order_mark (space, issued_until_ms, holder, updated_ms)
             VALUES (?1, ?2, ?3, ?4)",
    mysql: "INSERT IGNORE INTO id_order_mark (space, issued_until_ms, holder, updated_ms)
            VALUES (?, ?, ?, ?)",
    postgres: "INSERT INTO id_order_mark (space, issued_until_ms, holder, updated_ms)
               VALUES ($1, $2, $3, $4) ON CONFLICT (space) DO NOTHING",
};

/// What a failed write was doing, for its error.
const RAISING: &str = "raising the ID space's order mark";

fn to_db(value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| StoreError::InvalidInput(format!("order mark {value} does not fit a BIGINT")))
}

impl Store {
    /// The space's order mark (ms since the Unix epoch): no ID of `space` was stamped with a
    /// time unit ending after it. `None` while no server of the space has written one.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_worker::MarkRaise;
    /// store.raise_order_mark(MarkRaise::new("default", "worker 7", 1_800_000_000_000, 0)).await?;
    /// // A lower raise: the mark is kept.
    /// store.raise_order_mark(MarkRaise::new("default", "worker 8", 1_700_000_000_000, 0)).await?;
    /// assert_eq!(store.order_mark("default").await?, Some(1_800_000_000_000));
    /// # Ok(()) }
    /// ```
    pub fn order_mark<'a>(&'a self, space: &'a str) -> StoreFuture<'a, Option<u64>> {
        Box::pin(async move {
            check_space(space)?;
            let mark: Option<i64> = run_sql!(
                self,
                fetch_optional,
                query_scalar(READ_MARK),
                [space],
                "reading the ID space's order mark"
            );
            // Negative values are never written; read one as the distant past.
            Ok(mark.map(|ms| u64::try_from(ms).unwrap_or(0)))
        })
    }

    /// Raise the space's order mark to `raise.until_ms` unless it is higher already (the mark
    /// never falls), recording `raise.holder` and `raise.now_ms` as who raised it and when. On
    /// `Ok`, the mark is at least `raise.until_ms`, which is returned.
    pub fn raise_order_mark<'a>(&'a self, raise: MarkRaise<'a>) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let MarkRaise {
                space,
                holder,
                until_ms,
                now_ms,
            } = raise;
            check_space(space)?;
            let (until, now) = (to_db(until_ms)?, to_db(now_ms)?);
            if self.raise_only(space, holder, until, now).await? == 0 {
                // No row yet, or one at least as high: the insert settles the first case, and
                // changes nothing in the second.
                run_sql!(
                    self,
                    execute,
                    query(INSERT_MARK),
                    [space, until, holder, now],
                    RAISING,
                    then rows_affected
                );
                // A row another server inserted at once, lower than ours, is lifted here.
                self.raise_only(space, holder, until, now).await?;
            }
            // The raise proves the mark reached `until_ms`; what others put above it is not
            // read back (the fence needs no more).
            Ok(until_ms)
        })
    }

    /// `RAISE_MARK`: how many rows it raised (0: no row, or one at least as high).
    async fn raise_only(&self, space: &str, holder: &str, until: i64, now: i64) -> Result<u64> {
        Ok(match self.dialect() {
            // MySQL binds each `?` once: the mark's value appears twice.
            Dialect::MySql => run_sql!(
                self,
                execute,
                query(RAISE_MARK),
                [until, holder, now, space, until],
                RAISING,
                then rows_affected
            ),
            _ => run_sql!(
                self,
                execute,
                query(RAISE_MARK),
                [until, holder, now, space],
                RAISING,
                then rows_affected
            ),
        })
    }
}

// The store keeps the marks of every server sharing it (one fleet on one database).
uidgen_worker::order_marks_from!(Store, "the store", order_mark, raise_order_mark);
