//! [`ZkHolder`]: a held ZooKeeper worker id, its state, and the fence its generator obeys.
//!
//! The guarantee this file keeps, from the `zookeeper` row of docs/OPERATIONS.md ("Why IDs
//! never repeat"; the argument is in `assigner.rs`): **the holder's `limit` is
//! `min(local mark, R)`**, `R` the `reserved_until` of the last report ZooKeeper accepted.
//!
//! - The fence's limit is `min(local mark, accepted cap)`: the mark is synced to disk before
//!   any ID past it (so a restart on this host knows how far this life went), and the cap
//!   stops a holder cut off from ZooKeeper at the reservation of its last accepted report,
//!   before a restart without the cache or a reclaim may take its id.
//! - The holder raises its own cap to a value only after ZooKeeper accepted it, and never
//!   lowers it; once the id is lost the fence closes (limit 0) and the local cache is
//!   forgotten, so a start while ZooKeeper is down does not pick the id again.
//! - **Taking the id up again** (`holder/report.rs`): a forever node that vanished while the
//!   holder's cap still runs (`now + max_start_wait < cap`, uidgen-worker's
//!   `may_reestablish`) was lost with ZooKeeper's data, not reclaimed (a reclaim needs the cap
//!   passed and leaves a tombstone): the holder makes the namespace record fence every older
//!   id, then creates its `ids` claim and forever node again in one `multi` that checks the
//!   record's version, and goes on issuing. A node found at an older write of this life (a
//!   restore) is continued the same way; anything else loses the id.
//!
//! The reports that raise the cap, and the session they run on, are in `holder/report.rs`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use uidgen_core::{Clock, FenceRefusal, TimeFence};
use uidgen_worker::{BoxFuture, KeeperReports, KeeperStatus, WorkerError, WorkerKeeper};

use crate::error::ZkError;
use uidgen_core::clock::saturating_millis as ms;

pub(crate) mod report;
pub(crate) mod shared;
mod unconfirmed;

use report::Conn;
use report::run;
use shared::Shared;

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

    /// `Ok` while IDs may be issued: the id is held and the reservation of the last accepted
    /// report has not run out.
    pub fn check(&self) -> crate::error::Result<()> {
        let shared = &self.shared;
        let now = shared.clock.now_millis();
        match shared.health.refusal(now, &shared.coordinator()) {
            Some(reason) => Err(ZkError::Lost {
                worker_id: shared.worker_id,
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The fence to give the generator. It keeps the reporter running too, so a generator
    /// built from the fence alone (without the holder) keeps its id reported.
    pub fn fence(&self) -> Arc<dyn TimeFence> {
        Arc::new(ZkFence {
            shared: Arc::clone(&self.shared),
            _reporter: Arc::clone(&self.task),
        })
    }

    /// Stop reporting and close the session (the live node goes with it). The forever node
    /// and the local cache stay: a restart with the same ip:port continues from them.
    ///
    /// A round under way (a report ZooKeeper may already have accepted, and its record in the
    /// cache file) is let finish, for up to [`STOP_WAIT`]: aborted between the two, the cache
    /// would name an older write than the node holds, and a restart would take the id as lost
    /// and claim a new one. On a current-thread runtime, where the round cannot run while this
    /// blocks, it stops at once as before. [`WorkerKeeper::release`] is the async form.
    pub fn shutdown(&self) {
        self.begin_stop();
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() != tokio::runtime::RuntimeFlavor::CurrentThread);
        if multi_thread {
            let deadline = std::time::Instant::now() + STOP_WAIT;
            while self.round_under_way() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        self.task.0.abort();
    }

    /// [`shutdown`](Self::shutdown) without blocking a thread, and so graceful on any runtime:
    /// a report round under way (its `setData`, then its cache-file write) finishes first, so
    /// a restart finds the cache file agreeing with the node. `shutdown` can only wait like
    /// this on a multi-thread runtime; on a current-thread one it stops at once.
    pub async fn stop(&self) {
        self.begin_stop();
        let deadline = tokio::time::Instant::now() + STOP_WAIT;
        while self.round_under_way() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.task.0.abort();
    }

    fn begin_stop(&self) {
        // SeqCst: the Dekker pair with the report loop's `in_round` store then `stopping` load
        // (`report::run`): either the loop sees the stop and starts no round, or the load in
        // `round_under_way` sees the round and waits for it.
        self.shared.stopping.store(true, Ordering::SeqCst);
    }

    fn round_under_way(&self) -> bool {
        // SeqCst: see begin_stop().
        self.shared.in_round.load(Ordering::SeqCst) && !self.task.0.is_finished()
    }
}

/// The longest a stop waits for a round under way: a report on a healthy ensemble takes
/// milliseconds; one that waits on a lost connection is cut off (as it would be by a crash).
pub const STOP_WAIT: Duration = Duration::from_secs(3);

/// The holder keeps its ZooKeeper worker id: reports raise its cap, a loss closes it.
impl WorkerKeeper for ZkHolder {
    fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    fn check(&self) -> uidgen_worker::Result<()> {
        ZkHolder::check(self).map_err(WorkerError::from)
    }

    fn is_ended(&self) -> bool {
        self.shared.is_lost()
    }

    /// End issuing, then stop reporting gracefully ([`shutdown`](ZkHolder::shutdown)); the
    /// forever node and the cache stay for this address's restart.
    fn release(&self) -> BoxFuture<'_, uidgen_worker::Result<()>> {
        Box::pin(async move {
            // Not `Shared::lose`: that forgets the cache, which a restart continues from.
            self.shared.health.lose("released".to_owned());
            self.stop().await;
            Ok(())
        })
    }

    fn status(&self) -> KeeperStatus {
        KeeperStatus {
            not_issuing: "the ZooKeeper worker id can no longer issue IDs",
            reports: Some(KeeperReports {
                authority: "ZooKeeper",
                key: "zookeeper",
                metrics_prefix: "zk",
                // Relaxed: a counter for status only.
                reclaimed: self.shared.reclaimed.load(Ordering::Relaxed),
                data_losses: self.shared.health.data_losses(),
                reestablished: self.shared.health.reestablished(),
            }),
            ..KeeperStatus::from_health(self.shared.worker_id, self.shared.health.snapshot())
        }
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
        shared.health.admit(
            shared.worker_id,
            until_ms,
            &shared.coordinator(),
            // The limit in force is the mark's too.
            |_| self.limit_ms(),
        )?;
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

/// A short pause while polling ZooKeeper.
pub(crate) const POLL: Duration = Duration::from_millis(200);
