//! Specifications of the Default (Baidu) and Snowflake (Leaf) generators.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::Arc;

use common::{
    assert_exhausted_after_16_units, assert_no_duplicates, assert_worker, hammer,
    presets_but_legacy,
};
use uidgen_core::{
    Clock, DefaultUidGenerator, Layout, ManualClock, SnowflakeGenerator, SystemClock, UidError,
    UidGenerator,
};

fn baidu_at(seconds_after_epoch: u64) -> (Layout, ManualClock) {
    let layout = Layout::baidu_default().unwrap();
    let clock = ManualClock::new(layout.epoch_ms() + seconds_after_epoch * 1000);
    (layout, clock)
}

#[test]
fn default_generator_is_unique_across_four_threads_over_many_seconds() {
    // 13 sequence bits allow 8192 IDs a second; 4 x 250k IDs run the sequence over ~120 times,
    // and the auto-advancing clock stands in for the seconds the generator waits out.
    let layout = Layout::baidu_default().unwrap();
    let clock = ManualClock::auto_advancing(layout.epoch_ms() + 1_000);
    let generator = Arc::new(DefaultUidGenerator::new(layout, 77, clock).unwrap());
    let ids = hammer(Arc::clone(&generator), 4, 250_000);
    assert_eq!(ids.len(), 1_000_000);
    assert_no_duplicates(&ids);
    assert_worker(&*generator, &ids, 77);
    let seconds: std::collections::BTreeSet<u64> = ids
        .iter()
        .map(|&id| generator.parse(id).unwrap().parts.time)
        .collect();
    assert!(
        seconds.len() >= 1_000_000 / 8192,
        "{} seconds used",
        seconds.len()
    );
}

#[test]
fn snowflake_generator_is_unique_across_four_threads_a_million_each() {
    let generator = Arc::new(
        SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1023, SystemClock)
            .unwrap()
            .random_sequence_start(true),
    );
    let ids = hammer(Arc::clone(&generator), 4, 1_000_000);
    assert_eq!(ids.len(), 4_000_000);
    assert_no_duplicates(&ids);
    assert_worker(&*generator, &ids, 1023);
}

#[test]
fn default_generator_counts_the_sequence_up_within_one_second() {
    let (layout, clock) = baidu_at(10);
    let generator = DefaultUidGenerator::new(layout, 3, clock.clone()).unwrap();
    for expected in 0..5 {
        let parts = generator.parse(generator.next_id().unwrap()).unwrap().parts;
        assert_eq!(
            (parts.time, parts.worker, parts.sequence),
            (10, 3, expected)
        );
    }
    clock.advance(1_000);
    let parts = generator.parse(generator.next_id().unwrap()).unwrap().parts;
    assert_eq!((parts.time, parts.sequence), (11, 0));
}

#[test]
fn default_generator_waits_for_the_next_second_when_the_sequence_runs_out() {
    let layout = Layout::baidu_bits(30, 31, 2, "2026-01-01").unwrap(); // 4 IDs a second
    let clock = ManualClock::auto_advancing(layout.epoch_ms() + 5_250);
    let generator = DefaultUidGenerator::new(layout, 1, clock.clone()).unwrap();
    let parts: Vec<_> = (0..6)
        .map(|_| generator.parse(generator.next_id().unwrap()).unwrap().parts)
        .map(|p| (p.time, p.sequence))
        .collect();
    assert_eq!(parts, [(5, 0), (5, 1), (5, 2), (5, 3), (6, 0), (6, 1)]);
    assert!(clock.now_millis() >= generator.layout().millis_of(6));
}

