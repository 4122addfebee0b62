//! The `leaf_alloc` table (Meituan Leaf's segment mode): one row per biz tag; a claim moves
//! `max_id` forward by a step and hands the caller the range it skipped.
//!
//! Every value reaches the database as a bind parameter, never spliced into SQL text, so a tag
//! such as `x'; DROP TABLE leaf_alloc; --` is just a tag.

use crate::epoch::{READ_EPOCH, begin_new_life, in_tx, write_tx_retrying};
use crate::error::{Result, StoreError, StoreFuture};
use crate::ordered_fence::{DELETE_ORDERED, check_ordered_claim};
use crate::residue::{MAX_DELTA, Residue};
use crate::session::Session;
use crate::store::{Sql, Store, with_pool, with_pool_returning};
use crate::worker_node::{check_len, check_step};

/// The largest step a tag may have (Leaf keeps steps far below this; it bounds a typo).
pub const MAX_STEP: i64 = 1_000_000_000;
/// The longest description, in characters (`VARCHAR(256)`).
pub const MAX_DESCRIPTION_LEN: usize = 256;

/// A `leaf_alloc` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafAlloc {
    /// The business tag, the row's key.
    pub biz_tag: String,
    /// The next segment ends here; IDs below it have been handed out.
    pub max_id: i64,
    /// How far one claim moves `max_id`.
    pub step: i64,
    /// Free text.
    pub description: Option<String>,
    /// When the row last changed, ms since the Unix epoch.
    pub update_time_ms: Option<i64>,
    /// Which numbers of its segments this database hands out (Tinyid's `delta` and
    /// `remainder`; [`Residue::SINGLE`] for a tag served from one database).
    pub residue: Residue,
}

/// A claimed segment: the caller owns `[max_id - step, max_id)`.
///
/// ```
/// use uidgen_store::{Residue, SegmentClaim};
/// let claim = SegmentClaim {
///     max_id: 2001, step: 1000, stored_step: 1000, residue: Residue::SINGLE, epoch: 1,
/// };
/// assert_eq!(claim.range(), 1001..2001);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentClaim {
    /// `max_id` after the claim (exclusive end of the segment).
    pub max_id: i64,
    /// The step the claim used (the segment's length).
    pub step: i64,
    /// The step stored in the row, read in the claim's own statement (a dynamic step never
    /// goes below it), so callers need no second round trip to learn it.
    pub stored_step: i64,
    /// The row's `delta` and `remainder`, read by the claim itself: of [`range`](Self::range)
    /// the caller hands out only the numbers of this residue.
    pub residue: Residue,
    /// The tag's life the claim was made in (`leaf_alloc_epoch`, read in the claim's
    /// transaction): its untouched tail may be handed back only while the tag still has it.
    pub epoch: i64,
}

impl SegmentClaim {
    /// The IDs this claim owns (all of them when the residue is [`Residue::SINGLE`]).
    pub fn range(&self) -> std::ops::Range<i64> {
        self.max_id - self.step..self.max_id
    }
}

// The claims refuse to move `max_id` past i64::MAX (`max_id <= i64::MAX - step`, evaluated
// before the SET): on MySQL the addition would fail with an out-of-range error, on PostgreSQL
// with an overflow, and on SQLite it would silently turn `max_id` into a float. A row the guard
// refuses is reported as exhausted, not unknown (see `no_claim`). Steps are at least 1, so the
// subtraction itself cannot overflow.
const CLAIM: Sql = Sql {
    sqlite: "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP
             WHERE biz_tag = ?1 AND max_id <= 9223372036854775807 - step
             RETURNING max_id, step, step, delta, remainder",
    mysql: "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP
            WHERE biz_tag = ? AND max_id <= 9223372036854775807 - step",
    postgres: "UPDATE leaf_alloc SET max_id = max_id + step, update_time = CURRENT_TIMESTAMP
               WHERE biz_tag = $1 AND max_id <= 9223372036854775807 - step
               RETURNING max_id, CAST(step AS BIGINT) AS step, CAST(step AS BIGINT) AS stored_step,
                   CAST(delta AS BIGINT) AS delta, CAST(remainder AS BIGINT) AS remainder",
};

