//! A small worker process for the multi-process tests of `uidgen-store`.
//!
//! `uidgen-store-worker URL COUNT OUT` connects to URL, takes a disposable worker id, builds a
//! `CachedUidGenerator`, takes COUNT IDs and writes them to OUT as little-endian u64s; it
//! prints the worker id on stdout.
//!
//! `uidgen-store-worker --leased URL COUNT OUT` does the same with a leased worker id from a
//! layout with only two (1 worker bit), releasing the lease before it exits. A process that
//! gets no id exits with status 3 and the typed error on stderr.
//!
//! `uidgen-store-worker reuse [FLAGS]` is one life of a *reused* worker id (a lease, possibly
//! restarted from its local cache, or a static id with its state file), on a clock the test
//! sets, for the reuse scenarios of issue #8 (tests/reuse_processes.rs). It prints
//! `WORKER_ID KIND` (`0 LocalCache`) on stdout and writes its IDs to `--out` as above; a refused
//! worker id (or an ID refused for a lost lease) exits with status 3 and the error on stderr.
//! `--crash` exits right after writing the IDs, releasing nothing. See [`REUSE_USAGE`].

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{
    CachedOptions, Clock, FieldKind, Layout, ManualClock, SystemClock, TimeUnit, UidError,
    UidGenerator,
};
use uidgen_store::{
    DisposableWorkerIdAssigner, LeaseGuard, LeasedWorkerIdAssigner, Store, StoreError,
};
use uidgen_worker::{
    Built, GeneratorBuilder, LeaseOptions, StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner,
    WorkerIdRange,
};

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit status of a process that was refused a worker id, or whose IDs were refused.
const REFUSED: i32 = 3;

// Multi-threaded: the lease heartbeat must keep running while IDs are taken.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> AnyResult {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "reuse") {
        return reuse(ReuseArgs::parse(&args[1..])?).await;
    }
    let leased = args.first().is_some_and(|a| a == "--leased");
    if leased {
        args.remove(0);
    }
    let [url, count, out] = args.as_slice() else {
        return Err(format!(
            "usage: uidgen-store-worker [--leased] URL COUNT OUT\n   or: {REUSE_USAGE}"
        )
        .into());
    };
    let count: usize = count.parse()?;
    let store = Store::connect(url).await?;
    let built = if leased {
        // 49 bits of seconds, 1 worker bit, 13 bits of sequence: two worker ids to fight over.
        let layout = Layout::baidu_bits(49, 1, 13, "2026-01-01")?;
        let options = LeaseOptions {
            holder: Some(format!("worker-{}", std::process::id())),
            ..LeaseOptions::default()
        };
        let assigner = LeasedWorkerIdAssigner::new(store.clone(), SystemClock, options);
        match GeneratorBuilder::new(layout)
            .assigner(assigner)
            .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(10)))
            .await
            .map_err(StoreError::from)
        {
            Ok(built) => built,
            Err(
                error @ (StoreError::NoFreeWorkerId { .. }
                | StoreError::LeaseContention { .. }
                | StoreError::Worker(WorkerError::ClockBehindLastIssued { .. })),
            ) => {
                eprintln!("{error}");
                std::process::exit(REFUSED);
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        GeneratorBuilder::new(Layout::baidu_default()?)
            .assigner(DisposableWorkerIdAssigner::new(store.clone()))
            .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(10)))
            .await?
    };
    let bytes = take_ids(Arc::clone(&built.generator), count).await??;
    std::fs::File::create(out)?.write_all(&bytes)?;
    if let Some(lease) = LeaseGuard::of(&built.assignment) {
        lease.release().await?;
    }
    store.close().await;
    println!("{}", built.worker_id());
    Ok(())
}

