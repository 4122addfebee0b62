//! Segment leases on every database: whole ranges claimed for one caller, never overlapping
//! the service's own segments, other leases (from other services on the same table, and
//! concurrent ones), and refused with typed errors for bad sizes and tags.

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::time::Duration;

use common::{all_dbs, assert_unique, fresh_with_tag, max_id, service};
use uidgen_core::SystemClock;
use uidgen_segment::{SegmentError, SegmentOptions};

fn small_leases() -> SegmentOptions {
    SegmentOptions {
        max_lease_size: 5_000,
        dynamic_step: false,
        ..SegmentOptions::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_and_segment_ids_of_two_services_never_overlap() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "order", 100).await;
        let first = service(store.clone(), small_leases(), SystemClock).await;
        let second = service(store.clone(), small_leases(), SystemClock).await;
        let mut numbers = Vec::new();
        let mut leases = Vec::new();
        for _ in 0..5 {
            // Concurrent leases from both services, between batches of their own IDs.
            let (a, b) = tokio::join!(first.lease("order", 1_000), second.lease("order", 4_999));
            for range in [a.unwrap(), b.unwrap()] {
                leases.push(range.clone());
                numbers.extend(range);
            }
            numbers.extend(first.get_batch_async("order", 150).await.unwrap());
            numbers.extend(second.get_batch_async("order", 150).await.unwrap());
        }
        assert_unique(&mut numbers, &format!("{db:?}"));
        assert!(
            leases
                .iter()
                .all(|r| r.end - r.start == 1_000 || r.end - r.start == 4_999)
        );
        // The stored step is what the tag's owner set, whatever was leased.
        assert_eq!(
            store.get_tag("order").await.unwrap().unwrap().step,
            100,
            "{db:?}"
        );
        // A restarted service starts above every lease.
        let highest = leases.iter().map(|r| r.end).max().unwrap();
        first.shutdown();
        second.shutdown();
        tokio::time::sleep(Duration::from_millis(50)).await; // let a prefetch in flight land
        let restarted = service(store.clone(), small_leases(), SystemClock).await;
        assert!(
            restarted.get_async("order").await.unwrap() >= highest,
            "{db:?}"
        );
        assert!(max_id(&store, "order").await > highest, "{db:?}");
        restarted.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sizes_unknown_and_exhausted_tags_get_typed_errors() {
    for db in all_dbs() {
        let store = fresh_with_tag(db, "t", 10).await;
        let service = service(store.clone(), small_leases(), SystemClock).await;
        for size in [0, 5_001, u64::MAX] {
            let error = service.lease("t", size).await.unwrap_err();
            assert!(
                matches!(error, SegmentError::InvalidLeaseSize { max: 5_000, .. }),
                "{db:?} {size}: {error}"
            );
        }
        let error = service.lease("missing", 10).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::UnknownTag(_)),
            "{db:?}: {error}"
        );
        let error = service.lease("", 10).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::InvalidTag { .. }),
            "{db:?}: {error}"
        );
        uidgen_store::testing::run_script(
            &store,
            &format!(
                "UPDATE leaf_alloc SET max_id = {} WHERE biz_tag = 't'",
                i64::MAX - 10
            ),
        )
        .await
        .unwrap();
        let error = service.lease("t", 11).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::TagExhausted { .. }),
            "{db:?}: {error}"
        );
        assert_eq!(
            service.lease("t", 10).await.unwrap(),
            i64::MAX - 10..i64::MAX,
            "{db:?}"
        );
        service.shutdown();
        let error = service.lease("t", 1).await.unwrap_err();
        assert!(matches!(error, SegmentError::Shutdown), "{db:?}: {error}");
    }
}
