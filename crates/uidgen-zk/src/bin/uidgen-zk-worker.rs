//! A small worker process for the multi-process tests of `uidgen-zk`.
//!
//! `uidgen-zk-worker --connect C --name N --port P --cache FILE --out FILE [--secs S]
//! [--max-count M] [--range LO-HI]` takes a worker id from ZooKeeper for the address
//! `127.0.0.1:P` under the namespace N, prints it on stdout at once, then takes IDs from a
//! `SnowflakeGenerator` on Leaf's layout for S seconds (default 2, at most M IDs), writes
//! them to the out file as little-endian u64s, and stops its holder. A refused start exits
//! with status 3 and the typed error on stderr.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_zk::{ZkOptions, ZooKeeperWorkerIdAssigner};

type AnyResult<T = ()> = Result<T, Box<dyn std::error::Error>>;

/// The exit status of a refused start.
const REFUSED: i32 = 3;

const USAGE: &str = "uidgen-zk-worker --connect C --name N --port P --cache FILE --out FILE \
                     [--secs S] [--max-count M] [--range LO-HI]";

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
    let mut options = ZkOptions::new(
        need("--connect")?,
        need("--name")?,
        "127.0.0.1",
        need("--port")?,
    );
    options.cache_file = need("--cache")?.into();
    if let Some(range) = flag("--range") {
        options.range = Some(range.parse()?);
    }
    let out = need("--out")?;
    let secs: f64 = flag("--secs").map_or(Ok(2.0), |s| s.parse())?;
    let max_count: usize = flag("--max-count").map_or(Ok(500_000), |s| s.parse())?;
    let layout = Layout::leaf()?;
    let assigner = ZooKeeperWorkerIdAssigner::new(options);
    let assigned = match assigner.start(&layout).await {
        Ok(assigned) => assigned,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(REFUSED);
        }
    };
    let worker_id = assigned.assignment.worker_id;
    println!("{worker_id}");
    std::io::stdout().flush()?;
    let mut generator = SnowflakeGenerator::new(layout, worker_id, SystemClock)?;
    if let Some(fence) = assigned.assignment.fence.clone() {
        generator = generator.fenced(fence);
    }
    let generator = Arc::new(generator);
    let until = Instant::now() + Duration::from_secs_f64(secs);
    // Off the runtime: the generator may sleep for the next millisecond, and the holder's
    // reports must keep running meanwhile.
    let bytes = tokio::task::spawn_blocking(move || -> uidgen_core::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        while Instant::now() < until && bytes.len() / 8 < max_count {
            for id in generator.next_ids(1000)? {
                bytes.extend_from_slice(&id.to_le_bytes());
            }
        }
        Ok(bytes)
    })
    .await??;
    std::fs::File::create(out)?.write_all(&bytes)?;
    assigned.holder.shutdown();
    Ok(())
}
