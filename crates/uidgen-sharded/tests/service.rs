#![allow(clippy::unwrap_used)]
//! The service on the shared test Redis and each database: IDs carry the app and shard asked
//! for, lists are refilled ahead, limits are ceilings, and every failure is a typed error.

mod common;

use std::time::Duration;

use common::{
    Keyspace, app, assert_unique, index_of, list_contents, service, sqlite_service,
    sqlite_service_and_store, sqlite_service_with_app, store,
};
use uidgen_sharded::{
    MAX_INDEX, ShardedError, ShardedId, ShardedOptions, ShardedService, shard_of,
};
use uidgen_store::testing::{TestDb, run_script};
use uidgen_store::{AppSpec, Store, StoreOptions};

per_db! {
    async fn ids_decode_to_the_app_and_shard_asked_for(db: TestDb) {
        let keys = Keyspace::shared("decode").await;
        let service = service(store(db).await, keys.options()).await;
        app(&service, 7, 100).await;
        let mut ids = Vec::new();
        for user in ["alice@example.com", "13800138000", "张三", "😀", "polygenelubricants"] {
            let id = service.get(7, user).await.unwrap();
            let parts = ShardedId::decode(id).unwrap();
            assert_eq!((parts.app_id, parts.shard), (7, shard_of(user)), "{user}");
            assert!(parts.index >= 1);
            ids.push(id);
        }
        // A batch larger than two steps: refilled on the way, still one shard, no repeats.
        let batch = service.get_batch(7, "alice@example.com", 250).await.unwrap();
        assert_eq!(batch.len(), 250);
        assert!(batch.iter().all(|&id| {
            let p = ShardedId::decode(id).unwrap();
            (p.app_id, p.shard) == (7, shard_of("alice@example.com"))
        }));
        ids.extend(batch);
        assert_unique(&mut ids, "one service");
        let stats = service.stats();
        assert!(stats.refills >= 3, "{stats:?}");
        service.shutdown();
    }
}

