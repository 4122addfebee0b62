#![allow(clippy::unwrap_used)]
//! The id_alloc DAO: apps with their 64 shards, segment claims, ceilings, validation.

mod common;

use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{AppSpec, IdSegment, StoreError};

/// The sharded layout's 49-bit index ceiling, as `uidgen-sharded` passes it.
const CEILING: i64 = (1 << 49) - 1;

/// The ranges concurrent claims got, checked to lie back to back (no gap, no overlap): the
/// whole span they cover.
async fn back_to_back(
    tasks: Vec<tokio::task::JoinHandle<uidgen_store::Result<IdSegment>>>,
) -> std::ops::Range<i64> {
    let mut ranges = Vec::new();
    for task in tasks {
        ranges.push(task.await.unwrap().unwrap().range());
    }
    ranges.sort_by_key(|r| r.start);
    for pair in ranges.windows(2) {
        assert_eq!(pair[0].end, pair[1].start, "{ranges:?}");
    }
    ranges[0].start..ranges[ranges.len() - 1].end
}

per_db! {
    async fn creating_an_app_creates_its_64_shards_and_claims_are_consecutive(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let app = store
            .create_or_update_app(&AppSpec {
                description: Some("order numbers".into()),
                ..AppSpec::new(7, "orders")
            })
            .await
            .unwrap();
        assert_eq!((app.app_id, app.app_name.as_str()), (7, "orders"));
        assert_eq!(app.description.as_deref(), Some("order numbers"));
        assert_eq!(app.shards.len(), 64);
        // The original service's init: nothing handed out yet, max_id 0.
        assert!(app.shards.iter().enumerate().all(|(i, s)| usize::from(s.shard_id) == i
            && s.max_id == 0
            && !s.exclusive
            && s.next_index() == 1
            && s.step == 1000
            && s.max_limit_id == 0));
        assert!(app.create_time_ms.unwrap() > 1_600_000_000_000);

        let first = store.claim_id_segment(7, 63, CEILING).await.unwrap();
        let second = store.claim_id_segment(7, 63, CEILING).await.unwrap();
        assert_eq!(first, IdSegment { start: 1, end: 1001, ceiling: CEILING });
        assert_eq!(second.range(), 1001..2001);
        // Shards are independent counters.
        assert_eq!(store.claim_id_segment(7, 0, CEILING).await.unwrap().range(), 1..1001);
    }
}

per_db! {
    async fn updating_an_app_changes_its_fields_but_never_max_id(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store
            .create_or_update_app(&AppSpec {
                description: Some("first".into()),
                ..AppSpec::new(3, "a")
            })
            .await
            .unwrap();
        store.claim_id_segment(3, 5, CEILING).await.unwrap();
        let app = store
            .create_or_update_app(&AppSpec {
                step: 10,
                // An ID ceiling: shard 5 of app 3 may go up to index 5000.
                max_limit_id: 5000 << 14 | 5 << 8 | 3,
                ..AppSpec::new(3, "b")
            })
            .await
            .unwrap();
        assert_eq!(app.app_name, "b");
        assert_eq!(app.description.as_deref(), Some("first"), "None keeps the description");
        let shard = &app.shards[5];
        // max_id is the last index handed out, as the original keeps it.
        assert_eq!((shard.max_id, shard.step, shard.max_limit_id), (1000, 10, 5000 << 14 | 1283));
        assert_eq!(store.claim_id_segment(3, 5, CEILING).await.unwrap().range(), 1001..1011);
        assert_eq!(store.apps().await.unwrap().len(), 1);
    }
}

per_db! {
    async fn concurrent_claims_of_one_shard_are_disjoint(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store
            .create_or_update_app(&AppSpec { step: 100, ..AppSpec::new(1, "burst") })
            .await
            .unwrap();
        let tasks: Vec<_> = (0..16)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.claim_id_segment(1, 9, CEILING).await })
            })
            .collect();
        assert_eq!(back_to_back(tasks).await, 1..1601);
    }
}

