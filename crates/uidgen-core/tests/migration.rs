//! Baidu users past 2024-11-20: `baidu_continued` goes on from the legacy layout so that every
//! new ID sorts above every legacy ID, equals none of them, and the legacy IDs still decode.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use common::{GENERATOR_KINDS, generator_of_kind, largest_composed};
use proptest::prelude::*;
use uidgen_core::layout::BAIDU_LEGACY_EPOCH_MS;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, Layout, ManualClock, UidError,
    UidGenerator,
};

/// 2024-11-20T13:24:16Z: the legacy layout's 2^28 seconds end here, the continuation begins.
const SWITCH_MS: u64 = BAIDU_LEGACY_EPOCH_MS + (1 << 28) * 1000;

#[test]
fn the_switch_is_where_the_legacy_time_field_ran_out() {
    let legacy = Layout::baidu_legacy().unwrap();
    let continued = Layout::baidu_continued().unwrap();
    assert_eq!(legacy.millis_of(legacy.max_time() + 1), SWITCH_MS);
    assert_eq!(continued.millis_of(continued.first_time()), SWITCH_MS);
    assert_eq!(continued.epoch_ms(), legacy.epoch_ms());
    // The largest legacy ID there can be, against the smallest new one.
    let last_legacy = largest_composed(&legacy);
    let first_new = continued
        .compose(&continued.parts(continued.first_time(), 0, 0))
        .unwrap();
    assert_eq!((last_legacy, first_new), (i64::MAX as u64, 1 << 63));
    // Room until 2033-05-24T10:48:32Z.
    assert_eq!(
        continued.millis_of(continued.max_time() + 1),
        2_000_544_512_000
    );
    assert!(matches!(
        legacy.time_at(SWITCH_MS),
        Err(UidError::TimestampExhausted { .. })
    ));
    assert_eq!(continued.time_at(SWITCH_MS).unwrap(), 1 << 28);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// A legacy ID (any fields the legacy layout holds) issued before the switch is smaller than
    /// every ID a generator of the continuation issues after it, the same worker id included,
    /// and decodes under the continuation exactly as under the legacy layout.
    #[test]
    fn every_new_id_sorts_above_every_legacy_id_and_equals_none(
        kind in 0..GENERATOR_KINDS,
        legacy_time in 0..(1u64 << 28),
        legacy_sequence in 0..8192u64,
        worker in 0..(1u64 << 22),
        same_worker in any::<bool>(),
        new_worker in 0..(1u64 << 22),
        seconds_after_switch in 0..(8 * 365 * 86_400u64),
    ) {
        let legacy = Layout::baidu_legacy().unwrap();
        let continued = Layout::baidu_continued().unwrap();
        let old = legacy.compose(&legacy.parts(legacy_time, worker, legacy_sequence)).unwrap();
        prop_assert_eq!(continued.decode(old).unwrap().parts, legacy.decode(old).unwrap().parts);
        prop_assert_eq!(
            continued.decode(old).unwrap().timestamp_ms,
            legacy.decode(old).unwrap().timestamp_ms
        );
        let new_worker = if same_worker { worker } else { new_worker };
        let clock = ManualClock::auto_advancing(SWITCH_MS + seconds_after_switch * 1000);
        let generator = generator_of_kind(kind, continued.clone(), new_worker, clock, 0);
        for id in generator.next_ids(3).unwrap() {
            prop_assert!(id > old, "{id} <= legacy {old}");
            let decoded = continued.decode(id).unwrap();
            prop_assert!(decoded.parts.time >= continued.first_time());
            prop_assert_eq!(decoded.parts.worker, new_worker);
            // Read as the legacy layout would, it is not a legacy ID at all (its sign bit).
            prop_assert!(legacy.decode(id).is_err());
        }
    }
}

#[test]
fn the_continuation_refuses_to_issue_inside_the_legacy_range() {
    // A clock before the switch is where the legacy layout may still be issuing.
    let continued = Layout::baidu_continued().unwrap();
    let before = SWITCH_MS - 1;
    for kind in 0..2 {
        let generator = generator_of_kind(kind, continued.clone(), 1, ManualClock::new(before), 0);
        assert_eq!(
            generator.next_id(),
            Err(UidError::ClockBeforeStart {
                now_ms: before,
                start_ms: SWITCH_MS
            })
        );
    }
    let cached = CachedUidGenerator::new(
        continued,
        1,
        ManualClock::new(before),
        CachedOptions::default(),
    );
    assert_eq!(
        cached.unwrap_err().to_string(),
        "clock reads 1732109055999 ms, before 1732109056000 ms where this layout's IDs begin \
         (earlier time belongs to the layout it continues); refusing to issue IDs"
    );
}

#[test]
fn a_deployment_with_its_own_baidu_epoch_continues_from_that_epoch() {
    // Baidu's `epochStr` was configurable; a 2019 epoch runs out in 2027.
    let own = Layout::baidu("2019-01-01").unwrap();
    let continued = Layout::preset_with_epoch("baidu_continued", Some("2019-01-01")).unwrap();
    assert_eq!(continued.name(), "baidu_continued");
    assert_eq!(
        continued,
        own.clone().continued().unwrap().named("baidu_continued")
    );
    let switch = own.millis_of(own.max_time() + 1);
    // Today (2026) is still the old layout's: the continuation waits for the switch.
    assert!(matches!(
        continued.time_at(switch - 1_000),
        Err(UidError::ClockBeforeStart { .. })
    ));
    let generator = DefaultUidGenerator::new(continued, 5, ManualClock::new(switch)).unwrap();
    let last_own = largest_composed(&own);
    assert!(generator.next_id().unwrap() > last_own);
}

#[test]
fn only_a_layout_with_time_under_its_sign_continues() {
    for layout in [
        Layout::vesta_max_peak().unwrap(),
        Layout::safe_js().unwrap(),
        Layout::baidu_continued().unwrap(),
    ] {
        assert!(
            matches!(
                layout.clone().continued(),
                Err(UidError::MalformedLayout(_))
            ),
            "{}",
            layout.name()
        );
    }
    // Snowflake continues too: 42 bits of ms from 2010, until 2150.
    let snowflake = Layout::snowflake().unwrap().continued().unwrap();
    assert_eq!(snowflake.first_time(), 1 << 41);
    assert_eq!(snowflake.name(), "snowflake_continued");
}
