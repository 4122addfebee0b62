//! The report loop: a held id's time reports, its session and its live node.
//!
//! The guarantee this file keeps, from the `zookeeper` row of docs/OPERATIONS.md ("Why IDs
//! never repeat"; the argument is in `assigner.rs`): **`R` only rises, and only what
//! ZooKeeper accepted at the version this holder last saw counts.**
//!
//! - A report writes the forever node with the version this holder last wrote (or read), so
//!   it fails if anyone else wrote or deleted the node meanwhile; the id is then lost and the
//!   fence closes. A reclaim, conversely, deletes the node only at the version it read, so a
//!   report racing it makes the reclaim fail.
//! - `reserved_until` (the promise in the node) is `max(previous, now + reservation)`: it rolls
//!   forward with every report and never falls.
//! - A report whose reply was lost (the connection broke after sending it) may or may not have
//!   been written: the next round reads the node before writing again, and takes the write as
//!   its own only when the node holds exactly what it sent, one version on (see
//!   `unconfirmed.rs`).
//! - A start from the local cache checks, on its first contact, that the node is still at the
//!   write the cache recorded; otherwise the id is lost.
//! - A lost session is replaced by a new one, and the live node re-created under it; an old
//!   session's leftover live node is deleted only if it was ours.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use zookeeper_client as zk;

use super::shared::{Accepted, Shared};
use crate::error::is_connectivity;
use crate::namespace;
use crate::session::{EPHEMERAL, PERSISTENT, connect, ensure_tree};
use crate::tree::{IdClaim, NodeData};
use uidgen_core::clock::saturating_millis as ms;

/// A report sent whose reply never came.
#[derive(Debug, Clone)]
pub(crate) struct Unconfirmed {
    /// The node data it wrote.
    pub(crate) data: Vec<u8>,
    /// This clock when it was written.
    pub(crate) now_ms: u64,
    /// The reservation it carried.
    pub(crate) reserved_ms: u64,
}

/// The ZooKeeper side of a held id: the session, the node's version, the live node.
#[derive(Debug)]
pub(crate) struct Conn {
    pub(crate) client: Option<zk::Client>,
    /// The forever node's version as this holder last wrote or read it; `None` until a start
    /// from the cache has checked the node.
    pub(crate) version: Option<i32>,
    /// For a start from the cache: the node's (czxid, mzxid) the cache recorded.
    pub(crate) verify: Option<(i64, i64)>,
    /// The node's czxid, once a report was accepted or the node verified: a node deleted and
    /// created again is not ours.
    pub(crate) czxid: Option<i64>,
    /// A report sent whose reply was lost: settled before the next write.
    pub(crate) unconfirmed: Option<Unconfirmed>,
    /// The session whose live node exists.
    live_session: Option<i64>,
    /// Sessions this holder had before: their leftover live node is ours to delete.
    old_sessions: Vec<i64>,
    next_reclaim_ms: u64,
}

impl Conn {
    pub(crate) fn new(
        client: Option<zk::Client>,
        version: Option<i32>,
        verify: Option<(i64, i64)>,
    ) -> Self {
        Self {
            client,
            version,
            verify,
            czxid: None,
            unconfirmed: None,
            live_session: None,
            old_sessions: Vec::new(),
            next_reclaim_ms: 0,
        }
    }

    /// Write the node: `timestamp = now`, `reserved_until = max(previous, now + reservation)`,
    /// at the version last seen, and raise the cap once ZooKeeper accepted it (the caller
    /// records it in the cache). `Err` carries the client's error when ZooKeeper did not
    /// accept it (the id is lost when that error is BadVersion or NoNode); after a broken
    /// connection the write is kept as [`Unconfirmed`], since it may have gone through.
    pub(crate) async fn report(&mut self, shared: &Shared) -> Result<Accepted, zk::Error> {
        let client = self.client.clone().ok_or(zk::Error::ConnectionLoss)?;
        let now = shared.clock.now_millis();
        let reserved = shared
            .accepted_until()
            .max(now.saturating_add(ms(shared.options.reservation)));
        let data = NodeData {
            ip: shared.options.ip.clone(),
            port: shared.options.port.clone(),
            timestamp: now,
            reserved_until: Some(reserved),
            life: Some(shared.life),
        }
        .to_json();
        match client.set_data(&shared.node, &data, self.version).await {
            Ok(stat) => {
                let accepted = Accepted {
                    now_ms: now,
                    reserved_ms: reserved,
                    stat,
                };
                self.adopt(shared, &accepted);
                Ok(accepted)
            }
            Err(error) => {
                if is_connectivity(&error) {
                    self.unconfirmed = Some(Unconfirmed {
                        data,
                        now_ms: now,
                        reserved_ms: reserved,
                    });
                }
                Err(error)
            }
        }
    }

