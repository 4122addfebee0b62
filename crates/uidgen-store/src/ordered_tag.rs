//! The `leaf_alloc_ordered` table (migration 0015, issue 35): biz tags whose IDs strictly
//! increase across the whole cluster, and each one's leader lease.
//!
//! Why the rows make the order hold (docs/OPERATIONS.md, "Ordered tags", has the whole
//! argument and its clock assumption):
//!
//! 1. One issuer per term: [`Store::lead_ordered`] grants the lease to one holder at a time, for
//!    `lease` of the database's clock, and begins a new term (raising `term`) only once the
//!    previous lease has run out by that same clock.
//! 2. Every segment of an ordered tag is claimed under its term:
//!    [`Store::claim_ordered_segment`] fails unless the caller holds the current term and its
//!    lease has not run out, checked in the claim's own transaction. A plain claim
//!    ([`Store::claim_segment`]) of an ordered tag fails ([`StoreError::TagOrdered`]), so no
//!    server outside the term gets numbers of it.
//! 3. A new term's first segment is claimed after the term began, so it lies above every
//!    number claimed before (`max_id` only rises): above everything the predecessors could
//!    have issued. Marking a tag drops its handed-back ranges (which lie below `max_id`), and
//!    [`Store::return_ranges`] hands nothing back to an ordered tag.
//!
//! The leader keeps its own clock's account of the lease and stops issuing before the
//! database's runs out: that part lives with the server, which issues.

use std::time::Duration;

use crate::epoch::{DELETE_RETURNED_OF_TAG, LOCK_TAG_ROW, in_tx, write_tx_retrying};
use crate::error::{Result, StoreError, StoreFuture};
use crate::leaf_alloc::{SegmentClaim, validate_tag};
use crate::ordered_fence::{DELETE_ORDERED, db_now};
use crate::store::{Sql, Store, run_sql};

/// The most bytes of a holder or an address (the columns' width).
pub const MAX_HOLDER_LEN: usize = 255;

/// The tag's lease row and the database's clock, the row locked until the transaction ends
/// (SQLite: `BEGIN IMMEDIATE` already excludes every other writer).
const LOCK_ORDERED_ROW: Sql = Sql {
    sqlite: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(sqlite),
        " FROM leaf_alloc_ordered WHERE biz_tag = ?1"
    ),
    mysql: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(mysql),
        " FROM leaf_alloc_ordered WHERE biz_tag = ? FOR UPDATE"
    ),
    postgres: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(postgres),
        " FROM leaf_alloc_ordered WHERE biz_tag = $1 FOR UPDATE"
    ),
};

const LIST_ORDERED: Sql = Sql {
    sqlite: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(sqlite),
        " FROM leaf_alloc_ordered ORDER BY biz_tag"
    ),
    mysql: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(mysql),
        " FROM leaf_alloc_ordered ORDER BY biz_tag"
    ),
    postgres: concat!(
        "SELECT biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, ",
        db_now!(postgres),
        " FROM leaf_alloc_ordered ORDER BY biz_tag"
    ),
};

/// Mark a tag: no term yet, its lease run out from the start.
const INSERT_ORDERED: Sql = Sql {
    sqlite: concat!(
        "INSERT OR IGNORE INTO leaf_alloc_ordered ",
        "(biz_tag, term, holder, address, lease_until_ms, ordered_since_ms) VALUES (?1, 0, '', '', 0, ",
        db_now!(sqlite),
        ")"
    ),
    mysql: concat!(
        "INSERT IGNORE INTO leaf_alloc_ordered ",
        "(biz_tag, term, holder, address, lease_until_ms, ordered_since_ms) VALUES (?, 0, '', '', 0, ",
        db_now!(mysql),
        ")"
    ),
    postgres: concat!(
        "INSERT INTO leaf_alloc_ordered ",
        "(biz_tag, term, holder, address, lease_until_ms, ordered_since_ms) VALUES ($1, 0, '', '', 0, ",
        db_now!(postgres),
        ") ON CONFLICT (biz_tag) DO NOTHING"
    ),
};

