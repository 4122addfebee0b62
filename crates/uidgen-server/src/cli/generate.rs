//! `uidgen gen`, `uidgen migrate`, and the generator `uidgen bench` measures in process.

use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use uidgen_core::UidGenerator;
use uidgen_worker::{WorkerAssignment, WorkerIdAssigner};

use super::args::{ConfigArgs, LayoutArgs};
use crate::config::worker::AssignerKind;
use crate::generators::{
    assign_and_build, build_generator, open_store, ready_state_dir, redacted, static_assigner,
};

/// `uidgen gen`.
#[derive(Debug, Args)]
pub struct GenArgs {
    /// Configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// How many IDs.
    #[arg(short = 'n', long, default_value_t = 1)]
    pub count: usize,
    /// Store URL to take a worker id from, over the configuration.
    #[arg(long)]
    pub store: Option<String>,
    /// Use this worker id instead of a fresh one. With a configured store (`store`,
    /// UIDGEN_STORE, --store) it is leased there as the static assigner's is, so a second
    /// host using it at the same time is refused; without one, you answer for its uniqueness.
    #[arg(long)]
    pub worker: Option<u64>,
}

/// `uidgen migrate`.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Configuration.
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Store URL, over the configuration.
    #[arg(long)]
    pub store: Option<String>,
}

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
            && crate::config::vesta::is_vesta(&settings.layout)
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
        let ids =
            tokio::task::spawn_blocking(move || take_showing_progress(generator.as_ref(), count))
                .await?;
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
    let ids = tokio::task::spawn_blocking(move || take_showing_progress(generator.as_ref(), count))
        .await?;
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

/// `uidgen gen` shows a progress bar from this many IDs on: a smaller run ends before a bar
/// would tell anything (a million IDs of `baidu` take about a minute, the clock's pace).
pub const PROGRESS_FROM: usize = 100_000;

/// IDs taken per step when the bar is shown: small enough for the bar to move several times a
/// second at the clock's pace (8,192 a second on `baidu`).
const PROGRESS_STEP: usize = 4_096;

/// Whether `uidgen gen -n count` draws a progress bar: only for a person watching (stderr is
/// a terminal) and only for a run long enough to watch. Piped or redirected, stderr stays
/// clean for whatever reads it.
///
/// ```
/// use uidgen_server::cli::generate::shows_progress;
/// assert!(shows_progress(true, 1_000_000));
/// assert!(!shows_progress(false, 1_000_000));
/// assert!(!shows_progress(true, 10));
/// ```
pub fn shows_progress(stderr_is_terminal: bool, count: usize) -> bool {
    stderr_is_terminal && count >= PROGRESS_FROM
}

/// `count` IDs from `generator`, with a progress bar on stderr when [`shows_progress`] says
/// so (the IDs then come in steps of [`PROGRESS_STEP`], unique all the same: a batch
/// promises no more than consecutive takes do); the bar is cleared at the end, so stdout's
/// IDs are all that stays.
fn take_showing_progress(
    generator: &dyn UidGenerator,
    count: usize,
) -> uidgen_core::Result<Vec<u64>> {
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if !shows_progress(terminal, count) {
        return generator.next_ids(count);
    }
    let bar = indicatif::ProgressBar::new(count as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{wide_bar}] {percent:>3}% {pos}/{len} IDs, {per_sec}, eta {eta}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        let step = PROGRESS_STEP.min(count - ids.len());
        match generator.next_ids(step) {
            Ok(taken) => ids.extend(taken),
            Err(error) => {
                bar.abandon();
                return Err(error);
            }
        }
        bar.set_position(ids.len() as u64);
    }
    bar.finish_and_clear();
    Ok(ids)
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

/// `uidgen migrate`: create or upgrade the tables of every store the configuration names (the
/// store, then each `[[segment.groups]]` database), listing per store each migration it
/// applied, by version and name, or that it was already up to date.
pub async fn migrate(args: &MigrateArgs) -> anyhow::Result<()> {
    let mut config = args.config.read(args.store.is_some())?;
    if let Some(store) = &args.store {
        config.store.clone_from(store);
    }
    let settings = config.settings()?;
    let mut urls = vec![settings.store_url(&ready_state_dir(&settings)?)];
    for group in &settings.segment.groups {
        urls.extend(group.stores.iter().cloned());
    }
    for url in urls {
        migrate_store(&url).await?;
    }
    Ok(())
}

/// Migrate one store and say what changed.
async fn migrate_store(url: &str) -> anyhow::Result<()> {
    let context = || format!("cannot open the store `store = {:?}`", redacted(url));
    // Opened without migrating, so that the migration below is the one that reports.
    let options = uidgen_store::StoreOptions {
        migrate: false,
        ..uidgen_store::StoreOptions::default()
    };
    let store = uidgen_store::Store::connect_with(url, options)
        .await
        .with_context(context)?;
    let migrated = store.migrate().await;
    let (name, dialect) = (store.redacted_url().to_owned(), store.dialect());
    store.close().await;
    let applied = migrated?;
    let total = uidgen_store::migrations(dialect).len();
    println!(
        "{}",
        migration_report(&name, dialect.name(), total, &applied)
    );
    // Issue 31: migration 0006 alters Leaf's own table, which Java Leaf may still serve.
    if applied.iter().any(|m| m.version == 6) {
        println!(
            "  leaf_alloc keeps Leaf's columns; the delta and remainder uidgen added have \
             defaults (1, 0), and Java Leaf's statements name their columns, so Leaf keeps \
             working on it (docs/MIGRATING.md, \"Leaf\")"
        );
    }
    Ok(())
}

/// What `uidgen migrate` prints for one store: a line naming it, then one line per migration
/// applied, or that none was needed.
///
/// ```
/// use uidgen_server::cli::generate::migration_report;
/// assert_eq!(
///     migration_report("sqlite:///tmp/a.db", "sqlite", 12, &[]),
///     "migrated sqlite:///tmp/a.db (sqlite): already up to date (12 migrations)"
/// );
/// ```
pub fn migration_report(
    store: &str,
    dialect: &str,
    total: usize,
    applied: &[uidgen_store::Applied],
) -> String {
    use std::fmt::Write as _;
    if applied.is_empty() {
        return format!("migrated {store} ({dialect}): already up to date ({total} migrations)");
    }
    let mut out = format!(
        "migrated {store} ({dialect}): applied {} of {total} migrations",
        applied.len()
    );
    for migration in applied {
        let how = if migration.found_in_place {
            " (its changes were already there; recorded)"
        } else {
            ""
        };
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "\n  applied {:04} {}{how}",
            migration.version, migration.description
        );
    }
    out
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
