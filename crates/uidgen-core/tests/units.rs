//! Specifications of the per-thread unit handle ([`UnitIds`]): whole time units claimed under
//! the cached generator's padding lock, beside the padding run and plain takes.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::{
    assert_exhausted_after_16_units, assert_no_duplicates, assert_worker,
    cached_with_two_seconds_left, small_layout, standing_clock, take_until_error,
};
use uidgen_core::ring::policy;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, ManualClock, SystemClock, UidError, UidGenerator, UnitIds,
};
use uidgen_testkit::eventually;

/// A 16-ID-a-second generator on a clock that stands still: its ring is filled once, with
/// seconds 1,000 to 1,007 (boost 3).
fn standing_generator(worker: u64, options: CachedOptions) -> CachedUidGenerator<ManualClock> {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    CachedUidGenerator::new(layout, worker, clock, options).unwrap()
}

fn time_of<G: UidGenerator>(generator: &G, id: u64) -> u64 {
    generator.parse(id).unwrap().parts.time
}

fn assert_increasing(ids: &[u64]) {
    if let Some(w) = ids.windows(2).find(|w| w[0] >= w[1]) {
        panic!("a handle went backwards: {} then {}", w[0], w[1]);
    }
}

/// Every ID's unit ends within what the generator says it may have issued, the mark a successor
/// on a reused worker id waits out.
fn assert_within_issued<G: UidGenerator>(generator: &G, ids: &[u64]) {
    let issued_until = generator.issued_until_ms().unwrap();
    for &id in ids {
        let stamped = generator.parse(id).unwrap().timestamp_ms;
        assert!(
            stamped < issued_until,
            "id {id} stamped at {stamped} ms, past issued_until_ms {issued_until}"
        );
    }
}

#[test]
fn unit_handles_beside_plain_takes_and_the_padding_run_never_share_an_id() {
    // Four IDs a unit and a 32-slot ring: handles claim a unit every four IDs, so their claims
    // and the padding runs fight over the lock all the time. A padding run that finds the lock
    // held must look again (`Padded::Busy`): the takes that asked for it will not ask again,
    // and without the retry the plain takers below wait out their 10 s and fail.
    const HANDLES: usize = 3;
    const TAKERS: usize = 3;
    const PER_THREAD: usize = 100_000;
    let generator = CachedUidGenerator::new(
        small_layout(2),
        9,
        SystemClock,
        CachedOptions::waiting(Duration::from_secs(10)),
    )
    .unwrap();
    let barrier = Barrier::new(HANDLES + TAKERS);
    let (from_handles, from_takes): (Vec<Vec<u64>>, Vec<Vec<u64>>) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..HANDLES)
            .map(|_| {
                s.spawn(|| {
                    let mut ids = generator.local_units();
                    barrier.wait();
                    (0..PER_THREAD)
                        .map(|_| ids.next_id().unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        let takers: Vec<_> = (0..TAKERS)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    (0..PER_THREAD)
                        .map(|_| generator.next_id().unwrap())
                        .collect::<Vec<u64>>()
                })
            })
            .collect();
        (
            handles.into_iter().map(|t| t.join().unwrap()).collect(),
            takers.into_iter().map(|t| t.join().unwrap()).collect(),
        )
    });
    for ids in &from_handles {
        // Borrowing is unbounded here, so a handle never falls back to the ring.
        assert_increasing(ids);
    }
    let mut all: Vec<u64> = from_handles
        .into_iter()
        .chain(from_takes)
        .flatten()
        .collect();
    all.sort_unstable();
    assert_eq!(all.len(), (HANDLES + TAKERS) * PER_THREAD);
    assert_no_duplicates(&all);
    assert_worker(&generator, &all, 9);
    assert_within_issued(&generator, &all);
}

#[test]
fn a_handle_hands_out_a_whole_unit_in_sequence_order_then_claims_the_next() {
    let generator = standing_generator(5, CachedOptions::default());
    assert_eq!(
        generator.last_second(),
        1_007,
        "the ring holds seconds 1,000 to 1,007"
    );
    let mut ids = generator.local_units();
    let unit: Vec<u64> = (0..16).map(|_| ids.next_id().unwrap()).collect();
    for (sequence, &id) in unit.iter().enumerate() {
        let parts = generator.parse(id).unwrap().parts;
        assert_eq!(
            (parts.time, parts.worker, parts.sequence),
            (1_008, 5, sequence as u64)
        );
    }
    assert_eq!(ids.held(), 0);
    assert_eq!(
        generator.last_second(),
        1_008,
        "the claim raised last_second"
    );
    let next = ids.next_id().unwrap();
    assert_eq!(time_of(&generator, next), 1_009);
    assert_eq!(ids.held(), 15);
    // The ring is untouched: it still hands out second 1,000 first.
    assert_eq!(time_of(&generator, generator.next_id().unwrap()), 1_000);
    assert_within_issued(&generator, &unit);
}

