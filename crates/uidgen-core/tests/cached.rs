//! Specifications of the ring buffer and the cached (Baidu) generator.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{
    assert_exhausted_after_16_units, assert_no_duplicates, assert_worker,
    cached_with_two_seconds_left, hammer, on_threads, presets_but_legacy, small_layout,
    standing_clock,
};
use uidgen_core::ring::policy;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, Clock, Layout, ManualClock, RingBuffer, SystemClock,
    UidError, UidGenerator,
};
use uidgen_testkit::eventually;

fn waiting() -> CachedOptions {
    CachedOptions::waiting(Duration::from_secs(10))
}

/// The cursor moved exactly once per ID handed out: no claim was lost (an ID read twice) or
/// skipped (a position claimed and never read).
fn assert_every_claim_was_handed_out(ring: &RingBuffer, taken: usize) {
    assert_eq!(ring.cursor() + 1, i64::try_from(taken).unwrap());
}

/// A clock that panics on its `fail_at`-th reading: a bug in a user's `Clock`.
#[derive(Debug)]
struct BreakingClock {
    inner: ManualClock,
    reads: AtomicU64,
    fail_at: u64,
}

impl Clock for BreakingClock {
    fn now_millis(&self) -> u64 {
        let read = self.reads.fetch_add(1, Ordering::SeqCst) + 1;
        assert!(read < self.fail_at, "test clock broke on read {read}");
        self.inner.now_millis()
    }
}

/// `ids` (sorted) are `count` IDs of `worker` without a duplicate, and the ring handed out every
/// slot it claimed.
fn assert_issued_exactly(generator: &CachedUidGenerator, ids: &[u64], count: usize, worker: u64) {
    assert_eq!(ids.len(), count);
    assert_no_duplicates(ids);
    assert_worker(generator, ids, worker);
    assert_every_claim_was_handed_out(generator.ring(), ids.len());
}

#[test]
fn cached_generator_is_unique_across_four_threads_a_million_each() {
    let layout = Layout::baidu_default().unwrap();
    let generator =
        Arc::new(CachedUidGenerator::new(layout, 4_000_000, SystemClock, waiting()).unwrap());
    let ids = hammer(Arc::clone(&generator), 4, 1_000_000);
    assert_issued_exactly(&generator, &ids, 4_000_000, 4_000_000);
}

#[test]
fn cached_batches_across_threads_are_unique_and_exact() {
    let generator = Arc::new(
        CachedUidGenerator::new(Layout::baidu_default().unwrap(), 9, SystemClock, waiting())
            .unwrap(),
    );
    let ids = on_threads(Arc::clone(&generator), 4, |generator| {
        let mut ids = Vec::new();
        for _ in 0..100 {
            ids.extend(generator.next_ids(2_500).unwrap());
        }
        ids
    });
    assert_issued_exactly(&generator, &ids, 1_000_000, 9);
}

#[test]
fn ring_size_is_the_sequence_space_shifted_by_the_boost_power() {
    let layout = Layout::baidu_default().unwrap();
    let clock = standing_clock(&layout, 100);
    let generator = CachedUidGenerator::new(layout, 1, clock, CachedOptions::default()).unwrap();
    assert_eq!(generator.ring().buffer_size(), 8192 << 3);
    assert_eq!(generator.ring().padding_threshold(), (8192 << 3) / 2);
    // Baidu fills the whole ring before the first take.
    assert!(generator.ring().is_full());
}

#[test]
fn full_ring_calls_reject_put_with_the_rejected_uid() {
    let rejected = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&rejected);
    let ring = RingBuffer::new(4, 50).unwrap().with_reject_put(Arc::new(
        move |_ring: &RingBuffer, uid| seen.lock().unwrap().push(uid),
    ));
    for uid in 1..=4 {
        assert!(ring.put(uid));
    }
    assert!(!ring.put(99));
    assert_eq!(*rejected.lock().unwrap(), [99]);
    assert_eq!(ring.rejected_puts(), 1);
    assert_eq!(ring.take().unwrap(), 1);
    assert!(ring.put(5), "a taken slot is free again");
}

#[test]
fn empty_ring_calls_reject_take() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&calls);
    let ring =
        RingBuffer::new(4, 50)
            .unwrap()
            .with_reject_take(Arc::new(move |_ring: &RingBuffer| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(42)
            }));
    assert_eq!(ring.take().unwrap(), 42);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[test]
