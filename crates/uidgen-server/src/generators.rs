//! The store, the worker id and the generator a command runs with, from [`Settings`]: `uidgen
//! serve` and `uidgen gen` build theirs here. A reused worker id's fence bounds what the
//! generator stamps; a lease's loss stops it.

use std::sync::Arc;

use anyhow::Context;
use tracing::warn;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, Layout, SnowflakeGenerator,
    SystemClock, TimeFence, UidGenerator,
};
use uidgen_store::{DisposableWorkerIdAssigner, LeasedWorkerIdAssigner, Store, StoreOptions};
use uidgen_worker::{
    ContainerProbe, GuardedGenerator, LeaseOptions, StateDir, StaticWorkerIdAssigner,
    WorkerAssignment, WorkerIdAssigner, WorkerKeeper,
};

use crate::config::{AssignerKind, GeneratorConfig, GeneratorKind, Settings};
use crate::service::ReadyRing;

/// A generator ready to serve, with a view of its ring buffer when it has one.
pub struct BuiltGenerator {
    /// The generator.
    pub generator: Arc<dyn UidGenerator>,
    /// The same generator's ring buffer: the inline fast path, readiness and metrics.
    pub ring: Option<Arc<dyn ReadyRing>>,
}

/// Build the configured kind of generator for an assignment. A reused worker id's fence (its
/// lease or reserved-until mark) bounds what the generator stamps; with a lease, the generator
/// also refuses to issue once the lease is lost, and the lease's heartbeat records how far it
/// has issued.
pub fn build_generator(
    settings: &Settings,
    assignment: &WorkerAssignment,
) -> anyhow::Result<BuiltGenerator> {
    fn guard<G: UidGenerator + 'static>(
        generator: G,
        keeper: Option<Arc<dyn WorkerKeeper>>,
    ) -> Arc<GuardedGenerator<G>> {
        let guarded = Arc::new(GuardedGenerator::new(generator, keeper.clone()));
        if let Some(keeper) = &keeper {
            keeper.track(Arc::clone(&guarded) as Arc<dyn UidGenerator>);
        }
        guarded
    }
    fn fenced<G>(
        generator: G,
        fence: Option<Arc<dyn TimeFence>>,
        with: fn(G, Arc<dyn TimeFence>) -> G,
    ) -> G {
        match fence {
            Some(fence) => with(generator, fence),
            None => generator,
        }
    }
    let (worker_id, lease, fence) = (
        assignment.worker_id,
        assignment.keeper.clone(),
        assignment.fence.clone(),
    );
    let layout = settings.layout.clone();
    Ok(match settings.generator.kind {
        GeneratorKind::Default => BuiltGenerator {
            generator: guard(
                fenced(
                    DefaultUidGenerator::new(layout, worker_id, SystemClock)?,
                    fence,
                    DefaultUidGenerator::fenced,
                ),
                lease,
            ),
            ring: None,
        },
        GeneratorKind::Snowflake => BuiltGenerator {
            generator: guard(
                fenced(
                    snowflake(layout, worker_id, &settings.generator)?,
                    fence,
                    SnowflakeGenerator::fenced,
                ),
                lease,
            ),
            ring: None,
        },
        GeneratorKind::Cached => {
            let options = CachedOptions {
                fence,
                ..settings.ring.clone()
            };
            let cached = guard(
                CachedUidGenerator::new(layout, worker_id, SystemClock, options)?,
                lease,
            );
            BuiltGenerator {
                generator: Arc::clone(&cached) as Arc<dyn UidGenerator>,
                ring: Some(cached),
            }
        }
    })
}

/// The per-host state directory ([`Settings::state_dir`]), created (0700) if missing: every
/// default file that keeps worker ids apart lives there, and every relative path in the
/// configuration is taken in it, so that no start depends on its working directory.
pub fn ready_state_dir(settings: &Settings) -> anyhow::Result<StateDir> {
    let dir = settings.state_dir()?;
    dir.create()?;
    Ok(dir)
}

