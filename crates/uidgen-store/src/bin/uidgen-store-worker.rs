//! A small worker process for the multi-process tests of `uidgen-store`.
//!
//! `uidgen-store-worker URL COUNT OUT` connects to URL, takes a disposable worker id, builds a
//! `CachedUidGenerator`, takes COUNT IDs and writes them to OUT as little-endian u64s; it
//! prints the worker id on stdout.
//!
//! `uidgen-store-worker --leased URL COUNT OUT` does the same with a leased worker id from a
//! layout with only two (1 worker bit), releasing the lease before it exits. A process that
//! gets no id exits with status 3 and the typed error on stderr.

use std::io::Write;
use std::time::Duration;

use uidgen_core::{CachedOptions, Layout, SystemClock, UidGenerator};
use uidgen_store::{
    DisposableWorkerIdAssigner, GeneratorBuilder, LeaseOptions, LeasedWorkerIdAssigner, Store,
    StoreError,
};

// Multi-threaded: the lease heartbeat must keep running while IDs are taken.
#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let leased = args.first().is_some_and(|a| a == "--leased");
    if leased {
        args.remove(0);
    }
    let [url, count, out] = args.as_slice() else {
        return Err("usage: uidgen-store-worker [--leased] URL COUNT OUT".into());
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
        {
            Ok(built) => built,
            Err(
                error @ (StoreError::NoFreeWorkerId { .. }
                | StoreError::LeaseContention { .. }
                | StoreError::ClockBehindLastIssued { .. }),
            ) => {
                eprintln!("{error}");
                std::process::exit(3);
            }
            Err(error) => return Err(error.into()),
        }
    } else {
        GeneratorBuilder::new(Layout::baidu_default()?)
            .assigner(DisposableWorkerIdAssigner::new(store.clone()))
            .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(10)))
            .await?
    };
    let generator = std::sync::Arc::clone(&built.generator);
    // Off the runtime: a leased generator's batch may wait for the clock (bounded borrowing).
    let bytes = tokio::task::spawn_blocking(move || -> uidgen_core::Result<Vec<u8>> {
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
    .await??;
    std::fs::File::create(out)?.write_all(&bytes)?;
    if let Some(lease) = &built.assignment.lease {
        lease.release().await?;
    }
    store.close().await;
    println!("{}", built.worker_id());
    Ok(())
}