fn empty_ring_default_policy_is_a_typed_error() {
    let ring = RingBuffer::new(4, 50).unwrap();
    let err = ring.take().unwrap_err();
    assert!(matches!(err, UidError::RingEmpty(_)));
    assert!(
        err.to_string()
            .starts_with("ring buffer is empty: padding has not caught up"),
        "{err}"
    );
}

#[test]
fn invalid_ring_options_are_refused_with_a_reason() {
    let err = RingBuffer::new(6, 50).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid option `buffer_size`: 6 must be a power of two from 2 to 67108864"
    );
    let err = RingBuffer::new(8, 100).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid option `padding_factor`: 100 must be a percentage from 1 to 99"
    );
    let options = CachedOptions {
        boost_power: 17,
        ..CachedOptions::default()
    };
    let err = CachedUidGenerator::new(Layout::baidu_default().unwrap(), 1, SystemClock, options)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid option `boost_power`: 17 must be 0 to 10"
    );
}

#[test]
fn worker_id_too_wide_is_refused_at_construction() {
    let layout = Layout::baidu_default().unwrap();
    let err = CachedUidGenerator::new(layout, 1 << 22, SystemClock, CachedOptions::default())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "worker id 4194304 exceeds the layout's maximum 4194303; widen the worker bits or use a smaller id"
    );
}

#[test]
fn takes_below_the_padding_threshold_wake_the_padding_thread() {
    let layout = small_layout(6); // 64 IDs a second, ring of 512
    let clock = standing_clock(&layout, 50);
    let generator = CachedUidGenerator::new(layout, 1, clock, CachedOptions::default()).unwrap();
    let runs_at_start = generator.padding_runs();
    let size = generator.ring().buffer_size();
    let threshold = generator.ring().padding_threshold();
    assert!(!generator.ring().padding_requested());
    // Down to exactly the threshold: nothing asks for padding yet. A take asks before it
    // returns, and only a run clears the request (after counting itself), so no request now
    // and no new run means no take asked.
    for _ in 0..size - threshold {
        generator.next_id().unwrap();
    }
    assert!(!generator.ring().padding_requested());
    assert_eq!(generator.padding_runs(), runs_at_start);
    // One more take leaves fewer than the threshold: it asks, and the padding thread answers.
    generator.next_id().unwrap();
    assert!(generator.ring().padding_requested() || generator.padding_runs() > runs_at_start);
    eventually("padding to run", || {
        generator.padding_runs() > runs_at_start
    });
    eventually("the ring to refill", || generator.ring().is_full());
}

#[test]
fn borrowed_seconds_run_ahead_of_a_standing_clock_without_reuse() {
    let layout = small_layout(4); // 16 IDs a second, ring of 128
    let clock = standing_clock(&layout, 1_000);
    let generator = CachedUidGenerator::new(layout, 5, clock, waiting()).unwrap();
    let ids = generator.next_ids(10_000).unwrap();
    let mut per_second: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for &id in &ids {
        let parts = generator.parse(id).unwrap().parts;
        assert_eq!(parts.worker, 5);
        per_second
            .entry(parts.time)
            .or_default()
            .push(parts.sequence);
    }
    let last = *per_second.keys().last().unwrap();
    assert!(last > 1_000 + 600, "IDs' time stopped at {last}");
    assert!(generator.borrowed_units() >= last - 1_000);
    // Every second but the last is used in full, in order: no second skipped, no pair reused.
    let (&first, _) = per_second.iter().next().unwrap();
    assert_eq!(first, 1_000, "padding starts at the clock's second");
    for (second, sequences) in &per_second {
        if *second != last {
            assert_eq!(*sequences, (0..16).collect::<Vec<u64>>(), "second {second}");
        }
    }
    assert_eq!(per_second.len() as u64, last - first + 1);
}

#[test]
fn padding_catches_up_with_a_clock_that_moved_ahead() {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let generator = CachedUidGenerator::new(layout, 5, clock.clone(), waiting()).unwrap();
    clock.advance(3_600_000); // an hour later
    // Drain what was padded an hour ago, then the refill must carry the new time.
    let stale = generator.ring().buffer_size();
    let ids = generator.next_ids(stale + 64).unwrap();
    let newest = generator.parse(*ids.last().unwrap()).unwrap().parts.time;
    assert!(newest >= 1_000 + 3_600, "ids still at second {newest}");
}

