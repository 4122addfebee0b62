//! `uidgen serve`: configuration in, a listening service out, and a clean stop on SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tracing::{info, warn};
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, Layout, SnowflakeGenerator,
    SystemClock, TimeFence, UidGenerator,
};
use uidgen_segment::SegmentService;
use uidgen_store::{
    ContainerProbe, DisposableWorkerIdAssigner, GuardedGenerator, LeaseGuard, LeaseOptions,
    LeasedWorkerIdAssigner, StateDir, StaticWorkerIdAssigner, Store, StoreOptions,
    WorkerAssignment, WorkerIdAssigner,
};

use crate::cli::{GenArgs, MigrateArgs, ServeArgs};
use crate::config::{AssignerKind, GeneratorConfig, GeneratorKind, SegmentSettings, Settings};
use crate::http::{AppState, NotReady, ReadinessCheck, ReadyRing};
use crate::servers::{Listeners, Servers};

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
        lease: Option<LeaseGuard>,
    ) -> Arc<GuardedGenerator<G>> {
        let guarded = Arc::new(GuardedGenerator::new(generator, lease.clone()));
        if let Some(lease) = &lease {
            lease.track(&guarded);
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
        assignment.lease.clone(),
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

fn redacted(url: &str) -> String {
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
            uidgen_store::MachineWorkerIdAssigner::new(worker.machine_state_dir(&state_dir))
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
fn static_assigner(settings: &Settings, dir: &StateDir) -> anyhow::Result<StaticWorkerIdAssigner> {
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
            .map_err(|e| crate::fallback::explain_refusal(&settings.worker, layout, e))
            .context("cannot obtain a worker id")?;
        (assignment, None)
    };
    match build_generator(settings, &assignment) {
        Ok(built) => Ok((built, assignment, coordinator)),
        Err(error) => {
            if let Some(lease) = &assignment.lease {
                // Hand the id back at once rather than leaving it held until the lease expires.
                let _ = lease.release().await;
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

/// `uidgen gen`: print IDs from an embedded generator. The worker id comes from the store (a
/// fresh disposable id by default), unless `--worker` names one: that is a static worker id,
/// kept apart from earlier runs with the same id by its state file (`worker.state_file`).
pub fn gen_ids(args: &GenArgs) -> anyhow::Result<()> {
    let mut config = args.config.read()?;
    args.layout.apply(&mut config);
    uidgen_core::check_count(args.count)?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let mut settings = config.settings()?;
    if let Some(worker_id) = args.worker {
        // This run's static worker id, set past the configuration's checks as it always was:
        // the static assigner checks it against the layout and `worker.range`.
        settings.worker.assigner = AssignerKind::Static;
        settings.worker.id = Some(worker_id);
    }
    let settings = settings;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (built, assignment) = match args.worker {
            Some(_) => {
                let assignment = static_assigner(&settings, &ready_state_dir(&settings)?)?
                    .assign(&settings.layout)
                    .await
                    .context("cannot use the worker id")?;
                (build_generator(&settings, &assignment)?, assignment)
            }
            None => {
                let store = open_store(&settings).await?;
                assign_and_build(&settings, &store).await?
            }
        };
        // On the blocking pool: a large batch may wait for the clock (a bounded borrow).
        let generator = Arc::clone(&built.generator);
        let count = args.count;
        let ids = tokio::task::spawn_blocking(move || generator.next_ids(count)).await?;
        // Released whether or not the IDs came: the id should not stay held until expiry.
        if let Some(lease) = &assignment.lease {
            lease.release().await?;
        }
        print_ids(&ids?)
    })
}

fn print_ids(ids: &[u64]) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for id in ids {
        writeln!(out, "{id}")?;
    }
    out.flush()?;
    Ok(())
}

/// `uidgen migrate`: create or upgrade the store's tables, then report the dialect.
pub async fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let mut config = args.config.read()?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let store = open_store(&config.settings()?).await?;
    println!(
        "migrated {} ({})",
        store.redacted_url(),
        store.dialect().name()
    );
    store.close().await;
    Ok(())
}

/// The generator `uidgen bench` measures in process: the configured kind and layout, worker 0
/// (the IDs are counted and thrown away, so no worker id needs to be reserved), with borrowing
/// unbounded: the bound keeps served IDs' time near the clock, and would otherwise turn a
/// measure of the generator into one of the layout's sequence per second.
pub fn bench_generator(
    config_args: &crate::cli::ConfigArgs,
) -> anyhow::Result<Arc<dyn UidGenerator>> {
    let mut config = config_args.read()?;
    config.ring.max_borrow_seconds = 0;
    let settings = config.settings()?;
    let assignment = WorkerAssignment::fixed(0, uidgen_store::AssignmentKind::Static);
    Ok(build_generator(&settings, &assignment)?.generator)
}

/// Resolve when SIGINT (Ctrl-C) or SIGTERM arrives.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => info!("SIGINT received; finishing in-flight requests"),
        () = terminate => info!("SIGTERM received; finishing in-flight requests"),
    }
}

