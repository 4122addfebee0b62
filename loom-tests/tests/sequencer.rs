//! Exhaustive interleavings of the real sequencer behind `DefaultUidGenerator` and
//! `SnowflakeGenerator`: one atomic word of `(time << seq_bits) | sequence`, advanced by
//! compare-and-swap, read beside a clock. The clock is `ManualClock`, whose atomics also come
//! through uidgen-core's `sync` door, so loom orders the clock reads against the state too.
//!
//! The layouts have a one-bit sequence (two IDs per time unit), so two threads taking two IDs
//! each always use a unit up and must wait for the next one: the overflow path runs in every
//! model. The property is the one everything else rests on: no ID is returned twice.
#![cfg(uidgen_loom)]
#![allow(clippy::unwrap_used)]

use loom::sync::Arc;
use loom::thread;
use uidgen_core::{
    Clock, DefaultUidGenerator, FieldKind, Layout, ManualClock, SnowflakeGenerator, TimeUnit,
    UidError, UidGenerator,
};

/// 2026-01-01T00:00:00Z, the epoch of the models' layouts.
const EPOCH_MS: u64 = 1_767_225_600_000;

/// Baidu's shape in seconds with a one-bit sequence.
fn seconds_layout() -> Layout {
    Layout::baidu_bits(52, 10, 1, EPOCH_MS).unwrap()
}

/// Snowflake's shape in milliseconds with a one-bit sequence.
fn millis_layout() -> Layout {
    Layout::new(
        "tiny-snowflake",
        &[
            (FieldKind::Sign, 1),
            (FieldKind::Time, 41),
            (FieldKind::Worker, 21),
            (FieldKind::Sequence, 1),
        ],
        TimeUnit::Millis,
        EPOCH_MS,
    )
    .unwrap()
}

/// Runs `calls` issues of `generator` on a new model thread; every result is kept.
fn issuer<G: UidGenerator + Send + Sync + 'static>(
    generator: &Arc<G>,
    calls: usize,
) -> thread::JoinHandle<Vec<Result<u64, UidError>>> {
    let generator = Arc::clone(generator);
    thread::spawn(move || (0..calls).map(|_| generator.next_id()).collect())
}

/// No ID twice among the successes; every failure is a refused backward clock.
fn check(results: impl IntoIterator<Item = Result<u64, UidError>>) -> Vec<u64> {
    let mut ids = Vec::new();
    for result in results {
        match result {
            Ok(id) => ids.push(id),
            Err(UidError::ClockMovedBackwards { .. }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len(), "an ID was issued twice: {ids:?}");
    ids
}

#[test]
fn two_threads_through_a_sequence_overflow_never_share_an_id() {
    loom::model(|| {
        // Auto-advancing: waiting for the next second moves the clock there.
        let clock = ManualClock::auto_advancing(EPOCH_MS + 5_000);
        let generator = Arc::new(DefaultUidGenerator::new(seconds_layout(), 3, clock).unwrap());
        let threads = [issuer(&generator, 2), issuer(&generator, 2)];
        let results: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        // Baidu's clock never moves back here, so all four are issued, over at least two units.
        let ids = check(results);
        assert_eq!(ids.len(), 4);
        let layout = seconds_layout();
        let units: std::collections::BTreeSet<u64> = ids
            .iter()
            .map(|&id| layout.decompose(id).unwrap().time)
            .collect();
        assert!(
            units.len() >= 2,
            "four IDs cannot fit one two-ID unit: {ids:?}"
        );
    });
}

#[test]
fn a_clock_stepping_back_under_a_racing_issuer_is_refused_never_repeated() {
    loom::model(|| {
        let clock = ManualClock::auto_advancing(EPOCH_MS + 5_000);
        let generator =
            Arc::new(DefaultUidGenerator::new(seconds_layout(), 3, clock.clone()).unwrap());
        let issuing = issuer(&generator, 2);
        let stepping = {
            let generator = Arc::clone(&generator);
            thread::spawn(move || {
                let first = generator.next_id();
                // An NTP correction of a second and a half, between two issues.
                clock.rewind(1_500);
                vec![first, generator.next_id()]
            })
        };
        let mut results = issuing.join().unwrap();
        results.extend(stepping.join().unwrap());
        check(results);
    });
}

#[test]
fn snowflake_waits_out_a_small_step_back_without_repeating() {
    loom::model(|| {
        let clock = ManualClock::auto_advancing(EPOCH_MS + 5_000);
        let generator =
            Arc::new(SnowflakeGenerator::new(millis_layout(), 3, clock.clone()).unwrap());
        let issuing = issuer(&generator, 2);
        let stepping = {
            let (generator, clock) = (Arc::clone(&generator), clock.clone());
            thread::spawn(move || {
                let first = generator.next_id();
                // Within Leaf's 5 ms: waited out (the clock moves on while it sleeps).
                clock.rewind(2);
                vec![first, generator.next_id()]
            })
        };
        let mut results = issuing.join().unwrap();
        results.extend(stepping.join().unwrap());
        assert_eq!(
            check(results).len(),
            4,
            "a 2 ms step is waited out, not refused"
        );
        assert!(clock.now_millis() >= EPOCH_MS + 5_000);
    });
}
