//! [`EtcdWorkerIdAssigner`]: worker ids claimed in etcd under a lease.
//!
//! # The keys
//!
//! - `{prefix}/workers/{id}`: the claim, attached to its holder's lease, so it goes when the
//!   holder stops keeping the lease alive (crash, partition) or revokes it (shutdown). Created
//!   only by a transaction that finds it absent (`create_revision == 0`).
//! - `{prefix}/marks/{id}`: the id's reservation, written with every accepted round and never
//!   deleted: the floor of the id's next holder.
//!
//! Both hold a [`Record`](crate::Record) (`holder`, `life`, `timestamp`, `reserved_until`).
//!
//! # Why IDs never repeat
//!
//! A holder's fence caps every ID at `R`, the `reserved_until` of its last round etcd
//! accepted (`R >= t + reservation`, `t` its own clock read before sending that round). Every
//! round is one transaction that writes the claim key and the mark key together, and holds
//! only while the claim key is the one this holder created. So as long as the claim key is
//! this holder's, the mark key holds at least the `R` of its last accepted round, and once the
//! claim key is gone no round of this holder is accepted any more: its cap is final and at
//! most the mark's value.
//!
//! A new holder claims an id in one transaction that holds only if the claim key is absent
//! **and** the mark key is still at the revision it read, and its floor is that mark's
//! `reserved_until`. So the floor is at least every cap the previous holders of the id ever
//! had: `limit(old) <= R <= floor(new)`, comparing labels the old holder wrote, so clock skew
//! between hosts can delay a claim but never make two holders share a time unit. The new
//! holder stamps nothing in a unit that ends at or before its floor (the generator refuses a
//! clock below it, and the start waits for the clock to pass it).
//!
//! A holder cut off from etcd keeps issuing, but stops at `R`, `reservation` after its last
//! accepted round; its claim key expires one lease ttl after its last keep-alive, but the id is
//! claimed again only once `R` is within `max_start_wait` of the claimant's clock: reclaim
//! happens only after the reservation. A restart takes whichever usable id is lowest (its own
//! earlier id once that id's reservation has passed, or its lease was revoked at shutdown and
//! the reservation passed); there is no local cache, and a start while etcd is down is
//! refused, since an id etcd does not record could be claimed by anyone.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use uidgen_core::{Clock, Layout, SystemClock};
use uidgen_worker::{
    AssignmentKind, BoxFuture, WorkerAssignment, WorkerError, WorkerIdAssigner, WorkerIdRange,
};

use crate::error::{EtcdError, Result};
use crate::gateway::{Gateway, compare_create, compare_mod, get, put};
use crate::holder::{Claimed, EtcdHolder, Shared, lock};
use crate::options::{EtcdOptions, ms};
use crate::record::Record;

/// How many rounds a claim may lose to other claimants before giving up.
const CLAIM_ATTEMPTS: u32 = 8;

/// A worker id from etcd, with what keeps it.
#[derive(Debug, Clone)]
pub struct EtcdAssignment {
    /// The worker id and its fence, as the store's assigners return them.
    pub assignment: WorkerAssignment,
    /// The holder (keep-alives, status, release).
    pub holder: EtcdHolder,
}

/// Worker ids from etcd: the lowest usable id of the [range](EtcdOptions::range), claimed
/// under a lease and kept alive; see the module documentation for the uniqueness argument.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use uidgen_core::{Layout, SystemClock, UidGenerator};
/// use uidgen_etcd::{EtcdOptions, EtcdWorkerIdAssigner};
/// use uidgen_worker::GeneratorBuilder;
/// let options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen/order", "10.0.0.7:8080");
/// let built = GeneratorBuilder::new(Layout::leaf()?)
///     .assigner(EtcdWorkerIdAssigner::new(options))
///     .build_snowflake(SystemClock)
///     .await?;
/// println!("worker {} issued {}", built.worker_id(), built.generator.next_id()?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct EtcdWorkerIdAssigner {
    options: EtcdOptions,
    clock: Arc<dyn Clock>,
    /// The holder of the last assignment, for callers that went through the trait.
    last: Mutex<Option<EtcdHolder>>,
}

/// A free id and what its mark says.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    worker_id: u64,
    floor_ms: u64,
    mark_revision: i64,
}

impl EtcdWorkerIdAssigner {
    /// Its assignments' kind: a claim key in etcd under a lease kept alive, fenced by the
    /// id's mark.
    pub const KIND: AssignmentKind = AssignmentKind::new("etcd");