per_db! {
    async fn a_claim_of_at_least_n_takes_more_than_the_step_in_one_go_and_never_overlaps(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store
            .create_or_update_app(&AppSpec { step: 10, ..AppSpec::new(6, "small-step") })
            .await
            .unwrap();
        // Larger than the step: the caller's size; smaller: the step.
        let big = store.claim_id_segment_at_least(6, 2, CEILING, 5000).await.unwrap();
        assert_eq!(big, IdSegment { start: 1, end: 5001, ceiling: CEILING });
        let small = store.claim_id_segment_at_least(6, 2, CEILING, 3).await.unwrap();
        assert_eq!(small.range(), 5001..5011);
        assert_eq!(store.apps().await.unwrap()[0].shards[2].step, 10, "the step is unchanged");
        // Mixed sizes from 16 tasks at once: back to back, no gap, no overlap.
        let tasks: Vec<_> = (0..16i64)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    store.claim_id_segment_at_least(6, 3, CEILING, 1 + i * 97).await
                })
            })
            .collect();
        let total: i64 = (0..16i64).map(|i| (1 + i * 97).max(10)).sum();
        assert_eq!(back_to_back(tasks).await, 1..1 + total);
        let error = store.claim_id_segment_at_least(6, 3, CEILING, 0).await.unwrap_err();
        assert!(matches!(error, StoreError::InvalidInput(_)), "{error}");
    }
}

per_db! {
    async fn max_limit_id_is_a_ceiling_that_cuts_and_then_refuses(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        // The limit is on the whole ID, `index << 14 | shard << 8 | app`: shard 1 of app 2 may
        // hand out indexes up to 2500, shard 63 (whose IDs are 15,872 higher) one fewer.
        let limit = 2500 << 14 | 1 << 8 | 2;
        store
            .create_or_update_app(&AppSpec { max_limit_id: limit, ..AppSpec::new(2, "small") })
            .await
            .unwrap();
        let last = store.claim_id_segment_at_least(2, 63, CEILING, 5000).await.unwrap();
        assert_eq!((last.start, last.end, last.range()), (1, 5001, 1..2500));
        let (fits, next) = (2499_i64 << 14 | 63 << 8 | 2, 2500_i64 << 14 | 63 << 8 | 2);
        assert!((fits..next).contains(&limit), "index 2499 of shard 63 is the last under it");
        assert_eq!(store.claim_id_segment(2, 1, CEILING).await.unwrap().range(), 1..1001);
        assert_eq!(store.claim_id_segment(2, 1, CEILING).await.unwrap().range(), 1001..2001);
        // The third segment holds 2001..3001 in the database, but only up to the limit is usable.
        let third = store.claim_id_segment(2, 1, CEILING).await.unwrap();
        assert_eq!((third.start, third.end, third.range()), (2001, 3001, 2001..2501));
        let error = store.claim_id_segment(2, 1, CEILING).await.unwrap_err();
        assert!(
            matches!(
                error,
                StoreError::AppShardExhausted { app_id: 2, shard_id: 1, max_id: 3001, ceiling: 2500 }
            ),
            "{error:?}"
        );
        // The refused claim left the row alone.
        assert_eq!(store.app(2).await.unwrap().unwrap().shards[1].max_id, 3000);
        // A limit below a shard's lowest ID leaves it nothing: shard 0 of app 2 starts at
        // index 1, ID 16,386.
        store
            .create_or_update_app(&AppSpec { max_limit_id: 16385, ..AppSpec::new(2, "small") })
            .await
            .unwrap();
        let error = store.claim_id_segment(2, 0, CEILING).await.unwrap_err();
        assert!(
            matches!(error, StoreError::AppShardExhausted { shard_id: 0, max_id: 1, ceiling: 0, .. }),
            "{error:?}"
        );
        // Raising the limit lets the shard go on, from where it stood.
        store
            .create_or_update_app(&AppSpec { max_limit_id: 0, ..AppSpec::new(2, "small") })
            .await
            .unwrap();
        assert_eq!(store.claim_id_segment(2, 1, CEILING).await.unwrap().range(), 3001..4001);
    }
}

