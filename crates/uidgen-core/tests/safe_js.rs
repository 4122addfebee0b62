//! JavaScript-safe IDs: no generator ever issues an ID at or above 2^53 on `safe_js`, not even
//! at the end of its time field, where the time field's exhaustion is a typed error.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    GENERATOR_KINDS, assert_no_duplicates, assert_worker, generator_of_kind, hammer,
    largest_composed,
};
use proptest::prelude::*;
use uidgen_core::layout::JS_MAX_SAFE_INTEGER;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, FieldKind, Layout, ManualClock,
    SystemClock, TimeUnit, UidError, UidGenerator,
};

/// A generator of `kind` ([`generator_of_kind`]), cached ones with a ring of one or two
/// seconds of IDs.
fn generator(
    kind: usize,
    layout: Layout,
    worker: u64,
    clock: ManualClock,
) -> Box<dyn UidGenerator> {
    let boost_power = u32::try_from(worker % 2).unwrap();
    generator_of_kind(kind, layout, worker, clock, boost_power)
}

/// Take IDs until the generator refuses; return them and the refusal.
fn drain(generator: &dyn UidGenerator, at_most: usize) -> (Vec<u64>, Option<UidError>) {
    let mut ids = Vec::new();
    while ids.len() < at_most {
        match generator.next_id() {
            Ok(id) => ids.push(id),
            Err(error) => return (ids, Some(error)),
        }
    }
    (ids, None)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Start a few seconds before the end of the 31-bit time field and drain every generator:
    /// each ID is at most `Number.MAX_SAFE_INTEGER` and decodes to its worker, none repeats,
    /// and what ends the IDs is `TimestampExhausted`, never an ID past bit 53.
    #[test]
    fn no_generator_issues_an_id_past_2_pow_53_even_at_the_end_of_time(
        kind in 0..GENERATOR_KINDS,
        worker in 0..1024u64,
        seconds_left in 0..3u64,
        ms_into_second in 0..1000u64,
    ) {
        let layout = Layout::safe_js().unwrap();
        let start = layout.millis_of(layout.max_time() - seconds_left) + ms_into_second;
        let generator = generator(kind, layout.clone(), worker, ManualClock::auto_advancing(start));
        // Every ID of the seconds left, and then some.
        let capacity = usize::try_from((seconds_left + 1) * 4096).unwrap();
        let (mut ids, error) = drain(&*generator, capacity + 10);
        prop_assert!(
            matches!(error, Some(UidError::TimestampExhausted { max, .. }) if max == layout.max_time()),
            "ended with {error:?} after {} IDs", ids.len()
        );
        prop_assert!(ids.len() <= capacity);
        prop_assert!(ids.iter().all(|&id| id <= JS_MAX_SAFE_INTEGER), "an ID past 2^53 - 1");
        for &id in &ids {
            prop_assert_eq!(layout.decode(id).unwrap().parts.worker, worker);
        }
        ids.sort_unstable();
        prop_assert!(ids.windows(2).all(|w| w[0] < w[1]), "a duplicate ID");
    }
}

#[test]
fn the_largest_safe_js_id_is_number_max_safe_integer() {
    let layout = Layout::safe_js().unwrap();
    assert_eq!(layout.width(), 53);
    assert_eq!(layout.max_id(), JS_MAX_SAFE_INTEGER);
    assert_eq!(JS_MAX_SAFE_INTEGER, 9_007_199_254_740_991);
    let last = largest_composed(&layout);
    assert_eq!(last, JS_MAX_SAFE_INTEGER);
    // A double tells every integer up to 2^53 - 1 from its neighbour, but reads 2^53 + 1 as
    // 2^53: the first ID a browser would silently change.
    assert_ne!(last as f64, (last - 1) as f64);
    assert_eq!((last + 2) as f64, (last + 1) as f64);
    // Lasts 68 years from its 2026 epoch: past 2094-01-19.
    assert!(layout.millis_of(layout.max_time() + 1) > 3_914_000_000_000);
    assert_eq!(layout.unit(), TimeUnit::Seconds);
    assert!(!layout.has(FieldKind::Sign));
}

#[test]
fn safe_js_ids_are_unique_across_four_threads() {
    let layout = Layout::safe_js().unwrap();
    // 4,096 IDs a second: 4 x 50k IDs run through ~50 seconds of the auto-advancing clock.
    let clock = ManualClock::auto_advancing(layout.epoch_ms() + 1_000);
    let generator = Arc::new(DefaultUidGenerator::new(layout.clone(), 1023, clock).unwrap());
    let ids = hammer(Arc::clone(&generator), 4, 50_000);
    assert_no_duplicates(&ids);
    assert_worker(&*generator, &ids, 1023);
    assert!(ids.iter().all(|&id| id <= JS_MAX_SAFE_INTEGER));

    let cached = Arc::new(
        CachedUidGenerator::new(
            layout,
            1,
            SystemClock,
            CachedOptions::waiting(Duration::from_secs(10)),
        )
        .unwrap(),
    );
    let ids = hammer(Arc::clone(&cached), 4, 50_000);
    assert_no_duplicates(&ids);
    assert_worker(&*cached, &ids, 1);
    assert!(ids.iter().all(|&id| id <= JS_MAX_SAFE_INTEGER));
}

#[test]
fn any_narrow_layout_keeps_its_ids_below_its_width() {
    // 32 bits: an ID that fits an unsigned 32-bit column, 10 ms units for 4.7 days of life.
    let layout = Layout::new(
        "u32",
        &[
            (FieldKind::Time, 25),
            (FieldKind::Worker, 2),
            (FieldKind::Sequence, 5),
        ],
        TimeUnit::TenMillis,
        "2026-01-01",
    )
    .unwrap();
    for kind in 0..GENERATOR_KINDS {
        let clock = ManualClock::auto_advancing(layout.millis_of(layout.max_time() - 1));
        let generator = generator(kind, layout.clone(), 3, clock);
        let (ids, error) = drain(&*generator, 1_000);
        assert!(
            matches!(error, Some(UidError::TimestampExhausted { .. })),
            "{kind}: {error:?}"
        );
        assert!(!ids.is_empty(), "{kind}: some IDs before the end");
        assert!(ids.iter().all(|&id| id <= u64::from(u32::MAX)), "{kind}");
    }
    assert!(matches!(
        layout.decode(1 << 32),
        Err(UidError::MalformedId { .. })
    ));
}
