//! The `leaf_alloc_returned` table (migration 0012, issue 33 item 2): the untouched tails of
//! segments a server handed back at a clean stop, served again before any new segment.
//!
//! Invariants (what keeps a returned number unique):
//!
//! 1. Every row holds numbers its writer claimed from `leaf_alloc` (so `max_id` is past them
//!    and no claim, by uidgen or by Leaf's own servers, gets them again) and never handed out:
//!    the writer computes the tail only after it has stopped serving from the segment.
//! 2. A row is written once ([`Store::return_ranges`] is one transaction, never retried: an
//!    ambiguous commit then at worst loses the rows, never writes them twice).
//! 3. A row is handed to one claimer: [`Store::claim_returned_range`] deletes it in the
//!    statement (PostgreSQL, SQLite) or the transaction (MySQL/MariaDB) that reads it, and uses
//!    it only when that delete removed it. The row lock (`FOR UPDATE SKIP LOCKED`) only keeps a
//!    second claimer from waiting on the first; uniqueness comes from the delete itself.
//!
//! 4. A row belongs to the life of its tag it was claimed in: written only under that life's
//!    epoch, dropped when the tag is deleted or created again (`epoch` module), so a tag
//!    re-created at `max_id` 1 never gets back numbers its own new segments issue.
//!
//! Leaf's own servers know nothing of this table: running beside uidgen during a switch, they
//! keep claiming from `leaf_alloc` above every number here, so uniqueness holds; what uidgen
//! hands back is then served again by uidgen servers only.

use crate::epoch::{LOCK_TAG_ROW, READ_EPOCH, in_tx};
use crate::error::{Result, StoreError, StoreFuture};
use crate::leaf_alloc::validate_tag;
use crate::ordered_fence::IS_ORDERED;
use crate::residue::Residue;
use crate::session::Session;
use crate::store::{Sql, Store, run_sql, with_pool, with_pool_returning};

/// A range of a tag's numbers handed back: `[start, end)`, of which only the numbers of
/// `residue` are the tag's (those of the `leaf_alloc` row it was claimed from).
///
/// ```
/// use uidgen_store::{ReturnedRange, Residue};
/// let tail = ReturnedRange {
///     biz_tag: "order".into(), start: 1500, end: 2001, residue: Residue::SINGLE, epoch: 1,
/// };
/// assert_eq!(tail.numbers(), 501);
/// let odd = ReturnedRange { residue: Residue::new(2, 1).unwrap(), ..tail };
/// assert_eq!(odd.numbers(), 250); // 1501, 1503, ..., 1999
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReturnedRange {
    /// The biz tag.
    pub biz_tag: String,
    /// The first number of the range.
    pub start: i64,
    /// The exclusive end (the `max_id` of the segment it was the tail of).
    pub end: i64,
    /// Which numbers of the range are the tag's.
    pub residue: Residue,
    /// The tag's life the numbers were claimed in ([`SegmentClaim::epoch`]): a range is
    /// written back only while the tag still has this epoch, and a claimed one carries the
    /// epoch of its claim.
    ///
    /// [`SegmentClaim::epoch`]: crate::SegmentClaim::epoch
    pub epoch: i64,
}

impl ReturnedRange {
    /// How many of the tag's numbers the range holds.
    pub fn numbers(&self) -> i64 {
        self.residue.count_in(self.start..self.end)
    }
}

const INSERT_RETURNED: Sql = Sql {
    sqlite: "INSERT INTO leaf_alloc_returned (biz_tag, start_id, end_id, delta, remainder)
             VALUES (?1, ?2, ?3, ?4, ?5)",
    mysql: "INSERT INTO leaf_alloc_returned (biz_tag, start_id, end_id, delta, remainder)
            VALUES (?, ?, ?, ?, ?)",
    postgres: "INSERT INTO leaf_alloc_returned (biz_tag, start_id, end_id, delta, remainder)
               VALUES ($1, $2, $3, $4, $5)",
};

/// The lowest returned range of a tag, deleted by the statement that finds it. PostgreSQL:
/// `SKIP LOCKED` lets a second claimer take the next row instead of waiting on the first;
/// SQLite: the write transaction (`BEGIN IMMEDIATE`) serialises claimers. MySQL cannot delete
/// from a table its own subquery reads: there this is the first of two statements, locking the
/// row (`SKIP LOCKED` as on PostgreSQL) for `DELETE_BY_ID` in the same transaction.
const CLAIM_RETURNED: Sql = Sql {
    sqlite: "DELETE FROM leaf_alloc_returned WHERE id = (
                 SELECT id FROM leaf_alloc_returned WHERE biz_tag = ?1
                 ORDER BY start_id, id LIMIT 1)
             RETURNING start_id, end_id, delta, remainder",
    mysql: "SELECT id, start_id, end_id, CAST(delta AS SIGNED) AS delta,
                   CAST(remainder AS SIGNED) AS remainder
            FROM leaf_alloc_returned WHERE biz_tag = ?
            ORDER BY start_id, id LIMIT 1 FOR UPDATE SKIP LOCKED",
    postgres: "DELETE FROM leaf_alloc_returned WHERE id = (
                   SELECT id FROM leaf_alloc_returned WHERE biz_tag = $1
                   ORDER BY start_id, id LIMIT 1 FOR UPDATE SKIP LOCKED)
               RETURNING start_id, end_id, CAST(delta AS BIGINT) AS delta,
                   CAST(remainder AS BIGINT) AS remainder",
};

