//! [`EtcdHolder`]: a held etcd worker id, its keep-alives, and the fence its generator obeys.
//!
//! Invariants (the argument is in `assigner.rs`; this file keeps them):
//!
//! - Every round keeps the lease alive, then writes the claim key and the mark key in one
//!   transaction that holds only while the claim key is still the one this holder created
//!   (`create_revision` compare). A claim key that expired or was taken means the id is lost,
//!   and the fence closes for good.
//! - The record's `reserved_until` is `max(accepted cap, now + reservation)`, `now` read before
//!   the transaction is sent: it never falls, and the holder raises its cap to it only after
//!   etcd accepted the transaction. A transaction whose answer was lost raises nothing.
//! - The fence's limit is the cap: a holder cut off from etcd stops at the reservation of its
//!   last accepted round, which is what the mark key holds for its successor.
//! - **Taking the id up again.** When the claim key is gone (the lease expired while etcd was
//!   out of reach, or etcd lost its data) the holder claims its own id again, under a new
//!   lease, in one transaction that holds only if the claim key is absent and the mark is
//!   still what the holder read: either its own last record (its `life`: nobody claimed the id
//!   since, as every claim writes the mark) or absent (etcd lost it). It does so only while
//!   `now + max_start_wait < cap` ([`may_reestablish`]): before then no claimant could have
//!   taken the id at the reservation the mark promised. An absent mark, or an answer whose
//!   revision went below one seen before, is a data loss: the holder first makes the namespace
//!   record fence every older id (`namespace::record_loss`), so claimants wait out what the
//!   holders etcd forgot may still stamp, then takes its id up again. Anything else (the claim
//!   key held by another, a mark of another life) loses the id.

use std::sync::Arc;

use parking_lot::Mutex;
use uidgen_core::{Clock, FenceRefusal, TimeFence};
use uidgen_worker::{
    BoxFuture, Coordinator, HolderHealth, KeeperReports, KeeperStatus, WorkerError, WorkerKeeper,
    may_reestablish,
};

use crate::error::{EtcdError, Result};
use crate::gateway::{Gateway, compare_create, compare_mod, get, put};
use crate::namespace::{read_namespace, record_loss};
use crate::options::EtcdOptions;
use crate::record::Record;
use uidgen_core::clock::saturating_millis as ms;

/// What the holder shares with its fence and its keep-alive task.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) worker_id: u64,
    pub(crate) options: EtcdOptions,
    pub(crate) gateway: Gateway,
    pub(crate) clock: Arc<dyn Clock>,
    /// The lease and the claim key's create revision: the rounds hold only while the claim key
    /// is the one this holder created. Replaced when the holder takes its id up again.
    claim: Mutex<ClaimKey>,
    /// Where the id's earlier holders stopped.
    pub(crate) floor_ms: u64,
    pub(crate) life: u64,
    /// The cap etcd last accepted, the rounds' fate, and the loss.
    health: HolderHealth,
}

/// The claim key a holder's rounds write under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ClaimKey {
    lease: i64,
    create_revision: i64,
}

/// What a claim leaves for the holder: the id, its lease and claim, the floor, and the first
/// accepted record.
#[derive(Debug)]
pub(crate) struct Claimed {
    pub(crate) worker_id: u64,
    pub(crate) lease: i64,
    pub(crate) create_revision: i64,
    pub(crate) floor_ms: u64,
    pub(crate) life: u64,
    pub(crate) record: Record,
}

impl Shared {
    pub(crate) fn new(
        options: EtcdOptions,
        gateway: Gateway,
        clock: Arc<dyn Clock>,
        claimed: &Claimed,
    ) -> Self {
        // The claim was the first accepted round.
        let health = HolderHealth::new(claimed.record.reserved_until);
        health.accepted(claimed.record.timestamp, claimed.record.reserved_until);
        Self {
            worker_id: claimed.worker_id,
            options,
            gateway,
            clock,
            claim: Mutex::new(ClaimKey {
                lease: claimed.lease,
                create_revision: claimed.create_revision,
            }),
            floor_ms: claimed.floor_ms,
            life: claimed.life,
            health,
        }
    }

    /// etcd accepted a round written at `now` reserving until `reserved`: raise the cap.
    fn accepted(&self, now: u64, reserved: u64) {
        if let Some(outage_ms) = self.health.accepted(now, reserved) {
            tracing::info!(
                worker_id = self.worker_id,
                outage_ms,
                "etcd answers again: keep-alives resumed"
            );
        }
    }

