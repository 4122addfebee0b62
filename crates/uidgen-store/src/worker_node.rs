//! The `worker_node` table (Baidu uid-generator's `WORKER_NODE`): one row per process start.

use uidgen_core::{Clock, SystemClock};
use uidgen_worker::{ENV_HOST, ENV_PORT, local_ip};

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql, with_pool_returning};

/// Where a process runs, as Baidu's `WorkerNodeType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeType {
    /// A container whose host and port come from the environment (stored as 1).
    Container,
    /// A plain host: first non-loopback IP and a `"<millis>-<random>"` port (stored as 2).
    Actual,
}

impl NodeType {
    /// The value stored in `worker_node.type`: CONTAINER = 1, ACTUAL = 2.
    ///
    /// ```
    /// assert_eq!(uidgen_store::NodeType::Actual.code(), 2);
    /// ```
    pub fn code(self) -> i32 {
        match self {
            Self::Container => 1,
            Self::Actual => 2,
        }
    }
}

/// A `worker_node` row to insert.
///
/// ```
/// use uidgen_store::{NodeType, WorkerNode};
/// let node = WorkerNode::from_lookup(|name| match name {
///     "UIDGEN_HOST" => Some("10.0.0.7".into()),
///     "UIDGEN_PORT" => Some("8080".into()),
///     _ => None,
/// });
/// assert_eq!((node.host_name.as_str(), node.port.as_str()), ("10.0.0.7", "8080"));
/// assert_eq!(node.node_type, NodeType::Container);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerNode {
    /// Host name or IP (at most 64 characters).
    pub host_name: String,
    /// Port, or `"<millis>-<random>"` (at most 64 characters).
    pub port: String,
    /// Container or actual host.
    pub node_type: NodeType,
    /// Launch date as `YYYY-MM-DD`; `None` stores the database's current date.
    pub launch_date: Option<String>,
}

impl WorkerNode {
    /// This process: [`ENV_HOST`] / [`ENV_PORT`] when both are set (a container), else the
    /// first non-loopback IP and `"<millis>-<random>"` (Baidu's rule). Lenient: a half-set
    /// pair is logged and ignored; [`try_detect`](Self::try_detect) refuses it instead.
    pub fn detect() -> Self {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`detect`](Self::detect), but only one of [`ENV_HOST`] / [`ENV_PORT`] being set is
    /// [`StoreError::IncompleteNodeEnv`]: a container that forgot its port would otherwise
    /// register as a plain host without anyone noticing.
    pub fn try_detect() -> Result<Self> {
        Self::try_from_lookup(|name| std::env::var(name).ok())
    }

    /// As [`detect`](Self::detect), reading variables through `lookup` (for tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        Self::try_from_lookup(&lookup).unwrap_or_else(|error| {
            tracing::warn!(%error, "ignoring the half-set container address");
            Self::actual()
        })
    }

    /// As [`try_detect`](Self::try_detect), reading variables through `lookup`.
    ///
    /// ```
    /// use uidgen_store::{StoreError, WorkerNode};
    /// let error =
    ///     WorkerNode::try_from_lookup(|name| (name == "UIDGEN_HOST").then(|| "10.0.0.7".into()));
    /// assert!(matches!(
    ///     error,
    ///     Err(StoreError::IncompleteNodeEnv { set: "UIDGEN_HOST", missing: "UIDGEN_PORT" })
    /// ));
    /// ```
    pub fn try_from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let non_empty = |name| lookup(name).filter(|v: &String| !v.trim().is_empty());
        match (non_empty(ENV_HOST), non_empty(ENV_PORT)) {
            (Some(host_name), Some(port)) => Ok(Self {
                host_name,
                port,
                node_type: NodeType::Container,
                launch_date: None,
            }),
            (Some(_), None) => Err(StoreError::IncompleteNodeEnv {
                set: ENV_HOST,
                missing: ENV_PORT,
            }),
            (None, Some(_)) => Err(StoreError::IncompleteNodeEnv {
                set: ENV_PORT,
                missing: ENV_HOST,
            }),
            (None, None) => Ok(Self::actual()),
        }
    }

    /// A plain host: its IP and a port unique to this start.
    fn actual() -> Self {
        Self {
            host_name: local_ip().map_or_else(|| "127.0.0.1".to_owned(), |ip| ip.to_string()),
            port: format!("{}-{}", SystemClock.now_millis(), fastrand::u32(0..100_000)),
            node_type: NodeType::Actual,
            launch_date: None,
        }
    }
}

