//! A small worker process for the multi-process tests of `uidgen-etcd`.
//!
//! `uidgen-etcd-worker --endpoint URL --prefix P --holder H --out FILE [--secs S]
//! [--max-count M] [--range LO-HI] [--ttl-ms T] [--reservation-ms R] [--start-wait-ms W] [--start-at-ms T]`
//! waits until the instant T (ms since the Unix epoch; claims race), claims a worker id from etcd, prints it on stdout at once, then takes IDs from a
//! `SnowflakeGenerator` on Leaf's layout for S seconds (default 2, at most M IDs), appending
//! them to the out file as little-endian u64s batch by batch (so a process killed midway leaves
//! what it issued), and releases its id. A refused start exits with status 3 and the typed
//! error on stderr.

use std::io::Write;
use std::sync::Arc;

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_etcd::{EtcdOptions, EtcdWorkerIdAssigner};
use uidgen_worker::testing::WorkerArgs;

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit status of a refused start.
const REFUSED: i32 = 3;

const USAGE: &str = "uidgen-etcd-worker --endpoint URL --prefix P --holder H --out FILE \
                     [--secs S] [--max-count M] [--range LO-HI] [--ttl-ms T] \
                     [--reservation-ms R] [--start-wait-ms W] [--start-at-ms T]";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> AnyResult {
    let args = WorkerArgs::new(std::env::args().skip(1), USAGE);
    let mut options = EtcdOptions::new(
        [args.need("--endpoint")?],
        args.need("--prefix")?,
        args.need("--holder")?,
    );
    if let Some(range) = args.flag("--range") {
        options.range = Some(range.parse()?);
    }
    if let Some(ttl) = args.millis("--ttl-ms")? {
        options.lease_ttl = ttl;
    }
    if let Some(reservation) = args.millis("--reservation-ms")? {
        options.reservation = reservation;
    }
    if let Some(wait) = args.millis("--start-wait-ms")? {
        options.max_start_wait = wait;
    }
    let out = args.need("--out")?;
    let secs: f64 = args.parsed("--secs", 2.0)?;
    let max_count: usize = args.parsed("--max-count", 500_000)?;
    let layout = Layout::leaf()?;
    // Racing claims: every process of a test waits for the same instant before claiming.
    let start_at: u64 = args.parsed("--start-at-ms", 0)?;
    let wait = start_at.saturating_sub(uidgen_core::Clock::now_millis(&SystemClock));
    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
    let assigned = match EtcdWorkerIdAssigner::new(options).start(&layout).await {
        Ok(assigned) => assigned,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(REFUSED);
        }
    };
    let worker_id = assigned.assignment.worker_id;
    println!("{worker_id} {}", assigned.holder.floor_ms());
    std::io::stdout().flush()?;
    let mut generator = SnowflakeGenerator::new(layout, worker_id, SystemClock)?;
    if let Some(fence) = assigned.assignment.fence.clone() {
        generator = generator.fenced(fence);
    }
    let generator: Arc<dyn UidGenerator> = Arc::new(generator);
    uidgen_worker::testing::issue_to_file(generator, out.as_ref(), secs, max_count).await?;
    assigned.holder.release().await?;
    Ok(())
}