    /// A round could not reach etcd: count it and keep issuing under the cap.
    fn failed(&self, error: &EtcdError) {
        let (failures, log) = self.health.failed(self.clock.now_millis());
        if log {
            tracing::warn!(
                worker_id = self.worker_id,
                failures,
                issuing_until_ms = self.health.accepted_until(),
                "cannot keep the etcd lease alive ({error}); still issuing IDs on the held \
                 worker id until issuing_until_ms, the reservation of the last accepted round"
            );
        }
    }

    /// The id is gone for good: close the fence.
    fn lose(&self, reason: String) {
        tracing::error!(
            worker_id = self.worker_id,
            "etcd worker id lost: {reason}; stopped issuing IDs"
        );
        self.health.lose(reason);
    }

    /// How the holder's messages name etcd and its rounds.
    fn coordinator(&self) -> Coordinator {
        Coordinator {
            name: "etcd",
            round: "keep-alive",
            reservation: self.options.reservation,
        }
    }

    fn claim_key_state(&self) -> ClaimKey {
        *self.claim.lock()
    }

    /// The record this holder writes at `now`, reserving until `reserved`.
    fn record(&self, now: u64, reserved: u64) -> Record {
        Record {
            holder: self.options.holder.clone(),
            life: self.life,
            timestamp: now,
            reserved_until: reserved,
        }
    }

    /// One round: keep the lease alive, then record the next reservation; take the id up
    /// again when the claim key is gone.
    async fn tick(&self) {
        let claim = self.claim_key_state();
        let alive = match self.gateway.keep_alive(claim.lease).await {
            Ok(alive) => alive.is_some(),
            Err(error) => return self.failed(&error),
        };
        if !alive {
            let reason = format!(
                "its lease {} is gone (etcd accepted no keep-alive within {:?}, or lost it)",
                claim.lease, self.options.lease_ttl
            );
            return self.reestablish(reason).await;
        }
        let now = self.clock.now_millis();
        let reserved = self
            .health
            .accepted_until()
            .max(now.saturating_add(ms(self.options.reservation)));
        let record = self.record(now, reserved).to_json();
        let key = self.options.claim_key(self.worker_id);
        let written = self
            .gateway
            .txn(
                "recording the reservation",
                vec![compare_create(&key, claim.create_revision)],
                vec![
                    put(&key, &record, claim.lease),
                    put(&self.options.mark_key(self.worker_id), &record, 0),
                ],
                Vec::new(),
            )
            .await;
        match written {
            Ok(txn) if txn.succeeded => {
                self.accepted(now, reserved);
                // A round that etcd accepted may still show that it went back (a restore that
                // kept this claim): fence what it may have forgotten of the others.
                if let Some((before, after)) = self.gateway.revisions().take_regression() {
                    self.saw_loss(before, after, now).await;
                }
            }
            Ok(_) => {
                self.reestablish(format!(
                    "its claim key {key} is no longer the one it created (expired, deleted or \
                     taken)"
                ))
                .await;
            }
            Err(error) => self.failed(&error),
        }
    }

    /// etcd's revision went from `before` down to `after`: count it, and make the namespace
    /// record fence every id whose mark may be stale. Returns whether the record is in force.
    async fn saw_loss(&self, before: i64, after: i64, now: u64) -> bool {
        self.health.data_loss();
        let why = format!(
            "its revision went back from {before} to {after} (seen by worker id {})",
            self.worker_id
        );
        let last_accepted = self.health.snapshot().last_report_ms.unwrap_or(0);
        match record_loss(&self.gateway, &self.options, now, last_accepted, &why).await {
            Ok(_) => true,
            Err(error) => {
                tracing::error!(
                    worker_id = self.worker_id,
                    %error,
                    "etcd lost data ({why}) and the namespace record could not be written; \
                     retrying next round"
                );
                // Seen again next round: the regression is kept until recorded.
                self.gateway.revisions().observe(before);
                false
            }
        }
    }

    /// The claim key is gone: take the id up again if nobody can have claimed it (see the
    /// module documentation), else lose it for good.
    async fn reestablish(&self, reason: String) {
        let now = self.clock.now_millis();
        let cap = self.health.accepted_until();
        if !may_reestablish(now, cap, ms(self.options.max_start_wait)) {
            return self.lose(format!(
                "{reason}, and its reservation runs out too soon to take it up again"
            ));
        }
        match self.try_reestablish(now, cap).await {
            Ok(Some(lease)) => {
                self.health.reestablish();
                tracing::warn!(
                    worker_id = self.worker_id,
                    lease,
                    "took the etcd worker id up again under a new lease ({reason}); issuing \
                     without a gap"
                );
            }
            Ok(None) => self.lose(reason),
            // etcd answered part of the way: try again next round, under the cap.
            Err(error) => self.failed(&error),
        }
    }