/// Start Leaf segment mode when enabled, creating the sample tag (Leaf's README example) if the
/// table does not have it yet; an existing tag is left as its owner set it.
pub async fn start_segments(
    segment: &SegmentSettings,
    store: &Store,
) -> anyhow::Result<Option<Arc<SegmentService>>> {
    if !segment.enabled {
        return Ok(None);
    }
    let options = segment.options.clone();
    let service = if segment.groups.is_empty() {
        SegmentService::start(store.clone(), options, SystemClock).await
    } else {
        let groups = segment_groups(segment).await?;
        SegmentService::start_with_groups(store.clone(), groups, options, SystemClock).await
    }
    .context("cannot start segment mode")?;
    let sample = &segment.sample_tag;
    if !sample.is_empty() && store.get_tag(sample).await?.is_none() {
        let step = segment.sample_step;
        service
            .upsert_tag(sample, step, Some("sample tag created by uidgen serve"))
            .await
            .with_context(|| format!("cannot create the sample tag `{sample}`"))?;
        info!(tag = %sample, step, "created the sample segment tag");
    }
    Ok(Some(service))
}

/// `[[segment.groups]]` as the library takes them. A group's database that cannot be reached
/// now is opened lazily (without migrations): the group serves from the others meanwhile, and
/// the database joins once it answers (migrate it first if it never was).
async fn segment_groups(
    segment: &SegmentSettings,
) -> anyhow::Result<Vec<uidgen_segment::SegmentGroup>> {
    let mut groups = Vec::with_capacity(segment.groups.len());
    for (i, group) in segment.groups.iter().enumerate() {
        let key = format!("segment.groups[{i}]");
        let mut stores = Vec::with_capacity(group.stores.len());
        for url in &group.stores {
            let store = match Store::connect(url).await {
                Ok(store) => store,
                Err(error) if error.is_unreachable() => {
                    warn!(group = %group.name, store = %redacted(url), %error,
                        "a database of the segment group is unreachable; serving from the others");
                    Store::connect_lazy(url, uidgen_store::StoreOptions::default())
                        .with_context(|| format!("invalid config key `{key}.stores`"))?
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("cannot open {} of `{key}`", redacted(url)));
                }
            };
            stores.push(store);
        }
        let built = uidgen_segment::SegmentGroup::new(&group.name, stores, group.tags.clone())
            .with_context(|| format!("invalid config key `{key}`"))?;
        groups.push(built);
    }
    Ok(groups)
}

pub use crate::http::READY_TIMEOUT;

/// After a shutdown signal, in-flight requests get this long to finish; then they are
/// abandoned, and the worker id lease is still released.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Segment mode's readiness: the store answers a ping within [`READY_TIMEOUT`]. Failures carry
/// the driver's text for the log only.
pub fn store_readiness(store: Store) -> ReadinessCheck {
    Arc::new(move || {
        let store = store.clone();
        Box::pin(async move {
            let failed = |detail| NotReady {
                code: "not_ready",
                public: "the store does not answer",
                detail,
            };
            match tokio::time::timeout(READY_TIMEOUT, store.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(failed(e.to_string())),
                Err(_) => Err(failed(format!(
                    "no answer to a ping within {READY_TIMEOUT:?} from {}",
                    store.redacted_url()
                ))),
            }
        })
    })
}

/// What the ID generator needs besides itself: its worker id's lease still holds (a lease
/// outlives an outage of the store by its ttl; no database is asked here).
pub fn lease_readiness(lease: Option<LeaseGuard>) -> ReadinessCheck {
    Arc::new(move || {
        let checked = lease.as_ref().map_or(Ok(()), |lease| {
            lease.check().map_err(|e| NotReady {
                code: "not_ready",
                public: "the worker id lease is lost",
                detail: e.to_string(),
            })
        });
        Box::pin(async move { checked })
    })
}

