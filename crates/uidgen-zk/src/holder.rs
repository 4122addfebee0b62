//! [`ZkHolder`]: a held ZooKeeper worker id, its reports, and the fence its generator obeys.
//!
//! Invariants (the argument is in `assigner.rs`; this file keeps them):
//!
//! - A report writes the forever node with the version this holder last wrote (or read), so
//!   it fails if anyone else wrote or deleted the node meanwhile; the id is then lost and the
//!   fence closes. A reclaim, conversely, deletes the node only at the version it read, so a
//!   report racing it makes the reclaim fail.
//! - `reserved_until` (the promise in the node) is `max(previous, now + reservation)`: it rolls
//!   forward with every report and never falls. The holder raises its own cap to a value only
//!   after ZooKeeper accepted it.
//! - The fence's limit is `min(local mark, accepted cap)`: the mark is synced to disk before
//!   any ID past it (so a restart on this host knows how far this life went), and the cap
//!   stops a holder cut off from ZooKeeper at the reservation of its last accepted report,
//!   before a restart without the cache or a reclaim may take its id.
//! - A report whose reply was lost (the connection broke after sending it) may or may not have
//!   been written: the next round reads the node before writing again, and takes the write as
//!   its own only when the node holds exactly what it sent, one version on (see
//!   `unconfirmed.rs`).
//! - A lost session is replaced by a new one, and the live node re-created under it; an old
//!   session's leftover live node is deleted only if it was ours.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uidgen_core::{Clock, FenceRefusal, TimeFence};
use uidgen_store::{HolderHealth, LocalMark};
use zookeeper_client as zk;

use crate::error::{ZkError, is_connectivity};
use crate::options::{ZkOptions, ms};
use crate::session::{EPHEMERAL, connect};
use crate::tree::{NodeData, Tree};
use crate::unconfirmed::Unconfirmed;

/// A report ZooKeeper accepted: this clock when it was written, the reservation it carried,
/// and the node's stat after it.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    pub(crate) now_ms: u64,
    pub(crate) reserved_ms: u64,
    pub(crate) stat: zk::Stat,
}

/// A snapshot of a holder's state, for readiness and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkStatus {
    /// The worker id.
    pub worker_id: u64,
    /// Whether the last report reached ZooKeeper.
    pub connected: bool,
    /// Reports that failed since start.
    pub report_failures: u64,
    /// This clock at the last accepted report (ms since the Unix epoch); `None` before the
    /// first (a start from the local cache).
    pub last_report_ms: Option<u64>,
    /// How long ago that was (ms), by this clock.
    pub last_report_age_ms: Option<u64>,
    /// The cap: IDs stop at this instant unless a report is accepted first.
    pub reserved_until_ms: u64,
    /// Since when reports have been failing (ms), if they are.
    pub outage_since_ms: Option<u64>,
    /// Why the id was lost, if it was: no ID is issued any more.
    pub lost: Option<String>,
    /// Ids freed by this holder's automatic reclaim.
    pub reclaimed: u64,
}

impl ZkStatus {
    /// Whether IDs can still be issued: the id is held and the cap is ahead of `now_ms`.
    pub fn issuing(&self, now_ms: u64) -> bool {
        self.lost.is_none() && now_ms < self.reserved_until_ms
    }
}

/// What the holder shares with its fence and its reporter.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) worker_id: u64,
    pub(crate) options: ZkOptions,
    pub(crate) tree: Tree,
    /// The forever node's path.
    pub(crate) node: String,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) mark: LocalMark,
    /// Where the id's earlier holders stopped.
    pub(crate) floor_ms: u64,
    /// This life's random number, written with every report (see `unconfirmed.rs`).
    life: u64,
    /// The `reserved_until` of the last report ZooKeeper accepted (or the cache recorded),
    /// the reports' fate, and the loss.
    health: HolderHealth,
    reclaimed: AtomicU64,
}

impl Shared {
    pub(crate) fn new(
        worker_id: u64,
        options: ZkOptions,
        tree: Tree,
        node: String,
        clock: Arc<dyn Clock>,
        mark: LocalMark,
        (floor_ms, accepted_until_ms): (u64, u64),
    ) -> Self {
        Self {
            worker_id,
            options,
            tree,
            node,
            clock,
            mark,
            floor_ms,
            life: fastrand::u64(..),
            health: HolderHealth::new(accepted_until_ms),
            reclaimed: AtomicU64::new(0),
        }
    }

