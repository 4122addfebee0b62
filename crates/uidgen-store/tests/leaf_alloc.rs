#![allow(clippy::unwrap_used)]
//! The leaf_alloc DAO: segments, tags, validation and injection safety.

mod common;

use uidgen_store::testing::{TestDb, fresh_store, run_script};
use uidgen_store::{Residue, SegmentClaim, StoreError};

per_db! {
    async fn two_claims_give_consecutive_ranges(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let row = store.upsert_tag("order", 1000, Some("orders")).await.unwrap();
        assert_eq!((row.max_id, row.step, row.description.as_deref()), (1, 1000, Some("orders")));
        assert!(row.update_time_ms.unwrap() > 1_600_000_000_000);
        let first = store.claim_segment("order").await.unwrap();
        let second = store.claim_segment("order").await.unwrap();
        assert_eq!(first, SegmentClaim { max_id: 1001, step: 1000, stored_step: 1000, residue: Residue::SINGLE, epoch: 1 });
        assert_eq!(second.range(), 1001..2001);
        assert_eq!(store.get_tag("order").await.unwrap().unwrap().max_id, 2001);
    }
}

per_db! {
    async fn sixteen_concurrent_claims_give_disjoint_ranges(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("burst", 100, None).await.unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.claim_segment("burst").await })
            })
            .collect();
        let mut ranges = Vec::new();
        for task in tasks {
            ranges.push(task.await.unwrap().unwrap().range());
        }
        ranges.sort_by_key(|r| r.start);
        assert_eq!(ranges.first().unwrap().start, 1);
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].end, pair[1].start, "{ranges:?}");
        }
        assert_eq!(ranges.last().unwrap().end, 1601);
    }
}

per_db! {
    async fn unknown_tag_is_an_error(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let error = store.claim_segment("missing").await.unwrap_err();
        assert!(matches!(&error, StoreError::UnknownTag(tag) if tag == "missing"), "{error:?}");
        let error = store.claim_segment_with_step("missing", 5).await.unwrap_err();
        assert!(matches!(error, StoreError::UnknownTag(_)), "{error:?}");
        assert!(store.get_tag("missing").await.unwrap().is_none());
        assert!(!store.delete_tag("missing").await.unwrap());
    }
}

per_db! {
    async fn custom_step_claims_that_many_and_keeps_the_stored_step(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("dyn", 10, None).await.unwrap();
        let claim = store.claim_segment_with_step("dyn", 250).await.unwrap();
        assert_eq!(claim, SegmentClaim { max_id: 251, step: 250, stored_step: 10, residue: Residue::SINGLE, epoch: 1 });
        let next = store.claim_segment("dyn").await.unwrap();
        assert_eq!(next, SegmentClaim { max_id: 261, step: 10, stored_step: 10, residue: Residue::SINGLE, epoch: 1 });
        assert!(matches!(store.claim_segment_with_step("dyn", 0).await, Err(StoreError::InvalidInput(_))));
    }
}

per_db! {
    async fn upsert_updates_step_and_validates(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("t", 10, Some("first")).await.unwrap();
        store.claim_segment("t").await.unwrap();
        let row = store.upsert_tag("t", 20, None).await.unwrap();
        assert_eq!((row.max_id, row.step, row.description.as_deref()), (11, 20, Some("first")));
        let row = store.upsert_tag("t", 20, Some("second")).await.unwrap();
        assert_eq!(row.description.as_deref(), Some("second"));
        // Tags are case-sensitive keys on every database.
        store.upsert_tag("T", 5, None).await.unwrap();
        assert_eq!(store.list_tags().await.unwrap(), vec!["T".to_owned(), "t".to_owned()]);

        for (tag, step) in [("", 10), (&*"x".repeat(129), 10), (" padded", 10), ("a b", 10), ("é", 10), ("or\u{200b}der", 10), ("ok", 0), ("ok", 1_000_000_001), ("ok", -5)] {
            let error = store.upsert_tag(tag, step, None).await.unwrap_err();
            assert!(matches!(error, StoreError::InvalidInput(_)), "{tag:?} {step}: {error:?}");
        }
        let long = "x".repeat(128);
        store.upsert_tag(&long, 1_000_000_000, None).await.unwrap();
        assert!(store.delete_tag(&long).await.unwrap());
        assert!(store.delete_tag("T").await.unwrap());
        assert_eq!(store.list_tags().await.unwrap(), vec!["t".to_owned()]);
    }
}

