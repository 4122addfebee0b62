//! A start while ZooKeeper answers: continue this address's forever node, or claim a free id.
//!
//! The guarantee this file keeps, from the `zookeeper` row of docs/OPERATIONS.md ("Why IDs
//! never repeat"; the whole argument is in `assigner.rs`): **the `floor` of a start on a node
//! is at least every `limit` its earlier holders had.** Their limit is `min(local mark, R)`, `R`
//! the `reserved_until` of the last report ZooKeeper accepted, and the floors are:
//!
//! - **A restart on this host whose cache saw the node's last write** (the cache records the
//!   node's czxid and the mzxid of this host's last accepted report, and the node is still at
//!   that write): `floor = max(cache mark, t)`. Every life that used this cache stamped below
//!   its mark (synced first, and the cache is locked while in use); no other life wrote the
//!   node since (every start writes it, at the version it read, before issuing); and the lives
//!   before that write were already below the floor of the life that made it, which its mark
//!   covers (the mark is raised to at least the floor at start).
//! - **Any other restart with the same ip:port** (no cache, one that did not see the last
//!   write, or another host with the same address), once the last session's live node is
//!   gone: `floor = max(R, t)`: the last writer's promise, read at the version the start's
//!   first report writes at (so a report of the last holder in between fails that write).
//!   If the clock cannot reach it within
//!   [`max_start_wait`](crate::ZkOptions::max_start_wait), the node is left alone and another
//!   id is claimed (a later start reuses the node once `R` has passed, minutes later, or a
//!   reclaim frees it). The last holder may still be running cut off, but it stops at `R`.
//! - **A new holder of a reclaimed id**: the tombstone's floor, at least `R` (see
//!   `reclaim.rs`); a claimant whose clock is behind it is refused before it claims.
//! - **Java Leaf beside uidgen**: no id is claimed or continued while ZooKeeper's sequence
//!   counter under `forever/` is at or below it (`sequence.rs`), so a Leaf server started later
//!   numbers its node above every id uidgen holds, and an id a Leaf node already carries is
//!   never taken.
//! - **Any id whose node or tombstone is older than the namespace record, or that has none**:
//!   at least the namespace record's floor (`namespace.rs`), which covers what ZooKeeper may
//!   have forgotten; such an id is left alone until the clock can reach it. Every claim's
//!   `multi` checks the record's version, so one rewritten meanwhile (a loss seen) makes the
//!   claim read again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_worker::{CachedWorker, WorkerIdRange, read_cache};
use zookeeper_client as zk;

use super::{ZkAssignment, ZkSource, ZooKeeperWorkerIdAssigner, clock_reaches};
use crate::error::{Result, ZkError};
use crate::holder::report::Conn;
use crate::holder::shared::Shared;
use crate::holder::{POLL, ZkHolder};
use crate::namespace::{self, Namespace};
use crate::options::ZkOptions;
use crate::peers::check_peers;
use crate::session::{PERSISTENT, ensure_tree, zk_error};
use crate::tree::{IdClaim, NodeData, Tree, forever_name, parse_forever_name};
use uidgen_core::clock::saturating_millis as ms;

/// How many rounds a claim may lose to other claimants before giving up.
const CLAIM_ATTEMPTS: u32 = 8;

/// A forever node of this process's address that the start may continue.
#[derive(Debug)]
struct Reuse {
    worker_id: u64,
    name: String,
    version: i32,
    floor_ms: u64,
    reserved_ms: u64,
}

