#![allow(clippy::unwrap_used)]
//! The app configuration: created with its 64 shards, seen by other servers after their sync,
//! and the lists of removed apps deleted by the one server that holds the config lock.

mod common;

use std::time::Duration;

use common::{
    Keyspace, app, held_lock, list_contents, service, sqlite_service, sqlite_service_and_store,
};
use uidgen_sharded::{MAX_INDEX, ShardedError, ShardedId};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{AppSpec, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_answers_the_largest_id_its_limit_allows() {
    let (_keys, service) = sqlite_service("largest").await;
    let info = service
        .upsert_app(&AppSpec {
            description: Some("orders".into()),
            ..AppSpec::new(12, "orders")
        })
        .await
        .unwrap();
    assert_eq!((info.app_id, info.shards, info.step), (12, 64, 1000));
    let top = ShardedId::new(12, 63, MAX_INDEX).unwrap().to_u64();
    assert_eq!((info.max_limit_id, info.largest_id), (0, top));
    let info = service
        .upsert_app(&AppSpec {
            max_limit_id: 1 << 60,
            ..AppSpec::new(12, "orders")
        })
        .await
        .unwrap();
    assert_eq!(
        info.largest_id,
        1 << 60,
        "a limit the bits can reach is the limit"
    );
    let info = service
        .upsert_app(&AppSpec {
            max_limit_id: i64::MAX,
            ..AppSpec::new(12, "orders")
        })
        .await
        .unwrap();
    assert_eq!(info.largest_id, top, "never above the 49 index bits");
    let error = service
        .upsert_app(&AppSpec {
            step: 0,
            ..AppSpec::new(12, "orders")
        })
        .await
        .unwrap_err();
    assert!(matches!(error, ShardedError::InvalidInput(_)), "{error:?}");
    assert!(!error.is_service_fault());
    assert_eq!(service.apps().await.unwrap().len(), 1);
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_created_on_one_server_is_usable_on_another_after_its_sync() {
    let keys = Keyspace::shared("sync").await;
    let (store_a, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    let a = service(store_a, keys.options()).await;
    let b = service(Store::connect(&url).await.unwrap(), keys.options()).await;
    app(&a, 20, 100).await;
    a.get(20, "alice").await.unwrap();
    assert!(matches!(
        b.get(20, "alice").await,
        Err(ShardedError::AppNotFound { app_id: 20 })
    ));
    b.sync_apps().await.unwrap();
    b.get(20, "alice").await.unwrap();
    a.shutdown();
    b.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_of_removed_apps_are_deleted_by_the_config_lock_holder_only() {
    let (keys, db, service) = sqlite_service_and_store("removed").await;
    app(&service, 30, 100).await;
    app(&service, 31, 100).await;
    service.get_in_shard(30, 0).await.unwrap();
    service.get_in_shard(31, 0).await.unwrap();
    db.delete_app(30).await.unwrap();
    let mut conn = keys.raw().await;
    // Another server holds the config lock: this one leaves the lists alone.
    let config_lock = format!("{}idList_", keys.prefix);
    let other = held_lock(&mut conn, &config_lock, Duration::from_secs(30)).await;
    service.sync_apps().await.unwrap();
    assert!(!list_contents(&mut conn, &keys.list(30, 0)).await.is_empty());
    assert!(matches!(
        service.get(30, "x").await,
        Err(ShardedError::AppNotFound { .. })
    ));
    // Once it holds the lock itself, it deletes the removed app's lists, and only those.
    assert!(other.release(&mut conn).await.unwrap());
    service.sync_apps().await.unwrap();
    assert!(list_contents(&mut conn, &keys.list(30, 0)).await.is_empty());
    assert_eq!(list_contents(&mut conn, &keys.list(31, 0)).await.len(), 99);
    assert_eq!(service.stats().removed_lists, 1);
    let lock: Option<String> = redis::cmd("GET")
        .arg(&config_lock)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(lock, None, "released");
    service.shutdown();
}
