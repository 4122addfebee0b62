//! [`ZooKeeperWorkerIdAssigner`]: Leaf's snowflake-mode worker ids, with Leaf's holes fixed.
//!
//! # Why IDs never repeat
//!
//! This is the `zookeeper` row of docs/OPERATIONS.md ("Why IDs never repeat"); the guarantee
//! this file keeps is the row's rule itself, **`limit(old) <= floor(new)`** for every way a
//! start may take an id, and the files below each keep one part of it.
//!
//! Every life of a worker id hands its generator a fence whose `limit` is
//! `min(local mark, R)`, where `R` is the `reserved_until` of its last report ZooKeeper
//! accepted (`R >= t + reservation`, `t` the report's own clock reading, rolling forward a
//! few minutes with every report) and the local mark is synced to the cache file before any
//! ID past it (`holder.rs`; the reports in `holder/report.rs`). A holder cut off from
//! ZooKeeper therefore stops at `R`, `reservation` after its last accepted report: it cannot
//! tell an outage from a partition in which a successor takes its node, so it may not stamp
//! past what that successor reads (`max_outage` only bounds the reservation). Its successors'
//! `floor`s are:
//!
//! - a start while ZooKeeper answers, on this address's node or on a newly claimed or
//!   reclaimed id: `assigner/claim.rs`;
//! - a start from the local cache while ZooKeeper is down: `assigner/offline.rs`.
//!
//! In each case `limit(old) <= floor(new)` compares one holder's own labels with a value it
//! wrote, so clock skew between hosts can delay a start but not make two holders share a
//! unit. Within a life, the generator refuses a clock below the floor, and Leaf's rule for a
//! clock that steps back while running is `SnowflakeGenerator`'s. Every start waits here
//! (`wait_for_clock`) until its clock has passed its floor, or refuses.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_worker::{AssignerCore, AssignmentKind, ClockBehind, LocalMark, WorkerAssignment};
use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::holder::ZkHolder;
use crate::options::ZkOptions;
use crate::reclaim::{ReclaimCandidate, Reclaimer};
use crate::session::{connect, zk_error};
use crate::tree::{NodeData, Tree, parse_forever_name};

mod claim;
mod offline;
mod sequence;

/// Where a [`ZkAssignment`]'s worker id came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZkSource {
    /// A forever node in ZooKeeper (this process's own, or a newly claimed one).
    ZooKeeper,
    /// The local cache, because ZooKeeper was unreachable at start-up: the id ZooKeeper
    /// assigned to this address, within the reservation its last accepted report recorded.
    LocalCache,
}

/// A worker id from ZooKeeper, with what keeps it.
#[derive(Debug, Clone)]
pub struct ZkAssignment {
    /// The worker id, its fence and its keeper (the holder), as every assigner returns them.
    pub assignment: WorkerAssignment,
    /// The holder (reports, status).
    pub holder: ZkHolder,
    /// Where the id came from.
    pub source: ZkSource,
}

/// Worker ids from ZooKeeper, Leaf's layout (`/snowflake/{name}/forever/{ip}:{port}-{id}`).
///
/// A process finds its own forever node by its ip:port and keeps that id (Leaf); a new ip:port
/// claims the lowest free id of the [range](ZkOptions::range). The holder reports its time
/// every few seconds, keeps an ephemeral live node, and hands its generator a fence. See the
/// module documentation for the uniqueness argument, and [`ZkOptions`] for the knobs.
///
/// [Registered in a store](Self::registered_in), it records its range there under
/// [`REGISTRY_NAME`](Self::REGISTRY_NAME) before it takes an id, so that the assigners sharing
/// the store (and the ID space) keep out of it; a range overlapping theirs is refused.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use uidgen_core::{Layout, SystemClock, UidGenerator};
/// use uidgen_worker::GeneratorBuilder;
/// use uidgen_zk::{ZkOptions, ZooKeeperWorkerIdAssigner};
/// let options = ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
/// let built = GeneratorBuilder::new(Layout::leaf()?)
///     .assigner(ZooKeeperWorkerIdAssigner::new(options))
///     .build_snowflake(SystemClock)
///     .await?;
/// println!("worker {} issued {}", built.worker_id(), built.generator.next_id()?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZooKeeperWorkerIdAssigner {
    /// The options, the clock, and where the range is recorded before an id is taken, if
    /// anywhere.
    core: AssignerCore<ZkOptions>,
}

