//! `Layout::succession` (issue 33, item 3): whether moving a live ID space from layout A to
//! layout B can repeat an ID A issued, and whether B's IDs sort above A's. Checked against a
//! brute-force enumeration of every ID small layouts can issue, and on the presets whose
//! answers are known (`baidu_continued`'s proof).
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::BTreeSet;

use proptest::prelude::*;
use uidgen_core::layout::{BAIDU_LEGACY_EPOCH_MS, HighMark};
use uidgen_core::{FieldKind, Layout, TimeUnit, UidError, UidParts};

/// Every ID `layout` can stamp with a time value in `times`: every worker, sequence and
/// method, the layout's own type bit.
fn every_id(layout: &Layout, times: std::ops::RangeInclusive<u64>) -> BTreeSet<u64> {
    let mut ids = BTreeSet::new();
    for time in times {
        for worker in 0..=layout.max_worker_id() {
            for sequence in 0..=layout.max_sequence() {
                for method in 0..=layout.max(FieldKind::Method) {
                    let parts = UidParts {
                        method,
                        ..layout.parts(time, worker, sequence)
                    };
                    ids.insert(layout.compose(&parts).unwrap());
                }
            }
        }
    }
    ids
}

/// The time unit of instant `ms` under `layout` (0 before its epoch).
fn unit_of(layout: &Layout, ms: u64) -> u64 {
    ms.saturating_sub(layout.epoch_ms()) / layout.unit().millis()
}

