//! The tables of the systems uidgen takes over from, read (and, where a takeover must, written)
//! in each peer's own format: Baidu's `WORKER_NODE` ([`baidu`]), Vesta's
//! `DB_MACHINE_ID_PROVIDER` ([`vesta`]) and Tinyid's `tiny_id_info` and `tiny_id_token`
//! ([`tinyid`]). Leaf's `leaf_alloc` and the sharded service's `id_alloc` are uidgen's own
//! tables too, kept in their peers' formats (`leaf_alloc.rs`, `id_alloc.rs`).
//!
//! Each peer's names are written as its own DDL writes them. MySQL and MariaDB compare table
//! names case-sensitively on Linux (`lower_case_table_names = 0`), so Baidu's `WORKER_NODE` is
//! another table than uidgen's `worker_node` there; PostgreSQL folds unquoted names to lower
//! case and SQLite ignores case, so there they are one table.

pub mod baidu;
pub mod tinyid;
pub mod vesta;

use crate::error::Result;
use crate::store::{Sql, Store, run_sql};

/// Tables and views whose name equals `name` ignoring case, with their exact names and whether
/// each is a view.
const TABLES_NAMED: Sql = Sql {
    sqlite: "SELECT name, CASE type WHEN 'view' THEN 1 ELSE 0 END FROM sqlite_master
             WHERE type IN ('table', 'view') AND lower(name) = ?1",
    mysql: "SELECT CAST(TABLE_NAME AS CHAR),
                   CAST(CASE TABLE_TYPE WHEN 'VIEW' THEN 1 ELSE 0 END AS SIGNED)
            FROM information_schema.TABLES
            WHERE TABLE_SCHEMA = DATABASE() AND LOWER(TABLE_NAME) = ?",
    postgres: "SELECT CAST(table_name AS TEXT),
                      CAST(CASE table_type WHEN 'VIEW' THEN 1 ELSE 0 END AS BIGINT)
               FROM information_schema.tables
               WHERE table_schema = current_schema() AND lower(table_name) = $1",
};

/// A table (or view) of the store, by its exact name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) name: String,
    pub(crate) view: bool,
}

impl Store {
    /// The tables and views named `lower_name` in any case, as the catalogue spells them.
    pub(crate) async fn tables_named(&self, lower_name: &str) -> Result<Vec<Found>> {
        let rows: Vec<(String, i64)> = run_sql!(
            self,
            fetch_all,
            query_as(TABLES_NAMED),
            [lower_name],
            "reading the catalogue"
        );
        Ok(rows
            .into_iter()
            .map(|(name, view)| Found {
                name,
                view: view != 0,
            })
            .collect())
    }

    /// The table of a peer whose DDL names it `peer_name` (upper case for Baidu and Vesta,
    /// which wrote MySQL): on MySQL the table of exactly that name, elsewhere the one table of
    /// that name in any case.
    pub(crate) async fn peer_table(&self, peer_name: &str) -> Result<Option<Found>> {
        let found = self.tables_named(&peer_name.to_ascii_lowercase()).await?;
        Ok(match self.dialect() {
            crate::url::Dialect::MySql => found.into_iter().find(|t| t.name == peer_name),
            _ => found.into_iter().next(),
        })
    }
}
