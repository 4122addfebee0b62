//! What the holder and its report loop share: the state of a held id and the last report
//! ZooKeeper accepted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use uidgen_core::Clock;
use uidgen_worker::{Coordinator, HolderHealth, LocalMark};
use zookeeper_client as zk;

use crate::options::ZkOptions;
use crate::tree::Tree;

/// A report ZooKeeper accepted: this clock when it was written, the reservation it carried,
/// and the node's stat after it.
#[derive(Debug, Clone)]
pub(crate) struct Accepted {
    pub(crate) now_ms: u64,
    pub(crate) reserved_ms: u64,
    pub(crate) stat: zk::Stat,
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
    pub(crate) life: u64,
    /// The zxids of this holder's accepted writes: one below an earlier one means ZooKeeper
    /// lost data or was restored from an older snapshot.
    pub(crate) zxids: uidgen_worker::RevisionWatch,
    /// The `reserved_until` of the last report ZooKeeper accepted (or the cache recorded),
    /// the reports' fate, and the loss.
    pub(crate) health: HolderHealth,
    pub(super) reclaimed: AtomicU64,
    /// Set by a stop: the report loop starts no new round.
    pub(super) stopping: AtomicBool,
    /// Set while a round (a report and its cache write) runs: a stop waits for it.
    pub(super) in_round: AtomicBool,
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
            zxids: uidgen_worker::RevisionWatch::default(),
            health: HolderHealth::new(accepted_until_ms),
            reclaimed: AtomicU64::new(0),
            stopping: AtomicBool::new(false),
            in_round: AtomicBool::new(false),
        }
    }

    pub(crate) fn accepted_until(&self) -> u64 {
        self.health.accepted_until()
    }

    pub(super) fn is_lost(&self) -> bool {
        // The flag is set before the mark is forgotten (`lose`), so the fence sees the loss no
        // later than that.
        self.health.is_lost()
    }

    /// How the holder's messages name ZooKeeper and its rounds.
    pub(super) fn coordinator(&self) -> Coordinator {
        Coordinator {
            name: "ZooKeeper",
            round: "report",
            reservation: self.options.reservation,
        }
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
