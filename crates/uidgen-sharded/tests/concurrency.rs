#![allow(clippy::unwrap_used)]
//! Several services on one database and one Redis: every ID is handed out once, and refills
//! that race (even with the lock taken away from under them) push disjoint segments.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{Keyspace, app, assert_unique, list_contents, service};
use uidgen_sharded::{RefillOutcome, ShardedId, ShardedOptions, shard_of};
use uidgen_store::Store;
use uidgen_store::testing::{TestDb, fresh_store};

per_db! {
    async fn two_services_on_one_database_and_redis_never_repeat_an_id(db: TestDb) {
        let keys = Keyspace::shared("two").await;
        let (store_a, url) = fresh_store(db).await.unwrap();
        let store_b = Store::connect(&url).await.unwrap();
        let a = service(store_a, keys.options()).await;
        let b = service(store_b, keys.options()).await;
        // A small step: many refills, many races for the same lists.
        app(&a, 9, 50).await;
        b.sync_apps().await.unwrap();
        let mut tasks = Vec::new();
        for (n, service) in [&a, &b].into_iter().cycle().take(16).enumerate() {
            let service = Arc::clone(service);
            tasks.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for i in 0..150_usize {
                    // Few users, so the 16 tasks fight over the same shards.
                    let user = format!("user{}", (n + i) % 8);
                    let batch = if i.is_multiple_of(3) {
                        service.get_batch(9, &user, 20).await.unwrap()
                    } else {
                        vec![service.get(9, &user).await.unwrap()]
                    };
                    for &id in &batch {
                        let parts = ShardedId::decode(id).unwrap();
                        assert_eq!((parts.app_id, parts.shard), (9, shard_of(&user)));
                    }
                    ids.extend(batch);
                }
                ids
            }));
        }
        let mut ids = Vec::new();
        for task in tasks {
            ids.extend(task.await.unwrap());
        }
        assert_eq!(ids.len(), 16 * (50 * 20 + 100));
        assert_unique(&mut ids, "two services");
        let (sa, sb) = (a.stats(), b.stats());
        assert!(sa.refills > 0 && sb.refills > 0, "both refilled: {sa:?} {sb:?}");
        a.shutdown();
        b.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refills_racing_without_the_lock_push_disjoint_segments() {
    // The lock keeps servers from refilling one list at once, but uniqueness must not depend
    // on it: here it is deleted as fast as it is taken, so refills of two services overlap in
    // time, and every push must still be a segment no one else pushed.
    let keys = Keyspace::shared("race").await;
    let (store_a, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    let store_b = Store::connect(&url).await.unwrap();
    // A ratio close to 1: a list is "short" until it holds 99 of 100, so both push often.
    let options = ShardedOptions {
        refill_ratio: 0.99,
        ..keys.options()
    };
    let a = service(store_a, options.clone()).await;
    let b = service(store_b, options).await;
    app(&a, 1, 100).await;
    b.sync_apps().await.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let breaker = {
        let (stop, lock_key) = (stop.clone(), format!("{}lock_1_0", keys.prefix));
        let mut conn = keys.raw().await;
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let _: u64 = redis::cmd("DEL")
                    .arg(&lock_key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                tokio::task::yield_now().await;
            }
        })
    };
    let mut refills = Vec::new();
    for service in [&a, &b, &a, &b] {
        let service = Arc::clone(service);
        refills.push(tokio::spawn(async move {
            let mut pushed = Vec::new();
            for _ in 0..25 {
                if let RefillOutcome::Pushed { start, end } = service.refill(1, 0).await.unwrap() {
                    pushed.push(start..end);
                }
            }
            pushed
        }));
    }
    // Drain the list meanwhile, so it keeps being short.
    let mut drained = Vec::new();
    let mut conn = keys.raw().await;
    let key = keys.list(1, 0);
    let mut segments = Vec::new();
    while segments.len() < refills.len() {
        let popped: Option<Vec<u64>> = redis::cmd("LPOP")
            .arg(&key)
            .arg(1000)
            .query_async(&mut conn)
            .await
            .unwrap();
        drained.extend(popped.unwrap_or_default());
        if refills.iter().all(tokio::task::JoinHandle::is_finished) {
            for refill in refills.drain(..) {
                segments.push(refill.await.unwrap());
            }
        }
        tokio::task::yield_now().await;
    }
    stop.store(true, Ordering::Relaxed);
    breaker.await.unwrap();
    drained.extend(list_contents(&mut conn, &key).await);
    let mut ranges: Vec<_> = segments.into_iter().flatten().collect();
    assert!(ranges.len() >= 8, "{} pushes", ranges.len());
    ranges.sort_by_key(|r| r.start);
    for pair in ranges.windows(2) {
        assert!(pair[0].end <= pair[1].start, "overlapping pushes: {pair:?}");
    }
    let pushed: u64 = ranges.iter().map(|r| r.end - r.start).sum();
    assert_eq!(
        u64::try_from(drained.len()).unwrap(),
        pushed,
        "every pushed number is in the list once"
    );
    assert_unique(&mut drained, "racing refills");
    a.shutdown();
    b.shutdown();
}