    pub(crate) fn accepted_until(&self) -> u64 {
        self.health.accepted_until()
    }

    fn is_lost(&self) -> bool {
        // The flag is set before the mark is forgotten (`lose`), so the fence sees the loss no
        // later than that.
        self.health.is_lost()
    }

    fn lost_reason(&self) -> Option<String> {
        self.health.lost_reason()
    }

    /// The holder string recorded in the cache: which node, as of which write.
    pub(crate) fn holder_string(&self, stat: &zk::Stat) -> String {
        holder_string(&self.options, stat.czxid, stat.mzxid)
    }

    /// ZooKeeper accepted `report`: raise the cap to its reservation. The cache records it
    /// separately ([`record`](Self::record)): a start writes the cache's first claim itself.
    pub(crate) fn accepted(&self, report: &Accepted) {
        if let Some(outage_ms) = self.health.accepted(report.now_ms, report.reserved_ms) {
            tracing::info!(
                worker_id = self.worker_id,
                outage_ms,
                "ZooKeeper answers again: time reports resumed"
            );
        }
    }

    /// Record an accepted report in the local cache: the write (czxid, mzxid) a restart
    /// checks the node against, and the reservation a start without ZooKeeper runs to.
    pub(crate) fn record(&self, report: &Accepted) {
        let holder = self.holder_string(&report.stat);
        if let Err(error) = self.mark.record_claim(&holder, report.reserved_ms) {
            // Only costs the fast restart: a restart then reads the node's reservation.
            tracing::warn!(%error, "cannot record the accepted report in the local cache");
        }
    }

    /// A report could not reach ZooKeeper: count it and keep issuing under the cap.
    pub(crate) fn failed(&self, reason: &str) {
        let (failures, log) = self.health.failed(self.clock.now_millis());
        if log {
            tracing::warn!(
                worker_id = self.worker_id,
                failures,
                issuing_until_ms = self.accepted_until(),
                "cannot report to ZooKeeper ({reason}); still issuing IDs on the held worker id \
                 until issuing_until_ms, the reservation of the last accepted report"
            );
        }
    }

    /// The id is gone for good: close the fence, and forget the local cache so a start while
    /// ZooKeeper is down does not pick the id again.
    pub(crate) fn lose(&self, reason: String) {
        self.health.lose(reason.clone());
        if let Err(error) = self.mark.forget() {
            tracing::warn!(%error, "cannot delete the local worker id cache");
        }
        tracing::error!(
            worker_id = self.worker_id,
            "ZooKeeper worker id lost: {reason}; stopped issuing IDs"
        );
    }

    fn status(&self) -> ZkStatus {
        let now = self.clock.now_millis();
        let health = self.health.snapshot();
        ZkStatus {
            worker_id: self.worker_id,
            connected: health.connected,
            report_failures: health.failures,
            last_report_ms: health.last_report_ms,
            last_report_age_ms: health.last_report_ms.map(|last| now.saturating_sub(last)),
            reserved_until_ms: health.accepted_until_ms,
            outage_since_ms: health.outage_since_ms,
            lost: health.lost,
            // Relaxed: a counter for status only.
            reclaimed: self.reclaimed.load(Ordering::Relaxed),
        }
    }
}

/// The cache's holder string for a node of `options`' namespace and address, as of the write
/// with `mzxid`: a restart that finds the node still at that write knows this host's cache
/// saw its last report.
pub(crate) fn holder_string(options: &ZkOptions, czxid: i64, mzxid: i64) -> String {
    format!("{}{czxid}:{mzxid}", holder_prefix(options))
}

/// The part of the holder string that names the namespace and address.
pub(crate) fn holder_prefix(options: &ZkOptions) -> String {
    format!("zk:{}/{}#", options.name, options.listen_address())
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
            Ok(accepted) => shared.record(&accepted),
            Err(zk::Error::BadVersion | zk::Error::NoNode) => {
                shared.lose(format!(
                    "its forever node {} was reclaimed or written by another process",
                    shared.node
                ));
                return;
            }
            Err(error) => {
                shared.failed(&error.to_string());
                return;
            }
        }
        self.ensure_live(shared).await;
        self.auto_reclaim(shared).await;
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
async fn run(shared: Arc<Shared>, mut conn: Conn, first_immediately: bool) {
    let interval = shared.options.report_interval;
    let mut first = first_immediately;
    loop {
        if !first {
            tokio::time::sleep(interval).await;
        }
        first = false;
        if shared.is_lost() {
            return;
        }
        conn.tick(&shared).await;
    }
}

