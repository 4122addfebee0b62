//! Baidu uid-generator's `WORKER_NODE` table, and the one counter uidgen shares with it.
//!
//! Baidu's `DisposableWorkerIdAssigner` inserts a row per start (`INSERT INTO WORKER_NODE
//! (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) VALUES (...)`, Baidu's
//! `WORKER_NODE.xml`) and takes the row's `ID` as its worker id, as uidgen's disposable assigner
//! does with `worker_node`. Two processes that draw from one `AUTO_INCREMENT` counter never
//! share a worker id, so Baidu apps and uidgen can run side by side on one table, and uidgen
//! continues where a stopped Baidu fleet left off.
//!
//! On PostgreSQL and SQLite Baidu's table *is* uidgen's `worker_node` (unquoted names fold to
//! lower case; SQLite ignores case), so the counter is shared already. On MySQL and MariaDB
//! (case-sensitive table names on Linux) Baidu's `WORKER_NODE` is a table apart, whose counter
//! uidgen's `worker_node` does not see: uidgen would take worker 1 again.
//! [`Store::share_baidu_worker_node`] makes uidgen's `worker_node` a view of Baidu's table, so every uidgen statement that reads or
//! inserts `worker_node` works on Baidu's rows and counter (a single-table view is insertable
//! on MySQL, and the insert id it reports is the base table's).

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql};
use crate::url::Dialect;

/// The name Baidu's DDL (`WORKER_NODE.sql`) gives its table.
pub const BAIDU_TABLE: &str = "WORKER_NODE";

/// What uidgen's own rows are kept as once `worker_node` becomes a view of Baidu's table.
pub const UIDGEN_ROWS_BEFORE_SHARING: &str = "worker_node_before_baidu";

/// A worker-node table as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerNodeTable {
    /// Its exact name.
    pub name: String,
    /// How many rows it holds: one per start of a process that took a worker id from it.
    pub rows: u64,
    /// The highest id in it (every worker id handed out from it so far is at most this).
    pub max_id: Option<i64>,
}

/// uidgen's `worker_node` and Baidu's `WORKER_NODE`, as [`Store::baidu_worker_nodes`] finds
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaiduWorkerNodes {
    /// The table uidgen's disposable ids come from (`worker_node`): Baidu's own table where
    /// the names are one (PostgreSQL, SQLite), or a view of it once shared (MySQL).
    pub own: WorkerNodeTable,
    /// Baidu's `WORKER_NODE` where it is a table apart from `worker_node` (MySQL), whether or
    /// not uidgen shares it yet.
    pub legacy: Option<WorkerNodeTable>,
    /// Whether `worker_node` is a view of Baidu's table ([`Store::share_baidu_worker_node`]):
    /// uidgen and Baidu draw worker ids from one counter.
    pub shared: bool,
}

impl BaiduWorkerNodes {
    /// Whether uidgen and Baidu's apps draw from one counter: the table is one, or shared.
    pub fn one_counter(&self) -> bool {
        self.legacy.is_none() || self.shared
    }

    /// The highest worker id either table handed out.
    pub fn max_id(&self) -> Option<i64> {
        let legacy = self.legacy.as_ref().and_then(|t| t.max_id);
        self.own.max_id.max(legacy)
    }
}

const OWN_STATS: Sql = Sql::same("SELECT COUNT(*), MAX(id) FROM worker_node");
// Baidu's names, on MySQL only: elsewhere the table is `worker_node`.
const LEGACY_STATS: Sql = Sql::same("SELECT COUNT(*), MAX(ID) FROM WORKER_NODE");
const BEFORE_SHARING_STATS: Sql =
    Sql::same("SELECT COUNT(*), MAX(id) FROM worker_node_before_baidu");

/// uidgen's `worker_node` as a view of Baidu's table: the column names uidgen's statements use,
/// over Baidu's upper-case ones (MySQL compares column names without case anyway).
const SHARE_VIEW: &str = "CREATE VIEW worker_node AS SELECT ID AS id, HOST_NAME AS host_name, \
                          PORT AS port, TYPE AS type, LAUNCH_DATE AS launch_date, \
                          MODIFIED AS modified, CREATED AS created FROM WORKER_NODE";

const KEEP_OWN_ROWS: &str = "RENAME TABLE worker_node TO worker_node_before_baidu";