#[test]
fn borrowing_bound_makes_padding_wait_for_the_clock() {
    let layout = small_layout(4); // ring of 128 = 8 seconds of IDs
    let clock = standing_clock(&layout, 1_000);
    let options = CachedOptions {
        max_borrow_units: Some(2),
        reject_take: Some(policy::wait(Duration::from_millis(50))),
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 5, clock.clone(), options).unwrap();
    // Seconds 1000..=1002 may be padded: 48 IDs, then padding waits for the clock.
    let ids = generator.next_ids(48).unwrap();
    assert_eq!(
        generator.parse(*ids.last().unwrap()).unwrap().parts.time,
        1_002
    );
    let err = generator.next_id().unwrap_err();
    assert_eq!(
        err.to_string(),
        "ring buffer is empty: padding has not caught up (waited 50 ms for padding); retry or use the waiting reject-take policy"
    );
    assert_eq!(generator.borrowed_units(), 2);
    clock.advance(1_000);
    let id = generator.next_id().unwrap();
    assert_eq!(generator.parse(id).unwrap().parts.time, 1_003);
}

#[test]
fn exhausted_timestamp_bits_stop_the_cached_generator_with_a_typed_error() {
    let generator = cached_with_two_seconds_left();
    let ids = generator.next_ids(2 * 8192).unwrap();
    let last = generator.parse(*ids.last().unwrap()).unwrap().parts;
    assert_eq!((last.time, last.sequence), (15, 8191));
    // Typed, so callers (and the service's `exhausted` alerts) can tell it from a stop.
    let err = generator.next_id().unwrap_err();
    assert_exhausted_after_16_units(&err);
    // The sign bit is never reached: every ID issued decodes.
    assert!(ids.iter().all(|&id| id >> 63 == 0));
}

#[test]
fn a_clock_past_the_time_range_is_refused_at_construction() {
    let layout = Layout::baidu_bits(4, 46, 13, "2026-01-01").unwrap();
    let clock = standing_clock(&layout, 16);
    let err = CachedUidGenerator::new(layout, 1, clock, CachedOptions::default()).unwrap_err();
    assert!(
        matches!(
            err,
            UidError::TimestampExhausted {
                elapsed: 16,
                max: 15
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "timestamp bits exhausted: 16 time units since the epoch exceed the layout's maximum 15; move the epoch forward or widen the time bits"
    );
}

#[test]
fn schedule_interval_pads_without_takes_asking() {
    let layout = small_layout(6);
    let clock = standing_clock(&layout, 10);
    let options = CachedOptions {
        schedule_interval: Some(Duration::from_millis(5)),
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 2, clock, options).unwrap();
    let before = generator.padding_runs();
    eventually("a scheduled padding run", || {
        generator.padding_runs() >= before + 3
    });
}

#[test]
fn issued_until_covers_every_padded_second() {
    let layout = small_layout(4);
    let clock = standing_clock(&layout, 1_000);
    let epoch = layout.epoch_ms();
    let generator = CachedUidGenerator::new(layout, 5, clock, waiting()).unwrap();
    let ids = generator.next_ids(1_000).unwrap();
    let newest = ids
        .iter()
        .map(|&id| generator.parse(id).unwrap().parts.time)
        .max()
        .unwrap();
    let until = generator.issued_until_ms().unwrap();
    assert!(until >= epoch + (newest + 1) * 1000);
    assert_eq!(until, epoch + (generator.last_second() + 1) * 1000);
}

#[test]
fn dropping_the_generator_joins_its_padding_thread() {
    for _ in 0..20 {
        let clock = Arc::new(SystemClock);
        let generator = CachedUidGenerator::new(
            small_layout(6),
            1,
            Arc::clone(&clock),
            CachedOptions::default(),
        )
        .unwrap();
        generator.next_ids(100).unwrap();
        assert!(
            Arc::strong_count(&clock) > 1,
            "the generator holds the clock"
        );
        drop(generator); // joins; would hang here if the thread ignored the stop
        // The padding thread held the shared state (and the clock in it) until it ended: only
        // joined does it give it back.
        assert_eq!(Arc::strong_count(&clock), 1);
    }
}

#[test]
fn a_schedule_interval_below_a_millisecond_is_refused() {
    for interval in [Duration::ZERO, Duration::from_micros(999)] {
        let options = CachedOptions {
            schedule_interval: Some(interval),
            ..CachedOptions::default()
        };
        let err = CachedUidGenerator::new(small_layout(6), 1, SystemClock, options).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid option `schedule_interval`: {interval:?} is shorter than a millisecond; use at least 1 ms, or None to pad only when takes ask"
            )
        );
    }
    let options = CachedOptions {
        schedule_interval: Some(Duration::from_millis(1)),
        ..CachedOptions::default()
    };
    assert!(CachedUidGenerator::new(small_layout(6), 1, SystemClock, options).is_ok());
}

