//! The store, the worker id and the generator a command runs with, from [`Settings`]: `uidgen
//! serve` and `uidgen gen` build theirs here: [`assign`] is the one match over assigners,
//! [`build_generator`] hands the assignment to [`GeneratorBuilder`]. A reused worker id's fence
//! bounds what the generator stamps; its keeper's loss stops it.

use std::sync::Arc;

use anyhow::Context;
use tracing::warn;
use uidgen_core::SystemClock;
use uidgen_etcd::EtcdWorkerIdAssigner;
use uidgen_k8s::StatefulSetWorkerIdAssigner;
use uidgen_store::{DisposableWorkerIdAssigner, LeasedWorkerIdAssigner, Store, StoreOptions};
use uidgen_worker::{
    AnyBuilt, ContainerProbe, GeneratorBuilder, LeaseOptions, StateDir, StaticWorkerIdAssigner,
    WorkerAssignment, WorkerError, WorkerIdAssigner,
};
use uidgen_zk::{ZkError, ZooKeeperWorkerIdAssigner};

use crate::config::Settings;
use crate::config::generator::GeneratorKind;
use crate::config::worker::AssignerKind;

/// Build the configured kind of generator on `assignment`, through
/// [`GeneratorBuilder`] (the one path from an assignment to a guarded, fenced, tracked
/// generator): a reused worker id's fence (its lease or reserved-until mark) bounds what the
/// generator stamps; with a keeper, the generator also refuses to issue once the id is lost,
/// and the keeper records how far it has issued. A build that fails releases the keeper.
pub async fn build_generator(
    settings: &Settings,
    assignment: WorkerAssignment,
) -> anyhow::Result<AnyBuilt> {
    let builder = GeneratorBuilder::new(settings.layout.clone()).assigned(assignment);
    let config = &settings.generator;
    Ok(match config.kind {
        GeneratorKind::Default => builder.build_default(SystemClock).await?.into_any(),
        // Leaf's clock-back tolerance as configured, and the random sequence start only when
        // configured (else the layout's own: on for `leaf`).
        GeneratorKind::Snowflake => builder
            .build_snowflake_with(
                SystemClock,
                config.max_backward_ms,
                config.random_sequence_start,
            )
            .await?
            .into_any(),
        GeneratorKind::Cached => builder
            .build_cached(SystemClock, settings.ring.clone())
            .await?
            .into_any(),
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
    let options = StoreOptions {
        idle_transaction_timeout: settings.ordered.store_idle_timeout(),
        ..StoreOptions::default()
    };
    match Store::connect_with(&url, options.clone()).await {
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
                ..options
            };
            Store::connect_lazy(&url, options).with_context(context)
        }
        Err(error) => Err(error).with_context(context),
    }
}

pub(crate) fn redacted(url: &str) -> String {
    uidgen_store::redact_url(url)
}

/// Obtain a worker id from the configured assigner ([`assigner`]), explaining a refusal.
pub async fn assign(settings: &Settings, store: &Store) -> anyhow::Result<WorkerAssignment> {
    let assigner = assigner(settings, store).await?;
    obtain(settings, assigner.as_ref()).await
}

/// Ask `assigner` (the configured one, [`assigner`]) for its first worker id; a refusal is
/// explained with what to change, naming the coordinator it came from.
pub async fn obtain(
    settings: &Settings,
    assigner: &dyn WorkerIdAssigner,
) -> anyhow::Result<WorkerAssignment> {
    let worker = &settings.worker;
    let layout = &settings.layout;
    assigner
        .assign(layout)
        .await
        .map_err(|error| match worker.assigner {
            AssignerKind::Zookeeper => explain_zookeeper_refusal(settings, error),
            AssignerKind::Etcd => {
                anyhow::Error::new(error).context("cannot obtain a worker id from etcd")
            }
            _ => crate::fallback::explain_refusal(worker, layout, error.into())
                .context("cannot obtain a worker id"),
        })
}