impl Store {
    /// uidgen's `worker_node` and, where it is a table apart, Baidu's `WORKER_NODE`.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// let found = store.baidu_worker_nodes().await?;
    /// if !found.one_counter() {
    ///     let rows = found.legacy.map_or(0, |t| t.rows);
    ///     println!("Baidu's WORKER_NODE holds {rows} rows uidgen does not see");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn baidu_worker_nodes(&self) -> StoreFuture<'_, BaiduWorkerNodes> {
        Box::pin(async move {
            let own_found = self.tables_named("worker_node").await?;
            let shared = own_found.iter().any(|t| t.view && t.name == "worker_node");
            let legacy = if self.dialect() == Dialect::MySql
                && self.peer_table(BAIDU_TABLE).await?.is_some()
            {
                Some(self.worker_node_stats(BAIDU_TABLE, LEGACY_STATS).await?)
            } else {
                None
            };
            let mut own = self.worker_node_stats("worker_node", OWN_STATS).await?;
            if shared
                && self
                    .tables_named(UIDGEN_ROWS_BEFORE_SHARING)
                    .await?
                    .iter()
                    .any(|t| !t.view)
            {
                // The rows uidgen wrote before sharing are ids it used too.
                let before = self
                    .worker_node_stats(UIDGEN_ROWS_BEFORE_SHARING, BEFORE_SHARING_STATS)
                    .await?;
                own.max_id = own.max_id.max(before.max_id);
            }
            Ok(BaiduWorkerNodes {
                own,
                legacy,
                shared,
            })
        })
    }

    async fn worker_node_stats(&self, name: &str, sql: Sql) -> Result<WorkerNodeTable> {
        let (rows, max_id): (i64, Option<i64>) = run_sql!(
            self,
            fetch_one,
            query_as(sql),
            [],
            "reading a worker_node table"
        );
        Ok(WorkerNodeTable {
            name: name.to_owned(),
            rows: u64::try_from(rows).unwrap_or(0),
            max_id,
        })
    }

    /// Make uidgen draw its disposable worker ids from Baidu's `WORKER_NODE` counter, on MySQL
    /// where it is a table apart: raise Baidu's `AUTO_INCREMENT` above every id uidgen's own
    /// `worker_node` handed out, keep uidgen's rows as `worker_node_before_baidu`, and make
    /// `worker_node` a view of Baidu's table. Returns the `AUTO_INCREMENT` set, or `None` when
    /// there was nothing to do (another dialect, no `WORKER_NODE`, or shared already).
    ///
    /// MySQL's DDL commits on its own: a failure between the steps names what is left to do.
    /// Needs the `ALTER`, `DROP` and `CREATE VIEW` privileges on the database.
    pub fn share_baidu_worker_node(&self) -> StoreFuture<'_, Option<i64>> {
        Box::pin(async move {
            let found = self.baidu_worker_nodes().await?;
            let Some(legacy) = found.legacy.as_ref().filter(|_| !found.shared) else {
                return Ok(None);
            };
            // Above every id either table handed out: Baidu's apps and uidgen's earlier starts.
            let next = found.max_id().unwrap_or(0).saturating_add(1);
            // DDL takes no bind parameters; `next` is a number this function computed.
            let raise = format!("ALTER TABLE {BAIDU_TABLE} AUTO_INCREMENT = {next}");
            let steps = [
                (raise.as_str(), "raising WORKER_NODE's AUTO_INCREMENT"),
                (
                    KEEP_OWN_ROWS,
                    "renaming worker_node to worker_node_before_baidu",
                ),
                (SHARE_VIEW, "creating the view worker_node of WORKER_NODE"),
            ];
            for (i, (statement, what)) in steps.iter().enumerate() {
                let done = crate::store::with_pool!(
                    self,
                    pool,
                    // Audited: two constant statements and one whose only variable is the integer
                    // `next`.
                    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_string()))
                        .execute(pool)
                        .await
                        .map(drop)
                );
                if let Err(error) = done {
                    let left: Vec<&str> = steps[i..].iter().map(|(s, _)| *s).collect();
                    return Err(StoreError::Takeover(format!(
                        "cannot share Baidu's {} with uidgen: {what} failed ({}); run by hand, in \
                         order: {}",
                        legacy.name,
                        self.err("sharing WORKER_NODE", error),
                        left.join("; ")
                    )));
                }
            }
            tracing::info!(
                auto_increment = next,
                "uidgen's worker_node is now a view of Baidu's WORKER_NODE: one counter for both"
            );
            Ok(Some(next))
        })
    }
}