#[test]
fn a_panicking_padding_thread_stops_the_generator() {
    let layout = small_layout(6); // 64 IDs a second, ring of 512: 8 clock reads fill it
    let clock = BreakingClock {
        inner: standing_clock(&layout, 50),
        reads: AtomicU64::new(0),
        // Construction reads it 9 times; the padding thread breaks it a few runs later.
        fail_at: 20,
    };
    // The wait is bounded: without the stop it would end in RingEmpty, not hang.
    let options = CachedOptions::waiting(Duration::from_secs(10));
    let generator = CachedUidGenerator::new(layout, 1, clock, options).unwrap();
    let mut taken = 0usize;
    let err = loop {
        match generator.next_id() {
            Ok(_) => taken += 1,
            Err(err) => break err,
        }
    };
    assert_eq!(
        err.to_string(),
        "ID generation has stopped: the padding thread panicked; no more IDs will be padded"
    );
    assert!(taken >= 512, "the first ring was handed out: {taken}");
    // It stays stopped, and dropping the generator joins the panicked thread without a panic.
    assert!(matches!(
        generator.next_id(),
        Err(UidError::GeneratorStopped(_))
    ));
}

#[test]
fn padded_ids_are_exactly_what_the_layout_composes_for_every_preset() {
    // Padding builds each unit's IDs from its sequence-0 ID with the sequence or-ed in; this
    // pins that shortcut to `Layout::compose` on layouts where the sequence is not the lowest
    // field (Vesta puts the machine there, Sonyflake too).
    for name in presets_but_legacy() {
        let layout = Layout::preset(name).unwrap();
        let worker = layout.max_worker_id().min(5);
        // A clock that stands still, so padding borrows and crosses unit boundaries.
        let clock = ManualClock::new(SystemClock.now_millis());
        let options = CachedOptions {
            boost_power: 0,
            ..waiting()
        };
        let generator = CachedUidGenerator::new(layout.clone(), worker, clock, options).unwrap();
        let per_unit = usize::try_from(layout.max_sequence() + 1).unwrap();
        let n = (2 * per_unit + 3).min(100_000);
        let ids = generator.next_ids(n).unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "{name}: not increasing"
        );
        for (i, &id) in ids.iter().enumerate() {
            let parts = layout.decompose(id).unwrap();
            assert_eq!(layout.compose(&parts).unwrap(), id, "{name}: id {id}");
            assert_eq!(parts.worker, worker, "{name}: id {id}");
            assert_eq!(
                usize::try_from(parts.sequence).unwrap(),
                i % per_unit,
                "{name}: id {id}"
            );
        }
    }
}

#[test]
fn the_padded_hook_hears_of_each_refill_and_of_the_stop() {
    // 4 time bits standing at second 14: the ring holds second 14, a refill brings second 15,
    // and the next refill finds the time field exhausted and stops the padding.
    let layout = Layout::baidu_bits(4, 46, 13, "2026-01-01").unwrap();
    let clock = standing_clock(&layout, 14);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 1, clock, options).unwrap();
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&heard);
    assert!(generator.on_padded(Arc::new(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })));
    assert!(!generator.on_padded(Arc::new(|| {})), "set once");
    // Draining second 14 (the whole ring, one claim) asks for a refill: second 15 arrives,
    // and the hook hears of it.
    let mut ids = Vec::new();
    assert_eq!(generator.ring().take_batch(&mut ids, 8192), 8192);
    eventually("the refill is announced", || {
        heard.load(Ordering::SeqCst) >= 1
    });
    eventually("second 15 is padded", || generator.ring().is_full());
    // Draining second 15 asks for a refill that cannot come: the stop is announced too, so a
    // waiter learns of it at once.
    let before = heard.load(Ordering::SeqCst);
    assert_eq!(generator.ring().take_batch(&mut ids, 8192), 8192);
    eventually("the stop is announced", || {
        heard.load(Ordering::SeqCst) > before
    });
    assert!(generator.ring().stop_error().is_some());
    assert_eq!(ids.len(), 2 * 8192);
}
