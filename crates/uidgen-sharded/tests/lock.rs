#![allow(clippy::unwrap_used)]
//! The refill lock: only its holder releases it, a server that did not get it never deletes it
//! (the original deleted it in a `finally` block either way), and a dead holder's lock expires.

mod common;

use std::time::Duration;

use common::{Keyspace, held_lock, sqlite_service_with_app};
use uidgen_sharded::{RedisLock, RefillOutcome};

async fn get(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_did_not_get_the_lock_never_deletes_it() {
    let (keys, service) = sqlite_service_with_app("lock-busy", 5).await;
    let mut conn = keys.raw().await;
    // Another server holds the refill lock of app 5 shard 3.
    let lock_key = format!("{}lock_5_3", keys.prefix);
    let other = held_lock(&mut conn, &lock_key, Duration::from_secs(30)).await;
    // This server wants to refill the same list: it is turned away ...
    assert_eq!(service.refill(5, 3).await.unwrap(), RefillOutcome::Busy);
    // ... and the other server's lock is still there, with its token and its expiry. The
    // original's `finally { del(lock) }` would have deleted it here.
    assert_eq!(
        get(&mut conn, &lock_key).await.as_deref(),
        Some(other.token())
    );
    assert!(pttl(&mut conn, &lock_key).await > 20_000);
    // A pop that finds the list empty does not delete it either; it gives up after its tries.
    let error = service.get_in_shard(5, 3).await.unwrap_err();
    assert!(
        matches!(
            error,
            uidgen_sharded::ShardedError::QueueEmpty {
                app_id: 5,
                shard: 3,
                tries: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(
        get(&mut conn, &lock_key).await.as_deref(),
        Some(other.token())
    );
    assert!(other.release(&mut conn).await.unwrap());
    assert!(matches!(
        service.refill(5, 3).await.unwrap(),
        RefillOutcome::Pushed { start: 1, end: 101 }
    ));
    assert_eq!(
        get(&mut conn, &lock_key).await,
        None,
        "released after the refill"
    );
    service.shutdown();
}

#[tokio::test]
async fn release_deletes_only_the_holders_own_token() {
    let keys = Keyspace::shared("lock-token").await;
    let mut conn = keys.raw().await;
    let key = format!("{}lock_1_1", keys.prefix);
    let first = held_lock(&mut conn, &key, Duration::from_secs(30)).await;
    assert!(
        RedisLock::acquire(&mut conn, &key, Duration::from_secs(30))
            .await
            .unwrap()
            .is_none(),
        "a held lock is not granted twice"
    );
    // The first holder was too slow: its lock expired and a second holder took it.
    let _: () = redis::cmd("DEL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .unwrap();
    let second = held_lock(&mut conn, &key, Duration::from_secs(30)).await;
    assert_ne!(first.token(), second.token());
    // The first holder's release leaves the second holder's lock alone.
    assert!(!first.release(&mut conn).await.unwrap());
    assert_eq!(get(&mut conn, &key).await.as_deref(), Some(second.token()));
    assert!(second.release(&mut conn).await.unwrap());
    assert_eq!(get(&mut conn, &key).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_lock_expires() {
    let (keys, service) = sqlite_service_with_app("lock-dead", 6).await;
    let mut conn = keys.raw().await;
    let key = format!("{}lock_6_0", keys.prefix);
    // A holder that dies right after taking the lock: it never releases.
    let dead = held_lock(&mut conn, &key, Duration::from_millis(300)).await;
    std::mem::forget(dead);
    // Key and expiry were set by one command: the lock has its ttl from the start.
    let ttl = pttl(&mut conn, &key).await;
    assert!((1..=300).contains(&ttl), "{ttl}");
    assert_eq!(service.refill(6, 0).await.unwrap(), RefillOutcome::Busy);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(get(&mut conn, &key).await, None, "expired");
    assert!(matches!(
        service.refill(6, 0).await.unwrap(),
        RefillOutcome::Pushed { .. }
    ));
    service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_that_goes_away_mid_refill_leaves_no_lock_behind() {
    // An HTTP client that disconnects drops its request wherever it is, here at every point of
    // the first refills of 64 shards. The refills finish and release their locks anyway: none
    // is left to block its list until the lock's ttl (10 s) ends.
    let (keys, service) = sqlite_service_with_app("lock-cancel", 8).await;
    for shard in 0..64_u8 {
        let wait = Duration::from_micros(100 * u64::from(shard));
        let _ = tokio::time::timeout(wait, service.get_in_shard(8, shard)).await;
    }
    let mut conn = keys.raw().await;
    let pattern = format!("{}lock_*", keys.prefix);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    loop {
        let locks: Vec<String> = redis::cmd("KEYS")
            .arg(&pattern)
            .query_async(&mut conn)
            .await
            .unwrap();
        if locks.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "left behind: {locks:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for shard in 0..64_u8 {
        service.get_in_shard(8, shard).await.unwrap();
    }
    service.shutdown();
}
