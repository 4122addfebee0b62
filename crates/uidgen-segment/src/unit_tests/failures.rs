//! Unit tests of the failure paths: a database that stops answering, unknown, re-created and
//! exhausted tags, shutdown seen through handles, and the load counters.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;
use uidgen_core::ManualClock;

use super::{eventually, options, service_with};
use crate::error::SegmentError;
use crate::options::SegmentOptions;
use crate::service::SegmentService;
use crate::source::memory::MemorySource;

/// Take IDs until the first error, which is returned; every ID must be new to `seen`.
async fn take_until_error(service: &SegmentService, seen: &mut HashSet<i64>) -> SegmentError {
    for _ in 0..1_000 {
        match service.get_async("t").await {
            Ok(id) => assert!(seen.insert(id), "duplicate {id}"),
            Err(error) => return error,
        }
    }
    panic!("no error after 1,000 IDs");
}

/// Run `f` on a plain thread and fail (rather than hang the suite) if it does not finish in
/// 20 s: the bug these guard against is a caller spinning forever.
fn on_thread_or_fail<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()));
    result
        .recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what}: still running after 20 s (spinning?)"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_never_answers_times_out_as_a_failed_load_and_is_retried() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        load_timeout: Duration::from_millis(200),
        wait_timeout: Duration::from_millis(50),
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    let gate = Arc::new(Semaphore::new(0));
    *source.gate.lock() = Some(gate.clone());
    // The claim hangs: the caller gets -3 while it is in flight...
    let error = service.get_async("t").await.unwrap_err();
    assert_eq!(error.code(), -3, "{error}");
    // ...and the load is abandoned after load_timeout as a failed load, not left in flight.
    eventually("timed-out load", || {
        let state = &service.monitor()[0];
        !state.loading && state.load_failures == 1
    })
    .await;
    let state = service.monitor().remove(0);
    let last_error = state.last_error.as_deref().unwrap_or_default();
    assert!(last_error.contains("did not answer"), "{state:?}");
    let error = service.get_async("t").await.unwrap_err();
    assert!(
        matches!(&error, SegmentError::BothSegmentsNotReady { reason, .. } if reason.contains(
            "claiming a segment")),
        "{error}"
    );
    // The database answers again: a later attempt succeeds, and nothing repeats.
    *source.gate.lock() = None;
    gate.add_permits(1_000);
    let mut seen = HashSet::new();
    for _ in 0..100 {
        // An attempt in flight when the gate opened may still time out: -3 once more.
        match service.get_async("t").await {
            Ok(id) => {
                seen.insert(id);
                break;
            }
            Err(error) => assert_eq!(error.code(), -3, "{error}"),
        }
    }
    assert_eq!(seen.len(), 1, "no recovery");
    for _ in 0..30 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    let state = service.monitor().remove(0);
    assert!(state.loads >= 3 && state.load_failures >= 1, "{state:?}");
    assert!(state.last_error.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_list_and_upsert_calls_that_never_answer_time_out() {
    let source = MemorySource::with_tag("t", 10);
    source.silent_admin.store(true, Ordering::SeqCst);
    let clock = ManualClock::new(0);
    let options = SegmentOptions {
        load_timeout: Duration::from_millis(100),
        ..options()
    };
    // `start` returns although the tag list never arrives.
    let service = service_with(&source, options, &clock).await;
    let error = service.get("t").unwrap_err();
    assert_eq!(error.code(), -1, "{error}");
    assert!(error.to_string().contains("did not answer"), "{error}");
    let error = service.upsert_tag("u", 5, None).await.unwrap_err();
    assert!(
        matches!(
            error,
            SegmentError::TimedOut {
                action: "creating or updating a biz tag",
                waited_ms: 100
            }
        ),
        "{error}"
    );
    let error = service.sync_tags().await.unwrap_err();
    assert!(matches!(error, SegmentError::TimedOut { .. }), "{error}");
    source.silent_admin.store(false, Ordering::SeqCst);
    service.sync_tags().await.unwrap();
    service.upsert_tag("u", 5, None).await.unwrap();
    assert_eq!(service.get_async("u").await.unwrap(), 1);
    assert_eq!(service.get_async("t").await.unwrap(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_tag_is_retried_after_the_back_off_and_at_once_after_a_sync_or_upsert() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(1_000);
    let options = SegmentOptions {
        retry_backoff: Duration::from_millis(500),
        ..options()
    };
    let service = service_with(&source, options, &clock).await;
    let mut seen = HashSet::new();
    assert!(seen.insert(service.get_async("t").await.unwrap()));
    let mut row_at = 100;
    for comeback in ["back-off", "sync", "upsert"] {
        source.remove("t");
        let error = take_until_error(&service, &mut seen).await;
        assert!(matches!(error, SegmentError::UnknownTag(_)), "{error}");
        // The row comes back (above everything served), but the failure is remembered...
        source.recreate("t", 10);
        source.set_max_id("t", row_at);
        let error = service.get_async("t").await.unwrap_err();
        assert_eq!(error.code(), -2, "{comeback}: {error}");
        // ...until the back-off ends, or something shows the tag exists.
        match comeback {
            "back-off" => clock.advance(500),
            "sync" => service.sync_tags().await.unwrap(),
            _ => {
                service.upsert_tag("t", 10, None).await.unwrap();
            }
        }
        assert_eq!(service.get_async("t").await.unwrap(), row_at, "{comeback}");
        assert!(seen.insert(row_at));
        row_at *= 10;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_created_tag_never_repeats_what_this_service_served_even_after_eviction() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let mut seen = HashSet::new();
    for _ in 0..25 {
        assert!(seen.insert(service.get_async("t").await.unwrap()));
    }
    let take = async |seen: &mut HashSet<i64>| {
        let mut refused = 0;
        for _ in 0..300 {
            match service.get_async("t").await {
                Ok(id) => assert!(seen.insert(id), "duplicate {id}"),
                Err(error) => {
                    assert!(error.to_string().contains("moved backwards"), "{error}");
                    refused += 1;
                }
            }
        }
        refused
    };
    // Deleted and re-created between two syncs: the row restarts at max_id 1.
    source.recreate("t", 10);
    assert!(take(&mut seen).await > 0);
    // Deleted, evicted by a sync, re-created, picked up by the next sync: a new buffer, which
    // still knows what the evicted one served.
    source.remove("t");
    service.sync_tags().await.unwrap();
    assert_eq!(service.get_async("t").await.unwrap_err().code(), -2);
    source.recreate("t", 10);
    service.sync_tags().await.unwrap();
    assert!(take(&mut seen).await > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_at_the_top_of_the_id_space_is_exhausted_without_overflow_or_spinning() {
    let source = MemorySource::with_tag("t", 10);
    source.set_max_id("t", i64::MAX - 20);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(service.get_async("t").await.unwrap());
    }
    assert_eq!(ids, (i64::MAX - 20..i64::MAX).collect::<Vec<_>>());
    let error = on_thread_or_fail("the first caller after exhaustion", {
        let service = service.clone();
        move || service.get("t").unwrap_err()
    });
    assert!(
        matches!(
            error,
            SegmentError::TagExhausted {
                max_id: i64::MAX,
                ..
            }
        ),
        "{error}"
    );
    // Callers that keep asking push the cursor past i64::MAX; they must keep getting the error.
    let errors = on_thread_or_fail("callers after exhaustion", {
        let service = service.clone();
        move || {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    let service = service.clone();
                    std::thread::spawn(move || {
                        (0..500)
                            .map(|i| {
                                let result = if i % 2 == 0 {
                                    service.get("t").map(|_| ())
                                } else {
                                    service.get_batch("t", 3).map(|_| ())
                                };
                                matches!(result, Err(SegmentError::TagExhausted { .. }))
                            })
                            .filter(|&exhausted| exhausted)
                            .count()
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .sum::<usize>()
        }
    });
    assert_eq!(errors, 2_000);
    let state = service.monitor().remove(0);
    assert_eq!(state.segments[state.pos].idle, 0, "{state:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_eviction_stop_tag_handles_with_segments_left() {
    let source = MemorySource::with_tag("t", 1_000);
    source.upsert_direct("old", 1_000);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    let old = service.tag("old").unwrap();
    old.get().unwrap();
    source.remove("old");
    service.sync_tags().await.unwrap();
    assert!(
        matches!(old.get(), Err(SegmentError::UnknownTag(_))),
        "a handle on an evicted tag"
    );

    let handle = service.tag("t").unwrap();
    for _ in 0..200 {
        handle.get().unwrap(); // past 10%: the next segment is loaded too
    }
    eventually("prefetch", || service.monitor()[0].next_ready).await;
    // A thread whose per-thread tag cache holds the buffer across the shutdown.
    let (cached_tx, cached_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let cached = {
        let service = service.clone();
        std::thread::spawn(move || {
            cached_tx.send(service.get("t").is_ok()).unwrap();
            go_rx.recv().unwrap();
            service.get("t")
        })
    };
    assert!(cached_rx.recv().unwrap());
    service.shutdown();
    assert!(matches!(handle.get(), Err(SegmentError::Shutdown)));
    assert!(matches!(handle.get_batch(5), Err(SegmentError::Shutdown)));
    assert!(matches!(
        handle.get_async().await,
        Err(SegmentError::Shutdown)
    ));
    assert!(matches!(service.get("t"), Err(SegmentError::Shutdown)));
    go_tx.send(()).unwrap();
    let from_cached_thread = cached.join().unwrap();
    assert!(matches!(from_cached_thread, Err(SegmentError::Shutdown)));
}