    /// An assigner with `options`, on the system clock.
    pub fn new(options: EtcdOptions) -> Self {
        Self {
            options,
            clock: Arc::new(SystemClock),
            last: Mutex::new(None),
        }
    }

    /// Read time from `clock` (the one the generator reads).
    #[must_use]
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The options.
    pub fn options(&self) -> &EtcdOptions {
        &self.options
    }

    /// The holder of the last assignment made through [`WorkerIdAssigner::assign`].
    pub fn holder(&self) -> Option<EtcdHolder> {
        lock(&self.last).clone()
    }

    /// Claim a worker id for `layout` and start keeping it; a typed error when etcd is
    /// unreachable or no id is usable. Must run inside a tokio runtime (the holder keeps the
    /// lease alive from a task).
    ///
    /// Cancel safety: a start dropped midway may leave a claim key behind, which goes with its
    /// lease one ttl later; nothing is issued before this returns.
    pub async fn start(&self, layout: &Layout) -> Result<EtcdAssignment> {
        self.options.validate()?;
        let range = self.options.range_for(layout)?;
        let gateway = Gateway::new(&self.options)?;
        let lease = gateway.grant(self.options.lease_ttl).await?;
        let claimed = match self.claim(&gateway, lease, range).await {
            Ok(claimed) => claimed,
            Err(error) => {
                let _ = gateway.revoke(lease).await;
                return Err(error);
            }
        };
        let (worker_id, floor_ms) = (claimed.worker_id, claimed.floor_ms);
        // The holder starts keeping the lease alive before the wait below, which may last
        // longer than the lease's ttl; its fence is handed out only after the wait.
        let holder = EtcdHolder::start(Shared::new(
            self.options.clone(),
            gateway,
            Arc::clone(&self.clock),
            &claimed,
        ));
        let waited = match self.wait_for_clock(worker_id, floor_ms).await {
            // The id may have been lost meanwhile (its claim key deleted).
            Ok(()) => holder.check(),
            Err(error) => Err(error),
        };
        if let Err(error) = waited {
            // Hand the id back at once; its mark (written by the claim) keeps it fenced.
            let _ = holder.release().await;
            return Err(error);
        }
        tracing::info!(
            worker_id,
            claim = %holder.claim_key(),
            lease,
            floor_ms,
            %range,
            "holding an etcd worker id"
        );
        *lock(&self.last) = Some(holder.clone());
        let assignment = WorkerAssignment {
            fence: Some(holder.fence()),
            keeper: Some(Arc::new(holder.clone())),
            ..WorkerAssignment::fixed(worker_id, Self::KIND)
        };
        Ok(EtcdAssignment { assignment, holder })
    }

