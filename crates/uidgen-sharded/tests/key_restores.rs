#![allow(clippy::unwrap_used)]
//! Issue 18: lists written back key by key into the *same* Redis process (no restart, no
//! failover, so `run_id` and `master_replid` stay and the instance check cannot see it), on a
//! private `redis-server`. Each list's mark (the highest index popped from it) catches every
//! such restore; the one it cannot, a restore of the list *and* its mark, is closed by the
//! operator action docs/OPERATIONS.md gives. Numbers may be skipped, none is served twice.

mod common;

use std::sync::Arc;

use common::{Keyspace, app, assert_unique, index_of, list_contents, service};
use redis::aio::MultiplexedConnection;
use uidgen_sharded::ShardedService;
use uidgen_sharded::testing::PrivateRedis;
use uidgen_store::testing::{TestDb, fresh_store};

const APP: u8 = 1;
/// The app's step: a list holds about a thousand numbers.
const STEP: i64 = 1000;

/// How an operator writes a backed-up list back.
#[derive(Debug, Clone, Copy)]
enum WriteBack {
    /// `RPUSH list <backup>`: behind what the list holds now.
    AppendAtTheTail,
    /// `LPUSH` of the backup reversed: in front of what the list holds now, in its order.
    PrependAtTheHead,
    /// `DEL list`, then `RPUSH list <backup>`: the list replaced by the backup.
    Replace,
    /// `RESTORE list 0 <DUMP payload> REPLACE`: Redis's own key-level backup.
    DumpPayload,
}

/// Send `command` on `conn`, failing the test on an error reply: what it answered.
async fn send<T: redis::FromRedisValue>(
    conn: &mut MultiplexedConnection,
    command: &redis::Cmd,
) -> T {
    command.query_async(conn).await.unwrap()
}

/// A raw connection to `redis`, behind the service's back.
async fn raw(redis: &PrivateRedis) -> MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn run_id(conn: &mut MultiplexedConnection) -> String {
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.trim_end().strip_prefix("run_id:"))
        .unwrap()
        .to_owned()
}

/// Take `total` IDs of one shard, in batches of `batch`.
async fn take(service: &ShardedService, shard: u8, total: usize, batch: usize) -> Vec<u64> {
    let mut ids = Vec::with_capacity(total);
    while ids.len() < total {
        let n = batch.min(total - ids.len());
        ids.extend(service.get_batch_in_shard(APP, shard, n).await.unwrap());
    }
    ids
}

/// A started service on a fresh SQLite store and a fresh prefix of `redis`, with the app.
async fn started(redis: &PrivateRedis, name: &str) -> (Keyspace, Arc<ShardedService>) {
    let keys = Keyspace::on(&redis.url(), name);
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let service = service(store, keys.options()).await;
    app(&service, APP, STEP).await;
    (keys, service)
}

/// Every way of writing a backed-up list back into the same server, one shard each: back the
/// list up, serve 300 of its numbers, write the backup back, serve 3,000 more (single IDs and
/// batches, one larger than the step, so the batch refill that keeps a caller's share runs
/// too). No ID comes back twice, and the server was the same process throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_restored_key_by_key_into_the_same_server_are_never_served_again() {
    let redis = PrivateRedis::start();
    let (keys, service) = started(&redis, "restore").await;
    let mut conn = raw(&redis).await;
    let instance = run_id(&mut conn).await;
    let ways = [
        WriteBack::AppendAtTheTail,
        WriteBack::PrependAtTheHead,
        WriteBack::Replace,
        WriteBack::DumpPayload,
    ];
    for (shard, way) in (0u8..).zip(ways) {
        let list = keys.list(APP, shard);
        let mut served = vec![service.get_in_shard(APP, shard).await.unwrap()];
        let backup = list_contents(&mut conn, &list).await;
        assert!(
            backup.len() > 300,
            "{way:?}: the list holds {}",
            backup.len()
        );
        let dump: Vec<u8> = send(&mut conn, redis::cmd("DUMP").arg(&list)).await;
        served.extend(take(&service, shard, 300, 100).await);
        let first_served = served.iter().map(|&id| index_of(id)).min().unwrap();
        assert!(
            backup.contains(&(first_served + 1)),
            "{way:?}: the backup holds served numbers"
        );

        match way {
            WriteBack::AppendAtTheTail => {
                send::<u64>(&mut conn, redis::cmd("RPUSH").arg(&list).arg(&backup)).await;
            }
            WriteBack::PrependAtTheHead => {
                let reversed: Vec<u64> = backup.iter().rev().copied().collect();
                send::<u64>(&mut conn, redis::cmd("LPUSH").arg(&list).arg(&reversed)).await;
            }
            WriteBack::Replace => {
                send::<u64>(&mut conn, redis::cmd("DEL").arg(&list)).await;
                send::<u64>(&mut conn, redis::cmd("RPUSH").arg(&list).arg(&backup)).await;
            }
            WriteBack::DumpPayload => {
                send::<()>(
                    &mut conn,
                    redis::cmd("RESTORE")
                        .arg(&list)
                        .arg(0)
                        .arg(&dump)
                        .arg("REPLACE"),
                )
                .await;
            }
        }
        let before = service.stats().restored_lists;
        served.push(service.get_in_shard(APP, shard).await.unwrap());
        served.extend(take(&service, shard, 1_000, 100).await);
        served.extend(take(&service, shard, 2_000, 1_500).await);
        assert_unique(&mut served, &format!("{way:?}"));
        assert!(
            service.stats().restored_lists > before,
            "{way:?}: the restore went unnoticed: {:?}",
            service.stats()
        );
    }
    assert_eq!(
        run_id(&mut conn).await,
        instance,
        "one server process throughout"
    );
    assert_eq!(
        service.stats().purges,
        1,
        "the instance check saw nothing: {:?}",
        service.stats()
    );
    service.shutdown();
}

