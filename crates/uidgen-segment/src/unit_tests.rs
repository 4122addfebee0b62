//! Unit tests of the buffer logic (switching, prefetch, waiting, dynamic step) over an
//! in-process `leaf_alloc`. The same behaviours are tested on the real databases in `tests/`.

#![allow(clippy::unwrap_used)]

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;
use uidgen_core::ManualClock;

use crate::error::SegmentError;
use crate::options::SegmentOptions;
use crate::service::SegmentService;
use crate::source::memory::MemorySource;

mod failures;
mod hand_back;
mod residues;

const MINUTE: u64 = 60_000;

/// Fixed steps (the dynamic-step tests turn it on), short waits, no backoff.
fn options() -> SegmentOptions {
    SegmentOptions {
        wait_timeout: Duration::from_millis(300),
        retry_backoff: Duration::ZERO,
        dynamic_step: false,
        ..SegmentOptions::default()
    }
}

async fn service_with(
    source: &Arc<MemorySource>,
    options: SegmentOptions,
    clock: &ManualClock,
) -> Arc<SegmentService> {
    SegmentService::start_with_source(source.clone(), options, Arc::new(clock.clone()))
        .await
        .unwrap()
}

/// Poll until `done` holds (loads run as tasks), failing after 5 s.
async fn eventually(what: &str, done: impl FnMut() -> bool) {
    uidgen_testkit::eventually_within(what, 5, done).await;
}

