//! Vesta's `DB_MACHINE_ID_PROVIDER`: the machine ids its `DbMachineIdProvider` hands to hosts.
//!
//! Vesta's script fills the table with ids 0 to 1023 and no IP; a starting process finds its
//! host's row (`select ID from DB_MACHINE_ID_PROVIDER where IP = ?`) or takes a free one
//! (`update DB_MACHINE_ID_PROVIDER set IP = ? where IP is null limit 1`). A row with an IP is
//! that host's machine id for good: Vesta never gives one back. uidgen reads the table to keep
//! its own worker ids off every id a Vesta host holds.

use crate::error::StoreFuture;
use crate::store::{Sql, Store, run_sql};

/// The name Vesta's DDL gives its table.
pub const VESTA_TABLE: &str = "DB_MACHINE_ID_PROVIDER";

/// A row of Vesta's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VestaMachineRow {
    /// The machine id.
    pub id: i64,
    /// The host holding it, or `None` while it is free.
    pub ip: Option<String>,
}

const MACHINE_ROWS: Sql = Sql {
    sqlite: "SELECT ID, IP FROM DB_MACHINE_ID_PROVIDER ORDER BY ID",
    mysql: "SELECT CAST(ID AS SIGNED), IP FROM DB_MACHINE_ID_PROVIDER ORDER BY ID",
    postgres: "SELECT CAST(id AS BIGINT), CAST(ip AS TEXT) FROM db_machine_id_provider ORDER BY id",
};

impl Store {
    /// The rows of Vesta's `DB_MACHINE_ID_PROVIDER`, by id; `None` when the store has no such
    /// table.
    pub fn vesta_machine_rows(&self) -> StoreFuture<'_, Option<Vec<VestaMachineRow>>> {
        Box::pin(async move {
            if self.peer_table(VESTA_TABLE).await?.is_none() {
                return Ok(None);
            }
            let rows: Vec<(i64, Option<String>)> = run_sql!(
                self,
                fetch_all,
                query_as(MACHINE_ROWS),
                [],
                "reading Vesta's DB_MACHINE_ID_PROVIDER"
            );
            Ok(Some(
                rows.into_iter()
                    .map(|(id, ip)| VestaMachineRow { id, ip })
                    .collect(),
            ))
        })
    }
}