const CLAIM_WITH_STEP: Sql = Sql {
    sqlite: "UPDATE leaf_alloc SET max_id = max_id + ?2, update_time = CURRENT_TIMESTAMP
             WHERE biz_tag = ?1 AND max_id <= 9223372036854775807 - ?2
             RETURNING max_id, ?2, step, delta, remainder",
    mysql: "UPDATE leaf_alloc SET max_id = max_id + ?, update_time = CURRENT_TIMESTAMP
            WHERE biz_tag = ? AND max_id <= 9223372036854775807 - ?",
    postgres: "UPDATE leaf_alloc SET max_id = max_id + $2, update_time = CURRENT_TIMESTAMP
               WHERE biz_tag = $1 AND max_id <= 9223372036854775807 - $2
               RETURNING max_id, CAST($2 AS BIGINT) AS step, CAST(step AS BIGINT) AS stored_step,
                   CAST(delta AS BIGINT) AS delta, CAST(remainder AS BIGINT) AS remainder",
};

/// The row as it stands: read back after a MySQL claim (no `RETURNING` on UPDATE there; the
/// UPDATE's row lock keeps it ours), and after a claim that updated nothing, to tell an unknown
/// tag from an exhausted one.
const READ_CLAIM_ROW: Sql = Sql {
    sqlite: "SELECT max_id, step, delta, remainder FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "SELECT max_id, CAST(step AS SIGNED) AS step, CAST(delta AS SIGNED) AS delta,
                   CAST(remainder AS SIGNED) AS remainder
            FROM leaf_alloc WHERE biz_tag = ?",
    postgres: "SELECT max_id, CAST(step AS BIGINT) AS step, CAST(delta AS BIGINT) AS delta,
                      CAST(remainder AS BIGINT) AS remainder
               FROM leaf_alloc WHERE biz_tag = $1",
};

const LIST_TAGS: Sql = Sql::same("SELECT biz_tag FROM leaf_alloc ORDER BY biz_tag");

const GET_TAG: Sql = Sql {
    sqlite: "SELECT biz_tag, max_id, step, description,
                    CAST(strftime('%s', update_time) AS INTEGER) * 1000 AS update_time_ms,
                    delta, remainder
             FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "SELECT biz_tag, max_id, CAST(step AS SIGNED) AS step, description,
                   CAST(UNIX_TIMESTAMP(update_time) * 1000 AS SIGNED) AS update_time_ms,
                   CAST(delta AS SIGNED) AS delta, CAST(remainder AS SIGNED) AS remainder
            FROM leaf_alloc WHERE biz_tag = ?",
    postgres: "SELECT biz_tag, max_id, CAST(step AS BIGINT) AS step, description,
                      CAST(EXTRACT(EPOCH FROM update_time) * 1000 AS BIGINT) AS update_time_ms,
                      CAST(delta AS BIGINT) AS delta, CAST(remainder AS BIGINT) AS remainder
               FROM leaf_alloc WHERE biz_tag = $1",
};

/// Create with `max_id` 1 (Leaf's default) and the given residue, or change step and, when
/// given, description. An existing row keeps its residue: changing it would let this database
/// hand out numbers another one of its group already did.
const UPSERT_TAG: Sql = Sql {
    sqlite: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                     remainder)
             VALUES (?1, 1, ?2, ?3, CURRENT_TIMESTAMP, ?4, ?5)
             ON CONFLICT (biz_tag) DO UPDATE SET step = excluded.step,
                 description = COALESCE(excluded.description, leaf_alloc.description),
                 update_time = CURRENT_TIMESTAMP",
    mysql: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                    remainder)
            VALUES (?, 1, ?, ?, CURRENT_TIMESTAMP, ?, ?)
            ON DUPLICATE KEY UPDATE step = VALUES(step),
                description = COALESCE(VALUES(description), description),
                update_time = CURRENT_TIMESTAMP",
    postgres: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                       remainder)
               VALUES ($1, 1, $2, $3, CURRENT_TIMESTAMP, $4, $5)
               ON CONFLICT (biz_tag) DO UPDATE SET step = EXCLUDED.step,
                   description = COALESCE(EXCLUDED.description, leaf_alloc.description),
                   update_time = CURRENT_TIMESTAMP",
};

