//! Specifications of the per-thread batch ([`LocalIds`]) over the cached generator's ring.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::{
    assert_exhausted_after_16_units, assert_no_duplicates, assert_worker,
    cached_with_two_seconds_left, small_layout, standing_clock, take_until_error,
};
use uidgen_core::local::{DEFAULT_LOCAL_BATCH, MAX_LOCAL_BATCH};
use uidgen_core::ring::policy;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, Layout, LocalIds, ManualClock, SystemClock, UidError,
    UidGenerator,
};
use uidgen_testkit::eventually;

/// Baidu's layout on a clock that stands still: the ring is filled once, at construction.
fn standing_generator(worker: u64) -> CachedUidGenerator<ManualClock> {
    let layout = Layout::baidu_default().unwrap();
    let clock = standing_clock(&layout, 1_000);
    CachedUidGenerator::new(layout, worker, clock, CachedOptions::default()).unwrap()
}

/// A 16-ID-a-second generator that may not pad past the clock's unit: its ring holds the 16 IDs
/// of one second until the clock moves; `reject_take` is what an empty ring does.
fn one_second_of_ids(reject_take: CachedOptions) -> (CachedUidGenerator<ManualClock>, ManualClock) {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let options = CachedOptions {
        max_borrow_units: Some(0),
        ..reject_take
    };
    let generator = CachedUidGenerator::new(layout, 3, clock.clone(), options).unwrap();
    (generator, clock)
}

fn assert_increasing(ids: &[u64]) {
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!("a handle went backwards: {} then {}", w[0], w[1]);
    }
}

#[test]
fn handles_on_four_threads_hand_out_each_id_once_and_in_order_per_handle() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 250_000;
    let generator = CachedUidGenerator::new(
        Layout::baidu_default().unwrap(),
        11,
        SystemClock,
        CachedOptions::waiting(Duration::from_secs(10)),
    )
    .unwrap();
    let barrier = Barrier::new(THREADS);
    let taken: Vec<(Vec<u64>, usize)> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut local = generator.local();
                    barrier.wait();
                    let ids: Vec<u64> = (0..PER_THREAD).map(|_| local.next_id().unwrap()).collect();
                    (ids, local.held())
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    for (ids, _) in &taken {
        assert_increasing(ids);
    }
    let held: usize = taken.iter().map(|(_, held)| held).sum();
    let mut all: Vec<u64> = taken.into_iter().flat_map(|(ids, _)| ids).collect();
    all.sort_unstable();
    assert_eq!(all.len(), THREADS * PER_THREAD);
    assert_no_duplicates(&all);
    assert_worker(&generator, &all, 11);
    // Every position claimed was handed out or is still held: no claim read twice or lost.
    let claimed = usize::try_from(generator.ring().cursor() + 1).unwrap();
    assert_eq!(claimed, all.len() + held);
}

#[test]
fn two_handles_give_up_the_global_order_but_never_share_an_id() {
    let generator = standing_generator(1);
    let mut a = generator.local();
    let mut b = generator.local();
    let a1 = a.next_id().unwrap(); // a claims the first 64
    let b1 = b.next_id().unwrap(); // b the next 64
    let a2 = a.next_id().unwrap();
    // Handed out after b1, yet older: the order across handles is the order of claims, not of
    // calls.
    assert!(a1 < a2 && a2 < b1, "{a1} {a2} {b1}");
    assert_eq!(
        b1 - a1,
        64,
        "a batch is one run of the ring (sequence in the low bits)"
    );
    assert_eq!((a.held(), b.held()), (62, 63));
}

#[test]
fn a_dropped_handle_leaves_a_gap_and_never_a_repeat() {
    let generator = standing_generator(2);
    let mut local = generator.local_with_batch(8).unwrap();
    let first = local.next_id().unwrap();
    assert_eq!(local.held(), 7);
    drop(local);
    // The seven held IDs are gone for good: the ring goes on after the batch.
    assert_eq!(generator.next_id().unwrap(), first + 8);
}

