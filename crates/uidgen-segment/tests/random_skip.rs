//! Non-continuous segment IDs (`SegmentOptions::random_skip_max`, Leaf PR #118): on SQLite,
//! MariaDB and PostgreSQL, many threads take single IDs and batches across many segment
//! switches; no ID repeats, each thread's IDs strictly increase, every ID lies inside a claimed
//! segment, and the gaps are there.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{all_dbs, assert_unique, fresh_with_tag, max_id, service};
use uidgen_core::SystemClock;
use uidgen_segment::{MAX_RANDOM_SKIP, SegmentError, SegmentOptions};

const STEP: i64 = 1_000;
const SKIP: u32 = 9;

fn skipping() -> SegmentOptions {
    SegmentOptions {
        dynamic_step: false,
        random_skip_max: SKIP,
        // Loads are quick, but the machine may be busy: a slow claim must not fail the test.
        wait_timeout: Duration::from_secs(10),
        ..SegmentOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skipping_threads_never_repeat_always_increase_and_leave_gaps() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "orders", STEP).await;
        let service = service(store.clone(), skipping(), SystemClock).await;
        let threads: Vec<_> = (0..4_usize)
            .map(|t| {
                let service = service.clone();
                std::thread::spawn(move || {
                    let mut ids = Vec::new();
                    for i in 0..2_000_usize {
                        if (i + t) % 4 == 0 {
                            // Batches too: 1 to 30 IDs, some spanning a switch.
                            let n = (i * 7 + t) % 30 + 1;
                            let batch = service.get_batch("orders", n).unwrap();
                            assert_eq!(batch.len(), n);
                            ids.extend(batch);
                        } else {
                            ids.push(service.get("orders").unwrap());
                        }
                    }
                    ids
                })
            })
            .collect();
        let per_thread: Vec<Vec<i64>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        for ids in &per_thread {
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "{db:?}: a thread's IDs strictly increase"
            );
        }
        let mut ids: Vec<i64> = per_thread.into_iter().flatten().collect();
        let count = ids.len();
        assert_unique(&mut ids, &format!("{db:?}"));
        common::eventually("loads to settle", 10, || !service.monitor()[0].loading).await;
        let claimed_end = max_id(&store, "orders").await;
        assert!(ids[0] >= 1 && *ids.last().unwrap() < claimed_end, "{db:?}");
        // Gaps: with skips of 0 to 9 (4.5 on average), most neighbours are more than 1 apart,
        // and the IDs spread over several times their count.
        let gaps = ids.windows(2).filter(|w| w[1] - w[0] > 1).count();
        assert!(
            gaps > count / 2,
            "{db:?}: only {gaps} gaps among {count} IDs"
        );
        let spread = ids.last().unwrap() - ids[0];
        assert!(
            spread > 3 * i64::try_from(count).unwrap(),
            "{db:?}: {count} IDs over only {spread}"
        );
        let state = service.monitor().remove(0);
        assert_eq!(state.load_failures, 0, "{db:?}: {state:?}");
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_caller_sees_every_gap_within_the_bound_and_never_past_a_segment() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "invoices", STEP).await;
        let service = service(store.clone(), skipping(), SystemClock).await;
        let mut ids = Vec::with_capacity(5_000);
        for _ in 0..5_000 {
            ids.push(service.get_async("invoices").await.unwrap());
        }
        for w in ids.windows(2) {
            let gap = w[1] - w[0];
            // One caller alone: the next ID is 1 to SKIP + 1 further on, or in the next
            // segment (each segment is [k * STEP + 1, (k + 1) * STEP + 1)).
            let same_segment = (w[0] - 1) / STEP == (w[1] - 1) / STEP;
            assert!(gap >= 1, "{db:?}: {w:?}");
            if same_segment {
                assert!(gap <= i64::from(SKIP) + 1, "{db:?}: {w:?}");
            }
        }
        let distinct_gaps: std::collections::HashSet<i64> =
            ids.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            distinct_gaps.len() >= 5,
            "{db:?}: gaps look fixed: {distinct_gaps:?}"
        );
        service.shutdown();
    }
}

#[test]
fn a_skip_past_the_bound_is_refused() {
    let bad = SegmentOptions {
        random_skip_max: MAX_RANDOM_SKIP + 1,
        ..SegmentOptions::default()
    };
    assert!(matches!(
        bad.validate(),
        Err(SegmentError::InvalidOption {
            option: "random_skip_max",
            ..
        })
    ));
    let most = SegmentOptions {
        random_skip_max: MAX_RANDOM_SKIP,
        ..SegmentOptions::default()
    };
    most.validate().unwrap();
}
