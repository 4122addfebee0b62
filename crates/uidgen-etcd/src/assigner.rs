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
//! # When etcd loses its data
//!
//! The marks are the only floor, so an etcd restarted on an emptied data directory, or
//! restored from an older snapshot, would let a claimant start an id below what its last
//! holder stamped. `{prefix}/namespace` holds a [`NamespaceRecord`] written before any claim
//! (its argument is in uidgen-worker's `namespace.rs`): a claimant that finds the prefix
//! empty cannot tell a new namespace from a lost one, so it records
//! [`Origin::UnknownPast`] and every id without a newer mark waits until `now + reservation
//! + max_start_wait` (an operator declares a new namespace with `uidgen etcd init`); a
//! prefix with marks but no record was written by an earlier uidgen and is adopted as it is.
//! A claim compares the namespace record's revision too, so one rewritten meanwhile (a loss
//! seen by a holder) makes the claim read again. Holders that see the loss take their own
//! ids up again (`holder.rs`).
//!
//! A holder cut off from etcd keeps issuing, but stops at `R`, `reservation` after its last
//! accepted round; its claim key expires one lease ttl after its last keep-alive, but the id is
//! claimed again only once `R` is within `max_start_wait` of the claimant's clock: reclaim
//! happens only after the reservation. A restart takes whichever usable id is lowest (its own
//! earlier id once that id's reservation has passed, or its lease was revoked at shutdown and
//! the reservation passed); there is no local cache, and a start while etcd is down is
//! refused, since an id etcd does not record could be claimed by anyone.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_worker::{
    AssignerCore, AssignmentKind, ClockBehind, NamespaceRecord, Origin, WorkerAssignment,
    WorkerIdRange,
};

use crate::error::{EtcdError, Result};
use crate::gateway::{Gateway, compare_create, compare_mod, get, put};
use crate::holder::{Claimed, EtcdHolder, Shared};
use crate::namespace::{CLAIM_ATTEMPTS, Namespace, read_namespace, record_loss};
use crate::options::EtcdOptions;
use crate::record::Record;
use uidgen_core::clock::saturating_millis as ms;

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
/// [Registered in a store](Self::registered_in), it records its range there under
/// [`REGISTRY_NAME`](Self::REGISTRY_NAME) before it claims, so that the assigners sharing the
/// store (and the ID space) keep out of it; a range overlapping theirs is refused.
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
    /// The options, the clock, and where the range is recorded before a claim, if anywhere.
    core: AssignerCore<EtcdOptions>,
}

/// A free id and what its mark says.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    worker_id: u64,
    floor_ms: u64,
    mark_revision: i64,
}

/// What a claim found in the range.
#[derive(Debug, Default)]
struct Survey {
    candidates: Vec<Candidate>,
    held: usize,
    reserved: usize,
    /// Free ids whose floor is the namespace record's (no mark newer than it).
    fenced_by_namespace: usize,
}

impl EtcdWorkerIdAssigner {
    /// Its assignments' kind: a claim key in etcd under a lease kept alive, fenced by the
    /// id's mark.
    pub const KIND: AssignmentKind = AssignmentKind::new("etcd");

    /// The name its range is recorded under in a
    /// [`RangeRegistry`](uidgen_worker::RangeRegistry) (the store's `worker_id_range`).
    pub const REGISTRY_NAME: &'static str = "etcd";

    uidgen_worker::assigner_constructors!(
        EtcdOptions,
        /// Record the range in `registry` before every claim, so that the other assigners sharing
        /// it keep out of that range (and a range overlapping theirs is refused before anything
        /// is claimed in etcd).
        ///
        /// ```no_run
        /// # async fn demo(store: impl uidgen_worker::RangeRegistry + 'static) -> Result<(), Box<dyn std::error::Error>> {
        /// use uidgen_core::Layout;
        /// use uidgen_etcd::{EtcdOptions, EtcdWorkerIdAssigner};
        /// use uidgen_worker::WorkerIdAssigner;
        /// let mut options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen/order", "10.0.0.7:8080");
        /// options.range = Some("924-1023".parse()?);
        /// let assigner = EtcdWorkerIdAssigner::new(options).registered_in(store);
        /// let assignment = assigner.assign(&Layout::leaf()?).await?;
        /// assert!((924..=1023).contains(&assignment.worker_id));
        /// # Ok(()) }
        /// ```
    );