per_db! {
    async fn a_batch_larger_than_the_step_takes_one_claim_not_one_per_step(db: TestDb) {
        // With a step of 1, a batch of 20,000 once made 20,000 claims, one database round trip
        // each (a fuzzer's request of 99,999 timed out). The caller's share now comes in one.
        let keys = Keyspace::shared("big-batch").await;
        let service = service(store(db).await, keys.options()).await;
        app(&service, 4, 1).await;
        let (user, other) = ("alice", "bob");
        let mut ids = service.get_batch(4, user, 20_000).await.unwrap();
        assert_eq!(ids.len(), 20_000);
        assert!(service.stats().refills <= 2, "{:?}", service.stats());
        let indexes: Vec<u64> = ids.iter().map(|&id| index_of(id)).collect();
        assert!(indexes.windows(2).all(|w| w[1] == w[0] + 1), "one contiguous claim");
        // Then single IDs (the step again) and another shard: all distinct.
        for _ in 0..5 {
            ids.push(service.get(4, user).await.unwrap());
            ids.push(service.get(4, other).await.unwrap());
        }
        ids.extend(service.get_batch(4, other, 3_000).await.unwrap());
        assert_unique(&mut ids, "big batches and single IDs");
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_list_is_refilled_in_the_background() {
    let (keys, service) = sqlite_service_with_app("refill", 1).await;
    let shard = 9;
    // The first pop fills the list (100 numbers) and takes one.
    service.get_in_shard(1, shard).await.unwrap();
    // Down to 20 left, 20% of the step: the pop that sees it starts a refill.
    service.get_batch_in_shard(1, shard, 79).await.unwrap();
    let mut conn = keys.raw().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let len = list_contents(&mut conn, &keys.list(1, shard)).await.len();
        if len == 120 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "list holds {len}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The list holds the rest of the first segment, then the whole second one.
    let contents = list_contents(&mut conn, &keys.list(1, shard)).await;
    assert_eq!(contents, (81..201).collect::<Vec<u64>>());
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_apps_and_shards_and_bad_input_are_typed_errors() {
    let (_keys, db, service) = sqlite_service_and_store("errors").await;
    app(&service, 7, 100).await;
    let error = service.get(8, "alice").await.unwrap_err();
    assert!(
        matches!(error, ShardedError::AppNotFound { app_id: 8 }),
        "{error:?}"
    );
    let error = service.get(7, "").await.unwrap_err();
    assert!(matches!(error, ShardedError::EmptyGatePass), "{error:?}");
    let error = service.get_batch(7, "alice", 0).await.unwrap_err();
    assert!(
        matches!(error, ShardedError::InvalidCount { count: 0, .. }),
        "{error:?}"
    );
    let over = ShardedOptions::default().max_batch + 1;
    let error = service.get_batch(7, "alice", over).await.unwrap_err();
    assert!(
        matches!(error, ShardedError::InvalidCount { .. }),
        "{error:?}"
    );
    let error = service.get_in_shard(7, 64).await.unwrap_err();
    assert!(
        matches!(error, ShardedError::ShardOutOfRange { shard: 64 }),
        "{error:?}"
    );
    // A shard row deleted by hand.
    run_script(
        &db,
        "DELETE FROM id_alloc WHERE app_id = 7 AND shard_id = 5",
    )
    .await
    .unwrap();
    service.sync_apps().await.unwrap();
    let error = service.get_in_shard(7, 5).await.unwrap_err();
    assert!(
        matches!(
            error,
            ShardedError::ShardNotFound {
                app_id: 7,
                shard: 5
            }
        ),
        "{error:?}"
    );
    for error in [
        ShardedError::AppNotFound { app_id: 8 },
        ShardedError::EmptyGatePass,
        ShardedError::ShardNotFound {
            app_id: 7,
            shard: 5,
        },
    ] {
        assert!(!error.is_service_fault(), "{error:?}");
    }
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_are_not_initialised_until_the_app_list_loads() {
    let keys = Keyspace::shared("init").await;
    // A PostgreSQL nobody listens on: the store connects lazily, so the service starts.
    let options = StoreOptions {
        migrate: false,
        connect_timeout: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let dead = Store::connect_lazy("postgres://postgres@127.0.0.1:1/none", options).unwrap();
    let service = ShardedService::start(dead, keys.options()).await.unwrap();
    let error = service.get(1, "alice").await.unwrap_err();
    assert!(
        matches!(error, ShardedError::NotInitialised { .. }),
        "{error:?}"
    );
    assert!(error.is_service_fault());
    assert!(service.ready().await.is_err());
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_limit_id_is_a_ceiling_never_a_modulus() {
    // The original answered `id % max_limit_id` past the limit, which repeats IDs. Here the
    // limit is on the whole ID, as in the original: shard 17 of app 3 hands out exactly the
    // indexes whose ID stays at or below it (1..=250), then a typed error.
    let (_keys, service) = sqlite_service("limit").await;
    let limit = ShardedId::new(3, 17, 250).unwrap().to_u64();
    let info = service
        .upsert_app(&AppSpec {
            step: 100,
            max_limit_id: i64::try_from(limit).unwrap(),
            ..AppSpec::new(3, "small")
        })
        .await
        .unwrap();
    assert_eq!(info.largest_id, limit);
    let mut ids = Vec::new();
    let error = loop {
        match service.get_batch_in_shard(3, 17, 7).await {
            Ok(batch) => ids.extend(batch),
            Err(error) => break error,
        }
    };
    assert!(
        matches!(
            error,
            ShardedError::AppExhausted {
                app_id: 3,
                shard: 17,
                ceiling: 250
            }
        ),
        "{error:?}"
    );
    assert!(
        !error.is_service_fault(),
        "the app's limit, not the service, is at fault"
    );
    // Then single gets get the same answer, at once.
    assert!(matches!(
        service.get_in_shard(3, 17).await,
        Err(ShardedError::AppExhausted { .. })
    ));
    let mut indexes: Vec<u64> = ids.iter().map(|&id| index_of(id)).collect();
    assert!(ids.iter().all(|&id| id <= limit), "an ID above the limit");
    assert_unique(&mut ids, "limited shard");
    indexes.sort_unstable();
    // 245 of the 250 came in batches of 7; the last 5 went with the batch that hit the limit.
    assert!(
        indexes.len() >= 245 && indexes.iter().all(|&i| (1..=250).contains(&i)),
        "{indexes:?}"
    );
    // Other shards of the app have their own last index under the limit: 18's IDs are 256
    // higher, so its index 250 would pass it.
    assert!(service.get_in_shard(3, 16).await.unwrap() <= limit);
    let ids = service.get_batch_in_shard(3, 18, 100).await.unwrap();
    let ids = [ids, service.get_batch_in_shard(3, 18, 100).await.unwrap()].concat();
    assert!(ids.iter().all(|&id| id <= limit), "{ids:?}");
    let error = loop {
        match service.get_batch_in_shard(3, 18, 7).await {
            Ok(batch) => assert!(batch.iter().all(|&id| id <= limit), "{batch:?}"),
            Err(error) => break error,
        }
    };
    assert!(
        matches!(
            error,
            ShardedError::AppExhausted {
                shard: 18,
                ceiling: 249,
                ..
            }
        ),
        "{error:?}"
    );
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_past_49_bits_are_refused() {
    let (_keys, db, service) = sqlite_service_and_store("bits").await;
    app(&service, 2, 100).await;
    let near = MAX_INDEX - 49; // 50 indexes left
    // max_id is the last index handed out: the next is `near`.
    run_script(
        &db,
        &format!(
            "UPDATE id_alloc SET max_id = {} WHERE app_id = 2 AND shard_id = 0",
            near - 1
        ),
    )
    .await
    .unwrap();
    let batch = service.get_batch_in_shard(2, 0, 50).await.unwrap();
    let indexes: Vec<u64> = batch.iter().map(|&id| index_of(id)).collect();
    assert_eq!(indexes, (near..=MAX_INDEX).collect::<Vec<u64>>());
    assert_eq!(
        *batch.last().unwrap(),
        i64::MAX.unsigned_abs() - (63 << 8) - 253,
        "app 2, shard 0"
    );
    let error = service.get_in_shard(2, 0).await.unwrap_err();
    assert!(
        matches!(
            error,
            ShardedError::AppExhausted {
                ceiling: MAX_INDEX,
                ..
            }
        ),
        "{error:?}"
    );
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_above_a_lowered_limit_are_refused_not_wrapped() {
    let (_keys, service) = sqlite_service_with_app("lowered", 4).await;
    service.get_batch_in_shard(4, 1, 10).await.unwrap(); // list now holds 11..=100
    service
        .upsert_app(&AppSpec {
            step: 100,
            // Index 5 of shard 1 of app 4 is the last under it: the list's 11..=100 are above.
            max_limit_id: 5 << 14 | 1 << 8 | 4,
            ..AppSpec::new(4, "app4")
        })
        .await
        .unwrap();
    let error = service.get_in_shard(4, 1).await.unwrap_err();
    assert!(
        matches!(error, ShardedError::AppExhausted { ceiling: 5, .. }),
        "{error:?}"
    );
    service.shutdown();
}
