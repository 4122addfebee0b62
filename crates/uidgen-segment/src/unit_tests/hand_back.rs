//! Handing segment tails back at a clean stop: what is handed back is exactly what no taker
//! got, and the next load serves it before a new segment.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::Semaphore;
use uidgen_core::ManualClock;
use uidgen_store::{Residue, ReturnedRange};

use super::{eventually, options, service_with};
use crate::source::memory::MemorySource;
use crate::{HandedBack, SegmentOptions};

fn returned(source: &MemorySource) -> Vec<(i64, i64)> {
    let mut ranges: Vec<(i64, i64)> = source
        .returned
        .lock()
        .iter()
        .map(|r| (r.start, r.end))
        .collect();
    ranges.sort_unstable();
    ranges
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hands_back_the_rest_of_the_current_segment_and_the_whole_next_one() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let first = service_with(&source, options(), &clock).await;
    for id in 1..=3 {
        assert_eq!(first.get_async("t").await.unwrap(), id);
    }
    eventually("prefetch", || first.monitor()[0].next_ready).await;
    let back = first.shutdown_and_hand_back().await.unwrap();
    assert_eq!(back, HandedBack { ranges: 2, ids: 17 });
    assert_eq!(returned(&source), vec![(4, 11), (11, 21)]);
    // Never twice.
    assert_eq!(
        first.shutdown_and_hand_back().await.unwrap(),
        HandedBack::default()
    );

    let second = service_with(&source, options(), &clock).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(second.get_async("t").await.unwrap());
    }
    assert_eq!(
        ids,
        (4..24).collect::<Vec<_>>(),
        "the tails first, then a new segment"
    );
    let state = &second.monitor()[0];
    assert_eq!((state.reused_ranges, state.reused_ids), (2, 17));
    assert!(returned(&source).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_server_serves_a_tail_below_what_it_already_served() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let stopping = service_with(&source, options(), &clock).await;
    // [1, 11), prefetching [11, 21) once past its 10% point.
    assert_eq!(stopping.get_async("t").await.unwrap(), 1);
    assert_eq!(stopping.get_async("t").await.unwrap(), 2);
    eventually("prefetch", || stopping.monitor()[0].next_ready).await;
    let running = service_with(&source, options(), &clock).await;
    assert_eq!(running.get_async("t").await.unwrap(), 21);
    assert_eq!(running.get_async("t").await.unwrap(), 22);
    eventually("prefetch", || running.monitor()[0].next_ready).await; // [31, 41)
    stopping.shutdown_and_hand_back().await.unwrap();
    // [23, 31) and [31, 41) first, then the handed-back [3, 11) and [11, 21), then new ones.
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(running.get_async("t").await.unwrap());
    }
    let wanted: Vec<i64> = (23..41).chain(3..21).chain(41..45).collect();
    assert_eq!(ids, wanted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_back_tail_keeps_its_residue() {
    let residue = Residue::new(3, 1).unwrap();
    let source = MemorySource::with_tag("t", 30);
    source.residues.lock().insert("t".to_owned(), residue);
    let clock = ManualClock::new(0);
    let first = service_with(&source, options(), &clock).await;
    // [1, 31) serves 1, 4, 7, ...: take 1 and 4.
    assert_eq!(first.get_async("t").await.unwrap(), 1);
    assert_eq!(first.get_async("t").await.unwrap(), 4);
    eventually("prefetch", || first.monitor()[0].next_ready).await;
    let back = first.shutdown_and_hand_back().await.unwrap();
    // 7..=28 (8 numbers) and the whole of [31, 61) (10 numbers).
    assert_eq!(back.ids, 18);
    for range in source.returned.lock().iter() {
        assert_eq!(range.residue, residue);
        assert!(residue.contains(range.start), "{range:?}");
    }
    let second = service_with(&source, options(), &clock).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(second.get_async("t").await.unwrap());
    }
    let wanted: Vec<i64> = (7..100).filter(|x| residue.contains(*x)).take(20).collect();
    assert_eq!(ids, wanted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_hand_back_off_a_stop_skips_its_tails_as_leaf_does() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let off = SegmentOptions {
        hand_back_tails: false,
        ..options()
    };
    let first = service_with(&source, off.clone(), &clock).await;
    first.get_async("t").await.unwrap();
    assert_eq!(
        first.shutdown_and_hand_back().await.unwrap(),
        HandedBack::default()
    );
    assert!(returned(&source).is_empty());
    // Nor does a server with it off take a range another handed back.
    source.returned.lock().push(ReturnedRange {
        biz_tag: "t".into(),
        start: 5,
        end: 8,
        residue: Residue::SINGLE,
        epoch: 0,
    });
    let second = service_with(&source, off, &clock).await;
    assert!(second.get_async("t").await.unwrap() > 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_whose_load_ends_after_the_stop_is_handed_back_whole() {
    let source = MemorySource::with_tag("t", 10);
    let clock = ManualClock::new(0);
    let service = service_with(&source, options(), &clock).await;
    service.get_async("t").await.unwrap(); // [1, 11)
    let gate = Arc::new(Semaphore::new(0));
    *source.gate.lock() = Some(gate.clone());
    service.get_async("t").await.unwrap(); // past 10%: the load of the next one waits
    eventually("loading", || service.monitor()[0].loading).await;
    let stopping = {
        let service = service.clone();
        tokio::spawn(async move { service.shutdown_and_hand_back().await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !stopping.is_finished(),
        "the stop waits for the load in flight"
    );
    gate.add_permits(1);
    let back = stopping.await.unwrap().unwrap();
    assert_eq!(back, HandedBack { ranges: 2, ids: 18 });
    assert_eq!(returned(&source), vec![(3, 11), (11, 21)]);
}

/// Four threads take IDs while the service stops: no number is both taken and handed back,
/// and (but for the few a race skips, as Leaf allows) every claimed number is one or the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takers_racing_the_stop_never_get_a_number_that_is_handed_back() {
    for round in 0..20 {
        let source = MemorySource::with_tag("t", 50);
        let clock = ManualClock::new(0);
        let service = service_with(&source, options(), &clock).await;
        let takers: Vec<_> = (0..4)
            .map(|_| {
                let service = service.clone();
                std::thread::spawn(move || {
                    let mut ids = Vec::new();
                    while let Ok(id) = service.get("t") {
                        ids.push(id);
                    }
                    ids
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(2 + round % 5)).await;
        service.shutdown_and_hand_back().await.unwrap();
        let mut taken = HashSet::new();
        for taker in takers {
            for id in taker.join().unwrap() {
                assert!(taken.insert(id), "{id} taken twice");
            }
        }
        let handed_back: Vec<i64> = source
            .returned
            .lock()
            .iter()
            .flat_map(|r| r.start..r.end)
            .collect();
        for id in &handed_back {
            assert!(
                !taken.contains(id),
                "round {round}: {id} taken and handed back"
            );
        }
        let claimed: i64 = source.claims.lock().iter().map(|(_, s, e)| e - s).sum();
        let accounted = i64::try_from(taken.len() + handed_back.len()).unwrap();
        let skipped = claimed - accounted;
        let claims = i64::try_from(source.claim_count.load(Ordering::SeqCst)).unwrap();
        assert!(
            (0..=4 * claims).contains(&skipped),
            "round {round}: {skipped} skipped of {claimed} in {claims} claims"
        );
    }
}
