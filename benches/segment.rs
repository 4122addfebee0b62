//! Leaf segment mode: `SegmentService::get(tag)` and `TagHandle::get` at 1 and 2 threads, next
//! to `AtomicU64::fetch_add` (the floor for any shared counter) and `CachedUidGenerator::next_id`,
//! in the same run.
//!
//! The tag lives in a SQLite temporary database with a 10 M step, so database claims are rare
//! and the figures measure the hot path: one atomic add on the current segment.
//!
//! Run: `cargo bench --bench segment -- --warm-up-time 1 --measurement-time 3`.
#![allow(missing_docs, clippy::unwrap_used)] // a bench binary: a panic is the failure report

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod common;

use common::run_shared;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use uidgen::core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
use uidgen::segment::{SegmentOptions, SegmentService};

const STEP: i64 = 10_000_000;

fn segment(c: &mut Criterion) {
    let (runtime, _dir, store) = common::runtime_and_store(1);
    let service = runtime.block_on(async {
        store.upsert_tag("bench", STEP, None).await.unwrap();
        let options = SegmentOptions {
            max_step: 1_000_000_000,
            ..SegmentOptions::default()
        };
        SegmentService::start(store, options, SystemClock)
            .await
            .unwrap()
    });
    let handle = service.tag("bench").unwrap();
    handle.get().unwrap(); // load the first segment outside the measurement
    let counter = AtomicU64::new(0);
    let cached = CachedUidGenerator::new(
        Layout::baidu_default().unwrap(),
        1,
        SystemClock,
        CachedOptions::waiting(Duration::from_secs(5)),
    )
    .unwrap();

    let mut group = c.benchmark_group("segment");
    group.throughput(Throughput::Elements(1));
    for threads in [1_u64, 2] {
        group.bench_with_input(
            BenchmarkId::new("AtomicU64::fetch_add", threads),
            &threads,
            |b, &t| {
                // Relaxed: the baseline measures the bare RMW.
                b.iter_custom(|iters| {
                    run_shared(t, iters, &|| counter.fetch_add(1, Ordering::Relaxed))
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("SegmentService::get", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    run_shared(t, iters, &|| service.get("bench").unwrap().cast_unsigned())
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("TagHandle::get", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    run_shared(t, iters, &|| handle.get().unwrap().cast_unsigned())
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("CachedUidGenerator::next_id", threads),
            &threads,
            |b, &t| b.iter_custom(|iters| run_shared(t, iters, &|| cached.next_id().unwrap())),
        );
    }
    group.finish();
    service.shutdown();
    drop(runtime);
}

criterion_group!(benches, segment);
criterion_main!(benches);