    /// A write of ours is in the node: continue from its version, and raise the cap.
    pub(crate) fn adopt(&mut self, shared: &Shared, accepted: &Accepted) {
        self.version = Some(accepted.stat.version);
        self.czxid = Some(accepted.stat.czxid);
        shared.accepted(accepted);
    }

    /// One round of upkeep: a session, a report, the live node, the automatic reclaim.
    async fn tick(&mut self, shared: &Shared) {
        if !self.ensure_session(shared).await {
            return;
        }
        if self.version.is_none() && !self.verify_cached_node(shared).await {
            return;
        }
        if self.unconfirmed.is_some() && !self.settle_unconfirmed(shared).await {
            return;
        }
        match self.report(shared).await {
            Ok(accepted) => {
                shared.record(&accepted);
                shared.zxids.observe(accepted.stat.mzxid);
                if let Some((before, after)) = shared.zxids.take_regression() {
                    // Our node survived a roll-back (a restore that kept it): fence what
                    // ZooKeeper may have forgotten of the others.
                    let why = format!("its zxid went back from {before:#x} to {after:#x}");
                    self.saw_loss(shared, &why).await;
                }
            }
            Err(zk::Error::NoNode) => {
                if !self.reestablish(shared, "its forever node vanished").await {
                    return;
                }
            }
            Err(zk::Error::BadVersion) => {
                if !self
                    .reestablish(shared, "its forever node was written by another")
                    .await
                {
                    return;
                }
            }
            Err(error) => {
                shared.failed(&error.to_string());
                return;
            }
        }
        self.ensure_live(shared).await;
        self.auto_reclaim(shared).await;
    }

    /// ZooKeeper lost data (`why`): count it, and make the namespace record fence every id
    /// whose node may be stale. Returns whether the record is in force.
    async fn saw_loss(&mut self, shared: &Shared, why: &str) -> bool {
        shared.health.data_loss();
        let Some(client) = self.client.clone() else {
            return false;
        };
        let why = format!("{why} (seen by worker id {})", shared.worker_id);
        let last_accepted = shared.health.snapshot().last_report_ms.unwrap_or(0);
        let now = shared.clock.now_millis();
        match namespace::record_loss(
            &client,
            &shared.options,
            &shared.tree,
            now,
            last_accepted,
            &why,
        )
        .await
        {
            Ok(_) => true,
            Err(error) => {
                tracing::error!(
                    worker_id = shared.worker_id,
                    %error,
                    "ZooKeeper lost data ({why}) and the namespace record could not be written"
                );
                false
            }
        }
    }

    /// The forever node vanished or holds another write: take the id up again if it is still
    /// this life's to take (see `holder.rs`), else lose it. Returns whether the holder goes on.
    pub(crate) async fn reestablish(&mut self, shared: &Shared, reason: &str) -> bool {
        let now = shared.clock.now_millis();
        let cap = shared.accepted_until();
        let reason = format!("{reason} ({})", shared.node);
        if !uidgen_worker::may_reestablish(now, cap, ms(shared.options.max_start_wait)) {
            shared.lose(format!(
                "{reason}, and its reservation runs out too soon to take it up again"
            ));
            return false;
        }
        match self.try_reestablish(shared, now, cap).await {
            Ok(true) => {
                shared.health.reestablish();
                tracing::warn!(
                    worker_id = shared.worker_id,
                    "took the ZooKeeper worker id up again ({reason}); issuing without a gap"
                );
                true
            }
            Ok(false) => {
                shared.lose(format!("{reason}: reclaimed or written by another process"));
                false
            }
            Err(error) => {
                shared.failed(&error);
                false
            }
        }
    }

