//! Reclaim: free the worker ids of holders that are gone (Leaf issues
//! [#84](https://github.com/Meituan-Dianping/Leaf/issues/84) and
//! [#94](https://github.com/Meituan-Dianping/Leaf/issues/94): forever nodes never go away, so
//! ip:port churn in containers uses up all 1,024 ids).
//!
//! A forever node is freed only when
//!
//! 1. no live node exists for its id (no running holder has a session), and
//! 2. its last report is older than the threshold, which is at least the reservation
//!    (`reservation`, minutes), and its `reserved_until` has passed by the reclaimer's clock.
//!
//! Freeing is one ZooKeeper `multi`: delete the forever node *at the version read* and turn
//! the id's `ids` node into a tombstone whose `floor` is the old holder's reservation. A report
//! (or a restart) that writes the node after it was read bumps its version, so the `multi`
//! fails and nothing is freed.
//!
//! **Why a new holder of a reclaimed id never stamps a unit the old holder may have used.**
//! The old holder's last accepted report wrote `timestamp = t` and
//! `reserved_until = R >= t + reservation` (its own clock's labels). Its fence caps every ID
//! at `R`: it stamps nothing ending after `R` unless ZooKeeper accepts another report, and the
//! reclaim's version check means none was accepted after the one read. A holder cut off from
//! ZooKeeper (whose live node vanished with its session) keeps issuing, but still stops at
//! `R`; a restart from its local cache is bounded by the cap its cache recorded, which is at
//! most `R`. So `limit(old) <= R`. The tombstone records `floor = max(R, t + reservation)`,
//! and the next claimant of the id takes it as its fence's floor: it stamps no unit starting
//! before it, whatever its clock reads (and waits, or refuses, while its clock is behind). So
//! `limit(old) <= R <= floor(new)`, comparing labels only. The threshold
//! (`t + threshold < now`, threshold >= reservation) is the operator's margin on top: a node
//! is not freed while its holder might still be issuing. Because the reservation rolls only
//! minutes ahead of each report (not a day), a dead holder's id can come back the same day.

use std::collections::HashSet;
use std::time::Duration;

use uidgen_core::Clock;
use zookeeper_client as zk;

use crate::error::Result;
use crate::options::check_threshold;
use crate::session::{PERSISTENT, zk_error};
use crate::tree::{IdClaim, NodeData, Tombstone, Tree, parse_forever_name};
use uidgen_core::clock::saturating_millis as ms;

/// A forever node a reclaim looked at and found dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReclaimCandidate {
    /// The worker id.
    pub worker_id: u64,
    /// The forever node's name (`{ip}:{port}-{id}`).
    pub node: String,
    /// Its last report (ms since the Unix epoch, its holder's clock).
    pub last_report_ms: u64,
    /// The floor its next holder starts from.
    pub floor_ms: u64,
    /// Whether it was freed (false in a dry run, or when a report raced the reclaim).
    pub freed: bool,
}

/// One reclaim pass over a namespace.
#[derive(Debug)]
pub(crate) struct Reclaimer<'a> {
    pub(crate) client: &'a zk::Client,
    pub(crate) connect: &'a str,
    pub(crate) tree: &'a Tree,
    pub(crate) clock: &'a dyn Clock,
    /// The reclaimer's own reservation: the least a threshold may be, and the least a
    /// tombstone's floor lies past the last report.
    pub(crate) reservation: Duration,
}

