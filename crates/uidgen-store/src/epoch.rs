//! The `leaf_alloc_epoch` table (migration 0013): how many times uidgen created or deleted each
//! biz tag, so that a segment's tail is handed back only to the life of the tag it came from.
//!
//! A tag deleted while a server still buffers its segments, and created again (it restarts at
//! `max_id` 1), issues the old tag's numbers again from its own segments: handing the old
//! segments' untouched tails back to the new tag would then issue those numbers twice within
//! one tag's life. So every claim reads the tag's epoch in its transaction, the segment keeps
//! it, and [`Store::return_ranges`](crate::Store::return_ranges) writes a tail only while the
//! tag's row exists, its epoch is the one the tail was claimed under and its `max_id` is past
//! the tail, all read with the row locked. [`Store::delete_tag`](crate::Store::delete_tag) and
//! the creation of a tag by [`Store::upsert_tag`](crate::Store::upsert_tag) raise the epoch (and
//! drop the tag's returned ranges) with the same row locked, so a hand-back and a delete or
//! creation are ordered: whichever commits second sees the other.
//!
//! What it does not see: a row deleted and created again by hand, outside uidgen, keeps its
//! epoch (documented in docs/OPERATIONS.md, "Segment tails handed back").

use std::future::Future;
use std::time::Duration;

use crate::error::Result;
use crate::store::Sql;

/// The tag's epoch; 0 when uidgen never created or deleted it (a row Leaf's own SQL wrote).
pub(crate) const READ_EPOCH: Sql = Sql {
    sqlite: "SELECT COALESCE(MAX(epoch), 0) FROM leaf_alloc_epoch WHERE biz_tag = ?1",
    mysql: "SELECT CAST(COALESCE(MAX(epoch), 0) AS SIGNED) FROM leaf_alloc_epoch
            WHERE biz_tag = ?",
    postgres: "SELECT CAST(COALESCE(MAX(epoch), 0) AS BIGINT) FROM leaf_alloc_epoch
               WHERE biz_tag = $1",
};

/// The tag's `max_id`, its row locked until the transaction ends (SQLite: the write
/// transaction, `BEGIN IMMEDIATE`, already excludes every other writer).
pub(crate) const LOCK_TAG_ROW: Sql = Sql {
    sqlite: "SELECT max_id FROM leaf_alloc WHERE biz_tag = ?1",
    mysql: "SELECT max_id FROM leaf_alloc WHERE biz_tag = ? FOR UPDATE",
    postgres: "SELECT max_id FROM leaf_alloc WHERE biz_tag = $1 FOR UPDATE",
};

/// A new life of the tag begins (it is being created or deleted).
pub(crate) const RAISE_EPOCH: Sql = Sql {
    sqlite: "INSERT INTO leaf_alloc_epoch (biz_tag, epoch) VALUES (?1, 1)
             ON CONFLICT (biz_tag) DO UPDATE SET epoch = leaf_alloc_epoch.epoch + 1",
    mysql: "INSERT INTO leaf_alloc_epoch (biz_tag, epoch) VALUES (?, 1)
            ON DUPLICATE KEY UPDATE epoch = epoch + 1",
    postgres: "INSERT INTO leaf_alloc_epoch (biz_tag, epoch) VALUES ($1, 1)
               ON CONFLICT (biz_tag) DO UPDATE SET epoch = leaf_alloc_epoch.epoch + 1",
};

/// Forget a tag's returned ranges (a new life of the tag: a re-created tag restarts at
/// `max_id` 1, and its new segments would overlap them).
pub(crate) const DELETE_RETURNED_OF_TAG: Sql = Sql {
    sqlite: "DELETE FROM leaf_alloc_returned WHERE biz_tag = ?1",
    mysql: "DELETE FROM leaf_alloc_returned WHERE biz_tag = ?",
    postgres: "DELETE FROM leaf_alloc_returned WHERE biz_tag = $1",
};

/// Run one of the statements above on an open transaction `$tx` of `$store`: `$kind` is
/// `query_scalar` or `query`, `$run` the fetch or `execute`.
macro_rules! in_tx {
    ($store:expr, $tx:expr, $kind:ident($sql:expr), $tag:expr, $run:ident, $action:expr) => {
        sqlx::$kind($sql.get($store.dialect()))
            .bind($tag)
            .$run(&mut *$tx)
            .await
            .map_err(|e| $store.err($action, e))?
    };
}
pub(crate) use in_tx;

/// In `$tx`, lock the tag's row; when the row is there (`row_exists: true`, a delete) or is
/// not (`false`, a creation), a new life of the tag begins: raise its epoch and drop its
/// handed-back ranges, so tails of the life that ends never come back to the next one.
macro_rules! begin_new_life {
    ($store:expr, $tx:expr, $tag:expr, $action:expr, row_exists: $exists:expr) => {{
        use $crate::epoch::{LOCK_TAG_ROW, RAISE_EPOCH, in_tx};
        let row: Option<i64> = in_tx!(
            $store,
            $tx,
            query_scalar(LOCK_TAG_ROW),
            $tag,
            fetch_optional,
            $action
        );
        if row.is_some() == $exists {
            in_tx!($store, $tx, query(RAISE_EPOCH), $tag, execute, $action);
            in_tx!(
                $store,
                $tx,
                query($crate::epoch::DELETE_RETURNED_OF_TAG),
                $tag,
                execute,
                $action
            );
        }
    }};
}
pub(crate) use begin_new_life;

/// Run `$body` in a write transaction `$tx` of `$store` ([`retrying_conflicts`] when the
/// database breaks a deadlock by rolling it back): the body commits or rolls `$tx` back
/// itself and evaluates to the result; a failure to begin is the store's error for `$action`.
macro_rules! write_tx_retrying {
    ($store:expr, $action:expr, $tx:ident => $body:expr) => {
        $crate::epoch::retrying_conflicts(|| async move {
            $crate::store::with_pool!($store, pool, {
                let mut $tx = $crate::session::Session::begin_write(pool, $store.dialect())
                    .await
                    .map_err(|e| $store.err($action, e))?;
                $body
            })
        })
    };
}
pub(crate) use write_tx_retrying;

/// Run `transaction` again when the database broke a deadlock by rolling it back. Creating a
/// missing tag locks a gap in `leaf_alloc` (MariaDB/MySQL), and servers that start at once
/// all create the sample tag: two such transactions deadlock, one of them is undone whole.
/// A few short, jittered retries let it go through after the other.
pub(crate) async fn retrying_conflicts<T, F, Fut>(mut transaction: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    const ATTEMPTS: u32 = 5;
    let mut attempt = 1;
    loop {
        match transaction().await {
            Err(error) if error.is_lock_conflict() && attempt < ATTEMPTS => {
                let pause = fastrand::u64(1..=10 * u64::from(attempt));
                tokio::time::sleep(Duration::from_millis(pause)).await;
                attempt += 1;
            }
            outcome => return outcome,
        }
    }
}