/// Open the configured store (creating a SQLite file if needed, a relative one in the state
/// directory) and apply its migrations.
///
/// A leased assigner with a local cache file may start while the database is down (it then
/// runs on the cached worker id, under a lease it claims once the database answers): for it,
/// a store that cannot be reached is opened lazily instead of stopping start-up.
pub async fn open_store(settings: &Settings) -> anyhow::Result<Store> {
    let url = settings.store_url(&ready_state_dir(settings)?);
    let context = || format!("cannot open the store `store = {:?}`", redacted(&url));
    match Store::connect(&url).await {
        Ok(store) => Ok(store),
        Err(error)
            if settings.worker.assigner == AssignerKind::Leased
                && settings.worker.lease.cache_path.is_some()
                && error.is_unreachable() =>
        {
            warn!(%error,
                "store unreachable at start; the leased worker id may come from the local cache");
            let options = StoreOptions {
                migrate: false,
                ..StoreOptions::default()
            };
            Store::connect_lazy(&url, options).with_context(context)
        }
        Err(error) => Err(error).with_context(context),
    }
}

pub(crate) fn redacted(url: &str) -> String {
    uidgen_store::redact_url(url)
}

/// The configured worker-id assigner. Each registers its range (`worker.range`, or its
/// default) in the store before taking an id, so assigners sharing the store stay disjoint.
pub fn assigner(settings: &Settings, store: &Store) -> anyhow::Result<Arc<dyn WorkerIdAssigner>> {
    let worker = &settings.worker;
    // `worker.range`, or Vesta's server range on Vesta layouts (the rest is the clients').
    let range = worker.server_range;
    let state_dir = settings.state_dir()?;
    Ok(match worker.assigner {
        AssignerKind::Disposable => {
            let disposable = DisposableWorkerIdAssigner::new(store.clone());
            Arc::new(match range {
                Some(range) => disposable.with_range(range),
                None => disposable,
            })
        }
        AssignerKind::Static => {
            let assigner = static_assigner(settings, &state_dir)?
                .registered_in(store.clone())
                .with_store_shared(settings.store_shared)
                .with_lease_options(worker.lease.clone());
            // An explicit absolute state file is the operator's statement that the id is
            // unique to that volume; without it, or a shared store, a container is refused.
            let assigner = if worker.state_file_declared() {
                assigner
            } else {
                assigner.refuse_uncoordinated_in_container(ContainerProbe::system())
            };
            Arc::new(match range {
                Some(range) => assigner.with_range(range),
                None => assigner,
            })
        }
        AssignerKind::Leased => Arc::new(LeasedWorkerIdAssigner::new(
            store.clone(),
            SystemClock,
            LeaseOptions {
                range,
                cache_path: worker.cache_file_in(&state_dir),
                ..worker.lease.clone()
            },
        )),
        // Needs no configuration: each (machine, process) value is leased in the store (and
        // locked in the state directory); its fixed range 0-1023 is recorded there. Without a
        // configured store it refuses to start in a container unless allowed.
        // The trait's way in (no status for readiness); `serve` goes through
        // `assign_and_build_holding`, which also records the range in the store.
        AssignerKind::Zookeeper => Arc::new(uidgen_zk::ZooKeeperWorkerIdAssigner::new(
            coordinator_options(settings.zookeeper.as_ref().map(|zk| &zk.options))?,
        )),
        AssignerKind::Etcd => Arc::new(uidgen_etcd::EtcdWorkerIdAssigner::new(
            coordinator_options(settings.etcd.as_ref().map(|etcd| &etcd.options))?,
        )),
        AssignerKind::Machine => Arc::new(
            uidgen_worker::MachineWorkerIdAssigner::new(worker.machine_state_dir(&state_dir))
                .registered_in(store.clone())
                .with_store_shared(settings.store_shared)
                .with_lease_options(worker.lease.clone())
                .allow_uncoordinated(worker.allow_uncoordinated),
        ),
    })
}