    /// Claim the lowest usable id of `range` under `lease`: no claim key, and a mark this
    /// clock reaches within `max_start_wait`.
    async fn claim(&self, gateway: &Gateway, lease: i64, range: WorkerIdRange) -> Result<Claimed> {
        let options = &self.options;
        let life = fastrand::u64(..);
        for attempt in 0..CLAIM_ATTEMPTS {
            if attempt > 0 {
                // Racers that retry in lockstep keep colliding; a short random pause spreads them.
                let pause = fastrand::u64(1..=5 * u64::from(attempt));
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let (candidates, held, reserved) = self.candidates(gateway, range).await?;
            let mut raced = false;
            for candidate in candidates {
                let worker_id = candidate.worker_id;
                let now = self.clock.now_millis();
                // The reservation covers the floor too: a later claimant never starts below
                // the previous holder, even if this one stamps nothing.
                let record = Record {
                    holder: options.holder.clone(),
                    life,
                    timestamp: now,
                    reserved_until: candidate
                        .floor_ms
                        .max(now)
                        .saturating_add(ms(options.reservation)),
                };
                let (claim, mark) = (options.claim_key(worker_id), options.mark_key(worker_id));
                let json = record.to_json();
                let txn = gateway
                    .txn(
                        "claiming a worker id",
                        vec![
                            compare_create(&claim, 0),
                            compare_mod(&mark, candidate.mark_revision),
                        ],
                        vec![put(&claim, &json, lease), put(&mark, &json, 0)],
                        vec![get(&claim)],
                    )
                    .await?;
                let create_revision = if txn.succeeded {
                    Some(txn.revision)
                } else {
                    // A request retried on another endpoint after the first applied it finds
                    // its own claim: the same lease, the same record.
                    txn.ranges
                        .first()
                        .and_then(|kvs| kvs.first())
                        .filter(|kv| kv.lease == lease && kv.value == json)
                        .map(|kv| kv.create_revision)
                };
                if let Some(create_revision) = create_revision {
                    tracing::info!(
                        worker_id,
                        floor_ms = candidate.floor_ms,
                        "claimed a worker id"
                    );
                    return Ok(Claimed {
                        worker_id,
                        lease,
                        create_revision,
                        floor_ms: candidate.floor_ms,
                        life,
                        record,
                    });
                }
                raced = true;
            }
            if !raced {
                return Err(EtcdError::RangeUsedUp {
                    range,
                    prefix: options.prefix.clone(),
                    held,
                    reserved,
                });
            }
        }
        Err(EtcdError::Contention {
            attempts: CLAIM_ATTEMPTS,
        })
    }

    /// The ids of `range` a claim may try, lowest first, and how many are held and reserved.
    async fn candidates(
        &self,
        gateway: &Gateway,
        range: WorkerIdRange,
    ) -> Result<(Vec<Candidate>, usize, usize)> {
        let options = &self.options;
        let id_of = |key: &str, dir: &str| {
            key.strip_prefix(&format!("{}/{dir}/", options.prefix))
                .and_then(|id| id.parse::<u64>().ok())
        };
        let held: HashSet<u64> = gateway
            .list(
                "listing the claims",
                &format!("{}/workers/", options.prefix),
            )
            .await?
            .iter()
            .filter_map(|kv| id_of(&kv.key, "workers"))
            .filter(|id| range.contains(*id))
            .collect();
        let marks: HashMap<u64, (Option<Record>, i64)> = gateway
            .list("listing the marks", &format!("{}/marks/", options.prefix))
            .await?
            .into_iter()
            .filter_map(|kv| {
                let id = id_of(&kv.key, "marks")?;
                Some((id, (Record::parse(&kv.value), kv.mod_revision)))
            })
            .collect();
        let now = self.clock.now_millis();
        let reach = now.saturating_add(ms(options.max_start_wait));
        let mut candidates = Vec::new();
        let mut reserved = 0;
        // Bounded: a claim only needs a few candidates, and a wide range (Baidu's 22 bits)
        // must not be walked id by id.
        let mut worker_id = range.low();
        while worker_id <= range.high() && candidates.len() < 16 {
            if !held.contains(&worker_id) {
                match marks.get(&worker_id) {
                    None => candidates.push(Candidate {
                        worker_id,
                        floor_ms: 0,
                        mark_revision: 0,
                    }),
                    Some((Some(record), revision)) if record.reserved_until <= reach => {
                        candidates.push(Candidate {
                            worker_id,
                            floor_ms: record.reserved_until,
                            mark_revision: *revision,
                        });
                    }
                    // Still reserved, or a mark this version cannot read: left alone.
                    Some(_) => reserved += 1,
                }
            }
            match worker_id.checked_add(1) {
                Some(next) => worker_id = next,
                None => break,
            }
        }
        Ok((candidates, held.len(), reserved))
    }

    /// Wait until the clock has passed `until_ms`, up to `max_start_wait`: the store's one
    /// wait (the rule every assigner's start follows), with etcd's error.
    async fn wait_for_clock(&self, worker_id: u64, until_ms: u64) -> Result<()> {
        let max_wait = self.options.max_start_wait;
        uidgen_worker::wait_for_clock(self.clock.as_ref(), worker_id, until_ms, max_wait)
            .await
            .map_err(|error| match error {
                WorkerError::ClockBehindLastIssued {
                    worker_id,
                    until_ms,
                    now_ms,
                    max_wait_ms,
                    ..
                } => EtcdError::ClockBehind {
                    worker_id,
                    until_ms,
                    now_ms,
                    max_wait_ms,
                },
                other => EtcdError::Worker(other),
            })
    }

    /// Every id's mark under the prefix (for operators and tests).
    pub async fn marks(&self) -> Result<HashMap<u64, Record>> {
        let gateway = Gateway::new(&self.options)?;
        let prefix = format!("{}/marks/", self.options.prefix);
        Ok(gateway
            .list("listing the marks", &prefix)
            .await?
            .into_iter()
            .filter_map(|kv| {
                let id = kv.key.strip_prefix(&prefix)?.parse().ok()?;
                Some((id, Record::parse(&kv.value)?))
            })
            .collect())
    }
}

impl WorkerIdAssigner for EtcdWorkerIdAssigner {
    fn assign<'a>(
        &'a self,
        layout: &'a Layout,
    ) -> BoxFuture<'a, uidgen_worker::Result<WorkerAssignment>> {
        Box::pin(async move { Ok(self.start(layout).await?.assignment) })
    }
}
