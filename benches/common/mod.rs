//! Helpers shared by the benchmark binaries: each `harness = false` bench is its own crate and
//! declares `mod common;`; Cargo does not take `benches/common/mod.rs` for a bench of its own.

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