impl ZooKeeperWorkerIdAssigner {
    /// ZooKeeper answers: continue this address's node, or claim a fresh id.
    pub(super) async fn start_with(
        &self,
        client: zk::Client,
        layout: &Layout,
        range: WorkerIdRange,
    ) -> Result<ZkAssignment> {
        let options = &self.core.options;
        let tree = Tree::new(options.root());
        ensure_tree(&client, &options.connect, &tree).await?;
        let namespace =
            namespace::ensure(&client, options, &tree, self.core.clock.as_ref()).await?;
        let (worker_id, name, version, floor, reserved) = match self
            .find_own(&client, &tree, layout, range, &namespace)
            .await?
        {
            Some(reuse) => {
                // A node from before issue 31 may lie above the sequence counter: raise it, and
                // refuse an id a Leaf node took meanwhile (`sequence.rs`).
                super::sequence::keep_ahead(&client, &tree, &options.connect, reuse.worker_id)
                    .await?;
                let others = super::sequence::others_with(
                    &client,
                    &tree,
                    &options.connect,
                    reuse.worker_id,
                    &reuse.name,
                )
                .await?;
                if !others.is_empty() {
                    let node = tree.forever(&reuse.name);
                    return Err(super::sequence::shared(reuse.worker_id, &node, others));
                }
                tracing::info!(
                    worker_id = reuse.worker_id,
                    node = %reuse.name,
                    "continuing this address's forever node (Leaf: a restart keeps its worker id)"
                );
                (
                    reuse.worker_id,
                    reuse.name,
                    reuse.version,
                    reuse.floor_ms,
                    reuse.reserved_ms,
                )
            }
            None => {
                // A new node only: a restart on its own node checks that node's last report.
                check_peers(&client, &tree, options, self.core.clock.as_ref()).await?;
                self.claim(&client, &tree, range, &namespace).await?
            }
        };
        let node = tree.forever(&name);
        self.wait_for_live_node(&client, &tree, worker_id, &node)
            .await?;
        let mark = self.open_mark(worker_id, layout, true)?;
        self.wait_for_clock(
            worker_id,
            floor,
            "where the id was last used (its node's reservation or this host's mark)",
        )
        .await?;
        let shared = Shared::new(
            worker_id,
            options.clone(),
            tree,
            node.clone(),
            Arc::clone(&self.core.clock),
            mark,
            (floor, reserved),
        );
        let mut conn = Conn::new(Some(client), Some(version), None);
        // The first report, before any ID: from here on a reclaim's version check fails, and a
        // restart sees this life's write. The cache is written by `begin` below, not by the
        // report: a fresh cache has nothing to record into yet.
        let first = conn.report(&shared).await.map_err(|source| match source {
            zk::Error::BadVersion | zk::Error::NoNode => ZkError::Contention { attempts: 1 },
            source => zk_error(&options.connect, "writing the first report", source),
        })?;
        shared.mark.begin(
            Some(&shared.holder_string(&first.stat)),
            Some(shared.accepted_until()),
        )?;
        // The mark covers the floor: a later restart from this cache starts above every
        // earlier life, not only this one.
        shared
            .mark
            .reserve(floor.max(self.core.clock.now_millis()))?;
        shared.mark.start_refresher()?;
        conn.ensure_live(&shared).await;
        let holder = ZkHolder::start(shared, conn);
        tracing::info!(
            worker_id,
            node = %holder.node(),
            floor_ms = floor,
            %range,
            "holding a ZooKeeper worker id"
        );
        Ok(self.assignment(holder, ZkSource::ZooKeeper))
    }

    /// This address's forever node that may be continued now, if any (see the module doc for
    /// the floors). A node whose reservation the clock cannot reach soon is left alone.
    async fn find_own(
        &self,
        client: &zk::Client,
        tree: &Tree,
        layout: &Layout,
        range: WorkerIdRange,
        namespace: &Namespace,
    ) -> Result<Option<Reuse>> {
        let options = &self.core.options;
        let error = |action, source| zk_error(&options.connect, action, source);
        let address = options.listen_address();
        let mut own: Vec<(u64, String)> = client
            .list_children(&tree.forever_dir())
            .await
            .map_err(|source| error("listing the forever nodes", source))?
            .into_iter()
            .filter_map(|name| match parse_forever_name(&name) {
                Some((a, id)) if a == address => Some((id, name.clone())),
                _ => None,
            })
            .collect();
        own.sort();
        let cache = read_cache(&options.cache_file).ok();
        let wait_ms = ms(options.max_start_wait);
        for (worker_id, name) in own {
            let path = tree.forever(&name);
            let max = layout.max_worker_id();
            if worker_id > max {
                return Err(ZkError::OutsideLayout {
                    id: worker_id,
                    max,
                    node: path,
                });
            }
            if !range.contains(worker_id) {
                return Err(ZkError::OutsideRange {
                    id: worker_id,
                    range,
                    node: path,
                });
            }
            let (bytes, stat) = match client.get_data(&path).await {
                Ok(found) => found,
                Err(zk::Error::NoNode) => continue, // reclaimed just now
                Err(source) => return Err(error("reading this address's forever node", source)),
            };
            let data = NodeData::parse(&path, &bytes)?;
            let now = self.core.clock.now_millis();
            // Leaf's check: the node's last report ahead of this clock means the clock went
            // back across the restart.
            clock_reaches(
                worker_id,
                "its forever node's last report",
                data.timestamp,
                now,
                wait_ms,
            )?;
            let reserved_ms = data.reserved_until.unwrap_or(0);
            let saw_last_write = cache
                .as_ref()
                .is_some_and(|c| cache_saw(c, options, worker_id, &stat));
            // Reusable from where the cache says the last life stopped, or else from the node's
            // own reservation once this clock can reach it.
            let floor_ms = if let Some(cache) = cache.as_ref().filter(|_| saw_last_write) {
                let floor_ms = cache.until_ms.max(data.timestamp);
                clock_reaches(
                    worker_id,
                    "the local cache's reserved-until mark",
                    floor_ms,
                    now,
                    wait_ms,
                )?;
                floor_ms
            } else {
                let floor_ms = data.reserved_until_ms().max(data.timestamp);
                if floor_ms > now.saturating_add(wait_ms) {
                    tracing::warn!(
                        worker_id,
                        node = %path,
                        reserved_until_ms = floor_ms,
                        cache = %options.cache_file.display(),
                        "this address's forever node is reserved by its last holder until \
                         reserved_until_ms and no local cache shows that holder's last write: \
                         not reusing it before then (claiming another id); keep the cache file \
                         across restarts to keep the id"
                    );
                    continue;
                }
                floor_ms
            };
            // A node older than the namespace record may be stale (ZooKeeper lost data since
            // it was written): it waits for the record's floor too.
            let fenced_ms = namespace.floor_of(Some((floor_ms, stat.mzxid)));
            if fenced_ms > floor_ms && fenced_ms > now.saturating_add(wait_ms) {
                tracing::warn!(
                    worker_id,
                    node = %path,
                    fenced_until_ms = fenced_ms,
                    "this address's forever node was written before ZooKeeper's namespace record \
                     fenced older ids: not reusing it before fenced_until_ms"
                );
                continue;
            }
            return Ok(Some(Reuse {
                worker_id,
                name,
                version: stat.version,
                floor_ms: fenced_ms,
                reserved_ms,
            }));
        }
        Ok(None)
    }

