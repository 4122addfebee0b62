//! Exhaustive interleavings of the cached generator's unit claims: a [`UnitIds`] handle
//! claiming whole time units beside a padding run and a plain take, on the real
//! `CachedUidGenerator` (its padding run driven from a model thread, since loom cannot run the
//! real padding thread).
#![cfg(uidgen_loom)]
#![allow(clippy::unwrap_used)]

use loom::sync::Arc;
use loom::thread;
use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, ManualClock, UidGenerator};

/// Baidu's shape in seconds with a one-bit sequence: two IDs a unit, and with no boost a
/// two-slot ring, so every third ID needs a new unit.
fn generator() -> CachedUidGenerator<ManualClock> {
    let layout = Layout::baidu_bits(28, 34, 1, "2026-01-01").unwrap();
    let clock = ManualClock::new(layout.epoch_ms() + 1_000_000);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::default()
    };
    CachedUidGenerator::without_padding_thread(layout, 1, clock, options).unwrap()
}

/// The two claimants every model runs, spawned in this order: a [`UnitIds`] handle taking
/// three IDs (two units: the second claim may race the padding run's), and a padding run with
/// a plain take of whatever it put (nothing, if it found the lock held by the handle).
///
/// [`UnitIds`]: uidgen_core::UnitIds
fn claimants(
    generator: &Arc<CachedUidGenerator<ManualClock>>,
) -> (thread::JoinHandle<Vec<u64>>, thread::JoinHandle<Vec<u64>>) {
    let handle = {
        let generator = Arc::clone(generator);
        thread::spawn(move || {
            let mut ids = generator.local_units();
            (0..3).map(|_| ids.next_id().unwrap()).collect::<Vec<u64>>()
        })
    };
    let padder = {
        let generator = Arc::clone(generator);
        thread::spawn(move || {
            generator.pad_now().unwrap();
            let mut ids = Vec::new();
            while let Ok(Some(id)) = generator.take_one_ready() {
                ids.push(id);
            }
            ids
        })
    };
    (handle, padder)
}

/// No ID in `taken` twice.
fn assert_distinct(taken: &[u64]) {
    let mut sorted = taken.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), taken.len(), "an ID twice: {taken:?}");
}

#[test]
fn a_handles_claims_and_a_padding_run_never_take_the_same_unit() {
    loom::model(|| {
        let generator = Arc::new(generator());
        // Empty the ring, so the padding run below has a unit to claim.
        let mut taken: Vec<u64> = (0..2).map(|_| generator.next_id().unwrap()).collect();
        let (handle, padder) = claimants(&generator);
        taken.extend(handle.join().unwrap());
        taken.extend(padder.join().unwrap());
        assert_distinct(&taken);
        // Every ID lies at or below the last unit claimed: what issued_until_ms reports.
        let last = generator.last_second();
        for &id in &taken {
            assert!(
                generator.parse(id).unwrap().parts.time <= last,
                "{id} past {last}"
            );
        }
    });
}

#[test]
fn slices_of_two_worker_ids_go_to_one_claimant_each_and_a_retired_one_stops_at_its_mark() {
    loom::model(|| {
        let generator = Arc::new(generator());
        generator.add_worker(2, None).unwrap();
        // Empty the ring, so the padding run below has slices to claim.
        let mut taken: Vec<u64> = (0..2).map(|_| generator.next_id().unwrap()).collect();
        let (handle, padder) = claimants(&generator);
        // Retired while the others claim: nothing of worker 2 past what it reports.
        let until = generator.retire_worker(2).unwrap();
        taken.extend(handle.join().unwrap());
        taken.extend(padder.join().unwrap());
        assert_distinct(&taken);
        for &id in &taken {
            let parsed = generator.parse(id).unwrap();
            if parsed.parts.worker == 2 {
                assert!(parsed.timestamp_ms + 1_000 <= until, "{id} past {until}");
            }
        }
    });
}