/// Run the service until a shutdown signal.
///
/// The ports are bound first, so a busy port costs no worker id (and a ZooKeeper worker id is
/// named after the bound port), and answer at once from then on: `503 starting` (gRPC
/// `UNAVAILABLE`) until the worker id is held and the generators are built, then the service
/// (`servers.rs`). A shutdown signal while starting abandons the start, as a kill would.
/// Once the id is held, every way out (segment mode failing to start, the server failing, a
/// shutdown that outlasts [`SHUTDOWN_GRACE`]) goes through the lease release.
pub async fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let mut config = args.config.read()?;
    if let Some(listen) = &args.listen {
        config.listen.clone_from(listen);
    }
    if let Some(grpc_listen) = &args.grpc_listen {
        config.grpc_listen.clone_from(grpc_listen);
    }
    args.layout.apply(&mut config);
    let mut settings = config.settings()?;
    // Found and made before anything else, and said once: which files this host's worker ids
    // are kept apart by is the first thing to know when two starts disagree.
    let state_dir = ready_state_dir(&settings)?;
    info!(
        state_dir = %state_dir,
        from = state_dir.source().name(),
        "state directory: {state_dir}"
    );
    let addr = settings.listen;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    // The bound address, port 0 resolved: a ZooKeeper worker id is named after it.
    settings.listening_on(listener.local_addr()?);
    let settings = settings;
    let grpc_listener = match settings.grpc_listen {
        Some(addr) => Some(
            TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for gRPC on {addr}"))?,
        ),
        None => None,
    };
    let listeners = Listeners {
        http: listener,
        grpc: grpc_listener,
    };
    let max_lease = u64::try_from(settings.segment.options.max_lease_size).unwrap_or(0);
    let servers = Servers::start(listeners, max_lease)?;
    info!(
        listen = %servers.http_addr,
        grpc_listen = %servers.grpc_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
        "uidgen starting: answering 503 (gRPC UNAVAILABLE) until the worker id is held"
    );
    let start = async {
        let store = open_store(&settings).await?;
        match assign_and_build_holding(&settings, &store).await {
            Ok(assigned) => Ok((store, assigned)),
            Err(error) => {
                store.close().await;
                Err(error)
            }
        }
    };
    let started = tokio::select! {
        started = start => started,
        () = servers.stopped() => {
            info!("stopped while starting");
            return servers.run().await;
        }
    };
    let (store, (built, assignment, coordinator)) = match started {
        Ok(started) => started,
        Err(error) => {
            servers.abort();
            return Err(error);
        }
    };
    // Kept past the server's end: the lease release records how far this generator issued.
    let generator = Arc::clone(&built.generator);
    let served = serve_with_worker(
        &settings,
        &store,
        servers,
        built,
        &assignment,
        coordinator.clone(),
    )
    .await;
    match &coordinator {
        // The forever node and the cache stay: a restart with this ip:port continues them.
        Some(Coordinator::ZooKeeper(holder)) => holder.shutdown(),
        // The claim goes at once; the mark stays, above every ID this life issued.
        Some(Coordinator::Etcd(holder)) => {
            if let Err(error) = holder.release().await {
                tracing::warn!(%error, "could not revoke the etcd lease; it will expire");
            }
        }
        None => {}
    }
    if let Some(lease) = &assignment.lease {
        // Release only after in-flight requests finished (or were abandoned): the lease records
        // how far we issued, and IDs asked for after the release are refused by the guard.
        if let Some(until) = generator.issued_until_ms() {
            lease.record_issued_until(until);
        }
        let worker_id = assignment.worker_id;
        match lease.release().await {
            Ok(()) => info!(worker_id, "released the worker id lease"),
            Err(error) => {
                tracing::warn!(worker_id, %error, "could not release the lease; it will expire")
            }
        }
    }
    store.close().await;
    if served.is_ok() {
        info!("stopped");
    }
    served
}

/// Everything between holding a worker id and giving it back: segment mode, opening the gate
/// to the service on both ports, and the bounded graceful shutdown of both servers.
async fn serve_with_worker(
    settings: &Settings,
    store: &Store,
    servers: Servers,
    built: BuiltGenerator,
    assignment: &WorkerAssignment,
    coordinator: Option<Coordinator>,
) -> anyhow::Result<()> {
    let worker_id = assignment.worker_id;
    let layout = built.generator.layout().clone();
    let mut state = AppState::embedded(built.generator, worker_id);
    state.ring = built.ring;
    state.batch_cap = settings.batch_cap;
    state.generator_kind = Some(settings.generator.kind.name());
    state.assigner = Some(assignment.kind.name());
    state.admin_token.clone_from(&settings.admin_token);
    state.worker_check = match &coordinator {
        Some(Coordinator::Etcd(holder)) => crate::etcd::readiness(holder.clone()),
        _ => lease_readiness(assignment.lease.clone()),
    };
    state.store_check = store_readiness(store.clone());
    let modes = async {
        state.segments = start_segments(&settings.segment, store).await?;
        state.sharded = crate::sharded::start_sharded(settings.sharded.as_ref(), store).await?;
        state.fallback = crate::fallback::start(&settings.worker, store);
        anyhow::Ok(())
    };
    if let Err(error) = modes.await {
        servers.abort();
        return Err(error);
    }
    if let Some(Coordinator::ZooKeeper(zk)) = coordinator {
        state.metrics.register_zk();
        state.zk = Some(zk);
    }

    let segments = state.segments.clone();
    let sharded = state.sharded.clone();
    servers.open(Arc::new(state));
    // Logged once the gate is open: whoever waits for this line is answered.
    info!(
        listen = %servers.http_addr,
        grpc_listen = %servers.grpc_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
        segments = segments.as_ref().map_or(0, |s| s.tags().len()),
        store = store.redacted_url(),
        state_dir = %settings.state_dir().map_or_else(|e| e.to_string(), |d| d.to_string()),
        layout = layout.name(),
        epoch_ms = layout.epoch_ms(),
        generator = ?settings.generator.kind,
        assigner = ?assignment.kind,
        worker_id,
        "uidgen serving"
    );
    let served = servers.run().await;
    if let Some(segments) = &segments {
        segments.shutdown();
    }
    if let Some(sharded) = &sharded {
        sharded.shutdown();
    }
    served
}