/// Take `count` IDs as little-endian bytes, off the runtime: a fenced or leased generator's
/// batch may wait for the clock (bounded borrowing), and the heartbeat must run meanwhile.
async fn take_ids<G: UidGenerator + ?Sized + 'static>(
    generator: Arc<G>,
    count: usize,
) -> AnyResult<uidgen_core::Result<Vec<u8>>> {
    let taken = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::with_capacity(count * 8);
        let mut left = count;
        while left > 0 {
            let batch = left.min(100_000);
            for id in generator.next_ids(batch)? {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
            left -= batch;
        }
        Ok(bytes)
    })
    .await?;
    Ok(taken)
}

const REUSE_USAGE: &str = "uidgen-store-worker reuse --out FILE [--count N] \
[--assigner leased|static] [--url URL] [--down] [--cache PATH] [--state PATH] [--worker-id N] \
[--worker-bits N] [--range LO-HI] [--clock-ms T] [--max-wait-ms N] [--generator default|cached] \
[--boost-power N] [--renew-at-ms T] [--crash]";

/// Where the worker id comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AssignerKind {
    /// `LeasedWorkerIdAssigner` over `--url`, with the local cache `--cache` if given.
    Leased,
    /// `StaticWorkerIdAssigner` for `--worker-id`, with the state file `--state`.
    Static,
}

/// Which generator issues the IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GeneratorKind {
    /// `DefaultUidGenerator`, fenced per time unit.
    Default,
    /// `CachedUidGenerator`, fenced before padding.
    Cached,
}

/// The flags of `reuse`.
#[derive(Debug)]
struct ReuseArgs {
    /// The database (leased); needed for a leased worker id even when `down`.
    url: Option<String>,
    /// Connect, then close the store: every query is unreachable, as if the database were down.
    down: bool,
    assigner: AssignerKind,
    /// The static worker id (default 0).
    worker_id: u64,
    /// Worker bits of the seconds layout (default 0: one worker id).
    worker_bits: u32,
    /// The leased worker ids (`LeaseOptions::range`; default: every id of the layout).
    range: Option<WorkerIdRange>,
    /// The lease's local cache (`LeaseOptions::cache_path`).
    cache: Option<PathBuf>,
    /// The static id's state file (required for `static`).
    state: Option<PathBuf>,
    /// A settable clock starting here, moved forward by the generator's waits
    /// (`ManualClock::auto_advancing`); the system clock without it.
    clock_ms: Option<u64>,
    /// `max_takeover_wait` (leased) or `max_start_wait` (static); the library's default without it.
    max_wait_ms: Option<u64>,
    generator: GeneratorKind,
    /// The cached generator's ring holds `2^boost_power` time units (Baidu's default 3).
    boost_power: u32,
    /// How many IDs to take (default 1000).
    count: usize,
    out: PathBuf,
    /// After taking the IDs, set the clock to this and renew the lease once (needs `--clock-ms`
    /// and a lease): a heartbeat after the holder's clock stepped.
    renew_at_ms: Option<u64>,
    /// Exit right after writing the IDs, releasing nothing and dropping nothing: a crash.
    crash: bool,
}