/// A tag's `max_id` and residue, locked until the takeover that moves Tinyid's biz type onto
/// it commits (`peer_tables/tinyid.rs`).
pub(crate) const READ_FOR_ADOPTION: Sql = Sql {
    sqlite: "SELECT max_id, delta, remainder FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "SELECT max_id, CAST(delta AS SIGNED), CAST(remainder AS SIGNED)
            FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE",
    postgres: "SELECT max_id, CAST(delta AS BIGINT), CAST(remainder AS BIGINT)
               FROM leaf_alloc WHERE biz_tag = $1 FOR UPDATE",
};

/// Raise a tag's `max_id` to where a peer stopped (never lower it).
pub(crate) const RAISE_FOR_ADOPTION: Sql = Sql {
    sqlite: "UPDATE leaf_alloc SET max_id = ?1, update_time = CURRENT_TIMESTAMP
             WHERE biz_tag = ?2 AND max_id < ?1",
    mysql: "UPDATE leaf_alloc SET max_id = GREATEST(max_id, ?), update_time = CURRENT_TIMESTAMP
            WHERE biz_tag = ?",
    postgres: "UPDATE leaf_alloc SET max_id = GREATEST(max_id, $1), update_time = CURRENT_TIMESTAMP
               WHERE biz_tag = $2",
};

/// A tag that continues a peer's counter: its next segment starts at `max_id`.
pub(crate) const INSERT_ADOPTED: Sql = Sql {
    sqlite: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                     remainder)
             VALUES (?1, ?2, ?3, ?4, CURRENT_TIMESTAMP, ?5, ?6)",
    mysql: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                    remainder)
            VALUES (?, ?, ?, ?, CURRENT_TIMESTAMP, ?, ?)",
    postgres: "INSERT INTO leaf_alloc (biz_tag, max_id, step, description, update_time, delta,
                                       remainder)
               VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP, $5, $6)",
};

const DELETE_TAG: Sql = Sql {
    sqlite: "DELETE FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "DELETE FROM leaf_alloc WHERE biz_tag = ?",
    postgres: "DELETE FROM leaf_alloc WHERE biz_tag = $1",
};

impl Residue {
    /// A checked residue: `delta` 1 to [`MAX_DELTA`], `remainder` 0 to `delta - 1`, else
    /// [`StoreError::InvalidInput`].
    pub fn new(delta: i64, remainder: i64) -> Result<Self> {
        if !(1..=MAX_DELTA).contains(&delta) || !(0..delta).contains(&remainder) {
            return Err(StoreError::InvalidInput(format!(
                "delta {delta} and remainder {remainder}: delta must be 1 to {MAX_DELTA} (the \
                 number of databases serving the tag) and remainder 0 to delta - 1"
            )));
        }
        Ok(Self { delta, remainder })
    }
}

/// A `leaf_alloc` row as selected by `GET_TAG`.
type LeafAllocTuple = (String, i64, i64, Option<String>, Option<i64>, i64, i64);

/// Check a biz tag ([`uidgen_core::check_biz_tag`]: 1 to
/// [`MAX_TAG_LEN`](uidgen_core::MAX_TAG_LEN) characters of the tag alphabet,
/// [`uidgen_core::TAG_PATTERN`]), as [`StoreError::InvalidInput`].
pub fn validate_tag(biz_tag: &str) -> Result<()> {
    uidgen_core::check_biz_tag(biz_tag).map_err(StoreError::InvalidInput)
}

/// Check a description (of a tag or an app): at most [`MAX_DESCRIPTION_LEN`] characters, and no
/// NUL character, which PostgreSQL cannot store in text (it would fail the statement, a store
/// error instead of the caller's).
///
/// ```
/// use uidgen_store::validate_description;
/// assert!(validate_description("order ids").is_ok());
/// assert!(validate_description("a\0b").is_err());
/// assert!(validate_description(&"x".repeat(257)).is_err());
/// ```
pub fn validate_description(description: &str) -> Result<()> {
    check_len("description", description, MAX_DESCRIPTION_LEN)?;
    if description.contains('\0') {
        return Err(StoreError::InvalidInput(
            "description has a NUL character, which the databases cannot store in text".to_owned(),
        ));
    }
    Ok(())
}