per_db! {
    async fn the_callers_ceiling_is_a_ceiling_too(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        store.create_or_update_app(&AppSpec::new(4, "narrow")).await.unwrap();
        assert_eq!(store.claim_id_segment(4, 0, 1500).await.unwrap().range(), 1..1001);
        assert_eq!(store.claim_id_segment(4, 0, 1500).await.unwrap().range(), 1001..1501);
        let error = store.claim_id_segment(4, 0, 1500).await.unwrap_err();
        assert!(matches!(error, StoreError::AppShardExhausted { ceiling: 1500, .. }), "{error:?}");
        assert!(error.to_string().contains("raise max_limit_id"), "{error}");
    }
}

per_db! {
    async fn unknown_apps_and_shards_are_errors_and_apps_can_be_deleted(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let error = store.claim_id_segment(9, 0, CEILING).await.unwrap_err();
        assert!(matches!(error, StoreError::UnknownAppShard { app_id: 9, shard_id: 0 }), "{error:?}");
        assert!(store.app(9).await.unwrap().is_none());
        store.create_or_update_app(&AppSpec::new(9, "x")).await.unwrap();
        store.create_or_update_app(&AppSpec::new(255, "last")).await.unwrap();
        store.create_or_update_app(&AppSpec::new(0, "first")).await.unwrap();
        let ids: Vec<u8> = store.apps().await.unwrap().iter().map(|a| a.app_id).collect();
        assert_eq!(ids, [0, 9, 255]);
        assert_eq!(store.delete_app(9).await.unwrap(), 64);
        assert_eq!(store.delete_app(9).await.unwrap(), 0);
        assert!(matches!(
            store.claim_id_segment(9, 3, CEILING).await,
            Err(StoreError::UnknownAppShard { .. })
        ));
    }
}

per_db! {
    async fn invalid_apps_are_refused_before_the_database(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        for spec in [
            AppSpec::new(1, ""),
            AppSpec { step: 100_001, ..AppSpec::new(1, "a") },
            AppSpec { max_limit_id: -5, ..AppSpec::new(1, "a") },
            AppSpec { description: Some("d".repeat(300)), ..AppSpec::new(1, "a") },
        ] {
            let error = store.create_or_update_app(&spec).await.unwrap_err();
            assert!(matches!(error, StoreError::InvalidInput(_)), "{spec:?}: {error:?}");
        }
        assert!(store.apps().await.unwrap().is_empty());
        // Names are data, not SQL.
        let app = store
            .create_or_update_app(&AppSpec::new(1, "x'); DROP TABLE id_alloc; --"))
            .await
            .unwrap();
        assert_eq!(app.app_name, "x'); DROP TABLE id_alloc; --");
    }
}

per_db! {
    async fn cancelled_id_alloc_claims_leave_no_pooled_connection_in_a_transaction(db: TestDb) {
        let options = uidgen_store::StoreOptions { max_connections: 3, ..Default::default() };
        let (store, _) = uidgen_store::testing::fresh_store_with(db, options).await.unwrap();
        store.create_or_update_app(&AppSpec { step: 10, ..AppSpec::new(3, "cancel") }).await.unwrap();
        common::cancelled_claims_leave_no_session_in_a_transaction(&store, || async {
            store.claim_id_segment(3, 0, CEILING).await.map(|segment| segment.range())
        })
        .await;
    }
}