#[test]
fn default_generator_refuses_a_clock_that_moved_backwards_and_names_the_gap() {
    let (layout, clock) = baidu_at(100);
    let generator = DefaultUidGenerator::new(layout, 1, clock.clone()).unwrap();
    generator.next_id().unwrap();
    clock.rewind(12_000);
    let err = generator.next_id().unwrap_err();
    assert_eq!(err, UidError::ClockMovedBackwards { by_ms: 12_000 });
    assert_eq!(
        err.to_string(),
        "clock moved backwards by 12000 ms; refusing to issue IDs"
    );
    clock.advance(12_000);
    assert!(
        generator.next_id().is_ok(),
        "recovers once the clock catches up"
    );
}

#[test]
fn default_generator_reports_exhausted_timestamp_bits() {
    let layout = Layout::baidu_bits(4, 46, 13, "2026-01-01").unwrap(); // 16 seconds of life
    let clock = ManualClock::new(layout.epoch_ms() + 16_000);
    let generator = DefaultUidGenerator::new(layout, 1, clock).unwrap();
    let err = generator.next_id().unwrap_err();
    assert_exhausted_after_16_units(&err);
}

#[test]
fn legacy_baidu_layout_refuses_to_generate_today() {
    let generator =
        DefaultUidGenerator::new(Layout::baidu_legacy().unwrap(), 1, SystemClock).unwrap();
    assert!(matches!(
        generator.next_id(),
        Err(UidError::TimestampExhausted { max, .. }) if max == (1 << 28) - 1
    ));
}

#[test]
fn a_clock_before_the_epoch_is_refused() {
    let layout = Layout::baidu_default().unwrap();
    let clock = ManualClock::new(layout.epoch_ms() - 1);
    let generator = DefaultUidGenerator::new(layout.clone(), 1, clock).unwrap();
    let err = generator.next_id().unwrap_err();
    assert_eq!(
        err,
        UidError::ClockBeforeEpoch {
            now_ms: layout.epoch_ms() - 1,
            epoch_ms: layout.epoch_ms()
        }
    );
    // DEFAULT_EPOCH, 2026-01-01T00:00:00Z, is 1767225600000 ms.
    assert_eq!(
        err.to_string(),
        "clock reads 1767225599999 ms, before the layout's epoch 1767225600000 ms; refusing to issue IDs"
    );
}

#[test]
fn worker_id_too_wide_for_the_layout_is_refused_at_construction() {
    let err = SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1024, SystemClock).unwrap_err();
    assert_eq!(
        err.to_string(),
        "worker id 1024 exceeds the layout's maximum 1023; widen the worker bits or use a smaller id"
    );
    assert!(
        DefaultUidGenerator::new(Layout::baidu_default().unwrap(), 1 << 22, SystemClock).is_err()
    );
}

#[test]
fn snowflake_waits_out_a_small_backward_step() {
    let clock = ManualClock::auto_advancing(1_700_000_000_000);
    let generator =
        SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, clock.clone()).unwrap();
    let before = generator.next_id().unwrap();
    clock.rewind(5);
    let after = generator.next_id().unwrap();
    assert!(after > before);
    // Leaf waits twice the gap: 5 ms back, 10 ms waited.
    assert_eq!(clock.now_millis(), 1_700_000_000_005);
}

/// A Snowflake generator on `clock` issues once, the clock steps back `back_ms`, and the next
/// call is refused naming that step.
fn assert_snowflake_refuses_step_back(clock: ManualClock, back_ms: u64) {
    let generator =
        SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, clock.clone()).unwrap();
    generator.next_id().unwrap();
    clock.rewind(back_ms);
    assert_eq!(
        generator.next_id(),
        Err(UidError::ClockMovedBackwards { by_ms: back_ms })
    );
}

#[test]
fn snowflake_refuses_a_large_backward_step() {
    assert_snowflake_refuses_step_back(ManualClock::auto_advancing(1_700_000_000_000), 6);
}

#[test]
fn snowflake_refuses_a_clock_still_behind_after_waiting() {
    // This clock does not move when slept on, so the wait cannot help.
    assert_snowflake_refuses_step_back(ManualClock::new(1_700_000_000_000), 2);
}