impl ReuseArgs {
    fn parse(args: &[String]) -> AnyResult<Self> {
        let mut parsed = Self {
            url: None,
            down: false,
            assigner: AssignerKind::Leased,
            worker_id: 0,
            worker_bits: 0,
            range: None,
            cache: None,
            state: None,
            clock_ms: None,
            max_wait_ms: None,
            generator: GeneratorKind::Default,
            boost_power: CachedOptions::default().boost_power,
            count: 1000,
            out: PathBuf::new(),
            renew_at_ms: None,
            crash: false,
        };
        let mut out = None;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .ok_or_else(|| format!("{flag} needs a value; usage: {REUSE_USAGE}"))
            };
            match flag.as_str() {
                "--url" => parsed.url = Some(value()?.clone()),
                "--down" => parsed.down = true,
                "--assigner" => {
                    parsed.assigner = match value()?.as_str() {
                        "leased" => AssignerKind::Leased,
                        "static" => AssignerKind::Static,
                        other => {
                            return Err(format!("--assigner {other}: use leased or static").into());
                        }
                    }
                }
                "--worker-id" => parsed.worker_id = value()?.parse()?,
                "--worker-bits" => parsed.worker_bits = value()?.parse()?,
                "--range" => parsed.range = Some(value()?.parse()?),
                "--cache" => parsed.cache = Some(value()?.into()),
                "--state" => parsed.state = Some(value()?.into()),
                "--clock-ms" => parsed.clock_ms = Some(value()?.parse()?),
                "--max-wait-ms" => parsed.max_wait_ms = Some(value()?.parse()?),
                "--generator" => {
                    parsed.generator = match value()?.as_str() {
                        "default" => GeneratorKind::Default,
                        "cached" => GeneratorKind::Cached,
                        other => {
                            return Err(
                                format!("--generator {other}: use default or cached").into()
                            );
                        }
                    }
                }
                "--boost-power" => parsed.boost_power = value()?.parse()?,
                "--count" => parsed.count = value()?.parse()?,
                "--out" => out = Some(PathBuf::from(value()?)),
                "--renew-at-ms" => parsed.renew_at_ms = Some(value()?.parse()?),
                "--crash" => parsed.crash = true,
                other => return Err(format!("unknown flag {other}; usage: {REUSE_USAGE}").into()),
            }
        }
        parsed.out = out.ok_or_else(|| format!("--out is required; usage: {REUSE_USAGE}"))?;
        match parsed.assigner {
            AssignerKind::Leased if parsed.url.is_none() => {
                return Err("a leased worker id needs --url".into());
            }
            AssignerKind::Static if parsed.state.is_none() => {
                return Err("a static worker id needs --state".into());
            }
            _ => {}
        }
        if parsed.renew_at_ms.is_some()
            && (parsed.clock_ms.is_none() || parsed.assigner != AssignerKind::Leased)
        {
            return Err("--renew-at-ms needs --clock-ms and a leased worker id".into());
        }
        Ok(parsed)
    }

    fn max_wait(&self) -> Option<Duration> {
        self.max_wait_ms.map(Duration::from_millis)
    }
}

/// Like the tests' `narrow_layout`: 1 sign bit, 30 bits of seconds, `worker_bits` worker bits
/// and the rest (33 - `worker_bits`) sequence.
fn narrow_layout(worker_bits: u32) -> uidgen_core::Result<Layout> {
    use FieldKind::{Sequence, Sign, Time, Worker};
    let sequence_bits = 33u32
        .checked_sub(worker_bits)
        .ok_or_else(|| UidError::InvalidOption {
            name: "worker_bits",
            reason: format!("{worker_bits} leaves no room in 33 bits"),
        })?;
    Layout::new(
        "narrow",
        &[
            (Sign, 1),
            (Time, 30),
            (Worker, worker_bits),
            (Sequence, sequence_bits),
        ],
        TimeUnit::Seconds,
        "2026-01-01",
    )
}

async fn reuse(args: ReuseArgs) -> AnyResult {
    match args.clock_ms {
        Some(ms) => {
            let clock = ManualClock::auto_advancing(ms);
            reuse_on(&args, clock.clone(), Some(clock)).await
        }
        None => reuse_on(&args, SystemClock, None).await,
    }
}