const INSERT_WORKER_NODE: Sql = Sql {
    sqlite: "INSERT INTO worker_node (host_name, port, type, launch_date, modified, created)
             VALUES (?1, ?2, ?3, COALESCE(?4, DATE('now')), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
             RETURNING id",
    // The id is read from the OK packet of this very statement on this very connection: the
    // value LAST_INSERT_ID() would return there, immune to other sessions' inserts.
    mysql: "INSERT INTO worker_node (host_name, port, type, launch_date, modified, created)
            VALUES (?, ?, ?, COALESCE(?, CURRENT_DATE), CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
    postgres: "INSERT INTO worker_node (host_name, port, type, launch_date, modified, created)
               VALUES ($1, $2, $3, COALESCE(CAST($4 AS DATE), CURRENT_DATE), CURRENT_TIMESTAMP, \
               CURRENT_TIMESTAMP)
               RETURNING id",
};

const COUNT_WORKER_NODES: Sql = Sql::same("SELECT COUNT(*) FROM worker_node");

impl Store {
    /// Insert a `worker_node` row and return its id: the new worker id.
    ///
    /// `RETURNING id` on SQLite and PostgreSQL; on MySQL the insert's own last-insert id,
    /// which is `LAST_INSERT_ID()` of the same connection.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// let id = store.insert_worker_node(&uidgen_store::WorkerNode::detect()).await?;
    /// assert!(id >= 1);
    /// # Ok(()) }
    /// ```
    pub fn insert_worker_node<'a>(&'a self, node: &'a WorkerNode) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            check_len("host_name", &node.host_name, 64)?;
            check_len("port", &node.port, 64)?;
            let sql = INSERT_WORKER_NODE.get(self.dialect());
            let action = "inserting a worker_node row";
            let id: i64 = with_pool_returning!(self, pool,
                mysql => {
                    let done = sqlx::query(sql)
                        .bind(&node.host_name)
                        .bind(&node.port)
                        .bind(node.node_type.code())
                        .bind(node.launch_date.as_deref())
                        .execute(pool)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    return Ok(done.last_insert_id());
                },
                returning => sqlx::query_scalar(sql)
                    .bind(&node.host_name)
                    .bind(&node.port)
                    .bind(node.node_type.code())
                    .bind(node.launch_date.as_deref())
                    .fetch_one(pool)
                    .await
                    .map_err(|e| self.err(action, e))?
            );
            u64::try_from(id)
                .map_err(|_| StoreError::InvalidInput(format!("worker_node id {id} is negative")))
        })
    }

    /// How many `worker_node` rows exist (every start of every process so far).
    pub fn count_worker_nodes(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let count: i64 = run_sql!(
                self,
                fetch_one,
                query_scalar(COUNT_WORKER_NODES),
                [],
                "counting worker_node rows"
            );
            Ok(u64::try_from(count).unwrap_or(0))
        })
    }
}

/// A claim's step must be 1 to `max` (the table's own cap), named in the message.
pub(crate) fn check_step(step: i64, max: i64) -> Result<()> {
    if !(1..=max).contains(&step) {
        return Err(StoreError::InvalidInput(format!(
            "step {step} is out of range; use 1 to {max}"
        )));
    }
    Ok(())
}

pub(crate) fn check_len(what: &str, value: &str, max: usize) -> Result<()> {
    let len = value.chars().count();
    if len > max {
        return Err(StoreError::InvalidInput(format!(
            "{what} is {len} characters long; at most {max} fit"
        )));
    }
    Ok(())
}