impl ZooKeeperWorkerIdAssigner {
    /// Its assignments' kind: a forever node in ZooKeeper, kept by a report every few
    /// seconds; or that node's id from the local cache, when ZooKeeper was unreachable at
    /// start-up ([`ZkSource`] tells which).
    pub const KIND: AssignmentKind = AssignmentKind::new("zookeeper");

    /// The name its range is recorded under in a
    /// [`RangeRegistry`](uidgen_worker::RangeRegistry) (the store's `worker_id_range`).
    pub const REGISTRY_NAME: &'static str = "zookeeper";

    uidgen_worker::assigner_constructors!(
        ZkOptions,
        /// Record the range in `registry` before every start, so that the other assigners
        /// sharing it keep out of that range (and a range overlapping theirs is refused before
        /// any node is claimed). A start from the local cache records it too: the registry is
        /// not ZooKeeper, and a range it refuses is refused whatever ZooKeeper's state.
        ///
        /// ```no_run
        /// # async fn demo(store: impl uidgen_worker::RangeRegistry + 'static) -> Result<(), Box<dyn std::error::Error>> {
        /// use uidgen_core::Layout;
        /// use uidgen_worker::WorkerIdAssigner;
        /// use uidgen_zk::{ReleaseMode, ZkOptions, ZooKeeperWorkerIdAssigner};
        /// let layout = Layout::leaf()?;
        /// let mut options = ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
        /// options.range = Some(ReleaseMode::Server.default_range(&layout));
        /// let assigner = ZooKeeperWorkerIdAssigner::new(options).registered_in(store);
        /// let assignment = assigner.assign(&layout).await?;
        /// assert!((924..=1023).contains(&assignment.worker_id));
        /// # Ok(()) }
        /// ```
    );

    /// Take a worker id for `layout`, after recording the range in the registry
    /// ([`registered_in`](Self::registered_in)), if any: from ZooKeeper, else from the local
    /// cache; else a typed error. There is no static fallback: one configured id would be the
    /// same id on every host that starts while ZooKeeper is down, and ZooKeeper would not know
    /// of it. Must run inside a tokio runtime (the holder reports from a task).
    ///
    /// Cancel safety: a start dropped midway may leave a claimed forever node behind, which
    /// the next start with the same ip:port continues; nothing is issued before this returns.
    pub async fn start(&self, layout: &Layout) -> Result<ZkAssignment> {
        let options = &self.core.options;
        options.validate()?;
        let range = options.range_for(layout)?;
        self.core.register(Self::REGISTRY_NAME, range).await?;
        match connect(&options.connect, options.session_timeout).await {
            Ok(client) => self.start_with(client, layout, range).await,
            Err(error) if error.is_unreachable() => self.start_without(layout, range, &error).await,
            Err(error) => Err(error),
        }
    }

    fn assignment(&self, holder: ZkHolder, source: ZkSource) -> ZkAssignment {
        let assignment = WorkerAssignment {
            fence: Some(holder.fence()),
            keeper: Some(Arc::new(holder.clone())),
            ..WorkerAssignment::fixed(holder.worker_id(), Self::KIND)
        };
        ZkAssignment {
            assignment,
            holder,
            source,
        }
    }

    fn open_mark(&self, worker_id: u64, layout: &Layout, replace_other: bool) -> Result<LocalMark> {
        let path = &self.core.options.cache_file;
        match LocalMark::open(
            path,
            worker_id,
            Arc::clone(&self.core.clock),
            layout,
            replace_other,
        )? {
            Some((mark, _)) => Ok(mark),
            None => Err(ZkError::CacheInUse {
                path: path.display().to_string(),
                worker_id,
            }),
        }
    }