/// The tag's `delta` (1 unless it belongs to a segment group).
const READ_DELTA: Sql = Sql {
    sqlite: "SELECT CAST(delta AS INTEGER) FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "SELECT CAST(delta AS SIGNED) FROM leaf_alloc WHERE biz_tag = ?",
    postgres: "SELECT CAST(delta AS BIGINT) FROM leaf_alloc WHERE biz_tag = $1",
};

/// Renew (same term) or take (next term) the lease: term, holder, address, lease end.
const SET_LEASE: Sql = Sql {
    sqlite: "UPDATE leaf_alloc_ordered SET term = ?1, holder = ?2, address = ?3,
             lease_until_ms = ?4 WHERE biz_tag = ?5",
    mysql: "UPDATE leaf_alloc_ordered SET term = ?, holder = ?, address = ?,
            lease_until_ms = ? WHERE biz_tag = ?",
    postgres: "UPDATE leaf_alloc_ordered SET term = $1, holder = $2, address = $3,
               lease_until_ms = $4 WHERE biz_tag = $5",
};

/// A row of `leaf_alloc_ordered`: biz tag, term, holder, address, lease end, marked since,
/// and the database's clock when read.
type OrderedRow = (String, i64, String, String, i64, i64, i64);

/// An ordered tag and its lease, as the database had it when read.
///
/// ```
/// let tag = uidgen_store::OrderedTag {
///     biz_tag: "order".into(), term: 3, holder: "a".into(), address: "http://a:8080".into(),
///     lease_until_ms: 10_000, ordered_since_ms: 0, db_now_ms: 9_000,
/// };
/// assert_eq!(tag.lease_left_ms(), 1_000);
/// assert!(tag.led());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedTag {
    /// The tag.
    pub biz_tag: String,
    /// The current term: raised by every new leader; 0 before the first.
    pub term: i64,
    /// The leader of the term (`""` before the first): unique per server life.
    pub holder: String,
    /// Where the other servers forward the tag's calls (the leader's gRPC address).
    pub address: String,
    /// The lease runs out here (ms since the epoch, the database's clock).
    pub lease_until_ms: i64,
    /// When the tag was marked ordered (ms since the epoch, the database's clock).
    pub ordered_since_ms: i64,
    /// The database's clock when the row was read (ms since the epoch).
    pub db_now_ms: i64,
}

impl OrderedTag {
    /// How long the lease still runs by the database's clock, 0 once it ran out.
    pub fn lease_left_ms(&self) -> i64 {
        (self.lease_until_ms - self.db_now_ms).max(0)
    }

    /// A leader holds the lease now.
    pub fn led(&self) -> bool {
        !self.holder.is_empty() && self.lease_left_ms() > 0
    }
}

impl From<OrderedRow> for OrderedTag {
    fn from(row: OrderedRow) -> Self {
        let (biz_tag, term, holder, address, lease_until_ms, ordered_since_ms, db_now_ms) = row;
        Self {
            biz_tag,
            term,
            holder,
            address,
            lease_until_ms,
            ordered_since_ms,
            db_now_ms,
        }
    }
}

/// What [`Store::lead_ordered`] found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lead {
    /// The caller leads: it renewed its lease (`new_term: false`) or began a new term
    /// (`new_term: true`: numbers of any earlier term of its own are not to be served).
    Leading {
        /// The row as written (the caller's term and lease end, the database's clock).
        tag: OrderedTag,
        /// The term is new.
        new_term: bool,
    },
    /// Another holder's lease runs (forward to it), or no term may begin yet (the tag was
    /// marked less than `settle` ago): the row as read.
    Follower(OrderedTag),
}

fn check_holder(what: &str, value: &str) -> Result<()> {
    if value.is_empty() || value.len() > MAX_HOLDER_LEN {
        return Err(StoreError::InvalidInput(format!(
            "an ordered tag's {what} must be 1 to {MAX_HOLDER_LEN} bytes; this one is {} bytes",
            value.len()
        )));
    }
    Ok(())
}

