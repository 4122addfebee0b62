//! uidgen's generators next to peer Rust ID crates, in the same run.
//!
//! Every generator is shared across threads the way a service shares it (one instance behind an
//! `Arc` or a static), and measured at 1 and 2 threads; the cached generator also through its
//! opt-in per-thread batch (`local()`, a handle each thread owns). `AtomicU64::fetch_add` is the
//! physical floor: no ID source that hands out distinct numbers from shared state can beat it.
//!
//! Run: `cargo bench --bench generators`. Figures and caveats are in docs/BENCHMARKS.md.
#![allow(missing_docs, clippy::unwrap_used)] // a bench binary: a panic is the failure report

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::{run_per_thread, run_shared};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use uidgen::core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, Layout, RingBuffer, SnowflakeGenerator,
    SystemClock, UidGenerator,
};

struct SnowdonParams;
impl snowdon::Epoch for SnowdonParams {
    fn millis_since_unix() -> u64 {
        1_288_834_974_657
    }
}
impl snowdon::MachineId for SnowdonParams {
    fn machine_id() -> u64 {
        1
    }
}
type SnowdonGenerator = snowdon::Generator<snowdon::ClassicLayout<SnowdonParams>, SnowdonParams>;

fn generators(c: &mut Criterion) {
    let counter = Arc::new(AtomicU64::new(0));
    // Sustained, not a pre-filled ring: the padding thread refills while the takes are measured,
    // and an empty ring waits for it (the policy a service runs with).
    let cached_gen = Arc::new(
        CachedUidGenerator::new(
            Layout::baidu_default().unwrap(),
            1,
            SystemClock,
            CachedOptions::waiting(Duration::from_secs(5)),
        )
        .unwrap(),
    );
    let default_gen =
        Arc::new(DefaultUidGenerator::new(Layout::snowflake().unwrap(), 1, SystemClock).unwrap());
    let snowflake_gen =
        Arc::new(SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, SystemClock).unwrap());
    let snowflaked_gen = Arc::new(snowflaked::sync::Generator::new(1));
    let snowdon_gen = Arc::new(SnowdonGenerator::default());
    let snowflake_me_gen = Arc::new(
        snowflake_me::Snowflake::builder()
            .machine_id(&|| Ok(1))
            .data_center_id(&|| Ok(1))
            .finalize()
            .unwrap(),
    );
    idgenerator::IdInstance::init(
        idgenerator::IdGeneratorOptions::new()
            .worker_id(1)
            .worker_id_bit_len(6),
    )
    .unwrap();

    #[allow(clippy::type_complexity)]
    let contenders: Vec<(&str, Box<dyn Fn() -> u64 + Sync>)> = vec![
        ("atomic_fetch_add_floor", {
            let c = Arc::clone(&counter);
            // Relaxed: the baseline measures the cheapest possible distinct-number source.
            Box::new(move || c.fetch_add(1, Ordering::Relaxed))
        }),
        ("uidgen_cached", {
            let g = Arc::clone(&cached_gen);
            Box::new(move || g.next_id().unwrap())
        }),
        ("uidgen_default_snowflake_layout", {
            let g = Arc::clone(&default_gen);
            Box::new(move || g.next_id().unwrap())
        }),
        ("uidgen_snowflake", {
            let g = Arc::clone(&snowflake_gen);
            Box::new(move || g.next_id().unwrap())
        }),
        ("snowflaked_sync", {
            let g = Arc::clone(&snowflaked_gen);
            Box::new(move || g.generate::<u64>())
        }),
        ("snowdon", {
            let g = Arc::clone(&snowdon_gen);
            // snowdon refuses (SnowflakeExhaustion) instead of waiting when a millisecond's
            // 4096 sequences are used up; a service would retry, so the bench does.
            Box::new(move || {
                loop {
                    if let Ok(id) = g.generate() {
                        break id.into_inner();
                    }
                    std::hint::spin_loop();
                }
            })
        }),
        ("snowflake_me", {
            let g = Arc::clone(&snowflake_me_gen);
            Box::new(move || *g.next_id().unwrap())
        }),
        ("idgenerator", {
            Box::new(|| idgenerator::IdInstance::next_id().unsigned_abs())
        }),
        ("uuid_now_v7", {
            Box::new(|| {
                let (hi, _) = uuid::Uuid::now_v7().as_u64_pair();
                hi
            })
        }),
    ];

    for threads in [1u64, 2] {
        let mut group = c.benchmark_group(format!("next_id_{threads}_thread"));
        group.throughput(Throughput::Elements(1));
        group.measurement_time(Duration::from_secs(4));
        group.warm_up_time(Duration::from_secs(1));
        for (name, f) in &contenders {
            group.bench_function(BenchmarkId::from_parameter(name), |b| {
                b.iter_custom(|iters| run_shared(threads, iters, f.as_ref()));
            });
        }
        // The opt-in per-thread batch: each measured thread makes its own handle (one claim on
        // the ring per 64 IDs), as a service thread would keep one for its lifetime. The IDs a
        // handle still holds at the end of a sample are dropped (gaps), as with any handle.
        group.bench_function("uidgen_cached_per_thread_batch", |b| {
            b.iter_custom(|iters| {
                run_per_thread(threads, iters, &|| {
                    let mut ids = cached_gen.local();
                    move || ids.next_id().unwrap()
                })
            });
        });
        // The unit handle: each thread claims a whole second (8,192 IDs) under the padding lock
        // and composes its IDs itself, so nothing is shared per ID; every claim borrows a second.
        group.bench_function("uidgen_cached_per_thread_units", |b| {
            b.iter_custom(|iters| {
                run_per_thread(threads, iters, &|| {
                    let mut ids = cached_gen.local_units();
                    move || ids.next_id().unwrap()
                })
            });
        });
        group.finish();
    }

    // Batches, as the HTTP batch route takes them: one claim on the ring per call.
    let mut group = c.benchmark_group("next_ids_1000");
    group.throughput(Throughput::Elements(1000));
    group.measurement_time(Duration::from_secs(4));
    group.warm_up_time(Duration::from_secs(1));
    group.bench_function("uidgen_cached", |b| {
        b.iter(|| black_box(cached_gen.next_ids(1000).unwrap()));
    });
    group.bench_function("uidgen_snowflake", |b| {
        b.iter(|| black_box(snowflake_gen.next_ids(1000).unwrap()));
    });
    group.finish();
}