per_db! {
    async fn injection_looking_tags_are_refused_by_the_alphabet_and_bound_literally_elsewhere(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let tags = [
            "x'; DROP TABLE leaf_alloc; --",
            "\"quoted\" OR 1=1",
            "back\\slash'\\'",
            "100%_like",
            "semi;colon`tick`$1?",
        ];
        store.upsert_tag("bystander", 3, None).await.unwrap();
        store.upsert_tag("100_like", 3, None).await.unwrap();
        for tag in tags {
            // Outside the tag alphabet (issue 32): never written.
            let error = store.upsert_tag(tag, 7, Some(tag)).await.unwrap_err();
            assert!(matches!(error, StoreError::InvalidInput(_)), "{tag:?}: {error:?}");
            // Reads, claims and deletes take any text, bound as a value, never spliced.
            assert!(store.get_tag(tag).await.unwrap().is_none(), "{tag:?}");
            assert!(store.claim_segment(tag).await.is_err(), "{tag:?}");
            assert!(!store.delete_tag(tag).await.unwrap(), "{tag:?}");
        }
        // Nothing else moved, nothing was dropped, LIKE metacharacters matched nothing extra.
        assert_eq!(store.get_tag("bystander").await.unwrap().unwrap().max_id, 1);
        assert_eq!(store.get_tag("100_like").await.unwrap().unwrap().max_id, 1);
        assert_eq!(store.list_tags().await.unwrap().len(), 2);
    }
}

per_db! {
    async fn a_claim_that_would_pass_i64_max_is_refused_as_exhausted_and_changes_nothing(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.upsert_tag("top", 1000, None).await.unwrap();
        // Two segments of room: the second ends exactly at i64::MAX.
        let near = i64::MAX - 2000;
        run_script(&store, &format!("UPDATE leaf_alloc SET max_id = {near} WHERE biz_tag = 'top'")).await.unwrap();
        let first = store.claim_segment("top").await.unwrap();
        assert_eq!(first.range(), near..near + 1000);
        let last = store.claim_segment_with_step("top", 1000).await.unwrap();
        assert_eq!(last, SegmentClaim { max_id: i64::MAX, step: 1000, stored_step: 1000, residue: Residue::SINGLE, epoch: 1 });
        for attempt in 0..2 {
            let error = if attempt == 0 {
                store.claim_segment("top").await.unwrap_err()
            } else {
                store.claim_segment_with_step("top", 1).await.unwrap_err()
            };
            assert!(
                matches!(&error, StoreError::TagExhausted { tag, max_id: i64::MAX, .. } if tag == "top"),
                "{db:?}: {error:?}"
            );
        }
        // Still an exact integer (no float on SQLite), still the same row.
        let row = store.get_tag("top").await.unwrap().unwrap();
        assert_eq!((row.max_id, row.step), (i64::MAX, 1000));
        // A custom step that still fits is granted; one that does not is refused.
        run_script(&store, &format!("UPDATE leaf_alloc SET max_id = {} WHERE biz_tag = 'top'", i64::MAX - 10)).await.unwrap();
        assert!(matches!(store.claim_segment("top").await, Err(StoreError::TagExhausted { step: 1000, .. })));
        assert_eq!(store.claim_segment_with_step("top", 10).await.unwrap().max_id, i64::MAX);
        // An unknown tag is still reported as unknown, not exhausted.
        assert!(matches!(store.claim_segment("none").await, Err(StoreError::UnknownTag(_))));
    }
}