/// A coordinator's options, which [`Settings`] holds whenever the assigner is that
/// coordinator's.
fn coordinator_options<O: Clone>(options: Option<&O>) -> anyhow::Result<O> {
    options
        .cloned()
        .context("the settings lack the assigner's section; build them with Config::settings")
}

/// The static assigner for `worker.id`, keeping its mark in `worker.state_file` (by default
/// in the state directory `dir`), limited to `worker.range` when set. Not registered in a
/// store: [`assigner`] adds that, while `gen --worker N` runs without one.
pub(crate) fn static_assigner(
    settings: &Settings,
    dir: &StateDir,
) -> anyhow::Result<StaticWorkerIdAssigner> {
    let worker = &settings.worker;
    let id = worker
        .id
        .context("invalid config key `worker.id`: the static assigner needs a worker id")?;
    let assigner = StaticWorkerIdAssigner::new(id, worker.state_file_for(id, dir));
    Ok(match worker.range {
        Some(range) => assigner.with_range(range),
        None => assigner,
    })
}

/// Obtain a worker id and build the configured generator with it.
pub async fn assign_and_build(
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<(BuiltGenerator, WorkerAssignment)> {
    // A ZooKeeper or etcd holder keeps its id while its generator (which holds its fence)
    // lives.
    let (built, assignment, _holder) = assign_and_build_holding(settings, store).await?;
    Ok((built, assignment))
}

/// The coordinator-side keeper of a worker id, when it comes from one: readiness, metrics and
/// shutdown read it.
#[derive(Debug, Clone)]
pub enum Coordinator {
    /// A ZooKeeper forever node and its reports.
    ZooKeeper(uidgen_zk::ZkHolder),
    /// An etcd claim under a lease and its keep-alives.
    Etcd(uidgen_etcd::EtcdHolder),
}

/// [`assign_and_build`], also returning the coordinator's holder (its status feeds `/readyz`
/// and `/metrics`) when the worker id comes from ZooKeeper or etcd.
pub async fn assign_and_build_holding(
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<(BuiltGenerator, WorkerAssignment, Option<Coordinator>)> {
    let layout = &settings.layout;
    let (assignment, coordinator) = if let Some(zk) = &settings.zookeeper {
        let (assignment, holder) = crate::zk::assign(zk, layout, store).await?;
        (assignment, holder.map(Coordinator::ZooKeeper))
    } else if let Some(etcd) = &settings.etcd {
        let (assignment, holder) = crate::etcd::assign(etcd, layout, store).await?;
        (assignment, Some(Coordinator::Etcd(holder)))
    } else {
        let assignment = assigner(settings, store)?
            .assign(layout)
            .await
            .map_err(|e| crate::fallback::explain_refusal(&settings.worker, layout, e.into()))
            .context("cannot obtain a worker id")?;
        (assignment, None)
    };
    match build_generator(settings, &assignment) {
        Ok(built) => Ok((built, assignment, coordinator)),
        Err(error) => {
            if let Some(keeper) = &assignment.keeper {
                // Hand the id back at once rather than leaving it held until the lease expires.
                let _ = keeper.release().await;
            }
            Err(error)
        }
    }
}

/// The Snowflake generator a service runs with: Leaf's clock-back tolerance as configured, and
/// the random sequence start only when configured (else the layout's own: on for `leaf`).
fn snowflake(
    layout: Layout,
    worker_id: u64,
    config: &GeneratorConfig,
) -> uidgen_core::Result<SnowflakeGenerator<SystemClock>> {
    let generator = SnowflakeGenerator::with_max_backward_ms(
        layout,
        worker_id,
        SystemClock,
        config.max_backward_ms,
    )?;
    Ok(match config.random_sequence_start {
        Some(random) => generator.random_sequence_start(random),
        None => generator,
    })
}