/// A layout of at most 11 bits: time, worker and sequence (and sometimes Vesta's method) in any
/// order, from a small epoch.
fn small_layout() -> impl Strategy<Value = Layout> {
    (
        1..=4u32,
        0..=2u32,
        1..=2u32,
        0..=2u32,
        Just(vec![0usize, 1, 2, 3]).prop_shuffle(),
        prop_oneof![
            Just(TimeUnit::Millis),
            Just(TimeUnit::TenMillis),
            Just(TimeUnit::Seconds)
        ],
        0..50u64,
    )
        .prop_map(|(time, worker, sequence, method, order, unit, epoch)| {
            let widths = [
                (FieldKind::Time, time),
                (FieldKind::Worker, worker),
                (FieldKind::Sequence, sequence),
                (FieldKind::Method, method),
            ];
            let fields: Vec<_> = order
                .into_iter()
                .map(|i| widths[i])
                .filter(|&(kind, bits)| bits > 0 || kind == FieldKind::Worker)
                .collect();
            Layout::new("small", &fields, unit, epoch * unit.millis()).unwrap()
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// The check agrees with a brute-force enumeration: B's smallest ID from the switch on, A's
    /// largest up to its high mark, whether any ID is in both, and the smallest such.
    #[test]
    fn the_check_agrees_with_every_id_small_layouts_can_issue(
        a in small_layout(),
        b in small_layout(),
        until in 0..40_000u64,
        by_id in any::<bool>(),
        id_pick in any::<prop::sample::Index>(),
        switch in 0..40_000u64,
    ) {
        let (high, old) = if by_id {
            let all: Vec<u64> = every_id(&a, 0..=a.max_time()).into_iter().collect();
            let highest = all[id_pick.index(all.len())];
            let old: BTreeSet<u64> = all.into_iter().filter(|&id| id <= highest).collect();
            (HighMark::HighestId(highest), old)
        } else if until <= a.epoch_ms() {
            (HighMark::IssuedUntil(until), BTreeSet::new())
        } else {
            let last = unit_of(&a, until - 1).min(a.max_time());
            (HighMark::IssuedUntil(until), every_id(&a, 0..=last))
        };
        let first = unit_of(&b, switch);
        let check = a.succession(high, &b, switch);
        if first > b.max_time() {
            prop_assert!(matches!(check, Err(UidError::TimestampExhausted { .. })), "{check:?}");
            return Ok(());
        }
        let check = check.unwrap();
        let new = every_id(&b, first..=b.max_time());
        prop_assert_eq!(check.new_smallest, *new.first().unwrap());
        prop_assert_eq!(check.new_largest, *new.last().unwrap());
        prop_assert_eq!(check.old_largest, old.last().copied());
        prop_assert_eq!(check.sorts_above(), old.last().is_none_or(|&o| *new.first().unwrap() > o));
        let common = old.intersection(&new).next().copied();
        prop_assert_eq!(check.common, common);
        prop_assert_eq!(check.never_equal(), common.is_none());
    }
}

/// 2024-11-20T13:24:16Z: where the legacy layout's 2^28 seconds end.
const SWITCH_MS: u64 = BAIDU_LEGACY_EPOCH_MS + (1 << 28) * 1000;

#[test]
fn baidu_continued_is_proved_safe_over_the_legacy_layout_at_any_high_mark() {
    let legacy = Layout::baidu_legacy().unwrap();
    let continued = Layout::baidu_continued().unwrap();
    for high in [
        HighMark::IssuedUntil(SWITCH_MS),
        HighMark::IssuedUntil(SWITCH_MS + 86_400_000), // a mark past the end: clamped to it
        HighMark::HighestId(i64::MAX.unsigned_abs()),
    ] {
        // Switching on the day the legacy field ran out, or years later.
        for switch in [SWITCH_MS - 1, SWITCH_MS, 1_800_000_000_000] {
            let check = legacy.succession(high, &continued, switch).unwrap();
            assert!(check.is_safe(), "{high:?} {switch}: {check:?}");
            assert_eq!(check.old_largest, Some(i64::MAX.unsigned_abs()));
            assert!(check.new_smallest >= 1 << 63);
            assert!(!check.fits_signed());
        }
    }
}

#[test]
fn the_same_layout_is_safe_only_from_past_its_high_mark() {
    let baidu = Layout::baidu("2026-01-01").unwrap();
    let mark = baidu.epoch_ms() + 10_000_500; // mid-second: that second was stamped
    let after = baidu
        .succession(HighMark::IssuedUntil(mark), &baidu, mark + 500)
        .unwrap();
    assert!(after.is_safe() && after.fits_signed(), "{after:?}");
    assert_eq!(after.new_first_time, after.old_last_time.unwrap() + 1);
    // Starting inside the stamped second: the same second, any worker: IDs may repeat.
    let inside = baidu
        .succession(HighMark::IssuedUntil(mark), &baidu, mark - 1)
        .unwrap();
    assert!(!inside.never_equal() && !inside.sorts_above());
    let common = baidu.decode(inside.common.unwrap()).unwrap();
    assert_eq!(common.parts.time, 10_000);
}

#[test]
fn vesta_types_never_collide_but_do_not_sort_one_above_the_other() {
    // The type bit (bit 62) differs, 0 max-peak, 1 min-granularity: no ID is in both, whatever
    // the times, and min-granularity's sort above max-peak's but not the other way round.
    let peak = Layout::vesta_max_peak().unwrap();
    let min = Layout::vesta_min_granularity().unwrap();
    let now = 1_800_000_000_000;
    let check = peak
        .succession(HighMark::IssuedUntil(now), &min, now)
        .unwrap();
    assert!(check.never_equal(), "{check:?}");
    assert!(
        check.sorts_above(),
        "min-granularity sets bit 62: {check:?}"
    );
    let back = min
        .succession(HighMark::IssuedUntil(now), &peak, now)
        .unwrap();
    assert!(back.never_equal() && !back.sorts_above(), "{back:?}");
}

#[test]
fn a_new_layout_whose_field_has_run_out_is_refused() {
    let legacy = Layout::baidu_legacy().unwrap();
    let err = legacy
        .succession(HighMark::IssuedUntil(SWITCH_MS), &legacy, SWITCH_MS)
        .unwrap_err();
    assert!(matches!(err, UidError::TimestampExhausted { .. }), "{err}");
    // A highest ID the old layout cannot have made (its sign bit set).
    let err = legacy
        .succession(
            HighMark::HighestId(1 << 63),
            &Layout::baidu_continued().unwrap(),
            SWITCH_MS,
        )
        .unwrap_err();
    assert!(matches!(err, UidError::MalformedId { .. }), "{err}");
}

#[test]
fn a_high_mark_before_the_old_epoch_means_nothing_was_issued() {
    let baidu = Layout::baidu("2026-01-01").unwrap();
    let check = baidu
        .succession(
            HighMark::IssuedUntil(baidu.epoch_ms()),
            &baidu,
            baidu.epoch_ms(),
        )
        .unwrap();
    assert_eq!((check.old_largest, check.common), (None, None));
    assert!(check.is_safe());
}