#[test]
fn a_dropped_handle_leaves_the_rest_of_its_unit_unused() {
    let generator = standing_generator(2, CachedOptions::default());
    let id = {
        let mut first: UnitIds<'_> = generator.local_units();
        first.next_id().unwrap()
    }; // the handle ends here, holding 15 IDs of its unit
    let mut second = generator.local_units();
    let next = second.next_id().unwrap();
    assert_eq!(time_of(&generator, next), time_of(&generator, id) + 1);
    assert_eq!(generator.parse(next).unwrap().parts.sequence, 0);
}

#[test]
fn the_padding_run_after_a_handles_claims_pads_later_units_only() {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let generator = CachedUidGenerator::new(layout, 6, clock, CachedOptions::default()).unwrap();
    let mut handle = generator.local_units();
    let mut ids: Vec<u64> = (0..48).map(|_| handle.next_id().unwrap()).collect(); // 1,008-1,010
    // Drain the ring: padding refills it from the unit after the handle's last claim.
    while ids.len() < 48 + 200 {
        match generator.next_id() {
            Ok(id) => ids.push(id),
            Err(UidError::RingEmpty(_)) => std::thread::yield_now(),
            Err(error) => panic!("{error}"),
        }
    }
    let padded_later: Vec<u64> = ids[48 + 128..]
        .iter()
        .map(|&id| time_of(&generator, id))
        .collect();
    assert!(padded_later.iter().all(|&t| t >= 1_011), "{padded_later:?}");
    ids.sort_unstable();
    assert_no_duplicates(&ids);
}

#[test]
fn a_borrowing_bound_sends_the_handle_to_the_ring_and_the_clock_frees_it() {
    // No borrowing: the ring holds second 1,000 only, and no later unit may be claimed before
    // the clock reaches it.
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let options = CachedOptions {
        max_borrow_units: Some(0),
        reject_take: Some(policy::fail()),
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 3, clock.clone(), options).unwrap();
    let mut handle = generator.local_units();
    let mut ids: Vec<u64> = (0..16).map(|_| handle.next_id().unwrap()).collect();
    assert!(
        ids.iter().all(|&id| time_of(&generator, id) == 1_000),
        "from the ring"
    );
    let error = handle.next_id().unwrap_err();
    assert!(matches!(error, UidError::RingEmpty(_)), "{error:?}");
    clock.advance(1_000);
    // Second 1,001 goes to the handle's claim or to the padding run, whichever takes the lock
    // first; the handle gets it either way.
    eventually("second 1,001", || {
        handle.next_id().map(|id| ids.push(id)).is_ok()
    });
    assert_eq!(time_of(&generator, ids[16]), 1_001);
    ids.sort_unstable();
    assert_no_duplicates(&ids);
}

#[test]
fn a_stopped_ring_makes_the_handle_drop_the_rest_of_its_unit() {
    let generator = standing_generator(4, CachedOptions::default());
    let mut handle = generator.local_units();
    handle.next_id().unwrap();
    assert_eq!(handle.held(), 15);
    generator.ring().stop("worker lease lost");
    let stopped = UidError::GeneratorStopped("worker lease lost".into());
    assert_eq!(handle.next_id(), Err(stopped.clone()));
    assert_eq!(handle.held(), 0, "the unit's rest is dropped");
    assert_eq!(handle.next_id(), Err(stopped.clone()), "stopped for good");
    assert_eq!(generator.local_units().next_id(), Err(stopped));
}

#[test]
fn exhausted_timestamp_bits_end_a_handle_with_the_typed_error() {
    // Seconds 14 and 15 are all the time field has; the ring holds 14, so a handle claims 15.
    let generator = cached_with_two_seconds_left();
    let mut handle = generator.local_units();
    let (ids, error) = take_until_error(|| handle.next_id());
    assert_exhausted_after_16_units(&error);
    assert_eq!(ids.len(), 8192, "the whole of second 15");
    assert_increasing(&ids);
    assert!(ids.iter().all(|&id| id >> 63 == 0));
    // The ring was stopped with the exhaustion: takes drain second 14, then report it.
    let (drained, error) = take_until_error(|| generator.next_id());
    assert_eq!(drained.len(), 8192);
    assert_exhausted_after_16_units(&error);
}
