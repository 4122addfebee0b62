//! The checks that keep every server but an ordered tag's leader from its numbers (issue 35,
//! the `ordered_tag` module has the argument): a segment claim's check of the tag's lease, in
//! the claim's own transaction, and the statements a hand-back and a deletion use.

use crate::error::{Result, StoreError};
use crate::store::Sql;

/// The database's clock in ms since the Unix epoch, as a column of the statements below.
macro_rules! db_now {
    (sqlite) => {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    };
    (mysql) => {
        "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)"
    };
    (postgres) => {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    };
}
pub(crate) use db_now;

/// A deleted tag is no longer ordered: a tag created again under its name starts plain.
pub(crate) const DELETE_ORDERED: Sql = Sql {
    sqlite: "DELETE FROM leaf_alloc_ordered WHERE biz_tag = ?1",
    mysql: "DELETE FROM leaf_alloc_ordered WHERE biz_tag = ?",
    postgres: "DELETE FROM leaf_alloc_ordered WHERE biz_tag = $1",
};

/// The tag's lease as a segment claim checks it, read after the claim's update in the same
/// transaction: term, holder, lease end and the database's clock. A locking read, so that
/// MySQL/MariaDB (repeatable read) sees the latest committed lease, not its snapshot's.
pub(crate) const READ_LEASE_FOR_CLAIM: Sql = Sql {
    sqlite: concat!(
        "SELECT term, holder, lease_until_ms, ",
        db_now!(sqlite),
        " FROM leaf_alloc_ordered WHERE biz_tag = ?1"
    ),
    mysql: concat!(
        "SELECT term, holder, lease_until_ms, ",
        db_now!(mysql),
        " FROM leaf_alloc_ordered WHERE biz_tag = ? LOCK IN SHARE MODE"
    ),
    postgres: concat!(
        "SELECT term, holder, lease_until_ms, ",
        db_now!(postgres),
        " FROM leaf_alloc_ordered WHERE biz_tag = $1 FOR SHARE"
    ),
};

/// Whether the tag is ordered, read with the tag's `leaf_alloc` row locked (hand-backs).
pub(crate) const IS_ORDERED: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM leaf_alloc_ordered WHERE biz_tag = ?1",
    mysql: "SELECT COUNT(*) FROM leaf_alloc_ordered WHERE biz_tag = ? LOCK IN SHARE MODE",
    // Read committed: a statement run after the row lock sees every commit before it.
    postgres: "SELECT COUNT(*) FROM leaf_alloc_ordered WHERE biz_tag = $1",
};

/// Check a segment claim of `$tag` against its lease, in the claim's transaction `$tx`,
/// after the claim's update: `Ok(())` when the claim may commit, else the refusal.
/// `$leader` is `None` for a plain claim, `Some((holder, term))` for a leader's.
macro_rules! check_ordered_claim {
    ($store:expr, $tx:expr, $tag:expr, $leader:expr, $action:expr) => {{
        let lease: Option<(i64, String, i64, i64)> =
            sqlx::query_as($crate::ordered_fence::READ_LEASE_FOR_CLAIM.get($store.dialect()))
                .bind($tag)
                .fetch_optional(&mut *$tx)
                .await
                .map_err(|e| $store.err($action, e))?;
        $crate::ordered_fence::judge_claim($tag, $leader, lease)
    }};
}
pub(crate) use check_ordered_claim;

/// The verdict of [`check_ordered_claim!`].
pub(crate) fn judge_claim(
    tag: &str,
    leader: Option<(&str, i64)>,
    lease: Option<(i64, String, i64, i64)>,
) -> Result<()> {
    match (leader, lease) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(StoreError::TagOrdered(tag.to_owned())),
        (Some(_), None) => Err(StoreError::NotOrdered(tag.to_owned())),
        (Some((holder, term)), Some((row_term, row_holder, until, now))) => {
            if row_term == term && row_holder == holder && until > now {
                Ok(())
            } else {
                Err(StoreError::LeadLost {
                    tag: tag.to_owned(),
                    term,
                    current: row_term,
                })
            }
        }
    }
}