/// A held ZooKeeper worker id: its reporter runs until [`shutdown`](Self::shutdown) or until
/// the last clone is dropped. Clones share it.
#[derive(Debug, Clone)]
pub struct ZkHolder {
    shared: Arc<Shared>,
    task: Arc<AbortOnDrop>,
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl ZkHolder {
    /// Start reporting (must be called inside a tokio runtime). A start from the cache
    /// reports at once, the others after one interval (they reported while starting).
    pub(crate) fn start(shared: Shared, conn: Conn) -> Self {
        let first_immediately = conn.version.is_none();
        let shared = Arc::new(shared);
        let task = tokio::spawn(run(Arc::clone(&shared), conn, first_immediately));
        Self {
            shared,
            task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The worker id.
    pub fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    /// The forever node's path (under the connect string's chroot).
    pub fn node(&self) -> &str {
        &self.shared.node
    }

    /// Where the id's earlier holders stopped: nothing is stamped before it.
    pub fn floor_ms(&self) -> u64 {
        self.shared.floor_ms
    }

    /// A snapshot for readiness and metrics.
    pub fn status(&self) -> ZkStatus {
        self.shared.status()
    }

    /// `Ok` while IDs may be issued: the id is held and the reservation of the last accepted
    /// report has not run out.
    pub fn check(&self) -> crate::Result<()> {
        let shared = &self.shared;
        if let Some(reason) = shared.lost_reason() {
            return Err(ZkError::Lost {
                worker_id: shared.worker_id,
                reason,
            });
        }
        let (now, cap) = (shared.clock.now_millis(), shared.accepted_until());
        if now >= cap {
            return Err(ZkError::Lost {
                worker_id: shared.worker_id,
                reason: format!(
                    "ZooKeeper accepted no report within the reservation ({:?}) of the last one; \
                     IDs stopped at {cap} ms",
                    shared.options.reservation
                ),
            });
        }
        Ok(())
    }

    /// The fence to give the generator. It keeps the reporter running too, so a generator
    /// built through the store's trait (which drops the holder) keeps its id reported.
    pub fn fence(&self) -> Arc<dyn TimeFence> {
        Arc::new(ZkFence {
            shared: Arc::clone(&self.shared),
            _reporter: Arc::clone(&self.task),
        })
    }

    /// Stop reporting and close the session (the live node goes with it). The forever node
    /// and the local cache stay: a restart with the same ip:port continues from them.
    pub fn shutdown(&self) {
        self.task.0.abort();
    }
}

/// The generator's fence: IDs only under the local mark and the accepted cap, none once the
/// id is lost.
#[derive(Debug)]
struct ZkFence {
    shared: Arc<Shared>,
    /// Reports go on while the generator lives.
    _reporter: Arc<AbortOnDrop>,
}

impl TimeFence for ZkFence {
    fn limit_ms(&self) -> u64 {
        if self.shared.is_lost() {
            return 0;
        }
        self.shared
            .mark
            .limit_ms()
            .min(self.shared.accepted_until())
    }

    fn extend(&self, until_ms: u64) -> Result<u64, FenceRefusal> {
        let shared = &self.shared;
        if let Some(reason) = shared.lost_reason() {
            return Err(FenceRefusal::Closed(format!(
                "ZooKeeper worker id {} lost: {reason}",
                shared.worker_id
            )));
        }
        let cap = shared.accepted_until();
        if until_ms > cap {
            return Err(FenceRefusal::NotYet {
                limit_ms: self.limit_ms(),
                reason: format!(
                    "ZooKeeper has accepted no report of worker id {} that reserves past {cap} ms \
                     (reservation {:?} past each accepted report)",
                    shared.worker_id, shared.options.reservation
                ),
            });
        }
        shared
            .mark
            .reserve_for_fence(until_ms, || self.limit_ms())?;
        Ok(self.limit_ms())
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        // A restart waits for the mark: keep borrowing within what a start may wait.
        Some(ms(self.shared.options.max_start_wait).max(1))
    }

    fn floor_ms(&self) -> u64 {
        self.shared.floor_ms
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves a whole value behind; keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A short pause while polling ZooKeeper.
pub(crate) const POLL: Duration = Duration::from_millis(200);