    /// `Ok(true)` once the id is this holder's again, `Ok(false)` when it is someone else's.
    async fn try_reestablish(
        &mut self,
        shared: &Shared,
        now: u64,
        cap: u64,
    ) -> Result<bool, String> {
        let client = self.client.clone().ok_or("no ZooKeeper session")?;
        let options = &shared.options;
        let address = options.listen_address();
        let ids = shared.tree.ids(shared.worker_id);
        match client.get_data(&shared.node).await {
            Ok((bytes, stat)) => {
                let ours = NodeData::parse(&shared.node, &bytes)
                    .ok()
                    .is_some_and(|data| data.life == Some(shared.life));
                if !ours {
                    return Ok(false);
                }
                // An older write of this life (ZooKeeper rolled back), or an earlier attempt
                // whose answer was lost: continue from its version.
                if stat.mzxid < shared.zxids.highest() || Some(stat.czxid) != self.czxid {
                    let why = "this holder's forever node went back to an older write";
                    if !self.saw_loss(shared, why).await {
                        return Err("the namespace record could not be written".into());
                    }
                }
                self.version = Some(stat.version);
                self.czxid = Some(stat.czxid);
                return Ok(true);
            }
            Err(zk::Error::NoNode) => {}
            Err(error) => return Err(error.to_string()),
        }
        let claimed = match client.get_data(&ids).await {
            Ok((bytes, _)) => match IdClaim::parse(&bytes) {
                IdClaim::Held(holder) if holder == address => true,
                // A reclaim's tombstone, or another address's claim.
                _ => return Ok(false),
            },
            Err(zk::Error::NoNode) => false,
            Err(error) => return Err(error.to_string()),
        };
        // The node vanished without a reclaim (a reclaim needs this holder's cap passed and
        // leaves a tombstone): ZooKeeper lost it. Fence what it forgot of the others first.
        if !self
            .saw_loss(shared, "this holder's forever node vanished")
            .await
        {
            return Err("the namespace record could not be written".into());
        }
        ensure_tree(&client, &options.connect, &shared.tree)
            .await
            .map_err(|e| e.to_string())?;
        let ns = namespace::read(&client, &options.connect, &shared.tree)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the namespace record vanished")?;
        let reserved = cap.max(now.saturating_add(ms(options.reservation)));
        let data = NodeData {
            ip: options.ip.clone(),
            port: options.port.clone(),
            timestamp: now,
            reserved_until: Some(reserved),
            life: Some(shared.life),
        }
        .to_json();
        let mut multi = client.new_multi_writer();
        let built = (|| {
            multi.add_check_version(&shared.tree.namespace(), ns.version)?;
            if !claimed {
                multi.add_create(&ids, address.as_bytes(), &PERSISTENT)?;
            }
            multi.add_create(&shared.node, &data, &PERSISTENT)
        })();
        built.map_err(|e| e.to_string())?;
        match multi.commit().await {
            Ok(_) => {}
            // Someone wrote the record, the claim or the node meanwhile: read again next round.
            Err(error) => return Err(format!("taking the worker id up again: {error}")),
        }
        // The multi's own stat may be invalid (ZOOKEEPER-4026): read it back.
        let (_, stat) = client
            .get_data(&shared.node)
            .await
            .map_err(|e| e.to_string())?;
        let accepted = Accepted {
            now_ms: now,
            reserved_ms: reserved,
            stat,
        };
        self.adopt(shared, &accepted);
        shared.zxids.observe(accepted.stat.mzxid);
        shared.record(&accepted);
        Ok(true)
    }

    /// A usable session: the current one, or a new one when it ended (expired while
    /// ZooKeeper was away). `false` when none could be made.
    async fn ensure_session(&mut self, shared: &Shared) -> bool {
        if let Some(client) = &self.client {
            if !client.state().is_terminated() {
                return true;
            }
            tracing::info!(
                worker_id = shared.worker_id,
                state = %client.state(),
                "the ZooKeeper session ended; opening a new one"
            );
            self.old_sessions.push(client.session_id().0);
            self.client = None;
            self.live_session = None;
        }
        match connect(&shared.options.connect, shared.options.session_timeout).await {
            Ok(client) => {
                self.client = Some(client);
                true
            }
            Err(error) => {
                shared.failed(&error.to_string());
                false
            }
        }
    }

