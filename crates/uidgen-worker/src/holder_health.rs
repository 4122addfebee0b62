//! [`HolderHealth`]: what a worker id kept by a coordinator (ZooKeeper, etcd) knows of itself:
//! the cap its coordinator last accepted, whether its reports get through, and whether the id
//! was lost. One home for the bookkeeping both holders share, and for the rules their `check`
//! and their fence apply to it ([`refusal`](HolderHealth::refusal),
//! [`admit`](HolderHealth::admit)), in words that name the coordinator ([`Coordinator`]).
//!
//! Invariants: the cap only rises, and only after the coordinator accepted the value
//! ([`accepted`](HolderHealth::accepted)); a lost id stays lost, with the first reason given.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use uidgen_core::FenceRefusal;

/// How a coordinator-kept holder's messages name its coordinator and the rounds that raise its
/// cap: ZooKeeper's reports, etcd's keep-alives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coordinator {
    /// Its name in sentences: "ZooKeeper", "etcd".
    pub name: &'static str,
    /// What one round is called: "report", "keep-alive".
    pub round: &'static str,
    /// How far past each accepted round the holder may stamp (its options' reservation).
    pub reservation: Duration,
}

/// The state of a coordinator-kept worker id, shared by its keeper task and its fence.
///
/// ```
/// use uidgen_worker::HolderHealth;
/// let health = HolderHealth::new(10_000);
/// assert_eq!(health.failed(5_000), (1, true)); // the first failure of an outage is logged
/// assert_eq!(health.accepted(6_000, 20_000), Some(1_000)); // an outage of 1 s ended
/// assert_eq!(health.accepted_until(), 20_000);
/// health.lose("taken over".into());
/// health.lose("later reason".into());
/// assert_eq!(health.lost_reason().as_deref(), Some("taken over"));
/// ```
#[derive(Debug)]
pub struct HolderHealth {
    /// The reservation the coordinator last accepted: IDs stop there.
    accepted_until_ms: AtomicU64,
    /// This clock at the last accepted report; 0 before the first.
    last_report_ms: AtomicU64,
    connected: AtomicBool,
    failures: AtomicU64,
    /// Since when reports fail; 0 while they succeed.
    outage_since_ms: AtomicU64,
    lost_flag: AtomicBool,
    lost: Mutex<Option<String>>,
    /// Times the coordinator was seen to have lost data (see `namespace.rs`).
    data_losses: AtomicU64,
    /// Times the holder took its id up again after its record vanished or its lease ended.
    reestablished: AtomicU64,
}

/// A snapshot of a [`HolderHealth`], for status and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSnapshot {
    /// Whether the last report reached the coordinator.
    pub connected: bool,
    /// Reports that failed since start.
    pub failures: u64,
    /// This clock at the last accepted report (ms since the Unix epoch), if any.
    pub last_report_ms: Option<u64>,
    /// The cap: IDs stop at this instant unless a report is accepted first.
    pub accepted_until_ms: u64,
    /// Since when reports have been failing (ms), if they are.
    pub outage_since_ms: Option<u64>,
    /// Why the id was lost, if it was.
    pub lost: Option<String>,
}

impl HolderHealth {
    /// A holder whose cap starts at `accepted_until_ms` (what a claim or a cache recorded),
    /// not yet connected, with no report accepted.
    pub fn new(accepted_until_ms: u64) -> Self {
        Self {
            accepted_until_ms: AtomicU64::new(accepted_until_ms),
            last_report_ms: AtomicU64::new(0),
            connected: AtomicBool::new(false),
            failures: AtomicU64::new(0),
            outage_since_ms: AtomicU64::new(0),
            lost_flag: AtomicBool::new(false),
            lost: Mutex::new(None),
            data_losses: AtomicU64::new(0),
            reestablished: AtomicU64::new(0),
        }
    }

    /// The cap: the reservation the coordinator last accepted.
    pub fn accepted_until(&self) -> u64 {
        // SeqCst: raised only after the coordinator accepted the value; a stamp under it must
        // not be ordered before that store (the same rule as a lease's expiry).
        self.accepted_until_ms.load(Ordering::SeqCst)
    }

    /// The coordinator accepted a report written at `now_ms` reserving until `reserved_ms`:
    /// raise the cap. Returns how long the outage that this ends lasted, if one did.
    pub fn accepted(&self, now_ms: u64, reserved_ms: u64) -> Option<u64> {
        // SeqCst: see accepted_until().
        self.accepted_until_ms
            .fetch_max(reserved_ms, Ordering::SeqCst);
        // Relaxed (these three): figures for status and metrics; nothing is ordered by them.
        self.last_report_ms.store(now_ms, Ordering::Relaxed);
        self.connected.store(true, Ordering::Relaxed);
        let since = self.outage_since_ms.swap(0, Ordering::Relaxed);
        (since != 0).then(|| now_ms.saturating_sub(since))
    }