fn steps(source: &MemorySource) -> Vec<i64> {
    source
        .claims
        .lock()
        .iter()
        .map(|(_, start, end)| end - start)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_run_on_across_segment_switches_and_the_next_segment_is_prefetched() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let mut ids = Vec::new();
    for _ in 0..35 {
        ids.push(service.get_async("t").await.unwrap());
    }
    assert_eq!(ids, (1..36).collect::<Vec<_>>());
    // Four segments for 35 IDs, and a fifth prefetched once 10% of the fourth was used.
    eventually("prefetch", || service.monitor()[0].next_ready).await;
    let claims = source.claims.lock().clone();
    assert_eq!(claims.len(), 5, "{claims:?} {:?}", service.monitor());
    let state = &service.monitor()[0];
    assert!(state.init);
    assert_eq!(state.segments[state.pos].value, 36);
    assert_eq!((state.loads, state.load_failures), (5, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_load_is_in_flight_however_many_callers_pass_the_prefetch_point() {
    let source = MemorySource::with_tag("t", 1_000);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    service.get_async("t").await.unwrap(); // first segment
    let gate = Arc::new(Semaphore::new(0));
    *source.gate.lock() = Some(gate.clone());
    for _ in 0..500 {
        service.get_async("t").await.unwrap(); // far past the 10% point
    }
    assert!(service.monitor()[0].loading);
    gate.add_permits(10);
    eventually("next ready", || service.monitor()[0].next_ready).await;
    assert_eq!(source.claim_count.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_waits_a_bounded_time_then_gets_both_segments_not_ready() {
    let source = MemorySource::with_tag("t", 5);
    *source.gate.lock() = Some(Arc::new(Semaphore::new(0)));
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let started = std::time::Instant::now();
    let service2 = service.clone();
    let error = tokio::task::spawn_blocking(move || service2.get("t"))
        .await
        .unwrap()
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(error.code(), -3, "{error}");
    assert!(error.to_string().contains("still loading"), "{error}");
    let error = service.get_async("t").await.unwrap_err();
    assert_eq!(error.code(), -3, "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_load_is_reported_then_recovered_from_without_repeating_an_id() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let mut seen = HashSet::new();
    for _ in 0..2 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    eventually("prefetch", || service.monitor()[0].next_ready).await;
    source.fail.store(true, Ordering::SeqCst);
    // Both buffered segments are still served.
    for _ in 0..18 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    let error = service.get_async("t").await.unwrap_err();
    assert!(
        matches!(error, SegmentError::BothSegmentsNotReady { ref reason, .. } if reason.contains(
            "simulated outage")),
        "{error}"
    );
    assert!(service.monitor()[0].last_error.is_some());
    source.fail.store(false, Ordering::SeqCst);
    for _ in 0..30 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    assert!(service.monitor()[0].last_error.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failure_background_prefetch_backs_off_on_the_clock() {
    let source = MemorySource::with_tag("t", 100);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        retry_backoff: Duration::from_millis(500),
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    service.get_async("t").await.unwrap();
    source.fail.store(true, Ordering::SeqCst);
    eventually("failed prefetch", || {
        service.get("t").unwrap();
        service.monitor()[0].last_error.is_some()
    })
    .await;
    let attempts = source.claim_count.load(Ordering::SeqCst);
    for _ in 0..20 {
        service.get_async("t").await.unwrap();
    }
    assert_eq!(source.claim_count.load(Ordering::SeqCst), attempts);
    source.fail.store(false, Ordering::SeqCst);
    clock.advance(500);
    service.get_async("t").await.unwrap();
    eventually("retried prefetch", || service.monitor()[0].next_ready).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_spans_segment_switches_and_is_capped() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        max_batch: 100,
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    let ids = service.get_batch_async("t", 25).await.unwrap();
    assert_eq!(ids, (1..26).collect::<Vec<_>>());
    let service2 = service.clone();
    let more = tokio::task::spawn_blocking(move || service2.get_batch("t", 30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(more.len(), 30);
    assert!(more.windows(2).all(|w| w[0] < w[1]) && more[0] > 25);
    for n in [0, 101] {
        let error = service.get_batch("t", n).unwrap_err();
        assert!(
            matches!(error, SegmentError::InvalidCount { max: 100, .. }),
            "{error}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_step_doubles_keeps_and_halves_by_how_long_a_segment_lasted() {
    let source = MemorySource::with_tag("t", 100);
    let clock = ManualClock::new(1_000_000);
    let dynamic = SegmentOptions {
        dynamic_step: true,
        ..options()
    };
    let service = service_with(&source, dynamic, &clock).await;
    let handle = service.tag("t").unwrap();
    // Take IDs until a prefetch has landed, then use up the current segment.
    let next_segment = || async {
        loop {
            handle.get_async().await.unwrap();
            if service.monitor()[0].next_ready || service.monitor()[0].loading {
                break;
            }
        }
        eventually("next ready", || service.monitor()[0].next_ready).await;
        let state = &service.monitor()[0];
        for _ in 0..state.segments[state.pos].idle {
            handle.get_async().await.unwrap();
        }
    };
    next_segment().await; // loads 1 and 2 use the table's step; load 2 starts the clock
    clock.advance(5 * MINUTE);
    next_segment().await; // segment 2 lasted 5 min: double
    clock.advance(20 * MINUTE);
    next_segment().await; // 20 min: keep
    clock.advance(45 * MINUTE);
    next_segment().await; // 45 min: halve
    clock.advance(45 * MINUTE);
    next_segment().await; // 45 min again: not below the table's 100
    assert_eq!(steps(&source), [100, 100, 200, 200, 100, 100]);
    assert_eq!(service.monitor()[0].min_step, 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_step_stops_doubling_at_max_step_and_can_be_turned_off() {
    let source = MemorySource::with_tag("t", 100);
    let clock = ManualClock::new(0);
    let capped = SegmentOptions {
        max_step: 300,
        prefetch_ratio: 0.0,
        dynamic_step: true,
        ..options()
    };
    let service = service_with(&source, capped, &clock).await;
    for _ in 0..1_500 {
        service.get_async("t").await.unwrap();
    }
    let steps_seen = steps(&source);
    assert_eq!(&steps_seen[..4], [100, 100, 200, 300]);
    assert!(steps_seen.iter().all(|&s| s <= 300));

    let source = MemorySource::with_tag("t", 100);
    let fixed = SegmentOptions {
        dynamic_step: false,
        ..options()
    };
    let service = service_with(&source, fixed, &clock).await;
    for _ in 0..1_000 {
        service.get_async("t").await.unwrap();
    }
    assert!(steps(&source).iter().all(|&s| s == 100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_tag_is_evicted_on_sync_and_a_new_one_becomes_usable() {
    let source = MemorySource::with_tag("old", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    service.get_async("old").await.unwrap();
    service.get("old").unwrap(); // now in this thread's tag cache
    let error = service.get_async("new").await.unwrap_err();
    assert_eq!(error.code(), -2);
    source.remove("old");
    source.upsert_direct("new", 10);
    service.sync_tags().await.unwrap();
    assert_eq!(service.tags(), ["new"]);
    assert_eq!(service.get_async("old").await.unwrap_err().code(), -2);
    assert_eq!(service.get("old").unwrap_err().code(), -2); // the cache was invalidated
    assert_eq!(service.get_async("new").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_deleted_between_syncs_reports_unknown_tag_when_its_segments_run_out() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        prefetch_ratio: 0.9,
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    service.get_async("t").await.unwrap();
    source.remove("t");
    for _ in 0..9 {
        service.get_async("t").await.unwrap();
    }
    let error = service.get_async("t").await.unwrap_err();
    assert!(matches!(error, SegmentError::UnknownTag(_)), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_started_while_the_database_is_down_is_not_initialised_until_a_sync() {
    let source = MemorySource::with_tag("t", 10);
    source.fail.store(true, Ordering::SeqCst);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let error = service.get("t").unwrap_err();
    assert_eq!(error.code(), -1, "{error}");
    assert!(error.to_string().contains("simulated outage"), "{error}");
    source.fail.store(false, Ordering::SeqCst);
    // The background task retries every `init_retry_interval` (1 s).
    eventually("initialised", || service.is_initialised()).await;
    assert_eq!(service.get_async("t").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_max_id_moved_backwards_is_refused_rather_than_repeating_ids() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        prefetch_ratio: 0.0,
        retry_backoff: Duration::from_secs(3600),
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    let mut seen = HashSet::new();
    seen.insert(service.get_async("t").await.unwrap());
    eventually("prefetch", || service.monitor()[0].next_ready).await;
    source.set_max_id("t", 5); // the next claim would be [5, 15): already served
    for _ in 0..19 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    let error = service.get_async("t").await.unwrap_err();
    assert_eq!(error.code(), -3);
    assert!(error.to_string().contains("moved backwards"), "{error}");
    // Once the row is past what was served, service resumes, still without repeats.
    source.set_max_id("t", 100);
    clock.advance(3_600_000);
    for _ in 0..30 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_makes_a_tag_usable_at_once_and_validates_input() {
    let source = Arc::new(MemorySource::default());
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let row = service.upsert_tag("fresh", 50, Some("d")).await.unwrap();
    assert_eq!(row.step, 50);
    // Before any load, the monitor shows the stored step (a console showed "0 (min 1)").
    let before = &service.monitor()[0];
    assert_eq!((before.init, before.step, before.min_step), (false, 0, 50));
    assert_eq!(service.get_async("fresh").await.unwrap(), 1);
    let error = service.upsert_tag("", 50, None).await.unwrap_err();
    assert!(matches!(error, SegmentError::InvalidTag { .. }), "{error}");
    let error = service.upsert_tag("x", 0, None).await.unwrap_err();
    assert!(matches!(error, SegmentError::InvalidStep { .. }), "{error}");
    let error = service.get("").unwrap_err();
    assert!(matches!(error, SegmentError::InvalidTag { .. }), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_shutdown_calls_fail_with_shutdown() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    service.get_async("t").await.unwrap();
    service.shutdown();
    assert!(matches!(service.get("t"), Err(SegmentError::Shutdown)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_threads_never_share_an_id_with_a_small_step() {
    let source = MemorySource::with_tag("t", 500);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let service = service.clone();
            std::thread::spawn(move || {
                (0..50_000)
                    .map(|_| service.get("t").unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = HashSet::new();
    for thread in threads {
        for id in thread.join().unwrap() {
            assert!(all.insert(id), "duplicate {id}");
        }
    }
    let claims = source.claims.lock();
    assert!(
        all.iter()
            .all(|id| claims.iter().any(|(_, s, e)| (s..e).contains(&id)))
    );
}
