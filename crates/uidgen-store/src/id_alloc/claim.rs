//! Claiming a segment of one `id_alloc` shard, in the row's meaning of `max_id`: the original
//! service's (the last index handed out) or, for a row listed in `id_alloc_exclusive`, an older
//! uidgen's (the next index). The module doc of `id_alloc.rs` says why both are kept.

use crate::error::{StoreError, StoreFuture};
use crate::session::Session;
use crate::store::{Sql, Store, run_sql, with_pool, with_pool_returning};

use super::index_ceiling;

/// A claimed segment of one shard: the caller owns the indexes `[start, end)` and may hand out
/// those in [`range`](Self::range), which stops at the shard's ceiling. For a row kept the
/// original's way, `start` is `max_id + 1` before the claim and `end - 1` is `max_id` after it.
///
/// ```
/// let segment = uidgen_store::IdSegment { start: 1001, end: 2001, ceiling: 1500 };
/// assert_eq!(segment.range(), 1001..1501);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdSegment {
    /// The first index of the segment.
    pub start: i64,
    /// One past the last index.
    pub end: i64,
    /// The largest index the shard may hand out: the caller's ceiling or the last index whose
    /// ID stays at or below `max_limit_id` ([`index_ceiling`]), whichever is lower. Indexes
    /// of the segment above it are skipped, never wrapped.
    pub ceiling: i64,
}

impl IdSegment {
    /// The indexes to hand out: the segment, cut at the ceiling.
    pub fn range(&self) -> std::ops::Range<i64> {
        self.start..self.end.min(self.ceiling.saturating_add(1))
    }
}

/// The lowest of the caller's ceiling and the index ceiling of the row's `max_limit_id`.
fn effective_ceiling(caller: i64, max_limit_id: i64, app_id: u8, shard_id: u8) -> i64 {
    caller.min(index_ceiling(max_limit_id, app_id, shard_id))
}

// The claim refuses rows whose next segment would start above the ceiling (the caller's, and
// the index ceiling of `max_limit_id`, as `index_ceiling` computes it: the guard on `low`
// keeps the division's numerator non-negative, so truncation is the floor; MySQL's `/` is a
// decimal division, hence `DIV`) or whose end would pass i64::MAX (see leaf_alloc's CLAIM).
// The next segment starts at `max_id + lead`: `lead` is 1 for a row kept the original's way
// and 0 for one listed in `id_alloc_exclusive` (read first, in the same transaction), so each
// bound is written `max_id <= bound - lead`, which cannot overflow. The size is the row's
// step, or the caller's `at_least` when larger (bound twice on MySQL, whose `?` are
// positional): a caller that needs more than one step gets it in one claim.
const CLAIM: Sql = Sql {
    sqlite: "UPDATE id_alloc
             SET max_id = max_id + (CASE WHEN step >= ?4 THEN step ELSE ?4 END),
                 update_time = CURRENT_TIMESTAMP
             WHERE app_id = ?1 AND shard_id = ?2 AND max_id <= ?3 - ?5
               AND (max_limit_id <= 0
                    OR (max_limit_id >= shard_id * 256 + app_id
                        AND max_id <= (max_limit_id - shard_id * 256 - app_id) / 16384 - ?5))
               AND max_id <= 9223372036854775807 - ?5
                             - (CASE WHEN step >= ?4 THEN step ELSE ?4 END)
             RETURNING max_id, step, max_limit_id",
    mysql: "UPDATE id_alloc
            SET max_id = max_id + (CASE WHEN step >= ? THEN step ELSE ? END),
                update_time = CURRENT_TIMESTAMP
            WHERE app_id = ? AND shard_id = ? AND max_id <= ? - ?
              AND (max_limit_id <= 0
                   OR (max_limit_id >= shard_id * 256 + app_id
                       AND max_id <= (max_limit_id - shard_id * 256 - app_id) DIV 16384 - ?))
              AND max_id <= 9223372036854775807 - ? - (CASE WHEN step >= ? THEN step ELSE ? END)",
    postgres: "UPDATE id_alloc
               SET max_id = max_id + (CASE WHEN step >= $4 THEN step ELSE $4 END),
                   update_time = CURRENT_TIMESTAMP
               WHERE app_id = $1 AND shard_id = $2 AND max_id <= $3 - $5
                 AND (max_limit_id <= 0
                      OR (max_limit_id >= shard_id * 256 + app_id
                          AND max_id <= (max_limit_id - shard_id * 256 - app_id) / 16384 - $5))
                 AND max_id <= 9223372036854775807 - $5
                               - (CASE WHEN step >= $4 THEN step ELSE $4 END)
               RETURNING max_id, CAST(step AS BIGINT) AS step, max_limit_id",
};