per_db! {
    async fn the_original_services_rows_continue_above_its_last_index(db: TestDb) {
        use uidgen_store::testing::peer_transaction;
        let (store, _) = fresh_store(db).await.unwrap();
        // The original's init script: a row per shard at max_id 0 (here shard 3 of app 7).
        peer_transaction(&store, &[
            "INSERT INTO id_alloc (app_id, app_name, max_id, shard_id, step, description, \
             max_limit_id) VALUES (7, 'orders', 0, 3, 1000, 'from the original', 0)",
        ])
        .await
        .unwrap();
        // Its claim: add the step, read the row back, push max_id - step + 1 ..= max_id.
        let claim = [
            "UPDATE id_alloc SET max_id = max_id + step WHERE app_id = 7 AND shard_id = 3",
            "SELECT max_id, step FROM id_alloc WHERE app_id = 7 AND shard_id = 3",
        ];
        let row = peer_transaction(&store, &claim).await.unwrap()[1].clone().unwrap();
        let original = row[0] - row[1] + 1..row[0] + 1;
        assert_eq!(original, 1..1001);
        // uidgen continues above the original's last index (issue 31: index 1000 was handed
        // out again when uidgen read the row as Leaf's), and the original above uidgen's.
        let ours = store.claim_id_segment(7, 3, CEILING).await.unwrap().range();
        assert_eq!(ours, 1001..2001);
        let row = peer_transaction(&store, &claim).await.unwrap()[1].clone().unwrap();
        assert_eq!(row[0] - row[1] + 1..row[0] + 1, 2001..3001);
        assert_eq!(store.claim_id_segment(7, 3, CEILING).await.unwrap().range(), 3001..4001);
        let shard = &store.app(7).await.unwrap().unwrap().shards[0];
        assert_eq!((shard.max_id, shard.exclusive, shard.next_index()), (4000, false, 4001));
    }
}

per_db! {
    async fn rows_an_older_uidgen_wrote_continue_exactly_beside_its_servers(db: TestDb) {
        use uidgen_store::testing::{peer_transaction, run_script};
        let (store, _) = fresh_store(db).await.unwrap();
        // The store as an older uidgen left it: migration 0010 not yet applied, and app 5's
        // rows at max_id 2001, its exclusive end (it handed out 1..2001 of each shard).
        store.create_or_update_app(&AppSpec::new(5, "older")).await.unwrap();
        run_script(
            &store,
            "DROP TABLE id_alloc_exclusive; \
             DELETE FROM _sqlx_migrations WHERE version = 10; \
             UPDATE id_alloc SET max_id = 2001 WHERE app_id = 5",
        )
        .await
        .unwrap();
        // This uidgen starts: the migration lists the rows as they were written.
        store.migrate().await.unwrap();
        let app = store.app(5).await.unwrap().unwrap();
        assert!(app.shards.iter().all(|s| s.exclusive && s.next_index() == 2001), "{app:?}");
        assert_eq!(store.exclusive_id_alloc_rows().await.unwrap().len(), 64);
        // It continues exactly, and an older server's claim beside it (its statement: add the
        // step, hand out max_id - step .. max_id - 1) never overlaps.
        let older = [
            "UPDATE id_alloc SET max_id = max_id + step WHERE app_id = 5 AND shard_id = 0",
            "SELECT max_id, step FROM id_alloc WHERE app_id = 5 AND shard_id = 0",
        ];
        assert_eq!(store.claim_id_segment(5, 0, CEILING).await.unwrap().range(), 2001..3001);
        let row = peer_transaction(&store, &older).await.unwrap()[1].clone().unwrap();
        assert_eq!(row[0] - row[1]..row[0], 3001..4001);
        assert_eq!(store.claim_id_segment(5, 0, CEILING).await.unwrap().range(), 4001..5001);
        // A deleted app's rows leave the list with it.
        store.create_or_update_app(&AppSpec::new(4, "gone")).await.unwrap();
        run_script(&store, "INSERT INTO id_alloc_exclusive (app_id, shard_id) VALUES (4, 0)")
            .await
            .unwrap();
        store.delete_app(4).await.unwrap();
        store.create_or_update_app(&AppSpec::new(4, "again")).await.unwrap();
        assert!(!store.app(4).await.unwrap().unwrap().shards[0].exclusive);
        // Apps created from now on follow the original.
        store.create_or_update_app(&AppSpec::new(6, "newer")).await.unwrap();
        assert!(!store.app(6).await.unwrap().unwrap().shards[0].exclusive);
        // Emptied (`uidgen takeover sharded`), every row is read the original's way: the older
        // row skips one index (5001), never repeats one.
        assert_eq!(store.clear_exclusive_id_alloc_rows().await.unwrap(), 64);
        assert_eq!(store.claim_id_segment(5, 0, CEILING).await.unwrap().range(), 5002..6002);
        assert_eq!(store.claim_id_segment(5, 1, CEILING).await.unwrap().range(), 2002..3002);
    }
}