    /// Claim this holder's id again: `Ok(Some(lease))` when taken, `Ok(None)` when the id is
    /// someone else's now.
    async fn try_reestablish(&self, now: u64, cap: u64) -> Result<Option<i64>> {
        let options = &self.options;
        let (claim, mark) = (
            options.claim_key(self.worker_id),
            options.mark_key(self.worker_id),
        );
        if let Some(kv) = self.gateway.get("reading the claim key", &claim).await? {
            // Ours only if an earlier attempt of this life wrote it and its answer was lost.
            if Record::parse(&kv.value).is_some_and(|r| r.life == self.life) && kv.lease != 0 {
                *self.claim.lock() = ClaimKey {
                    lease: kv.lease,
                    create_revision: kv.create_revision,
                };
                return Ok(Some(kv.lease));
            }
            return Ok(None); // held by another
        }
        let found = self.gateway.get("reading the mark", &mark).await?;
        let mark_revision = match &found {
            Some(kv) => match Record::parse(&kv.value) {
                Some(record) if record.life == self.life => kv.mod_revision,
                _ => return Ok(None), // another life claimed the id since
            },
            None => 0,
        };
        let regression = self.gateway.revisions().take_regression();
        if found.is_none() || regression.is_some() {
            // The mark is gone, or etcd went back: a data loss. Fence the ids etcd forgot
            // before taking ours up, so no claimant starts one below its lost holder.
            let (before, after) = regression.unwrap_or((0, 0));
            if !self.saw_loss(before, after, now).await {
                return Err(EtcdError::Etcd {
                    endpoint: String::new(),
                    action: "recording etcd's data loss",
                    reason: "the namespace record could not be written".into(),
                });
            }
        }
        let Some(namespace) = read_namespace(&self.gateway, &options.namespace_key()).await? else {
            return Err(EtcdError::Etcd {
                endpoint: String::new(),
                action: "reading the namespace record",
                reason: "it vanished while the worker id was taken up again".into(),
            });
        };
        let lease = self.gateway.grant(options.lease_ttl).await?;
        let reserved = cap.max(now.saturating_add(ms(options.reservation)));
        let record = self.record(now, reserved).to_json();
        let txn = self
            .gateway
            .txn(
                "taking the worker id up again",
                vec![
                    compare_create(&claim, 0),
                    compare_mod(&mark, mark_revision),
                    compare_mod(&options.namespace_key(), namespace.mod_revision),
                ],
                vec![put(&claim, &record, lease), put(&mark, &record, 0)],
                vec![get(&claim)],
            )
            .await;
        let txn = match txn {
            Ok(txn) => txn,
            Err(error) => {
                let _ = self.gateway.revoke(lease).await;
                return Err(error);
            }
        };
        if !txn.succeeded {
            let _ = self.gateway.revoke(lease).await;
            // Someone wrote the claim, the mark or the namespace meanwhile: read again next
            // round (a claim of another shows then and loses the id).
            return Err(EtcdError::Contention { attempts: 1 });
        }
        *self.claim.lock() = ClaimKey {
            lease,
            create_revision: txn.revision,
        };
        self.accepted(now, reserved);
        Ok(Some(lease))
    }
}

/// Keep the lease alive every interval until lost or dropped.
async fn run(shared: Arc<Shared>) {
    let interval = shared.options.report_interval();
    loop {
        tokio::time::sleep(interval).await;
        if shared.health.is_lost() {
            return;
        }
        shared.tick().await;
    }
}

#[derive(Debug)]
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A held etcd worker id: its keep-alives run until [`release`](Self::release) or until the
/// last clone (and the last fence) is dropped. Clones share it.
#[derive(Debug, Clone)]
pub struct EtcdHolder {
    shared: Arc<Shared>,
    task: Arc<AbortOnDrop>,
}

impl EtcdHolder {
    /// Start keeping the id (must be called inside a tokio runtime).
    pub(crate) fn start(shared: Shared) -> Self {
        let shared = Arc::new(shared);
        let task = tokio::spawn(run(Arc::clone(&shared)));
        Self {
            shared,
            task: Arc::new(AbortOnDrop(task)),
        }
    }