/// Check a step: 1 to [`MAX_STEP`].
pub fn validate_step(step: i64) -> Result<()> {
    check_step(step, MAX_STEP)
}

/// The end of a segment claim whose update went through, in its transaction `$tx`: the ordered
/// tags' check ([`check_ordered_claim!`]; a refusal rolls back and returns it from the calling
/// function), the tag's epoch read, the commit; `Ok(($row, epoch))`. One text for every
/// dialect's claim, so that no dialect commits a claim the check did not see.
macro_rules! commit_claim {
    ($store:expr, $tx:ident, $tag:expr, $leader:expr, $action:expr, $row:expr) => {{
        if let Err(refused) = check_ordered_claim!($store, $tx, $tag, $leader, $action) {
            $tx.rollback().await.map_err(|e| $store.err($action, e))?;
            return Err(refused);
        }
        let epoch: i64 = in_tx!(
            $store,
            $tx,
            query_scalar(READ_EPOCH),
            $tag,
            fetch_one,
            $action
        );
        $tx.commit().await.map_err(|e| $store.err($action, e))?;
        Ok(($row, epoch))
    }};
}
impl Store {
    /// Claim the next segment of `biz_tag` with its stored step: `max_id += step` and the new
    /// row read back, in one transaction. The caller owns `[max_id - step, max_id)`.
    ///
    /// An unknown tag is [`StoreError::UnknownTag`]; a tag whose next segment would pass
    /// `i64::MAX` is [`StoreError::TagExhausted`] (the row is left unchanged).
    ///
    /// Cancel safety: dropping the future before it finishes ends the transaction (its
    /// connection is closed, not pooled), or, if the commit already happened, skips the
    /// segment; either way no ID is handed out twice.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// store.upsert_tag("order", 1000, Some("order ids")).await?;
    /// let first = store.claim_segment("order").await?;
    /// let second = store.claim_segment("order").await?;
    /// assert_eq!((first.range(), second.range()), (1..1001, 1001..2001));
    /// # Ok(()) }
    /// ```
    pub fn claim_segment<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, SegmentClaim> {
        Box::pin(async move { self.claim(biz_tag, None).await })
    }

