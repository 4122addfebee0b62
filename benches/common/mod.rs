//! Helpers shared by the benchmark binaries: each `harness = false` bench is its own crate and
//! declares `mod common;`; Cargo does not take `benches/common/mod.rs` for a bench of its own.
// Each bench is a crate of its own and uses only part of this module.
#![allow(dead_code)]

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Run `iters` calls of `f` split across `threads` threads and return the wall time of the
/// slowest thread, so the figure is the throughput of the shared generator, not of one thread.
pub fn run_shared(threads: u64, iters: u64, f: &(dyn Fn() -> u64 + Sync)) -> Duration {
    run_per_thread(threads, iters, &|| f)
}

/// Like [`run_shared`], but each thread first makes its own source with `make` (a per-thread
/// handle on a shared generator), outside the timed part, then calls it its share of `iters`
/// times.
pub fn run_per_thread<F, M>(threads: u64, iters: u64, make: &M) -> Duration
where
    M: Fn() -> F + Sync,
    F: FnMut() -> u64,
{
    let barrier = std::sync::Barrier::new(usize::try_from(threads).unwrap());
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                // Spread the remainder so exactly `iters` calls are made.
                let n = iters / threads + u64::from(t < iters % threads);
                s.spawn(move || {
                    let mut f = make();
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..n {
                        black_box(f());
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

/// A tokio runtime of `workers` threads and a store in a new SQLite file (kept while the
/// returned directory lives), for the benches that need a database.
pub fn runtime_and_store(
    workers: usize,
) -> (
    tokio::runtime::Runtime,
    tempfile::TempDir,
    uidgen_store::Store,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let store = runtime
        .block_on(uidgen_store::Store::connect(&url))
        .unwrap();
    (runtime, dir, store)
}