#[test]
fn an_empty_ring_with_the_fail_policy_is_a_typed_error_and_the_handle_goes_on_after_padding() {
    let (generator, clock) = one_second_of_ids(CachedOptions {
        reject_take: Some(policy::fail()),
        ..CachedOptions::default()
    });
    let mut local = generator.local();
    let mut ids: Vec<u64> = (0..16).map(|_| local.next_id().unwrap()).collect();
    let error = local.next_id().unwrap_err();
    assert!(matches!(error, UidError::RingEmpty(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("ring buffer is empty: padding has not caught up"),
        "{error}"
    );
    clock.advance(1_000);
    eventually("padding of the next second", || {
        local.next_id().map(|id| ids.push(id)).is_ok()
    });
    assert_increasing(&ids);
    assert_eq!(generator.parse(ids[16]).unwrap().parts.time, 1_001);
}

#[test]
fn an_empty_ring_with_the_wait_policy_makes_the_handle_wait_for_padding() {
    let (generator, clock) = one_second_of_ids(CachedOptions::waiting(Duration::from_secs(30)));
    let mut local = generator.local();
    let before: Vec<u64> = (0..16).map(|_| local.next_id().unwrap()).collect();
    let after = std::thread::scope(|s| {
        s.spawn(|| {
            // Let the handle find the ring empty and wait (correct however the race goes).
            std::thread::sleep(Duration::from_millis(20));
            clock.advance(1_000);
        });
        local.next_id().unwrap()
    });
    assert!(after > before[15]);
    assert_eq!(generator.parse(after).unwrap().parts.time, 1_001);
}

#[test]
fn a_stopped_ring_makes_the_handle_refuse_even_the_ids_it_holds() {
    let generator = standing_generator(4);
    let mut local = generator.local_with_batch(8).unwrap();
    let first = local.next_id().unwrap();
    generator.ring().stop("worker lease lost");
    let stopped = UidError::GeneratorStopped("worker lease lost".into());
    assert_eq!(local.next_id(), Err(stopped.clone()));
    assert_eq!(local.held(), 0, "the held IDs are dropped");
    assert_eq!(local.next_id(), Err(stopped.clone()), "stopped for good");
    // The generator itself still drains what the ring holds (inside the fence), and the handle's
    // dropped IDs are not among them.
    assert_eq!(generator.next_id().unwrap(), first + 8);
    // A handle made after the stop refuses from its first call.
    assert_eq!(generator.local().next_id(), Err(stopped));
}

#[test]
fn exhausted_timestamp_bits_end_a_handle_with_the_typed_error() {
    let generator = cached_with_two_seconds_left();
    let mut local = generator.local();
    let (ids, error) = take_until_error(|| local.next_id());
    assert_exhausted_after_16_units(&error);
    assert_increasing(&ids);
    // Up to every ID of both seconds, never one past the time field (the sign bit stays clear).
    assert!(ids.len() <= 2 * 8192);
    assert!(ids.iter().all(|&id| id >> 63 == 0));
}

#[test]
fn batch_sizes_outside_one_to_the_smaller_of_the_cap_and_the_ring_are_refused() {
    let layout = small_layout(4); // 16 IDs a second, boost 3: a 128-slot ring
    let clock = standing_clock(&layout, 1_000);
    let generator = CachedUidGenerator::new(layout, 1, clock, CachedOptions::default()).unwrap();
    assert_eq!(generator.ring().buffer_size(), 128);
    for batch in [0, 129, MAX_LOCAL_BATCH + 1, usize::MAX] {
        let error = generator.local_with_batch(batch).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "invalid option `batch`: {batch} must be from 1 to 128 (the smaller of 4096 and \
                 the ring's 128 slots)"
            )
        );
    }
    assert_eq!(generator.local_with_batch(128).unwrap().batch(), 128);
    assert_eq!(generator.local().batch(), DEFAULT_LOCAL_BATCH);
    let big = standing_generator(5);
    assert!(big.local_with_batch(MAX_LOCAL_BATCH).is_ok());
    assert!(big.local_with_batch(MAX_LOCAL_BATCH + 1).is_err());
}

#[test]
fn the_default_batch_shrinks_to_a_ring_smaller_than_it() {
    let layout = small_layout(1); // 2 IDs a second, no boost: a 2-slot ring
    let clock = standing_clock(&layout, 1_000);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 1, clock, options).unwrap();
    let mut local: LocalIds<'_> = generator.local();
    assert_eq!(local.batch(), 2);
    assert!(local.next_id().is_ok());
}