    /// The worker id.
    pub fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    /// The claim key (`{prefix}/workers/{id}`).
    pub fn claim_key(&self) -> String {
        self.shared.options.claim_key(self.shared.worker_id)
    }

    /// Where the id's earlier holders stopped: nothing is stamped before it.
    pub fn floor_ms(&self) -> u64 {
        self.shared.floor_ms
    }

    /// The lease keeping the claim key now: a new one once the holder took its id up again
    /// (the rounds' fate, the cap and a loss are in [`WorkerKeeper::status`]).
    pub fn lease_id(&self) -> i64 {
        self.shared.claim_key_state().lease
    }

    /// `Ok` while IDs may be issued: the id is held and the reservation of the last accepted
    /// round has not run out.
    pub fn check(&self) -> Result<()> {
        let shared = &self.shared;
        let now = shared.clock.now_millis();
        match shared.health.refusal(now, &shared.coordinator()) {
            Some(reason) => Err(EtcdError::Lost {
                worker_id: shared.worker_id,
                reason,
            }),
            None => Ok(()),
        }
    }

    /// The fence to give the generator. It keeps the keep-alives running too, so a generator
    /// built from the fence alone (without the holder) keeps its id.
    pub fn fence(&self) -> Arc<dyn TimeFence> {
        Arc::new(EtcdFence {
            shared: Arc::clone(&self.shared),
            _keeper: Arc::clone(&self.task),
        })
    }

    /// Stop issuing and keeping the id, and revoke the lease so the claim key goes at once.
    /// The mark key stays: the id's next holder starts above this one's reservation.
    ///
    /// Cancel safety: the fence is closed and the keep-alives stopped before the first await;
    /// a revoke dropped midway leaves the claim key to expire with its lease.
    pub async fn release(&self) -> Result<()> {
        // Not `lose`: a release is no failure worth an error line.
        self.shared.health.lose("released at shutdown".to_owned());
        self.task.0.abort();
        tracing::info!(
            worker_id = self.shared.worker_id,
            "released the etcd worker id; its reservation stays in its mark"
        );
        let lease = self.shared.claim_key_state().lease;
        self.shared.gateway.revoke(lease).await
    }
}

/// The holder keeps its etcd worker id: keep-alives raise its cap, a loss closes it.
impl WorkerKeeper for EtcdHolder {
    fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    fn check(&self) -> uidgen_worker::Result<()> {
        EtcdHolder::check(self).map_err(WorkerError::from)
    }

    fn is_ended(&self) -> bool {
        self.shared.health.is_lost()
    }

    fn release(&self) -> BoxFuture<'_, uidgen_worker::Result<()>> {
        Box::pin(async move { EtcdHolder::release(self).await.map_err(WorkerError::from) })
    }

    fn status(&self) -> KeeperStatus {
        KeeperStatus {
            // The claim counts as a report: a holder never rests on a local file alone.
            from_local_cache: false,
            not_issuing: "the etcd worker id can no longer issue IDs",
            // Keep-alive rounds are its time reports: each accepted one raises the cap. Published
            // so that metrics (`uidgen_etcd_*`), `/v1/status` and a degraded readiness follow
            // them as they follow ZooKeeper's.
            reports: Some(KeeperReports {
                authority: "etcd",
                key: "etcd",
                metrics_prefix: "etcd",
                // No automatic reclaim: an id comes free when its lease expires.
                reclaimed: 0,
                data_losses: self.shared.health.data_losses(),
                reestablished: self.shared.health.reestablished(),
            }),
            ..KeeperStatus::from_health(self.shared.worker_id, self.shared.health.snapshot())
        }
    }
}

/// The generator's fence: IDs only under the accepted cap, none once the id is lost.
#[derive(Debug)]
struct EtcdFence {
    shared: Arc<Shared>,
    /// Keep-alives go on while the generator lives.
    _keeper: Arc<AbortOnDrop>,
}

impl TimeFence for EtcdFence {
    fn limit_ms(&self) -> u64 {
        if self.shared.health.is_lost() {
            return 0;
        }
        self.shared.health.accepted_until()
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        let shared = &self.shared;
        shared
            .health
            .admit(shared.worker_id, until_ms, &shared.coordinator(), |cap| cap)
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        // Borrow no further ahead than a successor would wait for: a burst waits for the
        // clock instead of using up the reservation.
        Some(ms(self.shared.options.max_start_wait).max(1))
    }

    fn floor_ms(&self) -> u64 {
        self.shared.floor_ms
    }
}