/// One life of a reused worker id on `clock` (`manual` is the same clock when it is settable).
async fn reuse_on<C: Clock + Clone + 'static>(
    args: &ReuseArgs,
    clock: C,
    manual: Option<ManualClock>,
) -> AnyResult {
    let layout = narrow_layout(args.worker_bits)?;
    let store = match &args.url {
        Some(url) => {
            let store = Store::connect(url).await?;
            if args.down {
                // How the in-process tests take a database away: a closed pool is unreachable.
                store.close().await;
            }
            Some(store)
        }
        None => None,
    };
    let assigner: Arc<dyn WorkerIdAssigner> = match args.assigner {
        AssignerKind::Leased => {
            let store = store.clone().ok_or("a leased worker id needs --url")?;
            let defaults = LeaseOptions::default();
            let options = LeaseOptions {
                cache_path: args.cache.clone(),
                max_takeover_wait: args.max_wait().unwrap_or(defaults.max_takeover_wait),
                holder: Some(format!("worker-{}", std::process::id())),
                range: args.range,
                ..defaults
            };
            Arc::new(LeasedWorkerIdAssigner::new(store, clock.clone(), options))
        }
        AssignerKind::Static => {
            let state = args
                .state
                .clone()
                .ok_or("a static worker id needs --state")?;
            let mut assigner =
                StaticWorkerIdAssigner::new(args.worker_id, state).with_clock(clock.clone());
            if let Some(wait) = args.max_wait() {
                assigner = assigner.max_start_wait(wait);
            }
            Arc::new(assigner)
        }
    };
    let builder = GeneratorBuilder::new(layout).shared_assigner(assigner);
    match args.generator {
        GeneratorKind::Default => {
            let built = builder.build_default(clock).await;
            run_life(args, refused_or(built)?, manual).await?;
        }
        GeneratorKind::Cached => {
            let options = CachedOptions {
                boost_power: args.boost_power,
                ..CachedOptions::waiting(Duration::from_secs(10))
            };
            let built = builder.build_cached(clock, options).await;
            run_life(args, refused_or(built)?, manual).await?;
        }
    }
    if let Some(store) = store {
        store.close().await;
    }
    Ok(())
}

/// The built generator, or exit with [`REFUSED`] when the worker id was refused.
fn refused_or<G>(built: uidgen_worker::Result<Built<G>>) -> AnyResult<Built<G>> {
    match built.map_err(StoreError::from) {
        Ok(built) => Ok(built),
        Err(
            error @ (StoreError::NoFreeWorkerId { .. }
            | StoreError::LeaseContention { .. }
            | StoreError::Worker(WorkerError::ClockBehindLastIssued { .. } | WorkerError::Cache { .. })
            | StoreError::Cache { .. }
            | StoreError::LeaseLost { .. }
            // Down, with no usable cache to fall back on.
            | StoreError::Unreachable { .. }),
        ) => refuse(&error),
        Err(error) => Err(error.into()),
    }
}

fn refuse(error: &dyn std::fmt::Display) -> ! {
    eprintln!("{error}");
    std::process::exit(REFUSED);
}

/// Take the IDs, write them, print `WORKER_ID KIND`, then crash or shut down cleanly.
async fn run_life<G: UidGenerator + 'static>(
    args: &ReuseArgs,
    built: Built<G>,
    manual: Option<ManualClock>,
) -> AnyResult {
    let bytes = match take_ids(Arc::clone(&built.generator), args.count).await? {
        Ok(bytes) => bytes,
        // The lease ended or the fence would not rise: the worker id was refused mid-life.
        Err(error @ (UidError::GeneratorStopped(_) | UidError::BeyondFence { .. })) => {
            refuse(&error)
        }
        Err(error) => return Err(error.into()),
    };
    std::fs::File::create(&args.out)?.write_all(&bytes)?;
    if let (Some(at), Some(clock), Some(lease)) =
        (args.renew_at_ms, &manual, LeaseGuard::of(&built.assignment))
    {
        clock.set(at);
        lease.renew().await?;
    }
    println!(
        "{} {}",
        built.worker_id(),
        camel_case(built.assignment.kind.name())
    );
    std::io::stdout().flush()?;
    if args.crash {
        // No release, no drop: the lease row, the cache and the state file stay as a crash
        // leaves them.
        std::process::exit(0);
    }
    if let Some(lease) = LeaseGuard::of(&built.assignment) {
        lease.release().await?;
    }
    Ok(())
}

/// The kind as this tool has always printed it (`local_cache` as `LocalCache`), which the
/// multi-process tests read.
fn camel_case(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or_else(String::new, |first| {
                first.to_uppercase().chain(chars).collect::<String>()
            })
        })
        .collect()
}
