//! The segment service on SQLite, MariaDB and PostgreSQL: concurrency, restart, dynamic step,
//! tags. Every test body runs against all three databases.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestDb, all_dbs, assert_unique, fresh, fresh_with_tag, max_id, service};
use uidgen_core::{ManualClock, SystemClock};
use uidgen_segment::{SegmentError, SegmentOptions, SegmentService};
use uidgen_store::Store;
use uidgen_store::testing::run_script;

const MINUTE: u64 = 60_000;

/// Small segments and no dynamic step, so the threads switch segments thousands of times.
const SMALL_STEP: i64 = 1_000;

fn fixed_small_steps() -> SegmentOptions {
    SegmentOptions {
        dynamic_step: false,
        // Loads are quick, but the machine may be busy: a slow claim must not fail the test.
        wait_timeout: Duration::from_secs(10),
        ..SegmentOptions::default()
    }
}

/// After a run in which only `service` claimed: no duplicate, every ID inside `[1, max_id)`,
/// and every claim accounted for by the service's loads (so every range was claimed by it).
async fn check_run(db: TestDb, store: &Store, service: &SegmentService, ids: &mut [i64]) -> u64 {
    assert_unique(ids, &format!("{db:?}"));
    // A prefetch may still be on its way: let it land, so it is both claimed and counted.
    common::eventually("loads to settle", 10, || !service.monitor()[0].loading).await;
    let claimed_end = max_id(store, "busy").await;
    assert!(ids[0] >= 1 && *ids.last().unwrap() < claimed_end, "{db:?}");
    let state = service.monitor().remove(0);
    assert_eq!(state.load_failures, 0, "{db:?}: {state:?}");
    assert_eq!(
        claimed_end - 1,
        i64::try_from(state.loads).unwrap() * SMALL_STEP,
        "{db:?}: {state:?}"
    );
    state.loads
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_threads_take_a_million_ids_each_across_thousands_of_switches_without_a_duplicate() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "busy", SMALL_STEP).await;
        let service = service(store.clone(), fixed_small_steps(), SystemClock).await;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let service = service.clone();
                std::thread::spawn(move || {
                    (0..1_000_000)
                        .map(|_| service.get("busy").unwrap())
                        .collect::<Vec<i64>>()
                })
            })
            .collect();
        let mut ids: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        assert_eq!(ids.len(), 4_000_000);
        let loads = check_run(db, &store, &service, &mut ids).await;
        assert!(loads >= 4_000, "{db:?}: only {loads} segments");
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_batches_spanning_switches_never_share_an_id() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "busy", SMALL_STEP).await;
        let service = service(store.clone(), fixed_small_steps(), SystemClock).await;
        let threads: Vec<_> = (0..4_usize)
            .map(|t| {
                let service = service.clone();
                std::thread::spawn(move || {
                    let handle = service.tag("busy").unwrap();
                    let mut ids = Vec::new();
                    for i in 0..300_usize {
                        // 1 to 2,500: many batches span one or two segment switches.
                        let n = (i * 7_919 + t * 104_729) % 2_500 + 1;
                        let batch = if i % 2 == 0 {
                            service.get_batch("busy", n).unwrap()
                        } else {
                            handle.get_batch(n).unwrap()
                        };
                        assert_eq!(batch.len(), n);
                        assert!(batch.windows(2).all(|w| w[0] < w[1]));
                        ids.extend(batch);
                    }
                    ids
                })
            })
            .collect();
        let mut ids: Vec<i64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        let loads = check_run(db, &store, &service, &mut ids).await;
        assert!(loads >= 1_000, "{db:?}: only {loads} segments");
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_near_i64_max_serves_its_last_id_then_reports_exhaustion() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "top", 100).await;
        let near = i64::MAX - 200;
        run_script(
            &store,
            &format!("UPDATE leaf_alloc SET max_id = {near} WHERE biz_tag = 'top'"),
        )
        .await
        .unwrap();
        let options = SegmentOptions {
            dynamic_step: false,
            ..SegmentOptions::default()
        };
        let service = service(store.clone(), options, SystemClock).await;
        let ids = service.get_batch_async("top", 200).await.unwrap();
        assert_eq!(ids, (near..i64::MAX).collect::<Vec<_>>(), "{db:?}");
        // Callers that keep asking push the cursor past i64::MAX: each must get the typed
        // error, none may spin.
        let errors = common::on_thread_or_fail("callers after exhaustion", 30, {
            let service = service.clone();
            move || {
                (0..300)
                    .map(|i| {
                        if i % 3 == 0 {
                            service.get_batch("top", 3).unwrap_err()
                        } else {
                            service.get("top").unwrap_err()
                        }
                    })
                    .collect::<Vec<_>>()
            }
        });
        for error in errors {
            assert!(
                matches!(&error, SegmentError::TagExhausted { tag, max_id: i64::MAX } if tag == "top"),
                "{db:?}: {error}"
            );
        }
        // The row is intact: still the largest ID, as an integer (SQLite would have gone float).
        assert_eq!(max_id(&store, "top").await, i64::MAX, "{db:?}");
        assert!(service.monitor()[0].load_failures > 0, "{db:?}");
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_service_continues_above_every_claimed_max_id() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "order", 1_000).await;
        let mut all = Vec::new();
        let mut highest_claimed = 1;
        for round in 0..3 {
            let service = service(store.clone(), SegmentOptions::default(), SystemClock).await;
            let ids = service.get_batch_async("order", 1_500).await.unwrap();
            assert!(
                ids[0] >= highest_claimed,
                "{db:?} round {round}: {} below {highest_claimed}",
                ids[0]
            );
            all.extend(ids);
            service.shutdown();
            drop(service);
            tokio::time::sleep(Duration::from_millis(50)).await; // let a prefetch in flight land
            highest_claimed = max_id(&store, "order").await;
        }
        assert_unique(&mut all, &format!("{db:?}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_spans_a_segment_switch_on_the_database() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "t", 10).await;
        let options = SegmentOptions {
            dynamic_step: false,
            ..SegmentOptions::default()
        };
        let service = service(store.clone(), options, SystemClock).await;
        let ids = service.get_batch_async("t", 35).await.unwrap();
        assert_eq!(ids, (1..36).collect::<Vec<_>>(), "{db:?}");
        let error = service.get_batch("t", 10_001).unwrap_err();
        assert!(matches!(error, SegmentError::InvalidCount { .. }), "{db:?}");
    }
}