    /// A report failed at `now_ms`: count it. Returns the failures so far and whether to log
    /// this one (the first of an outage, then every twentieth).
    pub fn failed(&self, now_ms: u64) -> (u64, bool) {
        // Relaxed (all three): status figures only.
        let failures = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        self.connected.store(false, Ordering::Relaxed);
        let first = self
            .outage_since_ms
            .compare_exchange(0, now_ms.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_ok();
        (failures, first || failures.is_multiple_of(20))
    }

    /// The id is gone for good: keep the first reason, and close the fence.
    pub fn lose(&self, reason: String) {
        {
            let mut lost = self.lost.lock();
            if lost.is_none() {
                *lost = Some(reason);
            }
        }
        // SeqCst: pairs with the load in is_lost(), so a fence sees the loss at once.
        self.lost_flag.store(true, Ordering::SeqCst);
    }

    /// Whether the id was lost (one atomic load: the fence's hot path reads it).
    pub fn is_lost(&self) -> bool {
        // SeqCst: see lose().
        self.lost_flag.load(Ordering::SeqCst)
    }

    /// Why the id was lost, if it was.
    pub fn lost_reason(&self) -> Option<String> {
        self.lost.lock().clone()
    }

    /// The holder saw its coordinator lose data: count it.
    pub fn data_loss(&self) {
        // Relaxed: a status figure only.
        self.data_losses.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the holder saw its coordinator lose data.
    pub fn data_losses(&self) -> u64 {
        // Relaxed: see data_loss().
        self.data_losses.load(Ordering::Relaxed)
    }

    /// The holder took its id up again under a new claim: count it.
    pub fn reestablish(&self) {
        // Relaxed: a status figure only.
        self.reestablished.fetch_add(1, Ordering::Relaxed);
    }

    /// How many times the holder took its id up again.
    pub fn reestablished(&self) -> u64 {
        // Relaxed: see reestablish().
        self.reestablished.load(Ordering::Relaxed)
    }

    /// Why IDs may not be issued at `now_ms`, in words for the holder's "lost" error: the
    /// reason the id was lost, or that no round was accepted within the reservation of the
    /// last one; `None` while they may.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_worker::{Coordinator, HolderHealth};
    /// let etcd = Coordinator { name: "etcd", round: "keep-alive", reservation: Duration::from_secs(3) };
    /// let health = HolderHealth::new(9_000);
    /// assert_eq!(health.refusal(8_999, &etcd), None);
    /// assert_eq!(
    ///     health.refusal(9_000, &etcd).as_deref(),
    ///     Some("etcd accepted no keep-alive within the reservation (3s) of the last one; IDs stopped at 9000 ms")
    /// );
    /// ```
    pub fn refusal(&self, now_ms: u64, by: &Coordinator) -> Option<String> {
        if let Some(reason) = self.lost_reason() {
            return Some(reason);
        }
        let cap = self.accepted_until();
        (now_ms >= cap).then(|| {
            format!(
                "{} accepted no {} within the reservation ({:?}) of the last one; IDs stopped at \
                 {cap} ms",
                by.name, by.round, by.reservation
            )
        })
    }

    /// The fence's rule for stamping `worker_id` up to `until_ms`: closed once the id is lost;
    /// not yet past the accepted cap (`limit_ms` of the cap says the limit in force); else
    /// `Ok` with the cap. A holder with a local mark as well extends that after this.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::FenceRefusal;
    /// use uidgen_worker::{Coordinator, HolderHealth};
    /// let zk = Coordinator { name: "ZooKeeper", round: "report", reservation: Duration::from_secs(3) };
    /// let health = HolderHealth::new(9_000);
    /// assert_eq!(health.admit(7, 9_000, &zk, |cap| cap), Ok(9_000));
    /// assert!(matches!(health.admit(7, 9_001, &zk, |cap| cap), Err(FenceRefusal::NotYet { limit_ms: 9_000, .. })));
    /// health.lose("taken over".into());
    /// assert_eq!(
    ///     health.admit(7, 1, &zk, |cap| cap),
    ///     Err(FenceRefusal::Closed("ZooKeeper worker id 7 lost: taken over".into()))
    /// );
    /// ```
    pub fn admit(
        &self,
        worker_id: u64,
        until_ms: u64,
        by: &Coordinator,
        limit_ms: impl FnOnce(u64) -> u64,
    ) -> Result<u64, FenceRefusal> {
        if let Some(reason) = self.lost_reason() {
            return Err(FenceRefusal::Closed(format!(
                "{} worker id {worker_id} lost: {reason}",
                by.name
            )));
        }
        let cap = self.accepted_until();
        if until_ms > cap {
            return Err(FenceRefusal::NotYet {
                limit_ms: limit_ms(cap),
                reason: format!(
                    "{} has accepted no {} of worker id {worker_id} that reserves past {cap} ms \
                     (reservation {:?} past each accepted {})",
                    by.name, by.round, by.reservation, by.round
                ),
            });
        }
        Ok(cap)
    }

    /// A snapshot for people, not for deciding what to stamp.
    pub fn snapshot(&self) -> HealthSnapshot {
        // Relaxed (all loads): see above.
        let last = self.last_report_ms.load(Ordering::Relaxed);
        let since = self.outage_since_ms.load(Ordering::Relaxed);
        HealthSnapshot {
            connected: self.connected.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            last_report_ms: (last != 0).then_some(last),
            accepted_until_ms: self.accepted_until(),
            outage_since_ms: (since != 0).then_some(since),
            lost: self.lost_reason(),
        }
    }
}