impl Reclaimer<'_> {
    /// Free every dead forever node older than `older_than` (or only list them, `dry_run`).
    pub(crate) async fn run(
        &self,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<Vec<ReclaimCandidate>> {
        check_threshold(older_than, self.reservation)?;
        let error = |action, source| zk_error(self.connect, action, source);
        let list = |dir: String| async move {
            match self.client.list_children(&dir).await {
                Ok(children) => Ok(children),
                Err(zk::Error::NoNode) => Ok(Vec::new()),
                Err(source) => Err(error("listing the namespace", source)),
            }
        };
        let live: HashSet<u64> = list(self.tree.live_dir())
            .await?
            .iter()
            .filter_map(|id| id.parse().ok())
            .collect();
        let mut nodes: Vec<(u64, String)> = list(self.tree.forever_dir())
            .await?
            .into_iter()
            .filter_map(|name| parse_forever_name(&name).map(|(_, id)| (id, name.clone())))
            .collect();
        nodes.sort();
        let mut candidates = Vec::new();
        for (worker_id, name) in nodes {
            // 1. A running holder has a live node: never free its id.
            if live.contains(&worker_id) {
                continue;
            }
            let path = self.tree.forever(&name);
            let (bytes, stat) = match self.client.get_data(&path).await {
                Ok(found) => found,
                Err(zk::Error::NoNode) => continue,
                Err(source) => return Err(error("reading a forever node", source)),
            };
            let Ok(data) = NodeData::parse(&path, &bytes) else {
                tracing::warn!(node = %path,
                    "not reclaiming a forever node whose data is not Leaf's JSON");
                continue;
            };
            // 2. Silent for longer than the threshold, and past its own reservation.
            let now = self.clock.now_millis();
            let reserved = data.reserved_until_ms();
            if data.timestamp.saturating_add(ms(older_than)) >= now || reserved >= now {
                continue;
            }
            let floor = reserved.max(data.timestamp.saturating_add(ms(self.reservation)));
            let mut candidate = ReclaimCandidate {
                worker_id,
                node: name.clone(),
                last_report_ms: data.timestamp,
                floor_ms: floor,
                freed: false,
            };
            if !dry_run {
                let address = parse_forever_name(&name).map_or("", |(a, _)| a).to_owned();
                candidate.freed = self
                    .free(
                        worker_id,
                        &path,
                        stat.version,
                        Tombstone {
                            free: true,
                            floor,
                            previous: address,
                            reclaimed_at: now,
                        },
                    )
                    .await?;
                if candidate.freed {
                    tracing::info!(
                        worker_id,
                        node = %path,
                        last_report_ms = data.timestamp,
                        floor_ms = floor,
                        "reclaimed a dead holder's worker id"
                    );
                }
            }
            candidates.push(candidate);
        }
        Ok(candidates)
    }

    /// Delete the forever node at `version` and leave the tombstone, in one `multi`. `false`
    /// when the node changed (a report raced us) or another reclaim won.
    async fn free(
        &self,
        worker_id: u64,
        path: &str,
        version: i32,
        tombstone: Tombstone,
    ) -> Result<bool> {
        let ids = self.tree.ids(worker_id);
        let claim = match self.client.get_data(&ids).await {
            Ok((bytes, stat)) => Some((IdClaim::parse(&bytes), stat.version)),
            Err(zk::Error::NoNode) => None,
            Err(source) => return Err(zk_error(self.connect, "reading an id's claim", source)),
        };
        let data = serde_json::to_vec(&tombstone).unwrap_or_default();
        let mut multi = self.client.new_multi_writer();
        let build = (|| {
            multi.add_delete(path, Some(version))?;
            match &claim {
                // Our claim (or a stale tombstone): replace it at the version read.
                Some((_, ids_version)) => multi.add_set_data(&ids, &data, Some(*ids_version)),
                // A Leaf node has no claim: the tombstone is new.
                None => multi.add_create(&ids, &data, &PERSISTENT),
            }
        })();
        build.map_err(|source| zk_error(self.connect, "reclaiming a worker id", source))?;
        match multi.commit().await {
            Ok(_) => Ok(true),
            Err(zk::MultiWriteError::OperationFailed {
                source: zk::Error::BadVersion | zk::Error::NoNode | zk::Error::NodeExists,
                ..
            }) => Ok(false),
            Err(error) => Err(zk_error(
                self.connect,
                "reclaiming a worker id",
                error.into(),
            )),
        }
    }
}
