//! A small worker process for the multi-process tests of `uidgen-etcd`.
//!
//! `uidgen-etcd-worker --endpoint URL --prefix P --holder H --out FILE [--secs S]
//! [--max-count M] [--range LO-HI] [--ttl-ms T] [--reservation-ms R] [--start-wait-ms W]`
//! claims a worker id from etcd, prints it on stdout at once, then takes IDs from a
//! `SnowflakeGenerator` on Leaf's layout for S seconds (default 2, at most M IDs), appending
//! them to the out file as little-endian u64s batch by batch (so a process killed midway leaves
//! what it issued), and releases its id. A refused start exits with status 3 and the typed
//! error on stderr.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_etcd::{EtcdOptions, EtcdWorkerIdAssigner};

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit status of a refused start.
const REFUSED: i32 = 3;

const USAGE: &str = "uidgen-etcd-worker --endpoint URL --prefix P --holder H --out FILE \
                     [--secs S] [--max-count M] [--range LO-HI] [--ttl-ms T] \
                     [--reservation-ms R] [--start-wait-ms W]";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> AnyResult {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let need = |name: &str| flag(name).ok_or_else(|| format!("{name} is required; usage: {USAGE}"));
    let mut options = EtcdOptions::new([need("--endpoint")?], need("--prefix")?, need("--holder")?);
    if let Some(range) = flag("--range") {
        options.range = Some(range.parse()?);
    }
    let millis = |name: &str| -> AnyResult<Option<Duration>> {
        Ok(match flag(name) {
            Some(ms) => Some(Duration::from_millis(ms.parse()?)),
            None => None,
        })
    };
    if let Some(ttl) = millis("--ttl-ms")? {
        options.lease_ttl = ttl;
    }
    if let Some(reservation) = millis("--reservation-ms")? {
        options.reservation = reservation;
    }
    if let Some(wait) = millis("--start-wait-ms")? {
        options.max_start_wait = wait;
    }
    let out = need("--out")?;
    let secs: f64 = flag("--secs").map_or(Ok(2.0), |s| s.parse())?;
    let max_count: usize = flag("--max-count").map_or(Ok(500_000), |s| s.parse())?;
    let layout = Layout::leaf()?;
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
    uidgen_store::testing::issue_to_file(generator, out.as_ref(), secs, max_count).await?;
    assigned.holder.release().await?;
    Ok(())
}