/// The window the mark leaves: the list *and* its mark written back together. The mark then
/// lies below numbers already served, so the restored list would serve them again. The
/// documented action, setting the mark to the shard's `id_alloc.max_id` (at or above every
/// number ever pushed, the original service's meaning of `max_id`), closes it: the restored entries are refused, and nothing repeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_restored_with_its_mark_is_closed_by_setting_the_mark_from_the_database() {
    let redis = PrivateRedis::start();
    let keys = Keyspace::on(&redis.url(), "both");
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let service = service(store.clone(), keys.options()).await;
    app(&service, APP, STEP).await;
    let mut conn = raw(&redis).await;
    let list = keys.list(APP, 0);
    let mark = format!("{}popped_{APP}_0", keys.prefix);

    // The first batch is the refill's own share; the second comes through the list.
    let mut served = take(&service, 0, 20, 10).await;
    let list_backup = list_contents(&mut conn, &list).await;
    let mark_backup: String = send(&mut conn, redis::cmd("GET").arg(&mark)).await;
    served.extend(take(&service, 0, 300, 100).await);

    // Both written back: the mark says less was served than was.
    send::<u64>(&mut conn, redis::cmd("DEL").arg(&list)).await;
    send::<u64>(&mut conn, redis::cmd("RPUSH").arg(&list).arg(&list_backup)).await;
    send::<()>(&mut conn, redis::cmd("SET").arg(&mark).arg(&mark_backup)).await;
    let highest_served = served.iter().map(|&id| index_of(id)).max().unwrap();
    assert!(
        mark_backup.parse::<u64>().unwrap() < highest_served
            && list_backup.iter().any(|&n| n <= highest_served),
        "the window: the restored mark is below numbers already served, and the list holds them"
    );

    // The operator's action (docs/OPERATIONS.md): the mark set from the database.
    let max_id = store.app(APP).await.unwrap().unwrap().shards[0].max_id;
    send::<()>(&mut conn, redis::cmd("SET").arg(&mark).arg(max_id)).await;

    served.extend(take(&service, 0, 2_000, 100).await);
    assert_unique(&mut served, "after the restore of the list and its mark");
    assert!(service.stats().restored_lists >= 1, "{:?}", service.stats());
    service.shutdown();
}

/// A mark that is not a number stops the list's pops with an error naming the key and what to
/// do, rather than serving without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mark_that_is_not_a_number_stops_its_list_with_a_clear_error() {
    let redis = PrivateRedis::start();
    let (keys, service) = started(&redis, "corrupt-mark").await;
    let mut conn = raw(&redis).await;
    service.get_in_shard(APP, 0).await.unwrap();
    let mark = format!("{}popped_{APP}_0", keys.prefix);
    send::<()>(&mut conn, redis::cmd("SET").arg(&mark).arg("garbage")).await;
    let error = service.get_in_shard(APP, 0).await.unwrap_err();
    let message = error.to_string();
    assert!(error.is_service_fault(), "{error:?}");
    assert!(
        message.contains(&mark) && message.contains("id_alloc max_id and delete the list"),
        "{message}"
    );
    // Other shards are not affected.
    service.get_in_shard(APP, 1).await.unwrap();
    service.shutdown();
}
