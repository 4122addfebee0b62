#![allow(clippy::unwrap_used)]
//! Redis losing data, on private `redis-server` processes (so the shared one is never
//! disturbed): a restart from an old snapshot, `FLUSHALL` and a restart mid-run, a Redis that
//! is down at start, one that refuses the password, and failovers to replicas that missed pops. The database's `max_id` is the
//! only authority: numbers may be lost, none is served twice.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Keyspace, app, assert_unique, index_of, list_contents, service};
use uidgen_sharded::testing::PrivateRedis;
use uidgen_sharded::{ShardedError, ShardedId, ShardedOptions, ShardedService, shard_of};
use uidgen_store::Store;
use uidgen_store::testing::{TestDb, fresh_store};

/// A raw connection to a private Redis.
async fn raw(redis: &PrivateRedis) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Poll `INFO replication` of `redis` until it contains `needle`.
async fn wait_replication(redis: &PrivateRedis, needle: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = raw(redis).await;
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains(needle) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "waiting for {needle:?}: {info}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pop from `service` until it answers, for up to `secs`: the service recovers by itself.
async fn recovered(service: &ShardedService, app_id: u8, shard: u8, secs: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        match service.get_in_shard(app_id, shard).await {
            Ok(id) => return id,
            Err(error) => {
                assert!(error.is_service_fault(), "{error:?}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "not recovered: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_snapshot_is_detected_and_its_stale_numbers_are_never_served() {
    let mut redis = PrivateRedis::start();
    let keys = Keyspace::on(&redis.url(), "stale");
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let service = service(store, keys.options()).await;
    app(&service, 1, 1000).await;
    let mut served = vec![service.get_in_shard(1, 0).await.unwrap()];
    // Snapshot: the list holds 2..=1000.
    assert_eq!(redis.command(&["SAVE"]), "+OK");
    // Serve 300 more: 2..=301.
    served.extend(service.get_batch_in_shard(1, 0, 300).await.unwrap());
    assert_eq!(served.iter().map(|&id| index_of(id)).max(), Some(301));
    // Redis restarts from that snapshot: a new process (run_id) whose list holds the 300
    // numbers already served.
    redis.restart();
    let mut conn = raw(&redis).await;
    let list = list_contents(&mut conn, &keys.list(1, 0)).await;
    assert_eq!(
        list.first(),
        Some(&2),
        "the original's LPOP would serve index 2 again"
    );
    assert!(list.contains(&301));
    // The service notices the new instance on its next command, deletes every list before
    // popping, and serves from a fresh segment.
    let after = service.get_batch_in_shard(1, 0, 500).await.unwrap();
    assert!(
        after.iter().all(|&id| index_of(id) > 1000),
        "fresh segment only"
    );
    let mut all: Vec<u64> = served.iter().chain(&after).copied().collect();
    assert_unique(&mut all, "across the restore");
    assert!(service.stats().purges >= 2, "{:?}", service.stats());
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_then_a_restart_mid_run_repeat_nothing_and_the_service_recovers() {
    let mut redis = PrivateRedis::start();
    let keys = Keyspace::on(&redis.url(), "flush");
    let (store_a, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    let store_b = Store::connect(&url).await.unwrap();
    let a = service(store_a, keys.options()).await;
    let b = service(store_b, keys.options()).await;
    app(&a, 1, 200).await;
    b.sync_apps().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (n, service) in [&a, &b].into_iter().cycle().take(16).enumerate() {
        let (service, stop, errors) = (Arc::clone(service), stop.clone(), errors.clone());
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            let mut i = 0_u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let user = format!("user{}", (n as u64 * 7919 + i) % 500);
                let got = if i.is_multiple_of(4) {
                    service.get_batch(1, &user, 5).await
                } else {
                    service.get(1, &user).await.map(|id| vec![id])
                };
                match got {
                    Ok(batch) => {
                        for id in batch {
                            let parts = ShardedId::decode(id).unwrap();
                            assert_eq!((parts.app_id, parts.shard), (1, shard_of(&user)));
                            ids.push(id);
                        }
                    }
                    Err(error) => {
                        assert!(error.is_service_fault(), "{error:?}");
                        errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
            ids
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(redis.command(&["FLUSHALL"]), "+OK");
    tokio::time::sleep(Duration::from_millis(800)).await;
    redis.restart(); // nothing saved: an empty Redis, a new run_id
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut ids = Vec::new();
    for task in tasks {
        ids.extend(task.await.unwrap());
    }
    // Both services answer again on their own.
    recovered(&a, 1, 3, 10).await;
    recovered(&b, 1, 3, 10).await;
    assert!(ids.len() > 1000, "only {} IDs", ids.len());
    assert_unique(&mut ids, "across FLUSHALL and a restart");
    eprintln!(
        "{} IDs, {} errors during the faults; a: {:?}",
        ids.len(),
        errors.load(Ordering::Relaxed),
        a.stats()
    );
    a.shutdown();
    b.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_down_at_start_is_a_redis_error_until_it_comes_up() {
    let mut redis = PrivateRedis::start();
    let keys = Keyspace::on(&redis.url(), "down");
    redis.kill();
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let service = service(store, keys.options()).await;
    app(&service, 2, 100).await;
    let error = service.get(2, "alice").await.unwrap_err();
    assert!(matches!(error, ShardedError::Redis { .. }), "{error:?}");
    assert!(error.is_service_fault());
    assert!(service.ready().await.is_err());
    redis.restart();
    recovered(&service, 2, 0, 10).await;
    service.ready().await.unwrap();
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_refuses_the_password_stops_start_up_at_once() {
    let redis = PrivateRedis::start();
    assert_eq!(
        redis.command(&["CONFIG", "SET", "requirepass", "s3cret"]),
        "+OK"
    );
    let url = format!("redis://:not-the-password@127.0.0.1:{}", redis.port());
    let keys = Keyspace::on(&url, "wrongpass");
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let error = ShardedService::start(store, keys.options())
        .await
        .unwrap_err();
    assert!(matches!(error, ShardedError::RedisAuth { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "redis at redis://:***@127.0.0.1:{} refused the credentials: ",
            redis.port()
        )),
        "{message}"
    );
    assert!(
        message.ends_with("check the user and password in `redis.url`"),
        "{message}"
    );
    assert!(!message.contains("not-the-password"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_is_refused_and_a_promoted_replica_that_missed_pops_is_purged() {
    let a = PrivateRedis::start();
    let b = PrivateRedis::start();
    let keys = Keyspace::on(&a.url(), "failover");
    let (store, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    let on_a = service(store, keys.options()).await;
    app(&on_a, 3, 1000).await;
    let mut served = on_a.get_batch_in_shard(3, 0, 10).await.unwrap();
    // b replicates a: it holds the list (11..=1000) and a's verified marker.
    assert_eq!(
        b.command(&["REPLICAOF", "127.0.0.1", &a.port().to_string()]),
        "+OK"
    );
    wait_replication(&b, "master_link_status:up").await;
    // A uidgen server pointed at a replica refuses to use it.
    let options_b = ShardedOptions {
        redis_url: b.url(),
        ..keys.options()
    };
    let on_b = service(Store::connect(&url).await.unwrap(), options_b).await;
    let error = on_b.get_in_shard(3, 0).await.unwrap_err();
    assert!(error.to_string().contains("slave"), "{error}");
    // b is cut off from a (as in a partition) and promoted; a keeps serving meanwhile, so b's
    // list holds numbers a has served since.
    assert_eq!(b.command(&["REPLICAOF", "NO", "ONE"]), "+OK");
    served.extend(on_a.get_batch_in_shard(3, 0, 100).await.unwrap());
    let mut conn = raw(&b).await;
    let stale = list_contents(&mut conn, &keys.list(3, 0)).await;
    assert!(
        stale.contains(&50),
        "b still holds index 50, which a served"
    );
    // Failover: clients now talk to b. Its instance was never verified: everything is purged
    // before the first pop.
    let after = recovered(&on_b, 3, 0, 10).await;
    assert!(index_of(after) > 1000, "index {}", index_of(after));
    let mut all: Vec<u64> = served.iter().copied().chain([after]).collect();
    all.extend(on_b.get_batch_in_shard(3, 0, 500).await.unwrap());
    assert_unique(&mut all, "across the failover");
    on_a.shutdown();
    on_b.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_demoted_and_promoted_again_under_an_idle_connection_is_purged() {
    let a = PrivateRedis::start();
    let b = PrivateRedis::start();
    let keys = Keyspace::on(&a.url(), "demote");
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let options = ShardedOptions {
        verify_interval: Duration::from_millis(100),
        ..keys.options()
    };
    let service = service(store, options).await;
    app(&service, 4, 1000).await;
    let mut served = service.get_batch_in_shard(4, 0, 10).await.unwrap();
    // b copies a (list 11..=1000), then is cut off and promoted; a serves 100 more.
    assert_eq!(
        b.command(&["REPLICAOF", "127.0.0.1", &a.port().to_string()]),
        "+OK"
    );
    wait_replication(&b, "master_link_status:up").await;
    assert_eq!(b.command(&["REPLICAOF", "NO", "ONE"]), "+OK");
    served.extend(service.get_batch_in_shard(4, 0, 100).await.unwrap());
    // While the service is idle, a is made b's replica (taking b's stale data) and promoted
    // again: the same process, the same TCP connection if it survives, older data.
    assert_eq!(
        a.command(&["REPLICAOF", "127.0.0.1", &b.port().to_string()]),
        "+OK"
    );
    wait_replication(&a, "master_link_status:up").await;
    assert_eq!(a.command(&["REPLICAOF", "NO", "ONE"]), "+OK");
    let mut conn = raw(&a).await;
    let list = list_contents(&mut conn, &keys.list(4, 0)).await;
    assert_eq!(
        list.first(),
        Some(&11),
        "a's list went back in time: index 11 was served"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = recovered(&service, 4, 0, 10).await;
    assert!(index_of(after) > 1000, "index {}", index_of(after));
    let mut all: Vec<u64> = served.iter().copied().chain([after]).collect();
    all.extend(service.get_batch_in_shard(4, 0, 200).await.unwrap());
    assert_unique(&mut all, "across demotion and promotion");
    service.shutdown();
}