per_db! {
    async fn a_group_row_keeps_its_residue_and_claims_report_it(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        // An existing single-database tag reads as delta 1, remainder 0 after the migration.
        let plain = store.upsert_tag("plain", 10, None).await.unwrap();
        assert_eq!(plain.residue, Residue::SINGLE);
        assert_eq!(store.claim_segment("plain").await.unwrap().residue, Residue::SINGLE);
        let odd = Residue::new(2, 1).unwrap();
        let row = store.upsert_group_tag("g", 100, None, odd).await.unwrap();
        assert_eq!((row.max_id, row.step, row.residue), (1, 100, odd));
        let claim = store.claim_segment("g").await.unwrap();
        assert_eq!((claim.range(), claim.residue), (1..101, odd));
        let claim = store.claim_segment_with_step("g", 50).await.unwrap();
        assert_eq!((claim.range(), claim.residue, claim.stored_step), (101..151, odd, 100));
        // A plain upsert changes the step and keeps the residue.
        assert_eq!(store.upsert_tag("g", 200, None).await.unwrap().residue, odd);
        // Asking for another residue is refused, typed, and the row keeps its own.
        let even = Residue::new(2, 0).unwrap();
        let error = store.upsert_group_tag("g", 200, None, even).await.unwrap_err();
        assert!(matches!(error, StoreError::ResidueMismatch { stored, wanted, .. } if stored == odd && wanted == even), "{error:?}");
        assert_eq!(store.get_tag("g").await.unwrap().unwrap().residue, odd);
        // A step below delta could leave a segment without a number of some database.
        assert!(matches!(store.upsert_group_tag("h", 1, None, odd).await, Err(StoreError::InvalidInput(_))));
        // A row edited by hand into nonsense is reported, not served.
        run_script(&store, "UPDATE leaf_alloc SET remainder = 5 WHERE biz_tag = 'g'").await.unwrap();
        assert!(matches!(store.claim_segment("g").await, Err(StoreError::InvalidResidue { remainder: 5, .. })));
    }
}

per_db! {
    async fn cancelled_segment_claims_leave_no_pooled_connection_in_a_transaction(db: TestDb) {
        let options = uidgen_store::StoreOptions { max_connections: 3, ..Default::default() };
        let (store, _) = uidgen_store::testing::fresh_store_with(db, options).await.unwrap();
        store.upsert_tag("cancel", 10, None).await.unwrap();
        common::cancelled_claims_leave_no_session_in_a_transaction(&store, || async {
            store.claim_segment("cancel").await.map(|claim| claim.range())
        })
        .await;
    }
}

per_db! {
    /// Servers that start at once all create the sample tag. Creating a missing tag locks a
    /// gap in `leaf_alloc` on MariaDB, and two such creations deadlock; the one rolled back is
    /// run again. 20 tags, each created by 6 stores at once: every creation succeeds and the
    /// tag serves. (On PostgreSQL each creator may see the row missing and start a life of its
    /// own: the epoch rises more than once, which can only drop a tail, never repeat one.)
    async fn stores_creating_one_tag_at_once_all_succeed(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let mut stores = Vec::new();
        for _ in 0..6 {
            stores.push(uidgen_store::Store::connect(&url).await.unwrap());
        }
        for round in 0..20 {
            let tag = format!("sample{round}");
            let tasks: Vec<_> = stores
                .iter()
                .map(|s| {
                    let (s, tag) = (s.clone(), tag.clone());
                    tokio::spawn(async move { s.upsert_tag(&tag, 2000, None).await })
                })
                .collect();
            for task in tasks {
                task.await.unwrap().unwrap_or_else(|e| panic!("{db:?} round {round}: {e}"));
            }
            let claim = store.claim_segment(&tag).await.unwrap();
            assert!((1..=6).contains(&claim.epoch), "{db:?} round {round}: {claim:?}");
            assert_eq!(claim.range(), 1..2001, "{db:?} round {round}");
        }
    }
}
