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
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_store::{DisposableWorkerIdAssigner, LeasedWorkerIdAssigner, Store, StoreOptions};
use uidgen_worker::{
    ContainerProbe, GuardedGenerator, LeaseOptions, StateDir, StaticWorkerIdAssigner,
    WorkerAssignment, WorkerIdAssigner, WorkerKeeper,
};

use crate::cli::{GenArgs, MigrateArgs, ServeArgs};
use crate::config::{AssignerKind, Config, GeneratorConfig, GeneratorKind, RingConfig};
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
    config: &Config,
    layout: Layout,
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
    Ok(match config.generator.kind {
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
                    snowflake(layout, worker_id, &config.generator)?,
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
                ..cached_options(&config.ring, &layout)
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

/// The per-host state directory of `config` ([`Config::state_dir`]), created (0700) if
/// missing: every default file that keeps worker ids apart lives there, and every relative
/// path in the configuration is taken in it, so that no start depends on its working
/// directory.
pub fn ready_state_dir(config: &Config) -> anyhow::Result<StateDir> {
    let dir = config.state_dir()?;
    dir.create()?;
    Ok(dir)
}

/// Open the configured store (creating a SQLite file if needed, a relative one in the state
/// directory) and apply its migrations.
///
/// A leased assigner with a local cache file may start while the database is down (it then
/// runs on the cached worker id, under a lease it claims once the database answers): for it,
/// a store that cannot be reached is opened lazily instead of stopping start-up.
pub async fn open_store(config: &Config) -> anyhow::Result<Store> {
    let url = config.store_url(&ready_state_dir(config)?);
    let context = || format!("cannot open the store `store = {:?}`", redacted(&url));
    match Store::connect(&url).await {
        Ok(store) => Ok(store),
        Err(error)
            if config.worker.assigner == AssignerKind::Leased
                && config.worker.cache_file.is_some()
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
pub fn assigner(config: &Config, store: &Store) -> anyhow::Result<Arc<dyn WorkerIdAssigner>> {
    // `worker.range`, or Vesta's server range on Vesta layouts (the rest is the clients').
    let range = crate::fallback::server_range(config, &config.build_layout()?)?;
    let state_dir = config.state_dir()?;
    Ok(match config.worker.assigner {
        AssignerKind::Disposable => {
            let disposable = DisposableWorkerIdAssigner::new(store.clone());
            Arc::new(match range {
                Some(range) => disposable.with_range(range),
                None => disposable,
            })
        }
        AssignerKind::Static => {
            let assigner = static_assigner(config, &state_dir)?
                .registered_in(store.clone())
                .with_store_shared(config.store_is_shared())
                .with_lease_options(config.worker.lease_options());
            // An explicit absolute state file is the operator's statement that the id is
            // unique to that volume; without it, or a shared store, a container is refused.
            let declared = (config.worker.state_file.as_ref()).is_some_and(|p| p.is_absolute());
            let assigner = if declared {
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
                cache_path: config.worker.cache_file_in(&state_dir),
                ..config.worker.lease_options()
            },
        )),
        // Needs no configuration: each (machine, process) value is leased in the store (and
        // locked in the state directory); its fixed range 0-1023 is recorded there. Without a
        // configured store it refuses to start in a container unless allowed.
        // The trait's way in (no status for readiness); `serve` goes through
        // `assign_and_build_holding`, which also records the range in the store.
        AssignerKind::Zookeeper => Arc::new(uidgen_zk::ZooKeeperWorkerIdAssigner::new(
            crate::zk::options(config, &config.build_layout()?)?,
        )),
        AssignerKind::Etcd => Arc::new(uidgen_etcd::EtcdWorkerIdAssigner::new(
            crate::etcd::options(config, &config.build_layout()?)?,
        )),
        AssignerKind::Machine => Arc::new(
            uidgen_worker::MachineWorkerIdAssigner::new(
                config.worker.machine_state_dir(&state_dir),
            )
            .registered_in(store.clone())
            .with_store_shared(config.store_is_shared())
            .with_lease_options(config.worker.lease_options())
            .allow_uncoordinated(config.worker.machine.allow_uncoordinated),
        ),
    })
}

/// The static assigner for `worker.id`, keeping its mark in `worker.state_file` (by default
/// in the state directory `dir`), limited to `worker.range` when set. Not registered in a
/// store: [`assigner`] adds that, while `gen --worker N` runs without one.
fn static_assigner(config: &Config, dir: &StateDir) -> anyhow::Result<StaticWorkerIdAssigner> {
    let id = config
        .worker
        .id
        .context("invalid config key `worker.id`: the static assigner needs a worker id")?;
    let assigner = StaticWorkerIdAssigner::new(id, config.worker.state_file_for(id, dir));
    Ok(match config.worker.id_range()? {
        Some(range) => assigner.with_range(range),
        None => assigner,
    })
}

/// Obtain a worker id and build the configured generator with it.
pub async fn assign_and_build(
    config: &Config,
    layout: Layout,
    store: &Store,
) -> anyhow::Result<(BuiltGenerator, WorkerAssignment)> {
    // A ZooKeeper or etcd holder keeps its id while its generator (which holds its fence)
    // lives.
    let (built, assignment, _holder) = assign_and_build_holding(config, layout, store).await?;
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
    config: &Config,
    layout: Layout,
    store: &Store,
) -> anyhow::Result<(BuiltGenerator, WorkerAssignment, Option<Coordinator>)> {
    let (assignment, coordinator) = if config.worker.assigner == AssignerKind::Zookeeper {
        let (assignment, holder) = crate::zk::assign(config, &layout, store).await?;
        (assignment, holder.map(Coordinator::ZooKeeper))
    } else if config.worker.assigner == AssignerKind::Etcd {
        let (assignment, holder) = crate::etcd::assign(config, &layout, store).await?;
        (assignment, Some(Coordinator::Etcd(holder)))
    } else {
        let assignment = assigner(config, store)?
            .assign(&layout)
            .await
            .map_err(|e| crate::fallback::explain_refusal(config, &layout, e.into()))
            .context("cannot obtain a worker id")?;
        (assignment, None)
    };
    match build_generator(config, layout, &assignment) {
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

/// The ring options a service runs with: the configured sizes, and a reject-take policy that
/// waits for padding (up to a second) rather than failing a request the next refill would serve
/// (the HTTP and gRPC handlers do not use it: they await the padding's signal). A non-zero
/// `ring.max_borrow_seconds` is converted to the layout's time units (whole units, at least
/// one: padding must always reach the unit after the clock's); 0 leaves borrowing unbounded.
pub fn cached_options(ring: &RingConfig, layout: &Layout) -> CachedOptions {
    let unit_ms = layout.unit().millis();
    CachedOptions {
        boost_power: ring.boost_power,
        padding_factor: ring.padding_factor,
        schedule_interval: (ring.schedule_interval_secs > 0)
            .then(|| Duration::from_secs(ring.schedule_interval_secs)),
        max_borrow_units: (ring.max_borrow_seconds > 0)
            .then(|| (ring.max_borrow_seconds.saturating_mul(1000) / unit_ms).max(1)),
        ..CachedOptions::waiting(Duration::from_secs(1))
    }
}

/// `uidgen gen`: print IDs from an embedded generator. The worker id comes from the store (a
/// fresh disposable id by default), unless `--worker` names one: that is a static worker id,
/// kept apart from earlier runs with the same id by its state file (`worker.state_file`).
pub fn gen_ids(args: &GenArgs) -> anyhow::Result<()> {
    let mut config = args.config.load()?;
    let layout = args.layout.apply(&mut config)?;
    uidgen_core::check_count(args.count)?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (built, assignment) = match args.worker {
            Some(worker_id) => {
                config.worker.assigner = AssignerKind::Static;
                config.worker.id = Some(worker_id);
                let assignment = static_assigner(&config, &ready_state_dir(&config)?)?
                    .assign(&layout)
                    .await
                    .context("cannot use the worker id")?;
                (build_generator(&config, layout, &assignment)?, assignment)
            }
            None => {
                let store = open_store(&config).await?;
                assign_and_build(&config, layout, &store).await?
            }
        };
        // On the blocking pool: a large batch may wait for the clock (a bounded borrow).
        let generator = Arc::clone(&built.generator);
        let count = args.count;
        let ids = tokio::task::spawn_blocking(move || generator.next_ids(count)).await?;
        // Released whether or not the IDs came: the id should not stay held until expiry.
        if let Some(keeper) = &assignment.keeper {
            keeper.release().await?;
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
    let mut config = args.config.load()?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let store = open_store(&config).await?;
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
    let mut config = config_args.load()?;
    config.ring.max_borrow_seconds = 0;
    let layout = config.build_layout()?;
    let assignment = WorkerAssignment::fixed(0, uidgen_worker::AssignmentKind::STATIC);
    Ok(build_generator(&config, layout, &assignment)?.generator)
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

/// The segment service's options from `[segment]` (validated with the configuration).
pub fn segment_options(config: &Config) -> SegmentOptions {
    let segment = &config.segment;
    SegmentOptions {
        prefetch_ratio: segment.prefetch_ratio,
        wait_timeout: Duration::from_millis(segment.wait_timeout_ms),
        load_timeout: Duration::from_millis(segment.load_timeout_ms),
        sync_interval: Duration::from_secs(segment.sync_interval_secs),
        segment_duration: Duration::from_secs(segment.segment_duration_secs),
        max_step: segment.max_step,
        dynamic_step: segment.dynamic_step,
        max_batch: config.batch_cap,
        max_lease_size: segment.max_lease_size,
        ..SegmentOptions::default()
    }
}

/// Start Leaf segment mode when enabled, creating the sample tag (Leaf's README example) if the
/// table does not have it yet; an existing tag is left as its owner set it.
pub async fn start_segments(
    config: &Config,
    store: &Store,
) -> anyhow::Result<Option<Arc<SegmentService>>> {
    if !config.segment.enabled {
        return Ok(None);
    }
    let options = segment_options(config);
    let service = if config.segment.groups.is_empty() {
        SegmentService::start(store.clone(), options, SystemClock).await
    } else {
        let groups = segment_groups(config).await?;
        SegmentService::start_with_groups(store.clone(), groups, options, SystemClock).await
    }
    .context("cannot start segment mode")?;
    let sample = &config.segment.sample_tag;
    if !sample.is_empty() && store.get_tag(sample).await?.is_none() {
        let step = i64::try_from(config.segment.sample_step)
            .context("invalid config key `segment.sample_step`: too large")?;
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
async fn segment_groups(config: &Config) -> anyhow::Result<Vec<uidgen_segment::SegmentGroup>> {
    let mut groups = Vec::with_capacity(config.segment.groups.len());
    for (i, group) in config.segment.groups.iter().enumerate() {
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
pub fn lease_readiness(lease: Option<Arc<dyn WorkerKeeper>>) -> ReadinessCheck {
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
    let mut config = args.config.load()?;
    if let Some(listen) = &args.listen {
        config.listen.clone_from(listen);
    }
    if let Some(grpc_listen) = &args.grpc_listen {
        config.grpc_listen.clone_from(grpc_listen);
    }
    let layout = args.layout.apply(&mut config)?;
    // Found and made before anything else, and said once: which files this host's worker ids
    // are kept apart by is the first thing to know when two starts disagree.
    let state_dir = ready_state_dir(&config)?;
    info!(
        state_dir = %state_dir,
        from = state_dir.source().name(),
        "state directory: {state_dir}"
    );
    let addr = config.listen_addr()?;
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    // The bound address, port 0 resolved: a ZooKeeper worker id is named after it.
    config.listen = listener.local_addr()?.to_string();
    let grpc_listener = match config.grpc_listen_addr()? {
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
    let max_lease = u64::try_from(config.segment.max_lease_size).unwrap_or(0);
    let servers = Servers::start(listeners, max_lease)?;
    info!(
        listen = %servers.http_addr,
        grpc_listen = %servers.grpc_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
        "uidgen starting: answering 503 (gRPC UNAVAILABLE) until the worker id is held"
    );
    let start = async {
        let store = open_store(&config).await?;
        match assign_and_build_holding(&config, layout.clone(), &store).await {
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
        &config,
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
    // ZooKeeper's and etcd's holders were stopped above, as their coordinators want.
    if let Some(lease) = assignment.keeper.as_ref().filter(|_| coordinator.is_none()) {
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
    config: &Config,
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
    state.batch_cap = config.batch_cap;
    state.generator_kind = Some(config.generator.kind.name());
    state.assigner = Some(assignment.kind.name());
    state.admin_token.clone_from(&config.admin_token);
    state.worker_check = match &coordinator {
        Some(Coordinator::Etcd(holder)) => crate::etcd::readiness(holder.clone()),
        // ZooKeeper's readiness is its holder's status (`AppState.zk`).
        Some(Coordinator::ZooKeeper(_)) => lease_readiness(None),
        None => lease_readiness(assignment.keeper.clone()),
    };
    state.store_check = store_readiness(store.clone());
    let modes = async {
        state.segments = start_segments(config, store).await?;
        state.sharded = crate::sharded::start_sharded(config, store).await?;
        state.fallback = crate::fallback::start(config, store, &layout)?;
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
        state_dir = %config.state_dir().map_or_else(|e| e.to_string(), |d| d.to_string()),
        layout = layout.name(),
        epoch_ms = layout.epoch_ms(),
        generator = ?config.generator.kind,
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