    /// A start from the cache checks, on its first contact, that nobody wrote the node since
    /// the write the cache recorded; otherwise the id is lost.
    async fn verify_cached_node(&mut self, shared: &Shared) -> bool {
        let Some(client) = self.client.clone() else {
            return false;
        };
        match client.get_data(&shared.node).await {
            Ok((_, stat)) if self.verify == Some((stat.czxid, stat.mzxid)) => {
                self.version = Some(stat.version);
                self.czxid = Some(stat.czxid);
                tracing::info!(
                    worker_id = shared.worker_id,
                    "ZooKeeper answers: the worker id taken from the local cache is still this \
                     host's"
                );
                true
            }
            Ok(_) => {
                shared.lose(format!(
                    "while this process ran on its local cache, another process wrote its forever \
                     node {}",
                    shared.node
                ));
                false
            }
            Err(zk::Error::NoNode) => {
                shared.lose(format!(
                    "while this process ran on its local cache, its forever node {} was reclaimed",
                    shared.node
                ));
                false
            }
            Err(error) => {
                shared.failed(&error.to_string());
                false
            }
        }
    }

    /// The live node under the current session (after a session expiry, a new one).
    pub(crate) async fn ensure_live(&mut self, shared: &Shared) {
        let Some(client) = self.client.clone() else {
            return;
        };
        let session = client.session_id().0;
        if self.live_session == Some(session) {
            return;
        }
        let live = shared.tree.live(shared.worker_id);
        let address = shared.options.listen_address();
        match client.create(&live, address.as_bytes(), &EPHEMERAL).await {
            Ok(_) => {
                if self.live_session.is_none() && !self.old_sessions.is_empty() {
                    tracing::info!(
                        worker_id = shared.worker_id,
                        "re-created the live node under a new ZooKeeper session"
                    );
                }
                self.live_session = Some(session);
            }
            Err(zk::Error::NodeExists) => match client.check_stat(&live).await {
                Ok(Some(stat)) if stat.ephemeral_owner == session => {
                    self.live_session = Some(session);
                }
                Ok(Some(stat)) if self.old_sessions.contains(&stat.ephemeral_owner) => {
                    // Our own earlier session, not yet expired on the server: replace it now.
                    let _ = client.delete(&live, Some(stat.version)).await;
                }
                Ok(_) => tracing::warn!(
                    worker_id = shared.worker_id,
                    "the live node belongs to another session; retrying"
                ),
                Err(error) => shared.failed(&error.to_string()),
            },
            Err(error) if is_connectivity(&error) => shared.failed(&error.to_string()),
            Err(error) => {
                tracing::warn!(worker_id = shared.worker_id, %error, "cannot create the live node")
            }
        }
    }

    async fn auto_reclaim(&mut self, shared: &Shared) {
        let Some(threshold) = shared.options.auto_reclaim_after else {
            return;
        };
        let Some(client) = self.client.clone() else {
            return;
        };
        let now = shared.clock.now_millis();
        if now < self.next_reclaim_ms {
            return;
        }
        // A tenth of the threshold, between a second and ten minutes: dead ids come back
        // soon after they may, without a listing every few seconds.
        let period = (ms(threshold) / 10).clamp(1_000, 600_000);
        self.next_reclaim_ms = now.saturating_add(period);
        let reclaim = crate::reclaim::Reclaimer {
            client: &client,
            connect: &shared.options.connect,
            tree: &shared.tree,
            clock: shared.clock.as_ref(),
            reservation: shared.options.reservation,
        };
        match reclaim.run(threshold, false).await {
            Ok(freed) => {
                let n = u64::try_from(freed.iter().filter(|c| c.freed).count()).unwrap_or(0);
                // Relaxed: a counter for status only.
                self.reclaimed_add(shared, n);
            }
            Err(error) => tracing::warn!(%error, "automatic reclaim failed; retrying later"),
        }
    }

    fn reclaimed_add(&self, shared: &Shared, n: u64) {
        // Relaxed: a counter for status only.
        shared.reclaimed.fetch_add(n, Ordering::Relaxed);
    }
}

/// Report every interval until lost or dropped.
pub(super) async fn run(shared: Arc<Shared>, mut conn: Conn, first_immediately: bool) {
    let interval = shared.options.report_interval;
    let mut first = first_immediately;
    loop {
        if !first {
            tokio::time::sleep(interval).await;
        }
        first = false;
        // SeqCst (both): the Dekker pair with `ZkHolder::begin_stop`; a stop waits for a round
        // it sees under way, so a report and its record in the cache file are not torn apart.
        shared.in_round.store(true, Ordering::SeqCst);
        if shared.is_lost() || shared.stopping.load(Ordering::SeqCst) {
            shared.in_round.store(false, Ordering::SeqCst);
            return;
        }
        conn.tick(&shared).await;
        // SeqCst: see above.
        shared.in_round.store(false, Ordering::SeqCst);
    }
}