    /// Wait until the clock has passed `until_ms`, up to `max_start_wait`: the worker crate's one
    /// wait (the rule every assigner's start follows), with ZooKeeper's error naming `what`.
    async fn wait_for_clock(
        &self,
        worker_id: u64,
        until_ms: u64,
        what: &'static str,
    ) -> Result<()> {
        let max_wait = self.core.options.max_start_wait;
        let behind =
            |b: ClockBehind| clock_behind(b.worker_id, what, b.until_ms, b.now_ms, b.max_wait_ms);
        (self.core)
            .wait_for_clock(worker_id, until_ms, max_wait, behind)
            .await
    }

    /// Free dead holders' ids in this namespace (see `reclaim.rs`): those with no live node,
    /// silent for longer than `older_than` (at least the reservation) and past their
    /// reservation. `dry_run` only lists them.
    pub async fn reclaim(
        &self,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<Vec<ReclaimCandidate>> {
        let options = &self.core.options;
        options.validate()?;
        let client = connect(&options.connect, options.session_timeout).await?;
        let tree = Tree::new(options.root());
        let reclaimer = Reclaimer {
            client: &client,
            connect: &options.connect,
            tree: &tree,
            clock: self.core.clock.as_ref(),
            reservation: options.reservation,
        };
        reclaimer.run(older_than, dry_run).await
    }

    /// Declare the namespace new (`uidgen zk init`): write an
    /// [`Origin::Init`](uidgen_worker::Origin) namespace record, which fences nothing. Refused
    /// when the namespace has forever nodes or id claims (a start adopts those as they are), or
    /// when its record says ZooKeeper lost data; a no-op on one already initialised or adopted.
    /// Only for a namespace that never issued an ID: after a loss, an init lets a claimant
    /// start an id below what its lost holder stamped.
    pub async fn init_namespace(&self) -> Result<uidgen_worker::NamespaceRecord> {
        use uidgen_worker::{NamespaceRecord, Origin};
        let options = &self.core.options;
        options.validate()?;
        let client = connect(&options.connect, options.session_timeout).await?;
        let tree = Tree::new(options.root());
        let not_new = |reason: String| ZkError::NotNew {
            root: tree.root().to_owned(),
            reason,
        };
        let existing = crate::namespace::read(&client, &options.connect, &tree).await?;
        if let Some(ns) = existing
            .as_ref()
            .filter(|ns| matches!(ns.record.origin, Origin::Init | Origin::Adopted))
        {
            return Ok(ns.record.clone());
        }
        for dir in [tree.forever_dir(), tree.ids_dir()] {
            match client.list_children(&dir).await {
                Ok(children) if !children.is_empty() => {
                    return Err(not_new(format!(
                        "it has {} node(s) under {dir}; a start uses it as it is",
                        children.len()
                    )));
                }
                Ok(_) | Err(zk::Error::NoNode) => {}
                Err(source) => {
                    return Err(zk_error(&options.connect, "listing the namespace", source));
                }
            }
        }
        let record =
            NamespaceRecord::open(Origin::Init, self.core.clock.now_millis(), "uidgen zk init");
        let written = match existing {
            Some(ns) if ns.record.origin == Origin::DataLoss => {
                return Err(not_new(format!(
                    "its namespace record says ZooKeeper lost data ({}, recorded by {}); its ids \
                     are fenced until {} ms so that no ID repeats: wait for that instead",
                    ns.record.why, ns.record.by, ns.record.floor_ms
                )));
            }
            Some(ns) => client
                .set_data(&tree.namespace(), &record.to_json(), Some(ns.version))
                .await
                .map(drop),
            None => match client.mkdir(tree.root(), &crate::session::PERSISTENT).await {
                Ok(()) => client
                    .create(
                        &tree.namespace(),
                        &record.to_json(),
                        &crate::session::PERSISTENT,
                    )
                    .await
                    .map(drop),
                Err(error) => Err(error),
            },
        };
        match written {
            Ok(()) => Ok(record),
            Err(zk::Error::BadVersion | zk::Error::NodeExists) => Err(not_new(
                "its namespace record changed while being initialised; run it again".to_owned(),
            )),
            Err(source) => Err(zk_error(
                &options.connect,
                "initialising the namespace",
                source,
            )),
        }
    }

    /// Record that ZooKeeper lost data (`uidgen zk recover`, after restoring it from a snapshot
    /// or any loss no running holder saw): every id whose node was written before now is
    /// fenced until `now + reservation + max_start_wait`. Running holders keep their ids.
    pub async fn recover_namespace(&self, why: &str) -> Result<uidgen_worker::NamespaceRecord> {
        let options = &self.core.options;
        options.validate()?;
        let client = connect(&options.connect, options.session_timeout).await?;
        let tree = Tree::new(options.root());
        let now = self.core.clock.now_millis();
        crate::namespace::record_loss(&client, options, &tree, now, 0, why).await
    }

    /// ZooKeeper's sequence counter under `forever/`: the suffix the next sequential node (a
    /// Java Leaf server's new node) gets, the number of children ever created there, read
    /// without writing (`cversion` counts creates and deletes, `numChildren` creates minus
    /// deletes; see `assigner/sequence.rs`). 0 when the namespace has no forever node yet.
    pub async fn leaf_sequence(&self) -> Result<u64> {
        let options = &self.core.options;
        let client = connect(&options.connect, options.session_timeout).await?;
        let tree = Tree::new(options.root());
        match client.get_children(&tree.forever_dir()).await {
            Ok((_, stat)) => {
                let changes = u64::try_from(stat.cversion).unwrap_or(0);
                let children = u64::try_from(stat.num_children).unwrap_or(0);
                Ok((changes + children) / 2)
            }
            Err(zk::Error::NoNode) => Ok(0),
            Err(source) => Err(zk_error(
                &options.connect,
                "reading the forever nodes' sequence counter",
                source,
            )),
        }
    }

    /// Every forever node of the namespace with its id and data (for operators and tests).
    pub async fn nodes(&self) -> Result<BTreeMap<u64, (String, Option<NodeData>)>> {
        let options = &self.core.options;
        let client = connect(&options.connect, options.session_timeout).await?;
        let tree = Tree::new(options.root());
        let mut nodes = BTreeMap::new();
        let names = match client.list_children(&tree.forever_dir()).await {
            Ok(names) => names,
            Err(zk::Error::NoNode) => Vec::new(),
            Err(source) => {
                return Err(zk_error(
                    &options.connect,
                    "listing the forever nodes",
                    source,
                ));
            }
        };
        for name in names {
            let Some((_, id)) = parse_forever_name(&name) else {
                continue;
            };
            let path = tree.forever(&name);
            let data = client
                .get_data(&path)
                .await
                .ok()
                .and_then(|(bytes, _)| NodeData::parse(&path, &bytes).ok());
            nodes.insert(id, (name, data));
        }
        Ok(nodes)
    }
}

uidgen_worker::impl_coordinated_assigner!(
    ZooKeeperWorkerIdAssigner,
    |this, index| {
        let mut cache_file = this.core.options.cache_file.clone().into_os_string();
        cache_file.push(format!(".{index}"));
        ZkOptions {
            port: format!("{}.{index}", this.core.options.port),
            cache_file: cache_file.into(),
            ..this.core.options.clone()
        }
    },
    /// Another forever node of this process, as Leaf keeps one per ip:port: the address
    /// `{ip}:{port}.{index}` and the cache file `{cache_file}.{index}`, so a restart that asks
    /// with the same numbers continues the same nodes (Leaf's rule), and Java Leaf, which
    /// splits node names at `-`, reads each as an address of its own.
);

/// Leaf's check, for every recorded time a start must not begin below: `until_ms` further ahead
/// of this clock than a start may wait means the clock went back across the restart, or is too
/// far behind the previous holder to be of use.
fn clock_reaches(
    worker_id: u64,
    what: &'static str,
    until_ms: u64,
    now_ms: u64,
    max_wait_ms: u64,
) -> Result<()> {
    if until_ms > now_ms.saturating_add(max_wait_ms) {
        return Err(clock_behind(worker_id, what, until_ms, now_ms, max_wait_ms));
    }
    Ok(())
}

/// [`ZkError::ClockBehind`], built off the start's happy path.
#[cold]
fn clock_behind(
    worker_id: u64,
    what: &'static str,
    until_ms: u64,
    now_ms: u64,
    max_wait_ms: u64,
) -> ZkError {
    ZkError::ClockBehind {
        worker_id,
        what,
        until_ms,
        now_ms,
        max_wait_ms,
    }
}
