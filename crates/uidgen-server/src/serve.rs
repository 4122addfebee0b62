//! `uidgen serve`: configuration in, a listening service out, and a clean stop on SIGTERM/SIGINT.

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tracing::{info, warn};
use uidgen_core::SystemClock;
use uidgen_segment::SegmentService;
use uidgen_store::Store;
use uidgen_worker::AnyBuilt;

use crate::cli::ServeArgs;
use crate::config::Settings;
use crate::config::segment::SegmentSettings;
use crate::config::spaces::DEFAULT_SPACE;
use crate::generators::{assign_and_pool, open_store, ready_state_dir, redacted};
use crate::servers::{Listeners, Servers};
use crate::service::clock_probe;
use crate::service::clock_watch::ClockWatch;
use crate::service::ready::store_readiness;
use crate::service::state::{AppState, Space};
use crate::workers::WorkerPool;

/// The step a tag of `ordered.tags` is created with when missing: its leader claims that much
/// at once at first, more as it goes faster.
const ORDERED_TAG_STEP: i64 = 1_000;

/// The ordered tags' leads (issue 35), forwarding to the leaders over gRPC (trusting the
/// server's own certificate with TLS on); this server leads only if the others can reach its
/// gRPC port.
async fn start_ordered(
    settings: &Settings,
    store: &Store,
    grpc: Option<std::net::SocketAddr>,
) -> anyhow::Result<Arc<crate::ordered::OrderedTags>> {
    let ca_pem = match &settings.tls {
        Some(tls) => Some(std::fs::read(&tls.cert).with_context(|| {
            format!("cannot read tls.cert {} for forwarding", tls.cert.display())
        })?),
        None => None,
    };
    // `ordered.tags`: marked at start (the mark is idempotent), created first when missing.
    for tag in &settings.ordered.tags {
        if store.get_tag(tag).await?.is_none() {
            store
                .upsert_tag(tag, ORDERED_TAG_STEP, Some("ordered.tags"))
                .await?;
            info!(
                tag,
                step = ORDERED_TAG_STEP,
                "created the ordered tag listed in ordered.tags"
            );
        }
        if store.mark_ordered(tag).await? {
            info!(tag, "marked the tag listed in ordered.tags ordered");
        }
    }
    let address = settings.ordered.address(grpc);
    if address.is_none() {
        warn!(
            "gRPC is off and ordered.advertise unset: while this server leads an ordered tag, \
             the others cannot forward to it and their calls of the tag wait"
        );
    }
    Ok(crate::ordered::OrderedTags::start(
        store.clone(),
        settings.ordered.clone(),
        address,
        settings.segment.options.max_step,
        settings.batch_cap,
        ca_pem,
    )
    .await)
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

/// The settings `uidgen serve` runs with: the configuration with the command line's
/// arguments over it, every key checked. Read before the log is set up, since they say how to
/// log (`log.format`).
pub fn settings(args: &ServeArgs) -> anyhow::Result<Settings> {
    let overridden = args.listen.is_some()
        || args.grpc_listen.is_some()
        || args.log_format.is_some()
        || args.layout.overrides();
    let mut config = args.config.read(overridden)?;
    if let Some(listen) = &args.listen {
        config.listen.clone_from(listen);
    }
    if let Some(grpc_listen) = &args.grpc_listen {
        config.grpc_listen.clone_from(grpc_listen);
    }
    if let Some(format) = args.log_format {
        config.log.format = format;
    }
    args.layout.apply(&mut config);
    Ok(config.settings()?)
}

/// Run the service with `settings` ([`settings`]) until a shutdown signal.
///
/// The ports are bound first, so a busy port costs no worker id (and a ZooKeeper worker id is
/// named after the bound port), and answer at once from then on: `503 starting` (gRPC
/// `UNAVAILABLE`) until the worker id is held and the generators are built, then the service
/// (`servers.rs`). A shutdown signal while starting abandons the start, as a kill would.
/// Once the id is held, every way out (segment mode failing to start, the server failing, a
/// shutdown that outlasts its 30 s grace, `servers.rs`'s `SHUTDOWN_GRACE`) goes through the keeper's release, the same for
/// every assigner.
pub async fn serve(mut settings: Settings) -> anyhow::Result<()> {
    // Found and made before anything else, and said once: which files this host's worker ids
    // are kept apart by is the first thing to know when two starts disagree.
    let state_dir = ready_state_dir(&settings)?;
    info!(
        state_dir = %state_dir,
        from = state_dir.source().name(),
        "state directory: {state_dir}"
    );
    // Read before binding: a bad certificate costs no port and no worker id.
    let tls = match &settings.tls {
        Some(tls) => Some(crate::tls::Tls::load(tls, &state_dir)?),
        None => None,
    };
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
        tls,
    };
    let max_lease = u64::try_from(settings.segment.options.max_lease_size).unwrap_or(0);
    let servers = Servers::start(listeners, settings.http, max_lease)?;
    info!(
        listen = %servers.http_addr,
        grpc_listen = %servers.grpc_addr.map_or_else(|| "off".to_owned(), |a| a.to_string()),
        tls = settings.tls.is_some(),
        "uidgen starting: answering 503 (gRPC UNAVAILABLE) until the worker id is held"
    );
    let start = async {
        let store = open_store(&settings).await?;
        crate::cli::takeover::enforce(&settings, &store).await?;
        // Before a worker id is claimed: a server no caller could ever use is a configuration
        // mistake, refused as one.
        crate::service::callers::check_tokens_can_be_made(
            settings.auth.required,
            settings.admin_token.is_some(),
            &store,
        )
        .await?;
        let built = match assign_and_pool(&settings, &store, DEFAULT_SPACE).await {
            Ok((built, pool)) => Held { built, pool },
            Err(error) => {
                store.close().await;
                return Err(error);
            }
        };
        match build_spaces(&settings, &store).await {
            Ok(spaces) => Ok((store, built, spaces)),
            Err(error) => {
                release(DEFAULT_SPACE, &built).await;
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
    let (store, built, spaces) = match started {
        Ok(started) => started,
        Err(error) => {
            servers.abort();
            return Err(error);
        }
    };
    let served = serve_with_worker(&settings, &store, servers, &built, &spaces).await;
    // The one release, for every kind of keeper and every space, only after in-flight requests
    // finished (or were abandoned): it records how far the generator issued first, and IDs
    // asked for after it are refused by the guard. A lease is given back, an etcd claim revoked; a ZooKeeper
    // forever node and the cache stay, so a restart with this ip:port continues them. The log
    // calls every kind's hold a lease (each is bounded in time and renewed while it runs); the
    // keeper logs its own details.
    release(DEFAULT_SPACE, &built).await;
    for (name, space) in &spaces {
        release(name, space).await;
    }
    store.close().await;
    if served.is_ok() {
        info!("stopped");
    }
    served
}

/// A space's generator on its first worker id, and the pool of the worker ids it holds beyond
/// the first (issue 30).
struct Held {
    built: AnyBuilt,
    pool: Arc<WorkerPool>,
}

/// Release the worker ids of the space `space` (`default` for the top-level generator), the
/// pool's extra ones first, logging how it went: a failed release is not fatal, the lease
/// expires.
async fn release(space: &str, held: &Held) {
    held.pool.release().await;
    let built = &held.built;
    let (worker_id, assigner) = (built.worker_id(), built.assignment.kind.name());
    if built.assignment.keeper.is_some() {
        match built.release().await {
            Ok(()) => info!(space, worker_id, assigner, "released the worker id lease"),
            Err(error) => {
                warn!(space, worker_id, assigner, %error,
                    "could not release the worker id lease; it will expire");
            }
        }
    }
}

/// Claim a worker id of its own for each `[spaces.<name>]` and build its generator, through
/// the same path as the default space's (each claim a separate lease with its own fence). A
/// space that cannot start releases those built before it.
async fn build_spaces(settings: &Settings, store: &Store) -> anyhow::Result<Vec<(String, Held)>> {
    let mut built: Vec<(String, Held)> = Vec::with_capacity(settings.spaces.len());
    for space in &settings.spaces {
        match assign_and_pool(&settings.for_space(space), store, &space.name).await {
            Ok((one, pool)) => {
                info!(space = %space.name, worker_id = one.worker_id(),
                    layout = space.layout.name(), "space holds its worker id");
                built.push((space.name.clone(), Held { built: one, pool }));
            }
            Err(error) => {
                for (name, earlier) in &built {
                    release(name, earlier).await;
                }
                return Err(error.context(format!("cannot start the space `{}`", space.name)));
            }
        }
    }
    Ok(built)
}

/// Everything between holding a worker id and giving it back: segment mode, opening the gate
/// to the service on both ports, and the bounded graceful shutdown of both servers.
async fn serve_with_worker(
    settings: &Settings,
    store: &Store,
    servers: Servers,
    held: &Held,
    spaces: &[(String, Held)],
) -> anyhow::Result<()> {
    let built = &held.built;
    let assignment = &built.assignment;
    let worker_id = assignment.worker_id;
    let layout = built.generator.layout().clone();
    let mut state = AppState::embedded(Arc::clone(&built.generator), worker_id)
        .kept_by(assignment.keeper.clone());
    state.batch_cap = settings.batch_cap;
    state.empty_ring = settings.empty_ring;
    state.generator_kind = Some(settings.generator.kind.name());
    state.assigner = Some(assignment.kind.name());
    state.admin_token.clone_from(&settings.admin_token);
    state.store_check = store_readiness(store.clone());
    state.pool = Some(Arc::clone(&held.pool));
    state.access_log = settings.log.access;
    state.masker = settings.mask.clone().map(Arc::new);
    state.runway_warning = settings.runway_warning;
    state.clock = Arc::new(ClockWatch::new(settings.clock_watch));
    for (name, Held { built: space, .. }) in spaces {
        let kind = settings
            .spaces
            .iter()
            .find(|s| &s.name == name)
            .map_or(settings.generator.kind, |s| s.generator.kind);
        let space = Space::new(
            &state,
            name,
            Arc::clone(&space.generator),
            space.worker_id(),
            space.assignment.keeper.clone(),
            kind.name(),
        );
        state.spaces.insert(name.clone(), space);
    }
    state.callers = Some(
        crate::service::callers::Callers::start(
            store.clone(),
            settings.auth.required,
            settings.admin_token.is_some(),
            settings.auth.refresh,
            state.metrics.callers.clone(),
        )
        .await,
    );
    let modes = async {
        state.segments = start_segments(&settings.segment, store).await?;
        state.dated_tags.clone_from(&settings.segment.dated_tags);
        if state.segments.is_some() {
            state.ordered = Some(start_ordered(settings, store, servers.grpc_addr).await?);
        }
        state.sharded = crate::sharded::start_sharded(settings.sharded.as_ref(), store).await?;
        state.fallback = crate::fallback::start(&settings.worker, store);
        anyhow::Ok(())
    };
    if let Err(error) = modes.await {
        servers.abort();
        return Err(error);
    }
    let segments = state.segments.clone();
    let ordered = state.ordered.clone();
    let sharded = state.sharded.clone();
    let state = Arc::new(state);
    servers.open(Arc::clone(&state));
    // Each space's pool claims more worker ids under load until the servers stop; the
    // release in `serve` then gives them back.
    let (stop_pools, pools_stopped) = tokio::sync::watch::channel(false);
    // The runway's warning, now and once a day, while it holds (issue 33).
    let mut runway_stopped = pools_stopped.clone();
    // The clocks compared while serving (issue 33, item 4).
    let mut clock_stopped = pools_stopped.clone();
    // etcd's too, when the worker id comes from etcd.
    let etcd_clock = settings.etcd.as_ref().and_then(|etcd| {
        uidgen_etcd::EtcdClock::new(&etcd.options)
            .map_err(|error| warn!(%error, "etcd's clock will not be compared"))
            .ok()
    });
    // ZooKeeper's too, when the worker id comes from ZooKeeper (its own session: the holder's
    // reports keep theirs).
    let zk_clock = settings.zookeeper.as_ref().and_then(|zk| {
        uidgen_zk::ZkClock::new(&zk.options)
            .map_err(|error| warn!(%error, "ZooKeeper's clock will not be compared"))
            .ok()
    });
    let clock = tokio::spawn(clock_probe::watch(
        Arc::clone(&state),
        store.clone(),
        etcd_clock,
        zk_clock,
        async move {
            let _ = clock_stopped.wait_for(|stop| *stop).await;
        },
    ));
    let runway = tokio::spawn(crate::service::runway::watch(state, async move {
        let _ = runway_stopped.wait_for(|stop| *stop).await;
    }));
    let pools: Vec<_> = std::iter::once(&held.pool)
        .chain(spaces.iter().map(|(_, held)| &held.pool))
        .map(|pool| {
            let mut stopped = pools_stopped.clone();
            tokio::spawn(Arc::clone(pool).run(async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            }))
        })
        .collect();
    // Logged once the gate is open: whoever waits for this line is answered. The message
    // says it in words; the fields repeat it for machines.
    let grpc_listen = servers
        .grpc_addr
        .map_or_else(|| "off".to_owned(), |a| a.to_string());
    let on_off = |on: bool| if on { "on" } else { "off" };
    let (generator, assigner) = (settings.generator.kind.name(), assignment.kind.name());
    let admin_routes = on_off(settings.admin_token.is_some());
    // How many keys, and which masks: never a secret.
    let masked_form = settings.mask.as_ref().map_or_else(
        || "off".to_owned(),
        |m| format!("{} keys, key {} masks", m.keys().len(), m.current().id()),
    );
    info!(
        listen = %servers.http_addr,
        grpc_listen = %grpc_listen,
        segments = segments.as_ref().map_or(0, |s| s.tags().len()),
        store = store.redacted_url(),
        state_dir = %settings.state_dir().map_or_else(|e| e.to_string(), |d| d.to_string()),
        layout = layout.name(),
        epoch_ms = layout.epoch_ms(),
        generator,
        assigner,
        worker_id,
        admin_routes,
        caller_tokens = if settings.auth.required { "required" } else { "not required" },
        access_log = on_off(settings.log.access),
        masked_form,
        "uidgen serving: HTTP on {}, gRPC {grpc_listen}; the {generator} generator on worker id \
         {worker_id} (from the {assigner} assigner), layout {}; admin routes {admin_routes}",
        servers.http_addr,
        layout.name(),
    );
    let served = servers.run().await;
    let _ = stop_pools.send(true);
    for pool in pools {
        let _ = pool.await;
    }
    let _ = runway.await;
    let _ = clock.await;
    // The servers have stopped answering: the ordered tags' leases end now, so that their
    // successors need not wait for them to run out (issue 35).
    if let Some(ordered) = &ordered {
        ordered.resign().await;
    }
    // The servers have stopped answering: no request takes a segment ID any more, so what is
    // left of each segment can go back (issue 33, item 2).
    if let Some(segments) = &segments
        && let Err(error) = segments.shutdown_and_hand_back().await
    {
        warn!(%error, "handing back the rest of the segments failed; those numbers are \
            skipped, as after a crash (never handed out twice)");
    }
    if let Some(sharded) = &sharded {
        sharded.shutdown();
    }
    served
}
