//! [`ZkOrderMarks`]: the order marks of ID spaces (issue 33 item 1, "order across restarts")
//! kept in the ZooKeeper the worker ids come from, one persistent node per space,
//! `/snowflake/{name}/order/{space}`, so that servers which each keep a store of their own
//! (the embedded SQLite) share them.
//!
//! Invariant: the value only rises. A raise reads the node and writes it with `set_data`
//! guarded by the version it read, so a write that another server's raise overtook in between
//! fails (`BadVersion`) and the raise reads again; it stops as soon as the value it finds is
//! at least its own. The node is not under `forever`, `ids` or `live`, the only parents that
//! Leaf, the claim, the peer check and the reclaim list, so none of them sees it.

use std::time::Duration;

use parking_lot::Mutex;
use uidgen_worker::{MarkRaise, OrderMarkRecord, order_mark_name};
use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::options::ZkOptions;
use crate::session::{PERSISTENT, connect, zk_error};

/// Rounds a raise tries before it reports contention (each one lost means another server
/// wrote the node meanwhile; a raise-only value settles in a few).
const RAISE_ATTEMPTS: u32 = 16;

/// What a failed raise was doing, for its error.
const RAISING: &str = "raising the ID space's order mark";

/// What a failed read was doing, for its error.
const READING: &str = "reading the ID space's order mark";

/// ID spaces' order marks in ZooKeeper, for [`OrderFence`](uidgen_worker::OrderFence). It
/// keeps a session of its own, opened at the first call and opened again once ZooKeeper has
/// expired it.
///
/// ```no_run
/// # async fn demo() -> uidgen_zk::Result<()> {
/// use uidgen_worker::MarkRaise;
/// use uidgen_zk::{ZkOptions, ZkOrderMarks};
/// let options = ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
/// let marks = ZkOrderMarks::new(&options);
/// assert_eq!(marks.mark_path("default"), "/snowflake/order/order/default");
/// marks.raise(MarkRaise::new("default", "10.0.0.7:8080", 1_800_000_000_000, 0)).await?;
/// // A lower raise: the mark is kept.
/// marks.raise(MarkRaise::new("default", "10.0.0.8:8080", 1_700_000_000_000, 0)).await?;
/// assert_eq!(marks.read("default").await?, Some(1_800_000_000_000));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZkOrderMarks {
    connect: String,
    session_timeout: Duration,
    root: String,
    /// The session, once opened; `None` again once it expired.
    client: Mutex<Option<zk::Client>>,
}

impl ZkOrderMarks {
    /// Marks under `options.root()` on `options.connect` (nothing is asked of ZooKeeper yet).
    pub fn new(options: &ZkOptions) -> Self {
        Self {
            connect: options.connect.clone(),
            session_timeout: options.session_timeout,
            root: options.root(),
            client: Mutex::new(None),
        }
    }

    /// The node of `space`'s mark.
    pub fn mark_path(&self, space: &str) -> String {
        format!("{}/order/{}", self.root, order_mark_name(space))
    }

    /// The space's mark; `None` while no server of the space has written one.
    ///
    /// Cancel safety: a read only (a session opened meanwhile is kept or closes itself).
    pub async fn read(&self, space: &str) -> Result<Option<u64>> {
        let client = self.client().await?;
        let path = self.mark_path(space);
        match client.get_data(&path).await {
            Ok((data, _)) => parse(&path, &data).map(Some),
            Err(zk::Error::NoNode) => Ok(None),
            Err(source) => Err(self.failed(READING, source)),
        }
    }

    /// Raise the space's mark to `raise.until_ms` unless it is at least that already;
    /// returns the mark as the raise left it (at least `raise.until_ms`).
    ///
    /// Cancel safety: a raise dropped midway may or may not have been applied; either way the
    /// mark did not fall.
    pub async fn raise(&self, raise: MarkRaise<'_>) -> Result<u64> {
        let client = self.client().await?;
        let (path, until_ms) = (self.mark_path(raise.space), raise.until_ms);
        let json = raise.record_json();
        for _ in 0..RAISE_ATTEMPTS {
            match client.get_data(&path).await {
                Ok((data, stat)) => {
                    let mark = parse(&path, &data)?;
                    if mark >= until_ms {
                        return Ok(mark);
                    }
                    match client.set_data(&path, &json, Some(stat.version)).await {
                        Ok(_) => return Ok(until_ms),
                        // Written (or removed) by another since the read: read again.
                        Err(zk::Error::BadVersion | zk::Error::NoNode) => {}
                        Err(source) => return Err(self.failed(RAISING, source)),
                    }
                }
                Err(zk::Error::NoNode) => {
                    let dir = format!("{}/order", self.root);
                    client
                        .mkdir(&dir, &PERSISTENT)
                        .await
                        .map_err(|source| self.failed(RAISING, source))?;
                    match client.create(&path, &json, &PERSISTENT).await {
                        Ok(_) => return Ok(until_ms),
                        // Another server created it first: raise over what it wrote.
                        Err(zk::Error::NodeExists) => {}
                        Err(source) => return Err(self.failed(RAISING, source)),
                    }
                }
                Err(source) => return Err(self.failed(READING, source)),
            }
        }
        // Every round lost to another server's write: the fence tries again.
        Err(zk_error(&self.connect, RAISING, zk::Error::BadVersion))
    }

    /// The session, opening one when there is none.
    async fn client(&self) -> Result<zk::Client> {
        if let Some(client) = self.client.lock().clone() {
            return Ok(client);
        }
        let client = connect(&self.connect, self.session_timeout).await?;
        *self.client.lock() = Some(client.clone());
        Ok(client)
    }

    /// `source` as our error; a session that cannot come back is dropped, so the next call
    /// opens another.
    #[cold]
    fn failed(&self, action: &'static str, source: zk::Error) -> ZkError {
        if matches!(
            source,
            zk::Error::SessionExpired | zk::Error::ClientClosed | zk::Error::AuthFailed
        ) {
            *self.client.lock() = None;
        }
        zk_error(&self.connect, action, source)
    }
}

/// The mark a node holds; an error for data that is not one.
fn parse(path: &str, data: &[u8]) -> Result<u64> {
    OrderMarkRecord::mark_in(data).map_err(|e| ZkError::InvalidNode {
        path: path.to_owned(),
        reason: format!("not an order mark ({e}): remove it or choose another namespace"),
    })
}

uidgen_worker::order_marks_from!(ZkOrderMarks, "ZooKeeper", read, raise);