/// MySQL/MariaDB: delete the range `CLAIM_RETURNED` locked.
const DELETE_BY_ID: &str = "DELETE FROM leaf_alloc_returned WHERE id = ?";

const LIST_RETURNED: Sql = Sql {
    sqlite: "SELECT biz_tag, start_id, end_id, delta, remainder FROM leaf_alloc_returned
             WHERE biz_tag = ?1 ORDER BY start_id, id",
    mysql: "SELECT biz_tag, start_id, end_id, CAST(delta AS SIGNED), CAST(remainder AS SIGNED)
            FROM leaf_alloc_returned WHERE biz_tag = ? ORDER BY start_id, id",
    postgres: "SELECT biz_tag, start_id, end_id, CAST(delta AS BIGINT), CAST(remainder AS BIGINT)
               FROM leaf_alloc_returned WHERE biz_tag = $1 ORDER BY start_id, id",
};

/// A returned range as selected: start, end, delta, remainder.
type RangeRow = (i64, i64, i64, i64);

impl Store {
    /// Hand `ranges` back, in one transaction: the next segment load of each tag, by any
    /// server on this store, serves them before claiming a new segment.
    ///
    /// Call it only with numbers this process claimed from this store's `leaf_alloc` and
    /// will never hand out (the segment service calls it after it stopped serving). Empty
    /// ranges, and ranges without a number of their residue, are left out; so is every range
    /// whose tag was deleted or created again since its claim (its row is gone, its `epoch`
    /// changed, or its `max_id` is no longer past the range: checked with the tag's row
    /// locked, `epoch` module). Returns the ranges written.
    ///
    /// Not retried on failure: a commit whose answer was lost may have written the rows, and
    /// writing them again would hand their numbers out twice. A failed or cancelled call loses
    /// the ranges (their numbers are skipped, as after a crash).
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::{ReturnedRange, Residue};
    /// store.upsert_tag("order", 1000, None).await?;
    /// let claim = store.claim_segment("order").await?; // [1, 1001)
    /// let tail = ReturnedRange {
    ///     biz_tag: "order".into(), start: 500, end: claim.max_id, residue: Residue::SINGLE,
    ///     epoch: claim.epoch,
    /// };
    /// store.return_ranges(std::slice::from_ref(&tail)).await?;
    /// assert_eq!(store.claim_returned_range("order").await?, Some(tail));
    /// assert_eq!(store.claim_returned_range("order").await?, None); // one claimer only
    /// # Ok(()) }
    /// ```
    pub fn return_ranges<'a>(
        &'a self,
        ranges: &'a [ReturnedRange],
    ) -> StoreFuture<'a, Vec<ReturnedRange>> {
        Box::pin(async move {
            let ranges: Vec<&ReturnedRange> = ranges.iter().filter(|r| r.numbers() > 0).collect();
            for range in &ranges {
                validate_tag(&range.biz_tag)?;
            }
            if ranges.is_empty() {
                return Ok(Vec::new());
            }
            let dialect = self.dialect();
            let action = "handing back segment tails";
            let mut written = Vec::new();
            with_pool!(self, pool, {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let mut tags: Vec<&str> = ranges.iter().map(|r| r.biz_tag.as_str()).collect();
                // One order of row locks for every writer of several tags: no deadlock between two.
                tags.sort_unstable();
                tags.dedup();
                let mut current = Vec::with_capacity(tags.len());
                for tag in tags {
                    let max_id: Option<i64> = in_tx!(
                        self,
                        tx,
                        query_scalar(LOCK_TAG_ROW),
                        tag,
                        fetch_optional,
                        action
                    );
                    let epoch: i64 =
                        in_tx!(self, tx, query_scalar(READ_EPOCH), tag, fetch_one, action);
                    // An ordered tag's numbers come from its leader's fresh segments only.
                    let ordered: i64 =
                        in_tx!(self, tx, query_scalar(IS_ORDERED), tag, fetch_one, action);
                    current.push((tag, max_id.filter(|_| ordered == 0), epoch));
                }
                let still_the_tags = |range: &&&ReturnedRange| {
                    current.iter().any(|&(tag, max_id, epoch)| {
                        tag == range.biz_tag
                            && epoch == range.epoch
                            && max_id.is_some_and(|max_id| range.end <= max_id)
                    })
                };
                for range in ranges.iter().filter(still_the_tags) {
                    written.push((*range).clone());
                    sqlx::query(INSERT_RETURNED.get(dialect))
                        .bind(&range.biz_tag)
                        .bind(range.start)
                        .bind(range.end)
                        .bind(range.residue.delta)
                        .bind(range.residue.remainder)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                }
                tx.commit().await.map_err(|e| self.err(action, e))?;
            });
            Ok(written)
        })
    }

    /// Take the lowest range handed back for `biz_tag`, removing it in the same transaction so
    /// that no other caller, on any server, gets it; `None` when there is none (claim a new
    /// segment then). Concurrent claimers on PostgreSQL and MySQL/MariaDB skip each other's
    /// locked rows rather than wait; on SQLite they queue on the write lock.
    ///
    /// Cancel safety: dropping the future before the delete commits changes nothing; after it,
    /// the range is lost (skipped, never repeated), as a committed segment claim would be.
    pub fn claim_returned_range<'a>(
        &'a self,
        biz_tag: &'a str,
    ) -> StoreFuture<'a, Option<ReturnedRange>> {
        Box::pin(async move {
            let dialect = self.dialect();
            let action = "claiming a returned range";
            let row: Option<(RangeRow, i64)> = with_pool_returning!(self, pool,
                mysql => {
                    let mut tx = Session::begin_write(pool, dialect)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    let locked: Option<(i64, i64, i64, i64, i64)> =
                        sqlx::query_as(CLAIM_RETURNED.mysql)
                            .bind(biz_tag)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(|e| self.err(action, e))?;
                    match locked {
                        Some((id, start, end, delta, remainder)) => {
                            let deleted = sqlx::query(DELETE_BY_ID)
                                .bind(id)
                                .execute(&mut *tx)
                                .await
                                .map_err(|e| self.err(action, e))?
                                .rows_affected();
                            // The lock makes the delete ours; checked all the same, as the
                            // uniqueness of the range rests on it.
                            if deleted == 1 {
                                let epoch: i64 = in_tx!(self, tx, query_scalar(READ_EPOCH), biz_tag,
                                    fetch_one, action);
                                tx.commit().await.map_err(|e| self.err(action, e))?;
                                Some(((start, end, delta, remainder), epoch))
                            } else {
                                tx.rollback().await.map_err(|e| self.err(action, e))?;
                                None
                            }
                        }
                        None => {
                            tx.rollback().await.map_err(|e| self.err(action, e))?;
                            None
                        }
                    }
                },
                returning => {
                    let mut tx = Session::begin_write(pool, dialect)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    let row: Option<RangeRow> = sqlx::query_as(CLAIM_RETURNED.get(dialect))
                        .bind(biz_tag)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    let epoch: i64 =
                        in_tx!(self, tx, query_scalar(READ_EPOCH), biz_tag, fetch_one, action);
                    tx.commit().await.map_err(|e| self.err(action, e))?;
                    row.map(|row| (row, epoch))
                }
            );
            row.map(|(row, epoch)| to_range(biz_tag, row, epoch))
                .transpose()
        })
    }

    /// Every range handed back for `biz_tag` and not yet claimed, lowest first (monitoring
    /// and tests).
    pub fn returned_ranges<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, Vec<ReturnedRange>> {
        Box::pin(async move {
            let epoch: i64 = run_sql!(
                self,
                fetch_one,
                query_scalar(READ_EPOCH),
                [biz_tag],
                "reading a biz tag's epoch"
            );
            let rows: Vec<(String, i64, i64, i64, i64)> = with_pool!(
                self,
                pool,
                sqlx::query_as(LIST_RETURNED.get(self.dialect()))
                    .bind(biz_tag)
                    .fetch_all(pool)
                    .await
                    .map_err(|e| self.err("listing returned ranges", e))?
            );
            rows.into_iter()
                .map(|(tag, start, end, delta, remainder)| {
                    to_range(&tag, (start, end, delta, remainder), epoch)
                })
                .collect()
        })
    }
}

/// A row as a range, refusing a residue no writer stores (edited by hand).
fn to_range(
    biz_tag: &str,
    (start, end, delta, remainder): RangeRow,
    epoch: i64,
) -> Result<ReturnedRange> {
    let residue = Residue::new(delta, remainder).map_err(|_| StoreError::InvalidResidue {
        tag: biz_tag.to_owned(),
        delta,
        remainder,
    })?;
    Ok(ReturnedRange {
        biz_tag: biz_tag.to_owned(),
        start,
        end,
        residue,
        epoch,
    })
}