/// Take IDs until the next segment has been claimed, then use up the current one.
async fn use_up_segment(service: &uidgen_segment::SegmentService, tag: &str) {
    loop {
        service.get_async(tag).await.unwrap();
        let state = &service.monitor()[0];
        if state.next_ready || state.loading {
            break;
        }
    }
    common::eventually("next segment", 10, || service.monitor()[0].next_ready).await;
    let state = &service.monitor()[0];
    for _ in 0..state.segments[state.pos].idle {
        service.get_async(tag).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_step_doubles_keeps_and_halves_on_the_database() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "t", 100).await;
        let clock = ManualClock::new(1_700_000_000_000);
        let service = service(store.clone(), SegmentOptions::default(), clock.clone()).await;
        let mut claimed = vec![max_id(&store, "t").await];
        let record = async |claimed: &mut Vec<i64>| {
            claimed.push(max_id(&store, "t").await);
        };
        use_up_segment(&service, "t").await; // two claims at the table's step
        record(&mut claimed).await;
        clock.advance(5 * MINUTE);
        use_up_segment(&service, "t").await; // lasted 5 min: double
        record(&mut claimed).await;
        clock.advance(20 * MINUTE);
        use_up_segment(&service, "t").await; // 20 min: keep
        record(&mut claimed).await;
        clock.advance(45 * MINUTE);
        use_up_segment(&service, "t").await; // 45 min: halve
        record(&mut claimed).await;
        clock.advance(45 * MINUTE);
        use_up_segment(&service, "t").await; // never below the table's 100
        record(&mut claimed).await;
        let grown: Vec<i64> = claimed.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(grown, [200, 200, 200, 100, 100], "{db:?}");
        assert_eq!(service.monitor()[0].step, 100, "{db:?}");
        // An admin raising the stored step lifts the floor.
        service.upsert_tag("t", 400, None).await.unwrap();
        clock.advance(45 * MINUTE);
        use_up_segment(&service, "t").await;
        assert_eq!(max_id(&store, "t").await - claimed[5], 400, "{db:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_empty_long_and_hostile_tags_get_clear_errors() {
    for db in all_dbs() {
        let (store, _) = fresh(db).await;
        let service = service(store.clone(), SegmentOptions::default(), SystemClock).await;

        let error = service.get("no-such-tag").unwrap_err();
        assert!(
            matches!(error, SegmentError::UnknownTag(_)),
            "{db:?}: {error}"
        );
        assert_eq!(error.code(), -2);
        // Never waiting changes nothing about an unknown tag.
        let error = service.try_get("no-such-tag").unwrap_err();
        assert!(
            matches!(error, SegmentError::UnknownTag(_)),
            "{db:?}: {error}"
        );

        let error = service.get("").unwrap_err();
        assert!(
            matches!(error, SegmentError::InvalidTag { .. }),
            "{db:?}: {error}"
        );
        let error = service.upsert_tag("", 10, None).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::InvalidTag { .. }),
            "{db:?}: {error}"
        );

        let long = "x".repeat(200);
        let error = service.upsert_tag(&long, 10, None).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::InvalidTag { .. }),
            "{db:?}: {error}"
        );
        assert!(error.to_string().contains("128"), "{db:?}: {error}");
        assert!(matches!(
            service.get(&long),
            Err(SegmentError::InvalidTag { .. })
        ));
        let longest = "y".repeat(128);
        service.upsert_tag(&longest, 10, None).await.unwrap();
        assert_eq!(service.get_async(&longest).await.unwrap(), 1, "{db:?}");
        assert_eq!(service.try_get(&longest).unwrap(), Some(2), "{db:?}");

        // Outside the tag alphabet (issue 32): refused before the database is asked.
        for hostile in [
            "o'reilly",
            "say \"hi\"",
            "x'; DROP TABLE leaf_alloc; --",
            "a%_\\b",
            "tag`)--",
            "ünïcödé 标签",
            "zero\u{200b}width",
        ] {
            let error = service
                .upsert_tag(hostile, 5, Some("it's \"fine\""))
                .await
                .unwrap_err();
            assert!(
                matches!(error, SegmentError::InvalidTag { .. }),
                "{db:?}: {hostile}: {error}"
            );
            assert!(matches!(
                service.get(hostile),
                Err(SegmentError::InvalidTag { .. })
            ));
        }
        service.upsert_tag("a_b", 5, None).await.unwrap();
        // The table survived, and `a_`'s LIKE metacharacter matched nothing (not `a_b`).
        assert_eq!(store.list_tags().await.unwrap().len(), 2, "{db:?}");
        assert!(matches!(
            service.get("a_"),
            Err(SegmentError::UnknownTag(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tag_sync_adds_new_tags_and_evicts_deleted_ones() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "kept", 10).await;
        store.upsert_tag("doomed", 10, None).await.unwrap();
        let options = SegmentOptions {
            sync_interval: Duration::from_millis(200),
            ..SegmentOptions::default()
        };
        let service = service(store.clone(), options, SystemClock).await;
        assert_eq!(service.tags(), ["doomed", "kept"], "{db:?}");
        service.get_async("doomed").await.unwrap();
        // Another admin (another process, say) changes the table.
        store.delete_tag("doomed").await.unwrap();
        store.upsert_tag("fresh", 10, None).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while service.tags() != ["fresh", "kept"] {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{db:?}: {:?}",
                service.tags()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(service.get_async("fresh").await.unwrap(), 1, "{db:?}");
        assert_eq!(
            service.get_async("doomed").await.unwrap_err().code(),
            -2,
            "{db:?}"
        );
        assert_eq!(service.get_async("kept").await.unwrap(), 1, "{db:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_shows_leafs_cache_page_and_serialises() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "m", 100).await;
        let options = SegmentOptions {
            dynamic_step: false,
            ..SegmentOptions::default()
        };
        let service = service(store, options, SystemClock).await;
        let before = &service.monitor()[0];
        assert!(!before.init && !before.next_ready, "{db:?}");
        for _ in 0..20 {
            service.get_async("m").await.unwrap();
        }
        common::eventually("prefetch", 10, || service.monitor()[0].next_ready).await;
        let state = service.monitor().remove(0);
        assert!(state.init);
        let current = &state.segments[state.pos];
        assert_eq!(
            (current.value, current.max, current.step),
            (21, 101, 100),
            "{db:?}"
        );
        let next = &state.segments[1 - state.pos];
        assert_eq!((next.value, next.max), (101, 201), "{db:?}");
        let json = serde_json::to_value(&state).unwrap();
        assert_eq!(json["segments"][state.pos]["max"], 101);
        let _ = Arc::clone(&service);
    }
}