/// The configured worker-id assigner: the one match a new assigner adds its arm to, and the
/// one way in for every source, the coordinators included. Each registers its range
/// (`worker.range`, or its default) in the store before it hands out an id, so assigners
/// sharing the store stay disjoint. The server asks it for the first worker id and, when it
/// [holds several](WorkerIdAssigner::holds_several), for more under load
/// ([`crate::workers::WorkerPool`]).
pub async fn assigner(
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Arc<dyn WorkerIdAssigner>> {
    let worker = &settings.worker;
    // `worker.range`, or Vesta's server range on Vesta layouts (the rest is the clients').
    let range = worker.server_range;
    let state_dir = settings.state_dir()?;
    refuse_private_store_in_container(settings, ContainerProbe::system())?;
    let assigner: Arc<dyn WorkerIdAssigner> = match worker.assigner {
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
        // Leased in the space's own name: IDs of two spaces may be equal, so a worker id held
        // in one space is free in the others (each space needs an id per server, no more).
        AssignerKind::Leased => Arc::new(
            LeasedWorkerIdAssigner::new(
                store.clone(),
                SystemClock,
                LeaseOptions {
                    range,
                    cache_path: worker.cache_file_in(&state_dir),
                    ..worker.lease.clone()
                },
            )
            .in_space(&worker.space),
        ),
        // Needs no configuration: each (machine, process) value is leased in the store (and
        // locked in the state directory); its fixed range 0-1023 is recorded there. Without a
        // configured store it refuses to start in a container unless allowed.
        AssignerKind::Machine => Arc::new(
            uidgen_worker::MachineWorkerIdAssigner::new(worker.machine_state_dir(&state_dir))
                .registered_in(store.clone())
                .with_store_shared(settings.store_shared)
                .with_lease_options(worker.lease.clone())
                .allow_uncoordinated(worker.allow_uncoordinated),
        ),
        // The pod's ordinal + offset, leased exactly in the store as a static id is: refused
        // on the zero-config store (one host's own), since a StatefulSet spans hosts.
        AssignerKind::Statefulset => {
            let offset = section(settings.statefulset.as_ref())?.offset;
            let ordinal = uidgen_k8s::PodOrdinal::from_env()
                .context("cannot take the worker id from the pod's ordinal")?;
            let id = ordinal.value().saturating_add(offset);
            let assigner =
                StatefulSetWorkerIdAssigner::new(ordinal, worker.state_file_for(id, &state_dir))
                    .with_offset(offset)
                    .registered_in(store.clone())
                    .with_store_shared(settings.store_shared)
                    .with_lease_options(worker.lease.clone());
            Arc::new(match range {
                Some(range) => assigner.with_range(range),
                None => assigner,
            })
        }
        // A coordinator records its range in the store before it claims, as the static and
        // machine assigners do; its holder is the assignment's keeper, as a lease is.
        AssignerKind::Zookeeper => Arc::new(
            ZooKeeperWorkerIdAssigner::new(section(settings.zookeeper.as_ref())?.options.clone())
                .registered_in(store.clone()),
        ),
        AssignerKind::Etcd => Arc::new(
            EtcdWorkerIdAssigner::new(section(settings.etcd.as_ref())?.options.clone())
                .registered_in(store.clone()),
        ),
    };
    Ok(assigner)
}

/// Refuse the store's own assigners (`disposable`, `leased`) on the zero-config store in a
/// container that `probe` finds, unless `worker.single_instance` says this is the only one.
///
/// Issue 36, point 7: the image's defaults put the SQLite store in each container's own state
/// directory, so two containers of one image (a Deployment with `replicas: 3`) each took worker
/// 1 from their own `worker_node` and issued the same IDs (5,000 of 5,000), without a warning.
/// A store is shared only when configured ([`Settings::store_shared`]); the static, machine
/// and statefulset assigners refuse the same start by their own rules.
pub(crate) fn refuse_private_store_in_container(
    settings: &Settings,
    probe: ContainerProbe,
) -> anyhow::Result<()> {
    let worker = &settings.worker;
    let assigner = match worker.assigner {
        AssignerKind::Disposable => "disposable",
        AssignerKind::Leased => "leased",
        _ => return Ok(()),
    };
    if settings.store_shared || worker.single_instance {
        return Ok(());
    }
    let Some(evidence) = probe.detect() else {
        return Ok(());
    };
    Err(WorkerError::UncoordinatedInContainer {
        assigner,
        evidence: evidence.to_string(),
        remedy: "The store is the zero-config SQLite file in this container's own state \
                 directory, so every container of this image has its own and takes the same \
                 worker ids from it. Configure a store that every instance shares (`store = \
                 \"postgres://...\"`, UIDGEN_STORE); or, if this container is the only \
                 instance of its ID space and never runs beside a copy of itself (no replicas, \
                 no scaling), say so with `worker.single_instance = true` \
                 (UIDGEN_WORKER_SINGLE_INSTANCE=true)."
            .to_owned(),
    }
    .into())
}

/// A refused ZooKeeper start, with what to do.
fn explain_zookeeper_refusal(settings: &Settings, error: WorkerError) -> anyhow::Error {
    let reservation = settings
        .zookeeper
        .as_ref()
        .map_or(0, |zk| zk.options.reservation.as_secs());
    // Issue 36, point 6: a churn of short-lived holders (each start on a new ip:port takes a
    // new forever node) uses the range up with nodes seconds old, which no threshold frees
    // before their reservation: say what does, with this service's numbers.
    if matches!(
        error.downcast_backend::<ZkError>(),
        Some(ZkError::RangeUsedUp { .. })
    ) {
        return anyhow::Error::new(error).context(format!(
            "cannot obtain a worker id from ZooKeeper. The ids of stopped holders are reserved \
             for {reservation} s after their last report (`zookeeper.reservation_secs`): once \
             that has passed, `uidgen zk reclaim --older-than {reservation}s` frees them, or \
             `zookeeper.auto_reclaim_after_secs = {reservation}` frees them in the background. A \
             restart on the same address and port keeps its own node; starts on new ones (new \
             pod IPs, `listen` port 0) each take another id"
        ));
    }
    anyhow::Error::new(error).context("cannot obtain a worker id from ZooKeeper")
}

/// A coordinator's section, which [`Settings`] holds whenever the assigner is that
/// coordinator's.
fn section<S>(section: Option<&S>) -> anyhow::Result<&S> {
    section.context("the settings lack the assigner's section; build them with Config::settings")
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

/// Obtain a worker id and build the configured generator with it. The assignment's keeper
/// (a lease, a ZooKeeper or etcd holder) keeps the id while the generator lives, and is what
/// readiness, status, metrics and shutdown read.
pub async fn assign_and_build(settings: &Settings, store: &Store) -> anyhow::Result<AnyBuilt> {
    Ok(
        assign_and_pool(settings, store, crate::config::spaces::DEFAULT_SPACE)
            .await?
            .0,
    )
}

/// [`assign_and_build`], with the pool that pads the generator from more worker ids of the
/// same assigner when demand outruns the first (issue 30; run it with
/// [`WorkerPool::run`](crate::workers::WorkerPool::run)).
pub async fn assign_and_pool(
    settings: &Settings,
    store: &Store,
    space: &str,
) -> anyhow::Result<(AnyBuilt, Arc<crate::workers::WorkerPool>)> {
    let assigner = assigner(settings, store).await?;
    let mut assignment = obtain(settings, assigner.as_ref()).await?;
    let order = match crate::order::fence_for(settings, store, space, &assignment).await {
        Ok(order) => order,
        Err(error) => {
            // Nothing was stamped with the id yet: give it back, as a failed build does.
            if let Some(keeper) = &assignment.keeper
                && let Err(release) = keeper.release().await
            {
                warn!(%release, "could not release the worker id after a failed start");
            }
            return Err(error);
        }
    };
    if let Some(order) = &order {
        assignment.fence = Some(order.over(assignment.fence.take()));
    }
    let built = build_generator(settings, assignment).await?;
    let pool = crate::workers::WorkerPool::new(
        space,
        Arc::clone(&built.generator),
        assigner,
        crate::workers::PoolOptions {
            max_workers: settings.worker.max_ids,
            release_idle: settings.worker.release_idle,
        },
    )
    .with_order(order);
    pool.announce();
    Ok((built, Arc::new(pool)))
}