/// Whether the row is kept as an older uidgen wrote it (migration 0010), read with a lock on
/// MySQL and PostgreSQL (SQLite's `BEGIN IMMEDIATE` already serialises writers), so that
/// `uidgen takeover sharded` emptying the list waits for claims in flight that read it.
const READ_EXCLUSIVE: Sql = Sql {
    sqlite: "SELECT app_id FROM id_alloc_exclusive WHERE app_id = ?1 AND shard_id = ?2",
    mysql: "SELECT app_id FROM id_alloc_exclusive WHERE app_id = ? AND shard_id = ? FOR UPDATE",
    postgres: "SELECT app_id FROM id_alloc_exclusive
               WHERE app_id = $1 AND shard_id = $2 FOR UPDATE",
};

/// Every row kept as an older uidgen wrote it.
const LIST_EXCLUSIVE: Sql =
    Sql::same("SELECT app_id, shard_id FROM id_alloc_exclusive ORDER BY app_id, shard_id");

/// Keep every row the original's way from now on (`uidgen takeover sharded`).
const CLEAR_EXCLUSIVE: Sql = Sql::same("DELETE FROM id_alloc_exclusive");

/// The row as it stands: read back after a MySQL claim (no `RETURNING` there; the UPDATE's row
/// lock keeps it ours), and after a claim that updated nothing, to tell a missing row from an
/// exhausted one.
const READ_CLAIM_ROW: Sql = Sql {
    sqlite: "SELECT max_id, step, max_limit_id FROM id_alloc WHERE app_id = ?1 AND shard_id = ?2",
    mysql: "SELECT max_id, CAST(step AS SIGNED) AS step, max_limit_id FROM id_alloc
            WHERE app_id = ? AND shard_id = ?",
    postgres: "SELECT max_id, CAST(step AS BIGINT) AS step, max_limit_id FROM id_alloc
               WHERE app_id = $1 AND shard_id = $2",
};