#[test]
fn snowflake_with_a_seconds_layout_measures_backward_steps_from_the_last_unit_start() {
    // Vesta's max-peak layout counts seconds; both epochs are whole seconds.
    let layout = Layout::vesta_max_peak().unwrap();
    let unit_start = 1_700_000_000_000;
    let unit = (unit_start - layout.epoch_ms()) / 1000;
    let clock = ManualClock::auto_advancing(unit_start + 600);
    let generator = SnowflakeGenerator::new(layout, 1, clock.clone()).unwrap();
    let time_and_sequence = |id| {
        let parts = generator.parse(id).unwrap().parts;
        (parts.time, parts.sequence)
    };
    assert_eq!(time_and_sequence(generator.next_id().unwrap()), (unit, 0));
    // Back 500 ms but still inside the unit: not a step back; the sequence goes on.
    clock.rewind(500);
    assert_eq!(time_and_sequence(generator.next_id().unwrap()), (unit, 1));
    // 3 ms before the unit's start: waited out (6 ms), which lands back inside the unit.
    clock.set(unit_start - 3);
    assert_eq!(time_and_sequence(generator.next_id().unwrap()), (unit, 2));
    assert_eq!(clock.now_millis(), unit_start + 3);
    // 50 ms before it: refused, with the step in milliseconds.
    clock.set(unit_start - 50);
    let err = generator.next_id().unwrap_err();
    assert_eq!(
        err.to_string(),
        "clock moved backwards by 50 ms; refusing to issue IDs"
    );
}

#[test]
fn snowflake_random_start_stays_below_one_hundred() {
    let clock = ManualClock::new(1_700_000_000_000);
    let generator = SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, clock.clone())
        .unwrap()
        .random_sequence_start(true);
    let mut starts = std::collections::BTreeSet::new();
    for _ in 0..200 {
        starts.insert(
            generator
                .parse(generator.next_id().unwrap())
                .unwrap()
                .parts
                .sequence,
        );
        clock.advance(1);
    }
    assert!(starts.iter().all(|&s| s < 100));
    assert!(starts.len() > 20, "starts vary: {starts:?}");
}

#[test]
fn ids_are_strictly_increasing_on_one_thread() {
    let clock = ManualClock::auto_advancing(1_700_000_000_000);
    let generator = SnowflakeGenerator::new(Layout::snowflake().unwrap(), 9, clock).unwrap();
    let ids = generator.next_ids(20_000).unwrap();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn batch_sizes_out_of_range_are_refused() {
    let generator =
        DefaultUidGenerator::new(Layout::baidu_default().unwrap(), 1, SystemClock).unwrap();
    assert_eq!(
        generator.next_ids(0).unwrap_err().to_string(),
        "count 0 is out of range; ask for 1 to 10000000 IDs"
    );
    assert!(generator.next_ids(10_000_001).is_err());
}

#[test]
fn issued_until_tracks_the_last_time_unit() {
    let (layout, clock) = baidu_at(50);
    let generator = DefaultUidGenerator::new(layout.clone(), 1, clock).unwrap();
    assert_eq!(generator.issued_until_ms(), None);
    generator.next_id().unwrap();
    assert_eq!(generator.issued_until_ms(), Some(layout.millis_of(51)));
}

#[test]
fn every_preset_generates_ids_that_decode_to_their_parts() {
    for name in presets_but_legacy() {
        let layout = Layout::preset(name).unwrap();
        let clock = ManualClock::new(SystemClock.now_millis());
        let generator = DefaultUidGenerator::new(layout.clone(), 5, clock.clone()).unwrap();
        let decoded = generator.parse(generator.next_id().unwrap()).unwrap();
        assert_eq!(decoded.parts.worker, 5, "{name}");
        let unit = layout.unit().millis();
        let expected = layout.epoch_ms() + (clock.now_millis() - layout.epoch_ms()) / unit * unit;
        assert_eq!(decoded.timestamp_ms, expected, "{name}");
        assert_eq!(decoded.layout, name);
    }
}