    /// Claim the lowest free id of the range: one `multi` creates (or takes over a tombstone
    /// of) its `ids` node and creates its forever node. Returns (id, name, version, floor,
    /// reserved).
    async fn claim(
        &self,
        client: &zk::Client,
        tree: &Tree,
        range: WorkerIdRange,
        namespace: &Namespace,
    ) -> Result<(u64, String, i32, u64, u64)> {
        let options = &self.core.options;
        let error = |action, source| zk_error(&options.connect, action, source);
        let address = options.listen_address();
        for attempt in 0..CLAIM_ATTEMPTS {
            if attempt > 0 {
                // Racers that retry in lockstep keep colliding; a short random pause spreads them.
                let pause = fastrand::u64(1..=5 * u64::from(attempt));
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let used: HashSet<u64> = client
                .list_children(&tree.forever_dir())
                .await
                .map_err(|source| error("listing the forever nodes", source))?
                .iter()
                .filter_map(|name| parse_forever_name(name).map(|(_, id)| id))
                .collect();
            let claims: HashSet<u64> = client
                .list_children(&tree.ids_dir())
                .await
                .map_err(|source| error("listing the id claims", source))?
                .iter()
                .filter_map(|id| id.parse().ok())
                .collect();
            let (mut raced, mut fenced) = (false, 0_usize);
            for worker_id in range.low()..=range.high() {
                if used.contains(&worker_id) {
                    continue;
                }
                let ids = tree.ids(worker_id);
                let (record, previous) = if claims.contains(&worker_id) {
                    match client.get_data(&ids).await {
                        Ok((bytes, stat)) => match IdClaim::parse(&bytes) {
                            IdClaim::Free(tombstone) => {
                                (Some((tombstone.floor, stat.mzxid)), Some(stat.version))
                            }
                            // Claimed but without a forever node: someone's claim in flight
                            // (or a node deleted by hand); not free.
                            IdClaim::Held(_) => continue,
                        },
                        Err(zk::Error::NoNode) => (None, None),
                        Err(source) => return Err(error("reading an id's claim", source)),
                    }
                } else {
                    (None, None)
                };
                let now = self.core.clock.now_millis();
                let wait_ms = ms(options.max_start_wait);
                let own_floor = record.map_or(0, |(floor, _)| floor);
                let floor_ms = namespace.floor_of(record);
                if floor_ms > own_floor && floor_ms > now.saturating_add(wait_ms) {
                    // Fenced by the namespace record: ZooKeeper may have forgotten a holder.
                    fenced += 1;
                    continue;
                }
                // A clock this far behind the previous holder would only sit on the id.
                clock_reaches(
                    worker_id,
                    "where the reclaimed id's previous holder stopped",
                    floor_ms,
                    now,
                    wait_ms,
                )?;
                // Java Leaf's next sequential node must not come out as this id: raise the
                // counter past it first, then look again for a Leaf node made before the raise
                // (`sequence.rs`).
                super::sequence::keep_ahead(client, tree, &options.connect, worker_id).await?;
                if !super::sequence::others_with(client, tree, &options.connect, worker_id, "")
                    .await?
                    .is_empty()
                {
                    raced = true;
                    continue;
                }
                let name = forever_name(&address, worker_id);
                let node = tree.forever(&name);
                // The promise covers the floor too, so that a later start which reads only
                // this node (no cache) never starts below the previous holder.
                let data = NodeData {
                    ip: options.ip.clone(),
                    port: options.port.clone(),
                    timestamp: now,
                    reserved_until: Some(floor_ms.max(now).saturating_add(ms(options.reservation))),
                    life: None,
                };
                let mut multi = client.new_multi_writer();
                let built = (|| {
                    // A namespace record rewritten since it was read (a loss seen) may fence
                    // this id: the claim fails and reads again.
                    multi.add_check_version(&tree.namespace(), namespace.version)?;
                    match previous {
                        Some(version) => {
                            multi.add_set_data(&ids, address.as_bytes(), Some(version))?
                        }
                        None => multi.add_create(&ids, address.as_bytes(), &PERSISTENT)?,
                    }
                    multi.add_create(&node, &data.to_json(), &PERSISTENT)
                })();
                built.map_err(|source| error("claiming a worker id", source))?;
                match multi.commit().await {
                    Ok(_) => {
                        // The multi's own stat may be invalid (ZOOKEEPER-4026): read it back.
                        let (_, stat) = client
                            .get_data(&node)
                            .await
                            .map_err(|source| error("reading the claimed forever node", source))?;
                        tracing::info!(
                            worker_id,
                            node = %node,
                            floor_ms,
                            "claimed a free worker id"
                        );
                        return Ok((
                            worker_id,
                            name,
                            stat.version,
                            floor_ms,
                            data.reserved_until.unwrap_or(0),
                        ));
                    }
                    Err(zk::MultiWriteError::OperationFailed {
                        source: zk::Error::NodeExists | zk::Error::BadVersion | zk::Error::NoNode,
                        ..
                    }) => raced = true,
                    Err(source) => return Err(error("claiming a worker id", source.into())),
                }
            }
            if !raced && fenced > 0 && namespace.record.origin.fences_older_ids() {
                let record = &namespace.record;
                return Err(ZkError::NamespaceFenced {
                    root: tree.root().to_owned(),
                    reason: record.fence_reason("ZooKeeper"),
                    origin: record.origin,
                    floor_ms: record.floor_ms,
                    now_ms: self.core.clock.now_millis(),
                });
            }
            if !raced {
                return Err(ZkError::RangeUsedUp {
                    range,
                    root: tree.root().to_owned(),
                });
            }
        }
        Err(ZkError::Contention {
            attempts: CLAIM_ATTEMPTS,
        })
    }

    /// Wait for a leftover live node of the id (a previous life whose session has not expired
    /// yet) to go; a live node that stays means another running process has the id.
    async fn wait_for_live_node(
        &self,
        client: &zk::Client,
        tree: &Tree,
        worker_id: u64,
        node: &str,
    ) -> Result<()> {
        let live = tree.live(worker_id);
        // A dead session's ephemeral node lives until the server expires it.
        let deadline = tokio::time::Instant::now()
            + self.core.options.session_timeout.saturating_mul(2)
            + Duration::from_secs(1);
        loop {
            match client.check_stat(&live).await {
                Ok(None) => return Ok(()),
                Ok(Some(_)) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(POLL).await
                }
                Ok(Some(_)) => {
                    return Err(ZkError::Live {
                        worker_id,
                        node: node.to_owned(),
                        live,
                    });
                }
                Err(source) => {
                    return Err(zk_error(
                        &self.core.options.connect,
                        "reading the live node",
                        source,
                    ));
                }
            }
        }
    }
}

/// Whether `cache` saw the node's last write: it names this namespace, address, id, and the
/// node's creation and last modification.
fn cache_saw(cache: &CachedWorker, options: &ZkOptions, worker_id: u64, stat: &zk::Stat) -> bool {
    cache.worker_id == worker_id
        && cache.holder.as_deref()
            == Some(&crate::holder::shared::holder_string(
                options, stat.czxid, stat.mzxid,
            ))
}
