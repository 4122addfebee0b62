//! Specifications of time fences (how a reused worker id bounds what its generator stamps) and
//! of the cached generator's edge cases around them: ring sizes, batches larger than the ring.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{assert_no_duplicates, small_layout, take_until_error};
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, FenceRefusal, Layout, ManualClock,
    SnowflakeGenerator, SystemClock, TimeFence, UidError, UidGenerator,
};
use uidgen_testkit::eventually;

/// A fence the test moves by hand; `extend` raises it only when `extensible` (as a
/// reserved-until mark does), and counts how often it was asked.
#[derive(Debug, Default)]
struct HandFence {
    limit: AtomicU64,
    extensible: AtomicBool,
    closed: AtomicBool,
    extends: AtomicU64,
    max_borrow_ms: Option<u64>,
    floor_ms: u64,
}

impl HandFence {
    fn at(limit: u64) -> Arc<Self> {
        Arc::new(Self {
            limit: AtomicU64::new(limit),
            ..Self::default()
        })
    }
}

impl TimeFence for HandFence {
    fn limit_ms(&self) -> u64 {
        self.limit.load(Ordering::SeqCst)
    }

    fn extend(&self, until_ms: u64) -> Result<u64, FenceRefusal> {
        self.extends.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            return Err(FenceRefusal::Closed("worker lease lost".to_owned()));
        }
        if self.extensible.load(Ordering::SeqCst) {
            self.limit.fetch_max(until_ms, Ordering::SeqCst);
            return Ok(self.limit_ms());
        }
        Err(FenceRefusal::NotYet {
            limit_ms: self.limit_ms(),
            reason: "held by hand".to_owned(),
        })
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        self.max_borrow_ms
    }

    fn floor_ms(&self) -> u64 {
        self.floor_ms
    }
}

#[test]
fn default_generator_stamps_only_units_that_end_inside_the_fence() {
    let layout = small_layout(13);
    let start = layout.epoch_ms() + 100_000;
    let clock = ManualClock::new(start);
    let fence = HandFence::at(start + 2_000);
    let generator = DefaultUidGenerator::new(layout.clone(), 3, clock.clone())
        .unwrap()
        .fenced(fence.clone());
    generator.next_id().unwrap();
    clock.advance(1_000); // the unit [start + 1 s, start + 2 s) ends exactly at the limit
    generator.next_id().unwrap();
    clock.advance(1_000);
    let error = generator.next_id().unwrap_err();
    assert_eq!(
        error,
        UidError::BeyondFence {
            worker_id: 3,
            unit_end_ms: start + 3_000,
            limit_ms: start + 2_000,
            reason: "held by hand".to_owned(),
        }
    );
    // A fence that can rise (a mark written to disk) is asked, and then lets the unit through.
    fence.extensible.store(true, Ordering::SeqCst);
    generator.next_id().unwrap();
    assert_eq!(fence.limit_ms(), start + 3_000);
}

#[test]
fn a_closed_fence_stops_the_generator() {
    let layout = Layout::snowflake().unwrap();
    let clock = ManualClock::new(layout.epoch_ms() + 10_000);
    let fence = HandFence::at(0);
    fence.closed.store(true, Ordering::SeqCst);
    let generator = SnowflakeGenerator::new(layout, 1, clock)
        .unwrap()
        .fenced(fence);
    assert_eq!(
        generator.next_id(),
        Err(UidError::GeneratorStopped("worker lease lost".into()))
    );
}

#[test]
fn cached_padding_waits_at_the_fence_instead_of_padding_ids_it_would_refuse() {
    let layout = small_layout(4); // 16 IDs a second, a 128-slot ring
    let start = layout.epoch_ms() + 50_000;
    let clock = ManualClock::new(start);
    let fence = HandFence::at(start + 3_000); // units start, +1 s and +2 s
    let options = CachedOptions {
        fence: Some(fence.clone()),
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout.clone(), 1, clock, options).unwrap();
    let (mut ids, error) = take_until_error(|| generator.next_id());
    // The ring ran dry at the fence: a plain "empty", never "stopped", and nothing past it.
    assert!(matches!(error, UidError::RingEmpty(_)), "{error:?}");
    assert_eq!(ids.len(), 3 * 16);
    assert!(ids.iter().all(|&id| {
        let time = layout.decompose(id).unwrap().time;
        layout.millis_of(time + 1) <= start + 3_000
    }));
    // The fence rises (a renewal): padding goes on by itself.
    fence.limit.store(start + 4_000, Ordering::SeqCst);
    eventually("padding past the raised fence", || {
        generator.next_id().map(|id| ids.push(id)).is_ok()
    });
    ids.sort_unstable();
    assert_no_duplicates(&ids);
}