impl Store {
    /// Mark `biz_tag` ordered: from now on only its leader (see [`lead_ordered`](Self::lead_ordered))
    /// claims its segments. Its handed-back ranges are dropped in the same transaction, with
    /// its `leaf_alloc` row locked. `true` when it was not ordered before. A tag of a segment
    /// group cannot be ordered (its databases each issue every `delta`-th number): refused
    /// with [`StoreError::InvalidInput`], as is an unknown tag ([`StoreError::UnknownTag`]).
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// store.upsert_tag("order", 1000, None).await?;
    /// assert!(store.mark_ordered("order").await?);
    /// assert!(store.claim_segment("order").await.is_err()); // only the leader claims now
    /// # Ok(()) }
    /// ```
    pub fn mark_ordered<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            validate_tag(biz_tag)?;
            let action = "marking a biz tag ordered";
            write_tx_retrying!(self, action, tx => {
                let row: Option<i64> = in_tx!(
                    self,
                    tx,
                    query_scalar(LOCK_TAG_ROW),
                    biz_tag,
                    fetch_optional,
                    action
                );
                if row.is_none() {
                    tx.rollback().await.map_err(|e| self.err(action, e))?;
                    return Err(StoreError::UnknownTag(biz_tag.to_owned()));
                }
                let delta: i64 = in_tx!(
                    self,
                    tx,
                    query_scalar(READ_DELTA),
                    biz_tag,
                    fetch_one,
                    action
                );
                if delta != 1 {
                    tx.rollback().await.map_err(|e| self.err(action, e))?;
                    return Err(StoreError::InvalidInput(format!(
                        "biz tag `{biz_tag}` belongs to a segment group (each database issues \
                         every delta-th number): it cannot be ordered"
                    )));
                }
                let inserted = in_tx!(self, tx, query(INSERT_ORDERED), biz_tag, execute, action)
                    .rows_affected();
                in_tx!(
                    self,
                    tx,
                    query(DELETE_RETURNED_OF_TAG),
                    biz_tag,
                    execute,
                    action
                );
                tx.commit().await.map_err(|e| self.err(action, e))?;
                Ok(inserted > 0)
            })
            .await
        })
    }

    /// Make `biz_tag` a plain tag again: every server then serves it from its own segments
    /// (IDs of two servers interleave again). `true` when it was ordered.
    pub fn unmark_ordered<'a>(&'a self, biz_tag: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            validate_tag(biz_tag)?;
            let deleted = run_sql!(self, execute, query(DELETE_ORDERED), [biz_tag],
                "unmarking an ordered biz tag", then rows_affected);
            Ok(deleted > 0)
        })
    }

    /// Every ordered tag and its lease, by tag, with the database's clock.
    pub fn ordered_tags(&self) -> StoreFuture<'_, Vec<OrderedTag>> {
        Box::pin(async move {
            let rows: Vec<OrderedRow> = run_sql!(
                self,
                fetch_all,
                query_as(LIST_ORDERED),
                [],
                "listing the ordered biz tags"
            );
            Ok(rows.into_iter().map(OrderedTag::from).collect())
        })
    }

    /// Renew or take the lead of `biz_tag` for `holder` (unique per server life), reachable
    /// at `address` (empty: the others cannot forward to it), for `lease` of the database's
    /// clock: renewed while `holder`'s lease runs; a new term once the lease ran out (whoever
    /// held it) and the tag was marked at least `settle` ago (the time every server takes to
    /// learn that it is ordered); else the current leader's row, to forward to.
    /// [`StoreError::NotOrdered`] when the tag is not (or no longer) ordered.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use std::time::Duration;
    /// use uidgen_store::Lead;
    /// let lease = Duration::from_secs(3);
    /// match store.lead_ordered("order", "a-1", "http://a:8080", lease, Duration::ZERO).await? {
    ///     Lead::Leading { tag, .. } => {
    ///         let claim = store.claim_ordered_segment("order", "a-1", tag.term, None).await?;
    ///         println!("serving {:?}", claim.range());
    ///     }
    ///     Lead::Follower(tag) => println!("forwarding to {}", tag.address),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn lead_ordered<'a>(
        &'a self,
        biz_tag: &'a str,
        holder: &'a str,
        address: &'a str,
        lease: Duration,
        settle: Duration,
    ) -> StoreFuture<'a, Lead> {
        Box::pin(async move {
            validate_tag(biz_tag)?;
            check_holder("holder", holder)?;
            if address.len() > MAX_HOLDER_LEN {
                return Err(StoreError::InvalidInput(format!(
                    "an ordered tag's address must be at most {MAX_HOLDER_LEN} bytes; this one \
                     is {} bytes",
                    address.len()
                )));
            }
            let lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
            let settle_ms = i64::try_from(settle.as_millis()).unwrap_or(i64::MAX);
            let action = "renewing an ordered tag's lease";
            let dialect = self.dialect();
            write_tx_retrying!(self, action, tx => {
                let row: Option<OrderedRow> = in_tx!(
                    self,
                    tx,
                    query_as(LOCK_ORDERED_ROW),
                    biz_tag,
                    fetch_optional,
                    action
                );
                let Some(row) = row else {
                    tx.rollback().await.map_err(|e| self.err(action, e))?;
                    return Err(StoreError::NotOrdered(biz_tag.to_owned()));
                };
                let mut tag = OrderedTag::from(row);
                let runs = tag.lease_until_ms > tag.db_now_ms;
                let settled = tag.db_now_ms.saturating_sub(tag.ordered_since_ms) >= settle_ms;
                let new_term = match (runs, tag.holder == holder) {
                    (true, true) => false,
                    (false, _) if settled => true,
                    _ => {
                        tx.rollback().await.map_err(|e| self.err(action, e))?;
                        return Ok(Lead::Follower(tag));
                    }
                };
                if new_term {
                    tag.term += 1;
                    holder.clone_into(&mut tag.holder);
                }
                address.clone_into(&mut tag.address);
                tag.lease_until_ms = tag.db_now_ms.saturating_add(lease_ms);
                sqlx::query(SET_LEASE.get(dialect))
                    .bind(tag.term)
                    .bind(&tag.holder)
                    .bind(&tag.address)
                    .bind(tag.lease_until_ms)
                    .bind(biz_tag)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.err(action, e))?;
                tx.commit().await.map_err(|e| self.err(action, e))?;
                Ok(Lead::Leading { tag, new_term })
            })
            .await
        })
    }

    /// Give the lead of `biz_tag` up at a clean stop: the lease runs out now, so a successor
    /// need not wait for it. Only `holder`'s own lease of `term` is ended; `true` when it was.
    /// The caller must have stopped issuing first.
    pub fn resign_ordered<'a>(
        &'a self,
        biz_tag: &'a str,
        holder: &'a str,
        term: i64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            const RESIGN: Sql = Sql {
                sqlite: "UPDATE leaf_alloc_ordered SET lease_until_ms = 0
                         WHERE biz_tag = ?1 AND holder = ?2 AND term = ?3",
                mysql: "UPDATE leaf_alloc_ordered SET lease_until_ms = 0
                        WHERE biz_tag = ? AND holder = ? AND term = ?",
                postgres: "UPDATE leaf_alloc_ordered SET lease_until_ms = 0
                           WHERE biz_tag = $1 AND holder = $2 AND term = $3",
            };
            let ended = run_sql!(self, execute, query(RESIGN), [biz_tag, holder, term],
                "ending an ordered tag's lease", then rows_affected);
            Ok(ended > 0)
        })
    }

    /// Claim a segment of ordered `biz_tag` as its leader: `holder` of `term`, whose lease
    /// must still run by the database's clock, checked in the claim's transaction; else
    /// [`StoreError::LeadLost`] and nothing is claimed. Never from handed-back ranges: a new
    /// term's numbers lie above every number claimed before it. `step` as
    /// [`claim_segment_with_step`](Self::claim_segment_with_step) (`None`: the stored step).
    pub fn claim_ordered_segment<'a>(
        &'a self,
        biz_tag: &'a str,
        holder: &'a str,
        term: i64,
        step: Option<i64>,
    ) -> StoreFuture<'a, SegmentClaim> {
        Box::pin(async move {
            validate_tag(biz_tag)?;
            self.claim_checked(biz_tag, step, Some((holder, term)))
                .await
        })
    }
}
