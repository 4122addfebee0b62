//! [`WorkerKeeper`]: what keeps a worker id held from an authority (a lease in a store, a
//! node in ZooKeeper, a key in etcd), behind one trait, so that a generator, a service's
//! readiness and its shutdown treat every such id alike.
//!
//! The rule every keeper keeps: once [`is_ended`](WorkerKeeper::is_ended) is true no ID may be
//! let out, and [`release`](WorkerKeeper::release) ends the keeper *before* it reads how far
//! the generator issued, so an ID stamped concurrently is either refused or counted (the
//! Dekker pattern with a SeqCst fence on both sides; see
//! [`GuardedGenerator::check_issued`](crate::GuardedGenerator::check_issued)).

use std::sync::Arc;

use uidgen_core::UidGenerator;

use crate::error::Result;
use crate::future::BoxFuture;
use crate::holder_health::HealthSnapshot;

/// A snapshot of a keeper, for readiness, status and metrics: for people, not for deciding
/// what to stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperStatus {
    /// The worker id.
    pub worker_id: u64,
    /// Whether the id rests on a local file alone (the authority was unreachable at start-up
    /// and has not confirmed it since).
    pub from_local_cache: bool,
    /// The authority's side, as a coordinator-kept id's [`HealthSnapshot`]: the cap it last
    /// accepted (`accepted_until_ms`: a lease's expiry, a report's reservation; IDs stop there
    /// unless a renewal is accepted first), whether renewals get through, and why the id was
    /// lost or given back (`lost`), if it was.
    pub health: HealthSnapshot,
    /// What a service tells clients once IDs cannot be issued on this id: a sentence in the
    /// keeper's words without details ("the worker id lease is lost").
    pub not_issuing: &'static str,
    /// For an id kept by time reports a service publishes (ZooKeeper's): where to publish
    /// them and the coordinator's own counters. `None` publishes nothing beyond readiness.
    pub reports: Option<KeeperReports>,
}

/// How a service publishes a keeper's time reports ([`KeeperStatus::reports`]), so that it
/// shows every coordinator through one path and names none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeeperReports {
    /// The coordinator's name in sentences: "ZooKeeper".
    pub authority: &'static str,
    /// The key a status document shows the figures under: "zookeeper".
    pub key: &'static str,
    /// The prefix of the metric names: "zk" for `uidgen_zk_connected`.
    pub metrics_prefix: &'static str,
    /// Ids the holder freed by reclaiming them automatically.
    pub reclaimed: u64,
    /// Times the holder saw the coordinator lose data (its revision or zxid went back, or the
    /// holder's own record vanished): see `uidgen_worker::NamespaceRecord`.
    pub data_losses: u64,
    /// Times the holder took its id up again after its record vanished or its lease ended,
    /// without a gap in issuing.
    pub reestablished: u64,
}

impl KeeperStatus {
    /// The status of a coordinator-kept id (ZooKeeper, etcd) from its
    /// [`HolderHealth`](crate::HolderHealth) snapshot; it rests on a local file alone until a
    /// report was accepted.
    ///
    /// ```
    /// use uidgen_worker::{HolderHealth, KeeperStatus};
    /// let health = HolderHealth::new(5_000);
    /// health.accepted(1_000, 9_000);
    /// let status = KeeperStatus::from_health(3, health.snapshot());
    /// assert!(status.issuing(8_999) && !status.issuing(9_000));
    /// assert!(!status.from_local_cache);
    /// ```
    pub fn from_health(worker_id: u64, health: HealthSnapshot) -> Self {
        Self {
            worker_id,
            from_local_cache: health.last_report_ms.is_none(),
            health,
            not_issuing: "the worker id can no longer issue IDs",
            reports: None,
        }
    }

    /// Whether IDs can still be issued at `now_ms`: the id is held and not run out.
    pub fn issuing(&self, now_ms: u64) -> bool {
        self.health.lost.is_none() && now_ms < self.health.accepted_until_ms
    }
}

/// What keeps a held worker id: renewals or reports in the background, a check before IDs
/// are let out, and a release on clean shutdown. Object safe; implemented by the store's
/// `LeaseGuard`, uidgen-zk's `ZkHolder` and uidgen-etcd's holder. A caller that needs the
/// implementation's own API downcasts (`&dyn Any`, e.g. the store's `LeaseGuard::of`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use uidgen_core::{Layout, SystemClock};
/// use uidgen_worker::{GeneratorBuilder, StaticWorkerIdAssigner};
/// let dir = tempfile::tempdir().expect("a temporary directory");
/// let built = GeneratorBuilder::new(Layout::snowflake()?)
///     .assigner(StaticWorkerIdAssigner::new(3, dir.path().join("worker-3.state")))
///     .build_snowflake(SystemClock)
///     .await?;
/// // A static id without a store needs no keeper; a leased one would carry its lease here.
/// assert!(built.assignment.keeper.is_none());
/// built.release().await?; // releases the keeper, if any
/// # Ok(()) }
/// ```
pub trait WorkerKeeper: std::any::Any + Send + Sync + std::fmt::Debug {
    /// The worker id kept.
    fn worker_id(&self) -> u64;

    /// `Ok` while IDs may be issued: the id is held and its authority's last answer has not
    /// run out. The error says why not, in the keeper's own words.
    fn check(&self) -> Result<()>;

    /// Whether the id was lost or released: no ID may be let out after this. One atomic load
    /// (the generator reads it after every ID).
    fn is_ended(&self) -> bool;

    /// Record the generator whose `issued_until_ms` the keeper writes down (renewals, the
    /// release). Held weakly. By default ignored: a keeper whose id is fenced by a local mark
    /// or a reservation its authority holds (ZooKeeper, etcd) needs no more.
    fn track(&self, generator: Arc<dyn UidGenerator>) {
        let _ = generator;
    }

    /// Record that IDs were issued up to `ms` (for callers that track no generator). By
    /// default ignored, as [`track`](Self::track).
    fn record_issued_until(&self, ms: u64) {
        let _ = ms;
    }

    /// Stop issuing, stop the background upkeep (waiting for it, within a bound, so that what
    /// it was writing is written), and give the id back as the authority allows: a lease is
    /// released at once, a ZooKeeper node is kept for this address's restart. Call on clean
    /// shutdown.
    ///
    /// Cancel safety: once it returns `Pending` the keeper has ended in this process; dropping
    /// the future leaves the authority's record to expire as an unrenewed one would.
    fn release(&self) -> BoxFuture<'_, Result<()>>;

    /// A snapshot for readiness, status and metrics.
    fn status(&self) -> KeeperStatus;
}
