//! The namespace record `/snowflake/{name}/namespace`: what keeps a ZooKeeper that lost its
//! data (restarted on an emptied data directory, restored from an older snapshot) from letting
//! a claimant start an id below what its forgotten holder stamped.
//!
//! The rule and its argument are uidgen-worker's [`NamespaceRecord`] (shared with etcd): an id
//! whose record (its forever node, or its `ids` tombstone) was written before the namespace
//! record (a lower `mzxid`), or that has no record at all, starts no lower than the namespace
//! record's floor. A start that finds the namespace empty writes [`Origin::UnknownPast`],
//! which fences every id for a reservation (`uidgen zk init` declares a new namespace
//! instead); a namespace with forever nodes or id claims but no record (Leaf's, or an earlier
//! uidgen's) is [`Origin::Adopted`] as it is; a holder that sees its node vanish, or the zxid
//! go back, writes [`Origin::DataLoss`] before it takes its id up again. Leaf reads only
//! `forever/`, so the extra node changes nothing for it.

use uidgen_core::Clock;
use uidgen_worker::{NamespaceRecord, Origin};
use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::options::ZkOptions;
use crate::session::{PERSISTENT, zk_error};
use crate::tree::Tree;
use uidgen_core::clock::saturating_millis as ms;

/// How many times a write of the record may lose a race before giving up.
const ATTEMPTS: u32 = 8;

/// The namespace record as read, with what a claim compares.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    pub(crate) record: NamespaceRecord,
    /// The zxid of its last write: id records older than it are fenced by it.
    pub(crate) mzxid: i64,
    /// Its version: a claim's `multi` checks it, so a record rewritten meanwhile makes the
    /// claim read again.
    pub(crate) version: i32,
}

impl Namespace {
    /// The floor of an id whose record holds `reserved_until` and was written at `mzxid`
    /// (`None`: no record).
    pub(crate) fn floor_of(&self, record: Option<(u64, i64)>) -> u64 {
        match record {
            Some((reserved, mzxid)) => self.record.floor_of(Some(reserved), mzxid > self.mzxid),
            None => self.record.floor_of(None, false),
        }
    }
}

/// The record, if any. A node that does not hold one is an error: reading it as absent could
/// unfence lost ids, and it is not ours to overwrite.
pub(crate) async fn read(
    client: &zk::Client,
    connect: &str,
    tree: &Tree,
) -> Result<Option<Namespace>> {
    let path = tree.namespace();
    match client.get_data(&path).await {
        Ok((bytes, stat)) => {
            let record = NamespaceRecord::parse(&bytes).ok_or_else(|| ZkError::InvalidNode {
                path: path.clone(),
                reason: "not a namespace record; remove or fix it by hand".into(),
            })?;
            Ok(Some(Namespace {
                record,
                mzxid: stat.mzxid,
                version: stat.version,
            }))
        }
        Err(zk::Error::NoNode) => Ok(None),
        Err(source) => Err(zk_error(connect, "reading the namespace record", source)),
    }
}

/// The record, written first when there is none: [`Origin::Adopted`] when the namespace has
/// forever nodes or id claims (Leaf's or an earlier uidgen's), else [`Origin::UnknownPast`].
pub(crate) async fn ensure(
    client: &zk::Client,
    options: &ZkOptions,
    tree: &Tree,
    clock: &dyn Clock,
) -> Result<Namespace> {
    let connect = &options.connect;
    for _ in 0..ATTEMPTS {
        if let Some(namespace) = read(client, connect, tree).await? {
            return Ok(namespace);
        }
        let mut recorded = false;
        for dir in [tree.forever_dir(), tree.ids_dir()] {
            match client.list_children(&dir).await {
                Ok(children) => recorded |= !children.is_empty(),
                Err(zk::Error::NoNode) => {}
                Err(source) => return Err(zk_error(connect, "listing the namespace", source)),
            }
        }
        let now = clock.now_millis();
        let by = options.listen_address();
        let record = NamespaceRecord::first(
            recorded,
            now,
            ms(options.reservation),
            ms(options.max_start_wait),
            by,
            tree.root(),
        );
        match client
            .create(&tree.namespace(), &record.to_json(), &PERSISTENT)
            .await
        {
            Ok(_) => {
                if recorded {
                    tracing::info!(
                        root = %tree.root(),
                        "adopted a ZooKeeper namespace written before namespace records (its \
                         nodes stand)"
                    );
                } else {
                    tracing::warn!(
                        root = %tree.root(),
                        fenced_until_ms = record.floor_ms,
                        "ZooKeeper holds nothing under this namespace: a new one, or one whose \
                         data ZooKeeper lost. Worker ids are fenced until fenced_until_ms, in \
                         case a holder ZooKeeper no longer records is still issuing; if the \
                         namespace is new, run `uidgen zk init` once to use it at once"
                    );
                }
            }
            Err(zk::Error::NodeExists) => {}
            Err(source) => return Err(zk_error(connect, "writing the namespace record", source)),
        }
    }
    read(client, connect, tree)
        .await?
        .ok_or(ZkError::Contention { attempts: ATTEMPTS })
}

/// Make the record fence a loss seen at `now_ms`: write an [`Origin::DataLoss`] record with
/// floor `now + reservation + max_start_wait`, unless the record in force already covers it
/// (written after `last_accepted_ms`, the observer's last accepted report, and fencing).
pub(crate) async fn record_loss(
    client: &zk::Client,
    options: &ZkOptions,
    tree: &Tree,
    now_ms: u64,
    last_accepted_ms: u64,
    why: &str,
) -> Result<NamespaceRecord> {
    let connect = &options.connect;
    let fresh = NamespaceRecord::fenced(
        Origin::DataLoss,
        now_ms,
        ms(options.reservation),
        ms(options.max_start_wait),
        options.listen_address(),
    )
    .because(why);
    for _ in 0..ATTEMPTS {
        let existing = read(client, connect, tree).await?;
        let mut record = fresh.clone();
        let written = match &existing {
            Some(ns) if last_accepted_ms > 0 && ns.record.covers_loss_after(last_accepted_ms) => {
                return Ok(ns.record.clone());
            }
            Some(ns) => {
                record.floor_ms = record.floor_ms.max(ns.record.floor_ms);
                client
                    .set_data(&tree.namespace(), &record.to_json(), Some(ns.version))
                    .await
                    .map(drop)
            }
            None => match client.mkdir(tree.root(), &PERSISTENT).await {
                Ok(()) => client
                    .create(&tree.namespace(), &record.to_json(), &PERSISTENT)
                    .await
                    .map(drop),
                Err(error) => Err(error),
            },
        };
        match written {
            Ok(()) => {
                tracing::error!(
                    root = %tree.root(),
                    fenced_until_ms = record.floor_ms,
                    "ZooKeeper lost data ({why}): recorded in its namespace record; worker ids \
                     without a newer node are fenced until fenced_until_ms"
                );
                return Ok(record);
            }
            Err(zk::Error::BadVersion | zk::Error::NodeExists | zk::Error::NoNode) => {}
            Err(source) => {
                return Err(zk_error(connect, "recording ZooKeeper's data loss", source));
            }
        }
    }
    Err(ZkError::Contention { attempts: ATTEMPTS })
}
