//! Specifications of a cached generator padded from several worker ids at once
//! ([`CachedUidGenerator::add_worker`]): each time unit yields one slice of IDs per worker id,
//! so `k` worker ids sustain `k` times one id's unit rate within the same borrowing bound.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{assert_no_duplicates, small_layout, standing_clock};
use uidgen_core::{
    CachedOptions, CachedUidGenerator, FenceRefusal, ManualClock, TimeFence, UidError, UidGenerator,
};

/// IDs per worker id in `ids`.
fn per_worker<G: UidGenerator>(generator: &G, ids: &[u64]) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for id in ids {
        *counts
            .entry(generator.parse(*id).unwrap().parts.worker)
            .or_default() += 1;
    }
    counts
}

/// A fence with a limit a test moves, a floor, and a switch that closes it for good.
#[derive(Debug)]
struct TestFence {
    limit: AtomicU64,
    floor: u64,
    closed: std::sync::atomic::AtomicBool,
}

impl TestFence {
    fn new(limit: u64, floor: u64) -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicU64::new(limit),
            floor,
            closed: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl TimeFence for TestFence {
    fn limit_ms(&self) -> u64 {
        if self.closed.load(Ordering::SeqCst) {
            return 0;
        }
        self.limit.load(Ordering::SeqCst)
    }
    fn extend(&self, _until_ms: u64) -> Result<u64, FenceRefusal> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(FenceRefusal::Closed("lease lost".into()));
        }
        Err(FenceRefusal::NotYet {
            limit_ms: self.limit_ms(),
            reason: "test".into(),
        })
    }
    fn floor_ms(&self) -> u64 {
        self.floor
    }
}

#[test]
fn k_worker_ids_give_k_slices_per_unit_within_the_same_borrowing_bound() {
    // 16 IDs a unit, a clock that stands still, borrowing bounded to 3 units ahead: one worker
    // id can issue the 4 units 1,000 to 1,003 (64 IDs). The ring (one unit) is filled from
    // worker 1 alone before the others come, so each added one gets the 3 units after it.
    let layout = small_layout(4);
    let options = CachedOptions {
        boost_power: 0,
        max_borrow_units: Some(3),
        ..CachedOptions::default()
    };
    for workers in 1..=3u64 {
        let clock = standing_clock(&layout, 1_000);
        let generator = CachedUidGenerator::new(layout.clone(), 1, clock, options.clone()).unwrap();
        for extra in 2..=workers {
            generator.add_worker(extra, None).unwrap();
        }
        let mut ids = Vec::new();
        for _ in 0..1_000 {
            while let Ok(Some(id)) = generator.take_one_ready() {
                ids.push(id);
            }
            generator.ring().try_take(); // asks for padding when below the threshold
            std::thread::sleep(Duration::from_millis(2));
        }
        ids.sort_unstable();
        assert_no_duplicates(&ids);
        let units: std::collections::BTreeSet<u64> = ids
            .iter()
            .map(|id| generator.parse(*id).unwrap().parts.time)
            .collect();
        assert!(
            units.iter().all(|u| (1_000..=1_003).contains(u)),
            "{units:?}"
        );
        let counts = per_worker(&generator, &ids);
        assert_eq!(counts.len() as u64, workers, "{counts:?}");
        assert_eq!(counts[&1], 64, "{counts:?}");
        for extra in 2..=workers {
            assert_eq!(counts[&extra], 48, "{counts:?}");
        }
    }
}

#[test]
fn many_threads_on_worker_ids_added_and_retired_while_taking_never_share_an_id() {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    let layout = small_layout(8);
    let clock = ManualClock::new(layout.epoch_ms() + 5_000_000);
    let options = CachedOptions {
        boost_power: 2,
        ..CachedOptions::waiting(Duration::from_secs(5))
    };
    let generator = Arc::new(CachedUidGenerator::new(layout, 1, clock.clone(), options).unwrap());
    let ring = generator.ring().buffer_size();
    let (taken, done) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicBool::new(false)),
    );
    let barrier = Arc::new(Barrier::new(5));
    let takers: Vec<_> = (0..4)
        .map(|i| {
            let (generator, barrier) = (Arc::clone(&generator), Arc::clone(&barrier));
            let (taken, done) = (Arc::clone(&taken), Arc::clone(&done));
            std::thread::spawn(move || {
                barrier.wait();
                let mut ids = Vec::new();
                let mut units = generator.local_units();
                // SeqCst (both): test flags.
                while !done.load(Ordering::SeqCst) {
                    for _ in 0..64 {
                        ids.push(if i % 2 == 0 {
                            generator.next_id().unwrap()
                        } else {
                            units.next_id().unwrap()
                        });
                    }
                    taken.fetch_add(64, Ordering::SeqCst);
                }
                ids
            })
        })
        .collect();
    barrier.wait();
    let mut retired = Vec::new();
    for round in 0..20u64 {
        clock.advance(1_000);
        generator.add_worker(10 + round, None).unwrap();
        if round >= 2 {
            let until = generator.retire_worker(10 + round - 2).unwrap();
            retired.push((10 + round - 2, until));
        }
        // Each lane lives through two rings' worth of takes, so every one is padded from.
        let from = taken.load(Ordering::SeqCst);
        while taken.load(Ordering::SeqCst) < from + 2 * ring {
            std::thread::yield_now();
        }
    }
    done.store(true, Ordering::SeqCst);
    let mut ids: Vec<u64> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    ids.sort_unstable();
    assert_no_duplicates(&ids);
    let counts = per_worker(generator.as_ref(), &ids);
    assert!(counts.len() > 10, "only {counts:?} padded from");
    // A retired worker id's IDs all end by what retiring it reported.
    for (worker, until) in retired {
        for id in &ids {
            let parsed = generator.parse(*id).unwrap();
            if parsed.parts.worker == worker {
                assert!(
                    parsed.timestamp_ms + 1_000 <= until,
                    "worker {worker} stamped {} past {until}",
                    parsed.timestamp_ms
                );
            }
        }
    }
}

