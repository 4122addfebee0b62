//! The `uidgen_takeover` table: what `uidgen takeover <peer>` decided, one row per peer uidgen
//! took over from (Baidu, Leaf, Vesta, the sharded service, Tinyid).
//!
//! The store keeps a decision as its caller wrote it (JSON the server defines, and the report
//! `--check` printed): it never reads one itself. `uidgen serve` reads them all at start and
//! refuses a configuration that contradicts one. Recording a decision again replaces it.
//!
//! The peers' own tables, read in their own formats, are in [`crate::peer_tables`].

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql};
use crate::worker_node::check_len;

/// The longest peer name (`VARCHAR(16)`).
pub const MAX_PEER_LEN: usize = 16;

/// A recorded takeover decision.
///
/// ```
/// let record = uidgen_store::TakeoverRecord {
///     peer: "baidu".into(),
///     decision: r#"{"layout":"baidu_continued"}"#.into(),
///     summary: "continue Baidu's worker_node counter".into(),
///     recorded_ms: 1_800_000_000_000,
/// };
/// assert_eq!(record.peer, "baidu");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TakeoverRecord {
    /// The peer: `baidu`, `leaf`, `vesta`, `sharded` or `tinyid` (at most 16 ASCII letters).
    pub peer: String,
    /// The decision, as its writer serialised it (JSON).
    pub decision: String,
    /// What `uidgen takeover --check` printed when it was recorded.
    pub summary: String,
    /// When it was recorded, ms since the Unix epoch.
    pub recorded_ms: i64,
}

const UPSERT_TAKEOVER: Sql = Sql {
    sqlite: "INSERT INTO uidgen_takeover (peer, decision, summary, recorded_ms)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (peer) DO UPDATE SET decision = excluded.decision,
                 summary = excluded.summary, recorded_ms = excluded.recorded_ms",
    mysql: "INSERT INTO uidgen_takeover (peer, decision, summary, recorded_ms)
            VALUES (?, ?, ?, ?)
            ON DUPLICATE KEY UPDATE decision = VALUES(decision), summary = VALUES(summary),
                recorded_ms = VALUES(recorded_ms)",
    postgres: "INSERT INTO uidgen_takeover (peer, decision, summary, recorded_ms)
               VALUES ($1, $2, $3, $4)
               ON CONFLICT (peer) DO UPDATE SET decision = EXCLUDED.decision,
                   summary = EXCLUDED.summary, recorded_ms = EXCLUDED.recorded_ms",
};

const LIST_TAKEOVERS: Sql =
    Sql::same("SELECT peer, decision, summary, recorded_ms FROM uidgen_takeover ORDER BY peer");

const DELETE_TAKEOVER: Sql = Sql {
    sqlite: "DELETE FROM uidgen_takeover WHERE peer = ?1",
    mysql: "DELETE FROM uidgen_takeover WHERE peer = ?",
    postgres: "DELETE FROM uidgen_takeover WHERE peer = $1",
};

impl Store {
    /// Record a takeover decision, replacing the peer's earlier one.
    ///
    /// Errors: [`StoreError::InvalidInput`] for a peer name that is empty, longer than
    /// [`MAX_PEER_LEN`] or not lowercase ASCII letters; database errors.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::TakeoverRecord;
    /// store
    ///     .record_takeover(&TakeoverRecord {
    ///         peer: "leaf".into(),
    ///         decision: "{}".into(),
    ///         summary: "nothing to continue".into(),
    ///         recorded_ms: 0,
    ///     })
    ///     .await?;
    /// assert_eq!(store.takeovers().await?.len(), 1);
    /// # Ok(()) }
    /// ```
    pub fn record_takeover<'a>(&'a self, record: &'a TakeoverRecord) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            check_peer(&record.peer)?;
            run_sql!(
                self,
                execute,
                query(UPSERT_TAKEOVER),
                [
                    record.peer.as_str(),
                    record.decision.as_str(),
                    record.summary.as_str(),
                    record.recorded_ms
                ],
                "recording a takeover decision",
                then rows_affected
            );
            Ok(())
        })
    }

    /// Every recorded takeover decision, by peer name.
    pub fn takeovers(&self) -> StoreFuture<'_, Vec<TakeoverRecord>> {
        Box::pin(async move {
            let rows: Vec<(String, String, String, i64)> = run_sql!(
                self,
                fetch_all,
                query_as(LIST_TAKEOVERS),
                [],
                "reading the takeover decisions"
            );
            Ok(rows
                .into_iter()
                .map(|(peer, decision, summary, recorded_ms)| TakeoverRecord {
                    peer,
                    decision,
                    summary,
                    recorded_ms,
                })
                .collect())
        })
    }

    /// The decision recorded for `peer`, if any.
    pub fn takeover<'a>(&'a self, peer: &'a str) -> StoreFuture<'a, Option<TakeoverRecord>> {
        Box::pin(async move { Ok(self.takeovers().await?.into_iter().find(|r| r.peer == peer)) })
    }

    /// Forget the decision recorded for `peer`; whether there was one.
    pub fn forget_takeover<'a>(&'a self, peer: &'a str) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let deleted = run_sql!(
                self,
                execute,
                query(DELETE_TAKEOVER),
                [peer],
                "forgetting a takeover decision",
                then rows_affected
            );
            Ok(deleted > 0)
        })
    }
}

fn check_peer(peer: &str) -> Result<()> {
    check_len("peer", peer, MAX_PEER_LEN)?;
    if peer.is_empty() || !peer.bytes().all(|b| b.is_ascii_lowercase()) {
        return Err(StoreError::InvalidInput(format!(
            "peer `{peer}` is not a peer name: use lowercase letters (baidu, leaf, vesta, \
             sharded, tinyid)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_peer;

    #[test]
    fn peer_names_are_short_lowercase_words() {
        for good in ["baidu", "leaf", "vesta", "sharded", "tinyid"] {
            assert!(check_peer(good).is_ok(), "{good}");
        }
        for bad in ["", "Baidu", "leaf-2", "a_very_long_peer_name"] {
            assert!(check_peer(bad).is_err(), "{bad}");
        }
    }
}
