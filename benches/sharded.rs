//! The sharded mode: `ShardedService::get` and `get_batch` against the real Redis, one caller
//! and 16 concurrent callers, so a change to the mode's code can be compared before and after
//! in one run (issue 30 asks that it not be made slower).
//!
//! Every get is a Lua script on Redis (a pop checked against the list's mark), so the figures
//! are round trips to a local Redis, not the cost of the mode's own code alone; what a
//! comparison can show is a change in the work around that round trip. The app's lists live
//! under a key prefix of this process's own, and its `id_alloc` rows in a SQLite temporary
//! database with a large step, so database claims are rare.
//!
//! Needs Redis at `UIDGEN_TEST_REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! Run: `cargo bench --bench sharded -- --warm-up-time 1 --measurement-time 3`.
#![allow(missing_docs, clippy::unwrap_used)] // a bench binary: a panic is the failure report

use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use uidgen_sharded::{ShardedOptions, ShardedService};
use uidgen_store::AppSpec;

const APP: u8 = 7;

fn sharded(c: &mut Criterion) {
    let redis_url = std::env::var("UIDGEN_TEST_REDIS_URL")
        .unwrap_or_else(|_| "redis://127.0.0.1:6379".to_owned());
    let (runtime, _dir, store) = common::runtime_and_store(2);
    let service = runtime.block_on(async {
        let options = ShardedOptions {
            redis_url: redis_url.clone(),
            key_prefix: format!("uidgen-bench-{}:", std::process::id()),
            ..ShardedOptions::default()
        };
        let service = ShardedService::start(store, options)
            .await
            .unwrap_or_else(|e| panic!("Redis at {redis_url} (UIDGEN_TEST_REDIS_URL): {e}"));
        service
            .upsert_app(&AppSpec {
                step: 100_000,
                ..AppSpec::new(APP, "bench")
            })
            .await
            .unwrap();
        // Fill the shard's list outside the measurement.
        service.get(APP, "alice").await.unwrap();
        service
    });

    let mut group = c.benchmark_group("sharded");
    for (callers, batch) in [(1_u64, 1_usize), (16, 1), (1, 100)] {
        group.throughput(Throughput::Elements(batch as u64));
        let name = if batch == 1 { "get" } else { "get_batch_100" };
        group.bench_with_input(
            BenchmarkId::new(name, format!("{callers}_callers")),
            &callers,
            |b, &callers| {
                b.iter_custom(|iters| {
                    runtime.block_on(run(Arc::clone(&service), callers, iters, batch))
                });
            },
        );
    }
    group.finish();
    service.shutdown();
    drop(runtime);
}

/// `iters` calls split across `callers` tasks; the wall time of them all.
async fn run(service: Arc<ShardedService>, callers: u64, iters: u64, batch: usize) -> Duration {
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|t| {
            let service = Arc::clone(&service);
            let n = iters / callers + u64::from(t < iters % callers);
            tokio::spawn(async move {
                for _ in 0..n {
                    if batch == 1 {
                        std::hint::black_box(service.get(APP, "alice").await.unwrap());
                    } else {
                        std::hint::black_box(service.get_batch(APP, "alice", batch).await.unwrap());
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    start.elapsed()
}

criterion_group!(benches, sharded);
criterion_main!(benches);