/// A cached generator on worker 1 of a small layout (the fast boost), its standing clock, and
/// the clock's reading at the start.
fn worker_one_generator() -> (CachedUidGenerator<ManualClock>, ManualClock, u64) {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let start = uidgen_core::Clock::now_millis(&clock);
    let options = CachedOptions {
        boost_power: 1,
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 1, clock.clone(), options).unwrap();
    (generator, clock, start)
}

/// `rounds` times: take every ready ID, ask for padding, and move the clock `step_ms` on.
fn take_while_advancing(
    generator: &CachedUidGenerator<ManualClock>,
    clock: &ManualClock,
    rounds: usize,
    step_ms: u64,
) -> Vec<u64> {
    let mut ids = Vec::new();
    for _ in 0..rounds {
        while let Ok(Some(id)) = generator.take_one_ready() {
            ids.push(id);
        }
        generator.ring().try_take();
        clock.advance(step_ms);
        std::thread::sleep(Duration::from_millis(1));
    }
    ids
}

#[test]
fn a_lane_whose_fence_holds_sits_out_and_one_whose_fence_closes_is_dropped() {
    let (generator, clock, start) = worker_one_generator();
    // Worker 2 may stamp only units ending by start + 4 s (the ring's first fill, two units,
    // is worker 1's); worker 3 until far ahead.
    let held = TestFence::new(start + 4_000, 0);
    let closing = TestFence::new(start + 1_000_000, 0);
    generator.add_worker(2, Some(held.clone())).unwrap();
    generator
        .add_worker(3, Some(closing.clone() as Arc<dyn TimeFence>))
        .unwrap();
    let mut ids = take_while_advancing(&generator, &clock, 200, 100);
    for id in &ids {
        let parsed = generator.parse(*id).unwrap();
        if parsed.parts.worker == 2 {
            assert!(parsed.timestamp_ms + 1_000 <= start + 4_000, "{parsed:?}");
        }
    }
    let counts = per_worker(&generator, &ids);
    assert!(
        counts.contains_key(&2) && counts.contains_key(&3),
        "{counts:?}"
    );
    // Worker 3's lease is lost: it is dropped, worker 1 goes on.
    closing.closed.store(true, Ordering::SeqCst);
    let after = take_while_advancing(&generator, &clock, 200, 100);
    assert!(
        !generator.workers().contains(&3),
        "{:?}",
        generator.workers()
    );
    assert!(generator.ring().stop_error().is_none());
    let late = per_worker(&generator, &after[after.len() / 2..]);
    assert!(!late.contains_key(&3), "{late:?}");
    assert!(late.contains_key(&1), "{late:?}");
    ids.extend(after);
    ids.sort_unstable();
    assert_no_duplicates(&ids);
}

#[test]
fn an_added_worker_id_starts_above_its_floor_and_a_duplicate_or_the_last_is_refused() {
    let (generator, clock, start) = worker_one_generator();
    // Worker 2's previous holder stamped up to 5 s from now.
    let floor = start + 5_000;
    generator
        .add_worker(2, Some(TestFence::new(u64::MAX, floor)))
        .unwrap();
    assert!(matches!(
        generator.add_worker(2, None),
        Err(UidError::InvalidOption {
            name: "worker_id",
            ..
        })
    ));
    assert!(generator.add_worker(1 << 40, None).is_err());
    let ids = take_while_advancing(&generator, &clock, 100, 200);
    let of_two: Vec<u64> = ids
        .iter()
        .map(|id| generator.parse(*id).unwrap())
        .filter(|p| p.parts.worker == 2)
        .map(|p| p.timestamp_ms)
        .collect();
    assert!(!of_two.is_empty());
    assert!(of_two.iter().all(|t| t + 1_000 > floor), "{of_two:?}");
    generator.retire_worker(2).unwrap();
    assert!(generator.retire_worker(2).is_err());
    assert!(
        generator.retire_worker(1).is_err(),
        "the last worker id stays"
    );
}