impl Store {
    /// Claim the next segment of one shard: `max_id += step` and the row read back, in one
    /// transaction. The caller owns `[start, end)` and hands out [`IdSegment::range`], which
    /// stops at the lowest of `ceiling` (the largest index the caller can represent) and the
    /// row's `max_limit_id`.
    ///
    /// A shard whose next segment would start above that ceiling (or pass `i64::MAX`) is
    /// [`StoreError::AppShardExhausted`] and is left unchanged; a missing row is
    /// [`StoreError::UnknownAppShard`].
    ///
    /// Cancel safety: dropping the future before it finishes ends the transaction (its
    /// connection is closed, not pooled), or, if the commit already happened, skips the
    /// segment; either way no index is handed out twice.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::AppSpec;
    /// store.create_or_update_app(&AppSpec::new(7, "orders")).await?;
    /// let first = store.claim_id_segment(7, 0, (1 << 49) - 1).await?;
    /// let second = store.claim_id_segment(7, 0, (1 << 49) - 1).await?;
    /// assert_eq!((first.range(), second.range()), (1..1001, 1001..2001));
    /// # Ok(()) }
    /// ```
    pub fn claim_id_segment(
        &self,
        app_id: u8,
        shard_id: u8,
        ceiling: i64,
    ) -> StoreFuture<'_, IdSegment> {
        Box::pin(async move {
            self.claim_id_segment_at_least(app_id, shard_id, ceiling, 1)
                .await
        })
    }

    /// [`claim_id_segment`](Self::claim_id_segment), but a segment of at least `at_least`
    /// indexes: the row's step, or `at_least` when that is larger (the stored step is
    /// unchanged). A caller that needs a batch larger than the step gets it in one claim, not
    /// one claim per step (with a step of 1, a batch of 100,000 took 100,000 round trips).
    /// The claim is the same single `max_id` increment, so it never overlaps another.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::AppSpec;
    /// store.create_or_update_app(&AppSpec { step: 10, ..AppSpec::new(7, "orders") }).await?;
    /// let big = store.claim_id_segment_at_least(7, 0, (1 << 49) - 1, 5000).await?;
    /// let next = store.claim_id_segment(7, 0, (1 << 49) - 1).await?;
    /// assert_eq!((big.range(), next.range()), (1..5001, 5001..5011));
    /// # Ok(()) }
    /// ```
    pub fn claim_id_segment_at_least(
        &self,
        app_id: u8,
        shard_id: u8,
        ceiling: i64,
        at_least: i64,
    ) -> StoreFuture<'_, IdSegment> {
        Box::pin(async move {
            if at_least < 1 {
                return Err(StoreError::InvalidInput(format!(
                    "a claim of at least {at_least} indexes: ask for 1 or more"
                )));
            }
            let dialect = self.dialect();
            let action = "claiming an id_alloc segment";
            let (app, shard) = (i32::from(app_id), i32::from(shard_id));
            // One body for the transactions of every dialect's pool, which differ in type.
            macro_rules! read_shard_row {
                ($tx:ident, $kind:ident($sql:ident)) => {
                    sqlx::$kind($sql.get(dialect))
                        .bind(app)
                        .bind(shard)
                        .fetch_optional(&mut *$tx)
                        .await
                        .map_err(|e| self.err(action, e))?
                };
            }
            // The claim's transaction, and `lead`: 1 for a row kept the original's way.
            macro_rules! begin_claim {
                ($pool:ident) => {{
                    let mut tx = Session::begin_write($pool, dialect)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    let exclusive: Option<i32> = read_shard_row!(tx, query_scalar(READ_EXCLUSIVE));
                    (tx, i64::from(exclusive.is_none()))
                }};
            }
            // `Ok((lead, row))`: the row after the claim; `Err((lead, row))`: nothing was updated
            // (rolled back), `row` is the row as it stands, if any. `lead` is where the segment
            // starts after the old `max_id` (see `CLAIM`). A failed statement or a cancelled claim
            // drops the session, which closes the connection and so ends the transaction
            // (`session.rs`).
            type Row = (i64, i64, i64);
            type Claimed = std::result::Result<(i64, Row), (i64, Option<Row>)>;
            let claimed: Claimed = with_pool_returning!(self, pool,
                mysql => {
                    let (mut tx, lead) = begin_claim!(pool);
                    let updated = sqlx::query(CLAIM.mysql)
                        .bind(at_least)
                        .bind(at_least)
                        .bind(app)
                        .bind(shard)
                        .bind(ceiling)
                        .bind(lead)
                        .bind(lead)
                        .bind(lead)
                        .bind(at_least)
                        .bind(at_least)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    let row: Option<Row> = read_shard_row!(tx, query_as(READ_CLAIM_ROW));
                    match row {
                        Some(row) if updated.rows_affected() > 0 => {
                            tx.commit().await.map_err(|e| self.err(action, e))?;
                            Ok((lead, row))
                        }
                        row => {
                            tx.rollback().await.map_err(|e| self.err(action, e))?;
                            Err((lead, row))
                        }
                    }
                },
                returning => {
                    let (mut tx, lead) = begin_claim!(pool);
                    let row: Option<Row> = sqlx::query_as(CLAIM.get(dialect))
                        .bind(app)
                        .bind(shard)
                        .bind(ceiling)
                        .bind(at_least)
                        .bind(lead)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    match row {
                        Some(row) => {
                            tx.commit().await.map_err(|e| self.err(action, e))?;
                            Ok((lead, row))
                        }
                        None => {
                            let row = read_shard_row!(tx, query_as(READ_CLAIM_ROW));
                            tx.rollback().await.map_err(|e| self.err(action, e))?;
                            Err((lead, row))
                        }
                    }
                }
            );
            match claimed {
                // The size the statement added: the row's step (not changed by a claim, and read
                // in the claim's own transaction), or `at_least` when larger. The segment is the
                // `size` indexes after the old `max_id` (lead 1), or from it (lead 0).
                Ok((lead, (max_id, step, max_limit_id))) => Ok(IdSegment {
                    start: max_id - step.max(at_least) + lead,
                    end: max_id + lead,
                    ceiling: effective_ceiling(ceiling, max_limit_id, app_id, shard_id),
                }),
                Err((lead, Some((max_id, step, max_limit_id)))) => {
                    Err(StoreError::AppShardExhausted {
                        app_id,
                        shard_id,
                        max_id: max_id.saturating_add(lead),
                        ceiling: effective_ceiling(ceiling, max_limit_id, app_id, shard_id)
                            .min(i64::MAX.saturating_sub(step.max(at_least))),
                    })
                }
                Err((_, None)) => Err(StoreError::UnknownAppShard { app_id, shard_id }),
            }
        })
    }

    /// The rows kept as an older uidgen wrote them (`id_alloc_exclusive`, migration 0010):
    /// `(app_id, shard_id)` pairs whose `max_id` is the next index, not the last handed out.
    pub fn exclusive_id_alloc_rows(&self) -> StoreFuture<'_, Vec<(i64, i64)>> {
        Box::pin(async move {
            let rows: Vec<(i64, i64)> = with_pool!(self, pool, {
                let rows: Vec<(i32, i32)> = sqlx::query_as(LIST_EXCLUSIVE.get(self.dialect()))
                    .fetch_all(pool)
                    .await
                    .map_err(|e| self.err("reading id_alloc_exclusive", e))?;
                rows.into_iter()
                    .map(|(a, s)| (i64::from(a), i64::from(s)))
                    .collect()
            });
            Ok(rows)
        })
    }

    /// Keep every `id_alloc` row the original service's way from now on: `max_id` the highest
    /// index handed out (`uidgen takeover sharded`, for rows the original wrote). Reading a row
    /// an older uidgen wrote this way skips one index; reading one the original wrote the other
    /// way would hand its last index out again. Waits for claims in flight that read the list.
    /// How many rows were listed.
    pub fn clear_exclusive_id_alloc_rows(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let cleared = run_sql!(
                self,
                execute,
                query(CLEAR_EXCLUSIVE),
                [],
                "emptying id_alloc_exclusive",
                then rows_affected
            );
            Ok(cleared)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{IdSegment, effective_ceiling};

    #[test]
    fn a_segment_is_cut_at_its_ceiling_never_wrapped() {
        let whole = IdSegment {
            start: 1,
            end: 1001,
            ceiling: i64::MAX,
        };
        assert_eq!(whole.range(), 1..1001);
        let cut = IdSegment {
            ceiling: 10,
            ..whole
        };
        assert_eq!(cut.range(), 1..11);
        assert_eq!(
            effective_ceiling(1 << 49, 0, 7, 3),
            1 << 49,
            "0 is no limit"
        );
        // Shard 3 of app 7: index i is the ID i << 14 | 775.
        assert_eq!(effective_ceiling(1 << 49, 5 << 14 | 775, 7, 3), 5);
        assert_eq!(effective_ceiling(1 << 49, (5 << 14 | 775) - 1, 7, 3), 4);
        assert_eq!(effective_ceiling(2, 5 << 14 | 775, 7, 3), 2);
        assert_eq!(effective_ceiling(1 << 49, 774, 7, 3), -1);
    }
}