#[test]
fn a_fence_closed_while_padding_stops_the_ring_with_its_reason() {
    let layout = small_layout(4);
    let start = layout.epoch_ms() + 50_000;
    let fence = HandFence::at(start + 1_000);
    let options = CachedOptions {
        fence: Some(fence.clone()),
        ..CachedOptions::default()
    };
    let generator = CachedUidGenerator::new(layout, 1, ManualClock::new(start), options).unwrap();
    fence.closed.store(true, Ordering::SeqCst);
    let error = loop {
        if let Err(error) = generator.next_id() {
            if !matches!(error, UidError::RingEmpty(_)) {
                break error;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    assert_eq!(
        error,
        UidError::GeneratorStopped("worker lease lost".into())
    );
}

#[test]
fn a_fence_bounds_borrowing_by_its_own_limit() {
    let layout = small_layout(4);
    let fence = Arc::new(HandFence {
        limit: AtomicU64::new(u64::MAX),
        max_borrow_ms: Some(2_000),
        ..HandFence::default()
    });
    let options = CachedOptions {
        fence: Some(fence),
        max_borrow_units: Some(100),
        ..CachedOptions::default()
    };
    let clock = ManualClock::new(layout.epoch_ms() + 50_000);
    let generator = CachedUidGenerator::new(layout, 1, clock, options).unwrap();
    while generator.next_id().is_ok() {}
    // The tighter of the two bounds: 2 s of the fence, not 100 units of the options.
    assert_eq!(generator.borrowed_units(), 2);
}

#[test]
fn a_ring_size_that_would_overflow_is_refused_not_wrapped() {
    // 62 sequence bits shifted by 3 wrap a u64 to 2; checked_shl alone does not notice.
    let layout = Layout::baidu_bits(1, 0, 62, "2026-01-01").unwrap();
    let error =
        CachedUidGenerator::new(layout, 0, SystemClock, CachedOptions::default()).unwrap_err();
    assert!(
        matches!(
            &error,
            UidError::InvalidOption {
                name: "boost_power",
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_batch_larger_than_the_ring_is_delivered_whole_under_the_fail_fast_policy() {
    // A 64-slot ring and Baidu's default policy (an empty ring is an error for one ID).
    let layout = small_layout(3);
    let generator =
        CachedUidGenerator::new(layout, 1, SystemClock, CachedOptions::default()).unwrap();
    assert_eq!(generator.ring().buffer_size(), 64);
    let mut ids = generator.next_ids(20_000).unwrap();
    assert_eq!(ids.len(), 20_000);
    ids.sort_unstable();
    assert_no_duplicates(&ids);
}

#[test]
fn nothing_is_stamped_below_the_floor_even_when_the_clock_steps_back_after_a_takeover() {
    // The previous holder stamped up to `floor`; this host's clock then reads 3 s behind it.
    let layout = small_layout(13);
    let floor = layout.epoch_ms() + 100_000;
    let fence = |floor_ms| {
        Arc::new(HandFence {
            limit: AtomicU64::new(u64::MAX),
            floor_ms,
            ..HandFence::default()
        })
    };
    let clock = ManualClock::new(floor - 3_000);
    let default = DefaultUidGenerator::new(layout.clone(), 1, clock.clone())
        .unwrap()
        .fenced(fence(floor));
    assert!(matches!(
        default.next_id(),
        Err(UidError::ClockMovedBackwards { .. })
    ));
    clock.set(floor);
    let id = default.next_id().unwrap();
    assert_eq!(layout.millis_of(layout.decompose(id).unwrap().time), floor);

    // The cached generator pads from the floor, borrowing, rather than from its clock.
    let options = CachedOptions {
        fence: Some(fence(floor)),
        ..CachedOptions::default()
    };
    let cached =
        CachedUidGenerator::new(layout.clone(), 1, ManualClock::new(floor - 3_000), options)
            .unwrap();
    let id = cached.next_id().unwrap();
    assert_eq!(layout.millis_of(layout.decompose(id).unwrap().time), floor);

    // A floor inside a unit (a takeover mid-second): that unit ends after it, so it is usable;
    // the one before is not.
    let clock = ManualClock::new(floor - 1_500);
    let mid = DefaultUidGenerator::new(layout.clone(), 1, clock.clone())
        .unwrap()
        .fenced(fence(floor + 400));
    assert!(matches!(
        mid.next_id(),
        Err(UidError::ClockMovedBackwards { .. })
    ));
    clock.set(floor + 400);
    let id = mid.next_id().unwrap();
    assert_eq!(layout.millis_of(layout.decompose(id).unwrap().time), floor);
}

#[test]
fn unit_handles_claim_only_units_inside_the_fence_and_stop_when_it_closes() {
    let layout = small_layout(4); // 16 IDs a second
    let start = layout.epoch_ms() + 50_000;
    let fence = HandFence::at(start + 3_000); // the ring pads start, +1 s and +2 s
    let options = CachedOptions {
        fence: Some(fence.clone()),
        ..CachedOptions::default()
    };
    let generator =
        CachedUidGenerator::new(layout.clone(), 1, ManualClock::new(start), options).unwrap();
    let inside = |id: u64, limit: u64| {
        let time = layout.decompose(id).unwrap().time;
        layout.millis_of(time + 1) <= limit
    };
    let mut handle = generator.local_units();
    // The next unit would end past the fence: the handle takes the ring's 48 IDs instead.
    let (mut ids, error) = take_until_error(|| handle.next_id());
    assert!(matches!(error, UidError::RingEmpty(_)), "{error:?}");
    assert_eq!(ids.len(), 3 * 16);
    // A renewal: the handle goes on, with units inside the new limit only.
    fence.limit.store(start + 6_000, Ordering::SeqCst);
    eventually("a unit inside the raised fence", || {
        handle.next_id().map(|id| ids.push(id)).is_ok()
    });
    while let Ok(id) = handle.next_id() {
        ids.push(id);
    }
    assert!(ids.iter().all(|&id| inside(id, start + 6_000)));
    assert_eq!(ids.len(), 6 * 16, "every unit up to the raised fence, once");
    ids.sort_unstable();
    assert_no_duplicates(&ids);
    // The lease is lost: the next claim finds the fence closed, and the handle is over.
    fence.closed.store(true, Ordering::SeqCst);
    let error = loop {
        match handle.next_id() {
            Err(UidError::RingEmpty(_)) => std::thread::sleep(Duration::from_millis(1)),
            Err(error) => break error,
            Ok(id) => panic!("{id} issued past a closed fence"),
        }
    };
    assert_eq!(
        error,
        UidError::GeneratorStopped("worker lease lost".into())
    );
    assert!(generator.ring().is_stopped());
}