/// The ring's two halves apart, on one thread, with no padding thread beside them: the take path
/// (what a consumer pays per ID once the ring holds IDs) and the padding path (what the producer
/// pays per ID to put and publish). The sustained `uidgen_cached` figures above are bounded by the
/// slower of the two plus the cache-line hand-off between cores; these say which half it is.
fn ring_paths(c: &mut Criterion) {
    const SIZE: usize = 1 << 16;
    let ring = RingBuffer::new(SIZE, 50).unwrap();
    let mut group = c.benchmark_group("ring_paths");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(4));
    group.warm_up_time(Duration::from_secs(1));
    let mut next = 0u64;
    let mut fill = |ring: &RingBuffer, n: usize| {
        let mut ids = (next..).take(n);
        let put = ring.put_batch(&mut ids);
        next += put as u64;
        put
    };
    // Only the takes are timed; the ring is refilled off the clock between rounds.
    group.bench_function("try_take", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let round = left.min(SIZE as u64);
                fill(&ring, usize::try_from(round).unwrap());
                let start = Instant::now();
                for _ in 0..round {
                    black_box(ring.try_take());
                }
                elapsed += start.elapsed();
                left -= round;
            }
            elapsed
        });
    });
    // Only the puts are timed; the ring is drained off the clock between rounds.
    let mut drained = Vec::with_capacity(SIZE);
    group.bench_function("put_batch", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                let round = usize::try_from(left.min(SIZE as u64)).unwrap();
                let start = Instant::now();
                black_box(fill(&ring, round));
                elapsed += start.elapsed();
                drained.clear();
                ring.take_batch(&mut drained, round);
                left -= round as u64;
            }
            elapsed
        });
    });
    // A batch of 1,000 from a filled ring: one claim, then the range read out.
    group.throughput(Throughput::Elements(1000));
    let mut out = Vec::with_capacity(1000);
    group.bench_function("take_batch_1000", |b| {
        b.iter_custom(|iters| {
            let mut elapsed = Duration::ZERO;
            for _ in 0..iters {
                if ring.len() < 1000 {
                    fill(&ring, SIZE);
                }
                out.clear();
                let start = Instant::now();
                black_box(ring.take_batch(&mut out, 1000));
                elapsed += start.elapsed();
            }
            elapsed
        });
    });
    group.finish();
}

criterion_group!(benches, generators, ring_paths);
criterion_main!(benches);
