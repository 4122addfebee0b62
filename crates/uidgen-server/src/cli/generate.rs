//! `uidgen gen`, `uidgen migrate`, and the generator `uidgen bench` measures in process.

use std::sync::Arc;

use anyhow::Context;
use uidgen_core::UidGenerator;
use uidgen_worker::{WorkerAssignment, WorkerIdAssigner};

use super::{ConfigArgs, GenArgs, MigrateArgs};
use crate::config::AssignerKind;
use crate::generators::{
    assign_and_build, build_generator, open_store, ready_state_dir, static_assigner,
};

/// `uidgen gen`: print IDs from an embedded generator. The worker id comes from the store (a
/// fresh disposable id by default), unless `--worker` names one: that is a static worker id,
/// kept apart from earlier runs with the same id by its state file (`worker.state_file`), and,
/// with a configured (shared) store, leased there exactly as the configured static assigner
/// leases it (issue 36, point 6: two hosts running `gen --worker 5` on one PostgreSQL store
/// gave 300,000 equal IDs), so a second host is refused while the first holds it.
pub fn gen_ids(args: &GenArgs) -> anyhow::Result<()> {
    let overridden = args.layout.overrides() || args.store.is_some() || args.worker.is_some();
    let mut config = args.config.read(overridden)?;
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
        if args.worker.is_none()
            && crate::config::is_vesta(&settings.layout)
            && let Some(range) = settings.worker.fallback_range
        {
            return print_ids(&embedded_vesta(&settings, range, args.count).await?);
        }
        let built = match args.worker {
            // Without a shared store there is nothing to lease in: the operator's `--worker`.
            Some(_) if !settings.store_shared => {
                let assignment = static_assigner(&settings, &ready_state_dir(&settings)?)?
                    .assign(&settings.layout)
                    .await
                    .context("cannot use the worker id")?;
                build_generator(&settings, assignment).await?
            }
            // The configured assigner (static, for `--worker`) through the one match.
            _ => {
                let store = open_store(&settings).await?;
                super::takeover::enforce(&settings, &store).await?;
                assign_and_build(&settings, &store).await?
            }
        };
        // On the blocking pool: a large batch may wait for the clock (a bounded borrow).
        let generator = Arc::clone(&built.generator);
        let count = args.count;
        let ids = tokio::task::spawn_blocking(move || generator.next_ids(count)).await?;
        // Released whether or not the IDs came: the id should not stay held until expiry.
        built.release().await?;
        print_ids(&ids?)
    })
}

/// How long `uidgen gen`'s lease of an embedded machine id lasts: far longer than a run
/// takes, and renewed by nobody (it is released at the end, or expires).
const EMBEDDED_LEASE: std::time::Duration = std::time::Duration::from_secs(60);

/// `uidgen gen` on a Vesta layout: Vesta's embedded release mode (genMethod 0, the library and
/// the CLI) takes its machine id from the embedded range, 0-923 (`worker.fallback_range`; Vesta's
/// `MachineIdsProvider`), not the servers' 924-1023 (issue 31). The id is leased in the store
/// exactly as a client's fallback id is (`FallbackLeases`: distinct for racing runs, above
/// where the id's earlier holders stopped) and fenced by that lease and a state file
/// (`RemoteLease`), then given back with how far this run issued.
async fn embedded_vesta(
    settings: &crate::config::Settings,
    range: uidgen_worker::WorkerIdRange,
    count: usize,
) -> anyhow::Result<Vec<u64>> {
    use uidgen_core::SystemClock;
    // A store of this container's own leases the same ids in every container of the image.
    crate::generators::refuse_private_store_in_container(
        settings,
        uidgen_worker::ContainerProbe::system(),
    )?;
    let store = open_store(settings).await?;
    super::takeover::enforce(settings, &store).await?;
    let layout = &settings.layout;
    let leases = uidgen_store::FallbackLeases::new(store.clone(), range);
    let grant = leases
        .claim(layout, "uidgen-gen", EMBEDDED_LEASE)
        .await
        .context("cannot lease a machine id of the embedded range (`worker.fallback_range`)")?;
    let dir = ready_state_dir(settings)?;
    let lease =
        uidgen_worker::RemoteLease::start(dir.path(), layout, &grant, Arc::new(SystemClock))
            .await?
            .with_context(|| {
                format!(
                    "another process holds the state file of machine id {} in {dir}",
                    grant.worker_id
                )
            })?;
    let lease = Arc::new(lease);
    let assignment = WorkerAssignment {
        worker_id: grant.worker_id,
        kind: uidgen_worker::AssignmentKind::new("embedded"),
        keeper: None,
        fence: Some(Arc::clone(&lease) as Arc<dyn uidgen_core::TimeFence>),
    };
    let built = build_generator(settings, assignment).await?;
    let generator = Arc::clone(&built.generator);
    let ids = tokio::task::spawn_blocking(move || generator.next_ids(count)).await?;
    // Every unit this run stamped ends by the last ID's unit (one worker id, one generator):
    // the next holder of the id starts above it.
    let last = ids.as_ref().ok().and_then(|ids| {
        ids.iter()
            .filter_map(|&id| layout.decode(id).ok())
            .map(|d| d.timestamp_ms)
            .max()
    });
    let unit = layout.unit().millis();
    let issued = lease.let_go(|| last.map(|ms| ms.saturating_add(unit)))?;
    leases
        .release(layout, grant.worker_id, &grant.holder, issued)
        .await?;
    store.close().await;
    Ok(ids?)
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
    let mut config = args.config.read(args.store.is_some())?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let store = open_store(&config.settings()?).await?;
    println!(
        "migrated {} ({})",
        store.redacted_url(),
        store.dialect().name()
    );
    // Issue 31: migration 0006 alters Leaf's own table, which Java Leaf may still serve.
    println!(
        "leaf_alloc keeps Leaf's columns; the delta and remainder uidgen added have defaults \
         (1, 0), and Java Leaf's statements name their columns, so Leaf keeps working on it \
         (docs/MIGRATING.md, \"Leaf\")"
    );
    store.close().await;
    Ok(())
}

/// The generator `uidgen bench` measures in process: the configured kind and layout, worker 0
/// (the IDs are counted and thrown away, so no worker id needs to be reserved), with borrowing
/// unbounded: the bound keeps served IDs' time near the clock, and would otherwise turn a
/// measure of the generator into one of the layout's sequence per second.
pub fn bench_generator(config_args: &ConfigArgs) -> anyhow::Result<Arc<dyn UidGenerator>> {
    // Unbounded borrowing changes no check: the configuration is checked once, below.
    let mut config = config_args.read(false)?;
    config.ring.max_borrow_seconds = 0;
    let settings = config.settings()?;
    let assignment = WorkerAssignment::fixed(0, uidgen_worker::AssignmentKind::STATIC);
    // A fixed id has no keeper to reach, so the build awaits nothing: a runtime of the calling
    // thread, gone when it returns, is enough.
    let built = tokio::runtime::Builder::new_current_thread()
        .build()?
        .block_on(build_generator(&settings, assignment))?;
    Ok(built.generator)
}
