//! Keeping ZooKeeper's sequence counter under `forever/` above every id uidgen holds, so a Java
//! Leaf server started later never takes one of them.
//!
//! Java Leaf (`SnowflakeZookeeperHolder.createNode`,
//! <https://github.com/Meituan-Dianping/Leaf/blob/master/leaf-core/src/main/java/com/sankuai/inf/leaf/snowflake/SnowflakeZookeeperHolder.java>)
//! takes its worker id from ZooKeeper: a new ip:port creates `forever/{ip}:{port}-` as
//! `PERSISTENT_SEQUENTIAL` and parses the ten-digit suffix ZooKeeper appends. That suffix is
//! the parent's sequence counter, which moves by one with every child *created* under it (not
//! with deletes: measured on ZooKeeper 3.8, a parent with 7 creates and 3 deletes behind it,
//! `cversion` 10, numbers its next child 7). uidgen chooses its ids itself (the lowest free one
//! of its range) and names its nodes the same way, and each of its nodes is one create; a
//! counter below an id uidgen holds would, after enough Leaf starts, hand that id to Leaf, and
//! both would stamp one worker id. Issue 31 found it with Vesta's server range: uidgen's first
//! node was `-0000000924` while the counter stood at 3.
//!
//! The rule kept here: **before uidgen creates or continues a node of id `k`, the counter is
//! past `k`**. The counter is read by creating a probe child, `uidgen:sequence-`, itself
//! sequential (its suffix is the counter; ephemeral, so a crash leaves nothing; named so that
//! Leaf's `key.split("-")` and `Integer.parseInt` read it as the address `uidgen:sequence`,
//! which no Leaf server has, should Leaf list the namespace in the moment it exists). It is
//! raised by creating and deleting a child in one `multi` per step (never listed by anyone;
//! Leaf parses every child's name and would fail on one that is not `{address}-{digits}`),
//! and the probe goes in the same `multi`. A namespace whose children outnumber `k` needs no
//! probe: the counter is at least the number of children.
//!
//! Why that suffices: the counter never goes down, so every Leaf node created after the raise
//! gets a suffix above `k`; a Leaf node created before it is a child that the start lists
//! afterwards (its reads follow its own writes), and a listed node's id is not taken. Ids above
//! Leaf's 1023 need no raise: Leaf refuses to start on them (`workerID must gte 0 and lte
//! 1023`).

use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::session::{PERSISTENT, zk_error};
use crate::tree::{NodeData, Tree, parse_forever_name};

/// The largest worker id Java Leaf starts with (its 10 worker bits).
pub(crate) const LEAF_MAX_WORKER_ID: u64 = 1023;

/// The child created and deleted to move the counter: not a forever node's name, and never
/// listed (it lives only inside one `multi`).
const PAD: &str = "uidgen-sequence-pad";

/// The prefix of the probe that reads the counter: `{PROBE}{counter:010}` parses, for Leaf and
/// for uidgen alike, as a node of the address `uidgen:sequence`.
const PROBE: &str = "uidgen:sequence-";

/// Ephemeral and sequential: the probe.
const PROBE_MODE: zk::CreateOptions<'static> =
    zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());

/// Create/delete pairs per `multi`: 512 pairs are 1,024 small operations, far inside
/// ZooKeeper's request limit (`jute.maxbuffer`, 1 MB).
const PAIRS_PER_MULTI: u64 = 512;

/// Raise the sequence counter under `forever/` above `worker_id` (see the module doc). Ids
/// above [`LEAF_MAX_WORKER_ID`] are left alone.
pub(crate) async fn keep_ahead(
    client: &zk::Client,
    tree: &Tree,
    connect: &str,
    worker_id: u64,
) -> Result<()> {
    let error = |action, source| zk_error(connect, action, source);
    if worker_id > LEAF_MAX_WORKER_ID {
        return Ok(());
    }
    let forever = tree.forever_dir();
    let (_, stat) = client
        .get_children(&forever)
        .await
        .map_err(|source| error("counting the forever nodes", source))?;
    if u64::try_from(stat.num_children).unwrap_or(0) > worker_id {
        return Ok(());
    }
    let pad = tree.forever(PAD);
    loop {
        let (_, sequence) = client
            .create(&tree.forever(PROBE), &probe_data(), &PROBE_MODE)
            .await
            .map_err(|source| error("reading the forever nodes' sequence counter", source))?;
        let probe = tree.forever(&format!("{PROBE}{sequence}"));
        // The probe took the number it shows; the next create gets one more.
        let counter = u64::try_from(sequence.into_i64())
            .unwrap_or(0)
            .saturating_add(1);
        let pairs = (worker_id + 1).saturating_sub(counter).min(PAIRS_PER_MULTI);
        let mut multi = client.new_multi_writer();
        let built = (|| {
            for _ in 0..pairs {
                multi.add_create(&pad, b"", &PERSISTENT)?;
                multi.add_delete(&pad, None)?;
            }
            multi.add_delete(&probe, None)
        })();
        built.map_err(|source| error("raising the forever nodes' sequence counter", source))?;
        match multi.commit().await {
            Ok(_) if counter + pairs > worker_id => {
                if pairs > 0 {
                    tracing::debug!(
                        worker_id,
                        counter,
                        pairs,
                        "raised ZooKeeper's sequence counter"
                    );
                }
                return Ok(());
            }
            Ok(_) => {}
            Err(source) => {
                // The probe is ephemeral: a failed multi leaves it only until the session ends.
                return Err(error(
                    "raising the forever nodes' sequence counter",
                    source.into(),
                ));
            }
        }
    }
}

/// The probe's data: a node's JSON (the address `uidgen:sequence`, reporting now), so that any
/// reader of the forever nodes in the moment it exists reads it like any other.
fn probe_data() -> Vec<u8> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    NodeData {
        ip: "uidgen".to_owned(),
        port: "sequence".to_owned(),
        timestamp: u64::try_from(now.as_millis()).unwrap_or(u64::MAX),
        reserved_until: None,
        life: None,
    }
    .to_json()
}

/// The forever nodes of other addresses that carry `worker_id` (a Leaf node created before the
/// counter was raised past it); empty when the id is this address's alone.
pub(crate) async fn others_with(
    client: &zk::Client,
    tree: &Tree,
    connect: &str,
    worker_id: u64,
    own: &str,
) -> Result<Vec<String>> {
    Ok(client
        .list_children(&tree.forever_dir())
        .await
        .map_err(|source| zk_error(connect, "listing the forever nodes", source))?
        .into_iter()
        .filter(|name| {
            name != own
                && !name.starts_with(PROBE)
                && parse_forever_name(name).is_some_and(|(_, id)| id == worker_id)
        })
        .collect())
}

/// A node of ours shares its id with a node another process created (Leaf, before the counter
/// was raised past the id): refuse rather than stamp one id twice.
pub(crate) fn shared(worker_id: u64, own: &str, others: Vec<String>) -> ZkError {
    ZkError::SequenceTaken {
        worker_id,
        node: own.to_owned(),
        others,
    }
}