    /// Claim a segment of `step` IDs instead of the stored step (Leaf's dynamic step); the
    /// stored step is unchanged. Returns the step used and, from the same statement, the stored
    /// step. Errors as [`claim_segment`](Self::claim_segment).
    pub fn claim_segment_with_step<'a>(
        &'a self,
        biz_tag: &'a str,
        step: i64,
    ) -> StoreFuture<'a, SegmentClaim> {
        Box::pin(async move {
            validate_step(step)?;
            self.claim(biz_tag, Some(step)).await
        })
    }

    async fn claim(&self, biz_tag: &str, step: Option<i64>) -> Result<SegmentClaim> {
        self.claim_checked(biz_tag, step, None).await
    }

    /// Claim a segment: a plain claim (`leader: None`, refused for an ordered tag) or the
    /// claim of an ordered tag's leader (`Some((holder, term))`, refused unless it holds the
    /// lease), checked in the claim's transaction (`ordered_tag` module).
    pub(crate) async fn claim_checked(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        leader: Option<(&str, i64)>,
    ) -> Result<SegmentClaim> {
        let dialect = self.dialect();
        let action = "claiming a segment";
        // `Err(row)`: nothing was updated (rolled back); `row` is the row as it stands, if any.
        // A failed statement or a cancelled claim drops the session, which closes the
        // connection and so ends the transaction (`session.rs`).
        type Claimed = std::result::Result<((i64, i64, i64, i64, i64), i64), Option<ClaimRow>>;
        let claimed: Claimed = with_pool_returning!(self, pool,
            mysql => {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let updated = match step {
                    None => sqlx::query(CLAIM.mysql).bind(biz_tag),
                    Some(step) => sqlx::query(CLAIM_WITH_STEP.mysql)
                        .bind(step)
                        .bind(biz_tag)
                        .bind(step),
                }
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(action, e))?;
                let row: Option<ClaimRow> = sqlx::query_as(READ_CLAIM_ROW.mysql)
                    .bind(biz_tag)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(|e| self.err(action, e))?;
                match row {
                    Some((max_id, stored, delta, remainder)) if updated.rows_affected() > 0 => {
                        let row = (max_id, step.unwrap_or(stored), stored, delta, remainder);
                        commit_claim!(self, tx, biz_tag, leader, action, row)
                    }
                    row => {
                        tx.rollback().await.map_err(|e| self.err(action, e))?;
                        Err(row)
                    }
                }
            },
            returning => {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let row: Option<(i64, i64, i64, i64, i64)> = match step {
                    None => sqlx::query_as(CLAIM.get(dialect)).bind(biz_tag),
                    Some(step) => sqlx::query_as(CLAIM_WITH_STEP.get(dialect))
                        .bind(biz_tag)
                        .bind(step),
                }
                .fetch_optional(&mut *tx)
                .await
                .map_err(|e| self.err(action, e))?;
                match row {
                    Some(row) => commit_claim!(self, tx, biz_tag, leader, action, row),
                    None => {
                        let row = sqlx::query_as(READ_CLAIM_ROW.get(dialect))
                            .bind(biz_tag)
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(|e| self.err(action, e))?;
                        tx.rollback().await.map_err(|e| self.err(action, e))?;
                        Err(row)
                    }
                }
            }
        );
        match claimed {
            Ok(((max_id, step, stored_step, delta, remainder), epoch)) => Ok(SegmentClaim {
                max_id,
                step,
                stored_step,
                residue: stored_residue(biz_tag, delta, remainder)?,
                epoch,
            }),
            Err(Some((max_id, stored, _, _))) => Err(StoreError::TagExhausted {
                tag: biz_tag.to_owned(),
                max_id,
                step: step.unwrap_or(stored),
            }),
            Err(None) => Err(StoreError::UnknownTag(biz_tag.to_owned())),
        }
    }

    /// Every biz tag, sorted.
    pub fn list_tags(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            with_pool!(
                self,
                pool,
                sqlx::query_scalar(LIST_TAGS.get(self.dialect()))
                    .fetch_all(pool)
                    .await
                    .map_err(|e| self.err("listing biz tags", e))
            )
        })
    }

    /// The row of `biz_tag`, if any.
    pub fn get_tag<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, Option<LeafAlloc>> {
        Box::pin(async move {
            let action = "reading a biz tag";
            let row: Option<LeafAllocTuple> = with_pool!(
                self,
                pool,
                sqlx::query_as(GET_TAG.get(self.dialect()))
                    .bind(biz_tag)
                    .fetch_optional(pool)
                    .await
                    .map_err(|e| self.err(action, e))?
            );
            row.map(
                |(biz_tag, max_id, step, description, update_time_ms, delta, remainder)| {
                    Ok(LeafAlloc {
                        residue: stored_residue(&biz_tag, delta, remainder)?,
                        biz_tag,
                        max_id,
                        step,
                        description,
                        update_time_ms,
                    })
                },
            )
            .transpose()
        })
    }

    /// Create `biz_tag` (with `max_id` 1) or change its step and, when `Some`, its
    /// description. Tags must be non-empty and at most 128 characters; steps 1 to 10^9;
    /// else [`StoreError::InvalidInput`].
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// let row = store.upsert_tag("order", 2000, None).await?;
    /// assert_eq!((row.max_id, row.step), (1, 2000));
    /// # Ok(()) }
    /// ```
    pub fn upsert_tag<'a>(
        &'a self,
        biz_tag: &'a str,
        step: i64,
        description: Option<&'a str>,
    ) -> StoreFuture<'a, LeafAlloc> {
        Box::pin(async move {
            self.upsert(biz_tag, step, description, Residue::SINGLE)
                .await
        })
    }

    /// [`upsert_tag`](Self::upsert_tag) for one database of a group (Tinyid's multi-database
    /// segments): a new row gets `residue`; an existing row keeps its own, and when that is not
    /// `residue` the step is still changed but the call fails with
    /// [`StoreError::ResidueMismatch`] (changing a residue could repeat numbers; a DBA does it
    /// by hand, after moving every database's `max_id` past all served numbers). The step must
    /// be at least `residue.delta`, so that every segment holds a number of every database.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::Residue;
    /// let row = store.upsert_group_tag("order", 1000, None, Residue::new(2, 1)?).await?;
    /// assert_eq!((row.max_id, row.residue.delta, row.residue.remainder), (1, 2, 1));
    /// # Ok(()) }
    /// ```
    pub fn upsert_group_tag<'a>(
        &'a self,
        biz_tag: &'a str,
        step: i64,
        description: Option<&'a str>,
        residue: Residue,
    ) -> StoreFuture<'a, LeafAlloc> {
        Box::pin(async move {
            if step < residue.delta {
                return Err(StoreError::InvalidInput(format!(
                    "step {step} is below delta {}: every segment must hold a number of each \
                     of the group's databases",
                    residue.delta
                )));
            }
            let row = self.upsert(biz_tag, step, description, residue).await?;
            if row.residue != residue {
                return Err(StoreError::ResidueMismatch {
                    tag: biz_tag.to_owned(),
                    url: self.redacted_url().to_owned(),
                    stored: row.residue,
                    wanted: residue,
                });
            }
            Ok(row)
        })
    }

    async fn upsert(
        &self,
        biz_tag: &str,
        step: i64,
        description: Option<&str>,
        residue: Residue,
    ) -> Result<LeafAlloc> {
        validate_tag(biz_tag)?;
        validate_step(step)?;
        if let Some(description) = description {
            validate_description(description)?;
        }
        let action = "creating or updating a biz tag";
        let dialect = self.dialect();
        write_tx_retrying!(self, action, tx => {
            // Creating the row (perhaps after a delete by hand) begins a new life of it.
            begin_new_life!(self, tx, biz_tag, action, row_exists: false);
            sqlx::query(UPSERT_TAG.get(dialect))
                .bind(biz_tag)
                .bind(step)
                .bind(description)
                .bind(residue.delta)
                .bind(residue.remainder)
                .execute(&mut *tx)
                .await
                .map_err(|e| self.err(action, e))?;
            tx.commit().await.map_err(|e| self.err(action, e))?;
            Ok(())
        })
        .await?;
        self.get_tag(biz_tag)
            .await?
            .ok_or_else(|| StoreError::UnknownTag(biz_tag.to_owned()))
    }

    /// Delete `biz_tag`; `true` when a row was deleted.
    ///
    /// Deleting forgets the tag's `max_id`. Re-creating the tag with
    /// [`upsert_tag`](Self::upsert_tag) starts again at `max_id` 1, so its segments would
    /// repeat IDs the old tag already handed out. A running `uidgen-segment` service that served
    /// the old tag refuses such segments (they lie below what it served) until `max_id` has
    /// passed them, but a process started after the deletion cannot know: do not re-create a
    /// tag whose IDs are still in use, or set its `max_id` above the old one by hand first.
    ///
    /// The tag's returned ranges (`leaf_alloc_returned`) go with it, and its epoch rises in the
    /// same transaction, the row locked: a re-created tag's segments would overlap the old
    /// numbers, so a server that still buffers the old tag's segments cannot hand their tails
    /// back to it either (the `epoch` module).
    pub fn delete_tag<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let action = "deleting a biz tag";
            let deleted = write_tx_retrying!(self, action, tx => {
                begin_new_life!(self, tx, biz_tag, action, row_exists: true);
                let affected = in_tx!(self, tx, query(DELETE_TAG), biz_tag, execute, action);
                in_tx!(self, tx, query(DELETE_ORDERED), biz_tag, execute, action);
                tx.commit().await.map_err(|e| self.err(action, e))?;
                Ok(affected.rows_affected() > 0)
            })
            .await?;
            Ok(deleted)
        })
    }
}

/// A claim's row as read back: `max_id`, stored step, delta, remainder.
type ClaimRow = (i64, i64, i64, i64);

/// The residue a row holds, refusing one no migration or admin route writes (edited by hand).
fn stored_residue(biz_tag: &str, delta: i64, remainder: i64) -> Result<Residue> {
    Residue::new(delta, remainder).map_err(|_| StoreError::InvalidResidue {
        tag: biz_tag.to_owned(),
        delta,
        remainder,
    })
}
