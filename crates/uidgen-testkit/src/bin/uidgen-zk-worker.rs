//! A small worker process for the multi-process tests of `uidgen-zk`.
//!
//! `uidgen-zk-worker --connect C --name N --port P --cache FILE --out FILE [--secs S]
//! [--max-count M] [--range LO-HI] [--clock-offset-ms O] [--reservation-ms R] [--report-ms I]
//! [--session-ms T]` takes a worker id from ZooKeeper for the address `127.0.0.1:P` under the
//! namespace N, prints it on stdout at once, then takes IDs from a `SnowflakeGenerator` on
//! Leaf's layout for S seconds (default 2, at most M IDs), appending them to the out file as
//! little-endian u64s batch by batch (so a process killed midway leaves what it issued), and
//! stops its holder. The clock is the system clock moved by O ms (a host whose clock is off,
//! or stepped across a restart). A refused start exits with status 3 and the typed error on
//! stderr.
//!
//! With `--extra N` it also claims N more worker ids through the same assigner
//! (`assign_extra`, the nodes of `127.0.0.1:P.1` to `P.N`), as a server does under sustained
//! load (issue 30), and takes IDs from a cached generator padded from all of them instead.

use std::io::Write;
use std::sync::Arc;

use uidgen_core::{
    CachedOptions, CachedUidGenerator, Clock, Layout, SnowflakeGenerator, SystemClock, UidGenerator,
};
use uidgen_worker::WorkerIdAssigner;
use uidgen_worker::testing::WorkerArgs;
use uidgen_zk::{ZkOptions, ZooKeeperWorkerIdAssigner};

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit status of a refused start.
const REFUSED: i32 = 3;

const USAGE: &str = "uidgen-zk-worker --connect C --name N --port P --cache FILE --out FILE \
                     [--secs S] [--max-count M] [--range LO-HI] [--clock-offset-ms O] \
                     [--reservation-ms R] [--report-ms I] [--session-ms T] [--extra N]";

/// The system clock moved by a fixed offset: this process's host clock, off by that much.
#[derive(Debug, Clone, Copy)]
struct OffsetClock(i64);

impl Clock for OffsetClock {
    fn now_millis(&self) -> u64 {
        SystemClock.now_millis().saturating_add_signed(self.0)
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> AnyResult {
    let args = WorkerArgs::new(std::env::args().skip(1), USAGE);
    let mut options = ZkOptions::new(
        args.need("--connect")?,
        args.need("--name")?,
        "127.0.0.1",
        args.need("--port")?,
    );
    options.cache_file = args.need("--cache")?.into();
    if let Some(range) = args.flag("--range") {
        options.range = Some(range.parse()?);
    }
    if let Some(reservation) = args.millis("--reservation-ms")? {
        options.reservation = reservation;
    }
    if let Some(interval) = args.millis("--report-ms")? {
        options.report_interval = interval;
    }
    if let Some(timeout) = args.millis("--session-ms")? {
        options.session_timeout = timeout;
    }
    let clock = OffsetClock(args.parsed("--clock-offset-ms", 0)?);
    let out = args.need("--out")?;
    let secs: f64 = args.parsed("--secs", 2.0)?;
    let max_count: usize = args.parsed("--max-count", 500_000)?;
    let layout = Layout::leaf()?;
    let assigner = ZooKeeperWorkerIdAssigner::new(options).with_clock(clock);
    let assigned = match assigner.start(&layout).await {
        Ok(assigned) => assigned,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(REFUSED);
        }
    };
    let worker_id = assigned.assignment.worker_id;
    let extra: u32 = args.parsed("--extra", 0)?;
    let mut extras = Vec::new();
    for index in 1..=extra {
        match assigner.assign_extra(&layout, index).await {
            Ok(assignment) => extras.push(assignment),
            Err(error) => {
                eprintln!("{error}");
                std::process::exit(REFUSED);
            }
        }
    }
    println!("{worker_id}");
    std::io::stdout().flush()?;
    let fence = assigned.assignment.fence.clone();
    let generator: Arc<dyn UidGenerator> = if extras.is_empty() {
        let mut generator = SnowflakeGenerator::new(layout, worker_id, clock)?;
        if let Some(fence) = fence {
            generator = generator.fenced(fence);
        }
        Arc::new(generator)
    } else {
        let options = CachedOptions {
            boost_power: 0,
            fence,
            ..CachedOptions::waiting(std::time::Duration::from_secs(2))
        };
        let cached = CachedUidGenerator::new(layout, worker_id, clock, options)?;
        for assignment in &extras {
            cached.add_worker(assignment.worker_id, assignment.fence.clone())?;
        }
        Arc::new(cached)
    };
    uidgen_worker::testing::issue_to_file(generator, out.as_ref(), secs, max_count).await?;
    assigned.holder.shutdown();
    for assignment in &extras {
        if let Some(keeper) = &assignment.keeper {
            keeper.release().await?;
        }
    }
    Ok(())
}