    /// Claim a worker id for `layout` and start keeping it, after recording the range in the
    /// registry ([`registered_in`](Self::registered_in)), if any; a typed error when the
    /// registry refuses the range, etcd is unreachable or no id is usable. Must run inside a
    /// tokio runtime (the holder keeps the lease alive from a task).
    ///
    /// Cancel safety: a start dropped midway may leave a claim key behind, which goes with its
    /// lease one ttl later; nothing is issued before this returns.
    pub async fn start(&self, layout: &Layout) -> Result<EtcdAssignment> {
        let options = &self.core.options;
        options.validate()?;
        let range = options.range_for(layout)?;
        self.core.register(Self::REGISTRY_NAME, range).await?;
        let gateway = Gateway::new(options)?;
        let mut attempt = 0;
        let claimed = loop {
            let lease = gateway.grant(options.lease_ttl).await?;
            match self.claim(&gateway, lease, range).await {
                Ok(claimed) => break claimed,
                // The lease ran out before the claim's transaction (a process stalled past
                // the ttl, or an etcd restarted empty in between): etcd refused the whole
                // transaction, so nothing was written; a fresh lease claims again.
                Err(EtcdError::Etcd { ref reason, .. })
                    if reason.contains("lease not found") && attempt + 1 < CLAIM_ATTEMPTS =>
                {
                    attempt += 1;
                    tracing::warn!(lease, %reason, "the claim's lease expired; claiming again");
                }
                Err(error) => {
                    let _ = gateway.revoke(lease).await;
                    return Err(error);
                }
            }
        };
        let (worker_id, floor_ms, lease) = (claimed.worker_id, claimed.floor_ms, claimed.lease);
        // The holder starts keeping the lease alive before the wait below, which may last
        // longer than the lease's ttl; its fence is handed out only after the wait.
        let holder = EtcdHolder::start(Shared::new(
            options.clone(),
            gateway,
            Arc::clone(&self.core.clock),
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
        let options = &self.core.options;
        let life = fastrand::u64(..);
        for attempt in 0..CLAIM_ATTEMPTS {
            if attempt > 0 {
                // Racers that retry in lockstep keep colliding; a short random pause spreads them.
                let pause = fastrand::u64(1..=5 * u64::from(attempt));
                tokio::time::sleep(Duration::from_millis(pause)).await;
            }
            let namespace = self.namespace(gateway).await?;
            let mut survey = self.candidates(gateway, range, &namespace).await?;
            if attempt > 0 {
                // Racers that lost once would keep trying the same lowest ids in the same
                // order (servers claiming extra ids under load do, many at once): spread them.
                fastrand::shuffle(&mut survey.candidates);
            }
            let mut raced = false;
            for candidate in survey.candidates {
                let worker_id = candidate.worker_id;
                let now = self.core.clock.now_millis();
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
                            // A namespace record rewritten since it was read (a loss seen) may
                            // fence this id: read again.
                            compare_mod(&options.namespace_key(), namespace.mod_revision),
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
                let record = &namespace.record;
                if survey.fenced_by_namespace > 0 && record.origin.fences_older_ids() {
                    return Err(EtcdError::NamespaceFenced {
                        prefix: options.prefix.clone(),
                        reason: record.fence_reason("etcd"),
                        origin: record.origin,
                        floor_ms: record.floor_ms,
                        now_ms: self.core.clock.now_millis(),
                    });
                }
                return Err(EtcdError::RangeUsedUp {
                    range,
                    prefix: options.prefix.clone(),
                    held: survey.held,
                    reserved: survey.reserved,
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
        namespace: &Namespace,
    ) -> Result<Survey> {
        let options = &self.core.options;
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
        let now = self.core.clock.now_millis();
        let reach = now.saturating_add(ms(options.max_start_wait));
        let mut survey = Survey {
            held: held.len(),
            ..Survey::default()
        };
        let ns = &namespace.record;
        // Bounded: a claim only needs a few candidates, and a wide range (Baidu's 22 bits)
        // must not be walked id by id.
        let mut worker_id = range.low();
        while worker_id <= range.high() && survey.candidates.len() < 16 {
            if !held.contains(&worker_id) {
                let (floor_ms, mark_revision) = match marks.get(&worker_id) {
                    None => (Some(ns.floor_of(None, false)), 0),
                    Some((Some(record), revision)) => {
                        let newer = *revision > namespace.mod_revision;
                        (
                            Some(ns.floor_of(Some(record.reserved_until), newer)),
                            *revision,
                        )
                    }
                    // A mark this version cannot read: left alone.
                    Some((None, revision)) => (None, *revision),
                };
                match floor_ms {
                    Some(floor_ms) if floor_ms <= reach => survey.candidates.push(Candidate {
                        worker_id,
                        floor_ms,
                        mark_revision,
                    }),
                    Some(floor_ms) if floor_ms == ns.floor_ms => {
                        survey.fenced_by_namespace += 1;
                        survey.reserved += 1;
                    }
                    // Still reserved, or unreadable.
                    _ => survey.reserved += 1,
                }
            }
            match worker_id.checked_add(1) {
                Some(next) => worker_id = next,
                None => break,
            }
        }
        Ok(survey)
    }

    /// The namespace record, written first when there is none: [`Origin::Adopted`] when etcd
    /// records ids of the namespace already (an earlier uidgen's), else
    /// [`Origin::UnknownPast`], which fences every id (see the module documentation).
    pub(crate) async fn namespace(&self, gateway: &Gateway) -> Result<Namespace> {
        let options = &self.core.options;
        let key = options.namespace_key();
        for _ in 0..CLAIM_ATTEMPTS {
            if let Some(namespace) = read_namespace(gateway, &key).await? {
                return Ok(namespace);
            }
            let now = self.core.clock.now_millis();
            let recorded = gateway
                .any(
                    "looking for worker-id marks",
                    &format!("{}/marks/", options.prefix),
                )
                .await?;
            let record = NamespaceRecord::first(
                recorded,
                now,
                ms(options.reservation),
                ms(options.max_start_wait),
                options.holder.clone(),
                &options.prefix,
            );
            let txn = gateway
                .txn(
                    "writing the namespace record",
                    vec![compare_create(&key, 0)],
                    vec![put(&key, &record.to_json(), 0)],
                    Vec::new(),
                )
                .await?;
            if !txn.succeeded {
                continue; // another start wrote it first: read theirs
            }
            if record.origin == Origin::Adopted {
                tracing::info!(
                    prefix = %options.prefix,
                    "adopted an etcd namespace written before namespace records (its marks stand)"
                );
            } else {
                tracing::warn!(
                    prefix = %options.prefix,
                    fenced_until_ms = record.floor_ms,
                    "etcd holds nothing under this prefix: a new namespace, or one whose data etcd \
                     lost. Worker ids are fenced until fenced_until_ms, in case a holder etcd no \
                     longer records is still issuing; if the namespace is new, run `uidgen etcd \
                     init` once to use it at once"
                );
            }
            return Ok(Namespace {
                record,
                mod_revision: txn.revision,
            });
        }
        Err(EtcdError::Contention {
            attempts: CLAIM_ATTEMPTS,
        })
    }

    /// Declare the namespace new (`uidgen etcd init`): write an [`Origin::Init`] record, which
    /// fences nothing. Refused when etcd records worker ids under the prefix, or when its
    /// namespace record says etcd lost data; a no-op on a namespace already initialised or
    /// adopted. Only for a namespace that never issued an ID: after a loss, an init lets a
    /// claimant start an id below what its lost holder stamped.
    pub async fn init_namespace(&self) -> Result<NamespaceRecord> {
        let options = &self.core.options;
        options.validate()?;
        let gateway = Gateway::new(options)?;
        let key = options.namespace_key();
        let not_new = |reason: String| EtcdError::NotNew {
            prefix: options.prefix.clone(),
            reason,
        };
        let existing = read_namespace(&gateway, &key).await?;
        let revision = match &existing {
            Some(ns) if matches!(ns.record.origin, Origin::Init | Origin::Adopted) => {
                return Ok(ns.record.clone());
            }
            Some(ns) if ns.record.origin == Origin::DataLoss => {
                return Err(not_new(format!(
                    "its namespace record says etcd lost data ({}, recorded by {}); its ids are \
                     fenced until {} ms so that no ID repeats: wait for that instead",
                    ns.record.why, ns.record.by, ns.record.floor_ms
                )));
            }
            Some(ns) => ns.mod_revision,
            None => 0,
        };
        for dir in ["marks", "workers"] {
            if gateway
                .any(
                    "looking for worker-id records",
                    &format!("{}/{dir}/", options.prefix),
                )
                .await?
            {
                return Err(not_new(format!(
                    "etcd records worker ids under {}/{dir}/; a start uses it as it is",
                    options.prefix
                )));
            }
        }
        let record = NamespaceRecord::open(
            Origin::Init,
            self.core.clock.now_millis(),
            "uidgen etcd init",
        );
        let txn = gateway
            .txn(
                "initialising the namespace",
                vec![compare_mod(&key, revision)],
                vec![put(&key, &record.to_json(), 0)],
                Vec::new(),
            )
            .await?;
        if !txn.succeeded {
            return Err(not_new(
                "its namespace record changed while being initialised; run it again".to_owned(),
            ));
        }
        Ok(record)
    }

    /// Record that etcd lost data (`uidgen etcd recover`, after restoring etcd from a snapshot
    /// or any loss no running holder saw): every id's mark written before now is fenced until
    /// `now + reservation + max_start_wait`. Holders still running keep their ids (their next
    /// rounds write newer marks). Returns the record now in force.
    pub async fn recover_namespace(&self, why: &str) -> Result<NamespaceRecord> {
        let options = &self.core.options;
        options.validate()?;
        let gateway = Gateway::new(options)?;
        let now = self.core.clock.now_millis();
        record_loss(&gateway, options, now, 0, why).await
    }

    /// Wait until the clock has passed `until_ms`, up to `max_start_wait`: the store's one
    /// wait (the rule every assigner's start follows), with etcd's error.
    async fn wait_for_clock(&self, worker_id: u64, until_ms: u64) -> Result<()> {
        let max_wait = self.core.options.max_start_wait;
        let behind = |b: ClockBehind| EtcdError::ClockBehind {
            worker_id: b.worker_id,
            until_ms: b.until_ms,
            now_ms: b.now_ms,
            max_wait_ms: b.max_wait_ms,
        };
        (self.core)
            .wait_for_clock(worker_id, until_ms, max_wait, behind)
            .await
    }

    /// Every id's mark under the prefix (for operators and tests).
    pub async fn marks(&self) -> Result<HashMap<u64, Record>> {
        let gateway = Gateway::new(&self.core.options)?;
        let prefix = format!("{}/marks/", self.core.options.prefix);
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

uidgen_worker::impl_coordinated_assigner!(
    EtcdWorkerIdAssigner,
    |this, index| EtcdOptions {
        holder: format!("{}.{index}", this.core.options.holder),
        ..this.core.options.clone()
    },
    /// Another claim under a lease of its own, exactly as the first: claims are not kept per
    /// address, so only the holder name (`host:port.{index}`, for operators) tells them apart.
);
