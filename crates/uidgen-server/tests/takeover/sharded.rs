//! The original sharded service (seed 004): its `id_alloc` rows (inclusive `max_id`, rows at 0)
//! on PostgreSQL and its Redis lists and locks, continued by uidgen while the original's refills
//! and pops go on beside it.

use std::collections::BTreeMap;

use redis::aio::MultiplexedConnection;
use uidgen_sharded::{ShardedId, shard_of};
use uidgen_store::Store;
use uidgen_store::testing::{TestDb, fresh_store, peer_transaction};

use super::common::{Server, fetch, json};
use super::{assert_no_equal, refused_start, takeover};

const APP: u8 = 7;
const STEP: i64 = 50;

/// The original's redis commands.
async fn redis(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The original's refill of one shard's list: its lock (`SETNX`, then a 60 s `EXPIRE`), the claim
/// (`UPDATE id_alloc SET max_id = max_id + step`, read back), the push of `max_id - step + 1 ..=
/// max_id`, and the `DEL` of the lock in its `finally`, taken or not.
async fn original_refill(store: &Store, conn: &mut MultiplexedConnection, prefix: &str, shard: u8) {
    let lock = format!("{prefix}lock_{APP}_{shard}");
    let taken: bool = redis::cmd("SETNX")
        .arg(&lock)
        .arg(1)
        .query_async(conn)
        .await
        .unwrap();
    if taken {
        let _: bool = redis::cmd("EXPIRE")
            .arg(&lock)
            .arg(60)
            .query_async(conn)
            .await
            .unwrap();
        let claim = [
            format!(
                "UPDATE id_alloc SET max_id = max_id + step WHERE app_id = {APP} AND shard_id = {shard}"
            ),
            format!(
                "SELECT max_id, step FROM id_alloc WHERE app_id = {APP} AND shard_id = {shard}"
            ),
        ];
        let claim: Vec<&str> = claim.iter().map(String::as_str).collect();
        let row = peer_transaction(store, &claim).await.unwrap()[1]
            .clone()
            .unwrap();
        let indexes: Vec<i64> = (row[0] - row[1] + 1..=row[0]).collect();
        let _: u64 = redis::cmd("RPUSH")
            .arg(format!("{prefix}idList_{APP}_{shard}"))
            .arg(&indexes)
            .query_async(conn)
            .await
            .unwrap();
    }
    let _: u64 = redis::cmd("DEL")
        .arg(&lock)
        .query_async(conn)
        .await
        .unwrap();
}

/// The original's pop: `LPOP` of the shard's list, as an ID.
async fn original_pop(conn: &mut MultiplexedConnection, prefix: &str, shard: u8) -> Option<u64> {
    let index: Option<u64> = redis::cmd("LPOP")
        .arg(format!("{prefix}idList_{APP}_{shard}"))
        .query_async(conn)
        .await
        .unwrap();
    index.map(|index| ShardedId::new(APP, shard, index).unwrap().to_u64())
}

/// A gate pass that lands in `shard` (Java's `String.hashCode`, as the original computes it).
fn gate_pass_for(shard: u8) -> String {
    (0..)
        .map(|n| format!("user{n}@example.com"))
        .find(|g| shard_of(g) == shard)
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_original_sharded_service_and_uidgen_share_one_id_alloc_and_redis() {
    let (store, url) = fresh_store(TestDb::Postgres).await.unwrap();
    let redis_url = uidgen_sharded::testing::redis_url();
    uidgen_sharded::testing::check_redis(&redis_url)
        .await
        .unwrap();
    let prefix = uidgen_sharded::testing::unique_prefix("takeover");
    let mut conn = redis(&redis_url).await;
    // The original's init: the app's 64 shard rows at max_id 0.
    let rows: Vec<String> = (0..64)
        .map(|shard| {
            format!(
                "INSERT INTO id_alloc (app_id, app_name, max_id, shard_id, step, description, \
                 max_limit_id) VALUES ({APP}, 'orders', 0, {shard}, {STEP}, '', 0)"
            )
        })
        .collect();
    peer_transaction(&store, &rows.iter().map(String::as_str).collect::<Vec<_>>())
        .await
        .unwrap();
    // It ran: each of shards 0-3 refilled twice, and served 60 of its 100 indexes.
    let shards = [0_u8, 1, 2, 3];
    let mut before: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for &shard in &shards {
        original_refill(&store, &mut conn, &prefix, shard).await;
        original_refill(&store, &mut conn, &prefix, shard).await;
        for _ in 0..60 {
            before
                .entry(shard)
                .or_default()
                .push(original_pop(&mut conn, &prefix, shard).await.unwrap());
        }
    }
    // A shard at max_id 1000 (issue 31: uidgen handed its index 1000 out again).
    let thousand =
        format!("UPDATE id_alloc SET max_id = 1000 WHERE app_id = {APP} AND shard_id = 9");
    peer_transaction(&store, &[&thousand]).await.unwrap();

    let env = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_SHARDED_ENABLED", "true"),
        ("UIDGEN_REDIS_URL", redis_url.as_str()),
        ("UIDGEN_SHARDED_KEY_PREFIX", prefix.as_str()),
    ];
    let (ok, out) = takeover(&["sharded", "--beside", "--check"], &env);
    assert!(ok, "{out}");
    assert!(out.contains("4 lists hold 160 indexes"), "{out}");
    assert!(out.contains("app 7 shard 0 at 101"), "{out}");
    let (ok, out) = takeover(&["sharded", "--beside"], &env);
    assert!(ok, "{out}");

    // Another prefix would leave the original's lists and locks apart: refused.
    let other = [&env[..3], &[("UIDGEN_SHARDED_KEY_PREFIX", "other.")]].concat();
    let log = refused_start(&other);
    assert!(
        log.contains("the original service's lists and locks live under"),
        "{log}"
    );

    let server = Server::start(&[], &env);
    let original = {
        let (store, redis_url, prefix) = (store.clone(), redis_url.clone(), prefix.clone());
        tokio::spawn(async move {
            let mut conn = redis(&redis_url).await;
            let mut served: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
            for round in 0..30 {
                let shard = shards[round % shards.len()];
                match original_pop(&mut conn, &prefix, shard).await {
                    Some(id) => served.entry(shard).or_default().push(id),
                    None => original_refill(&store, &mut conn, &prefix, shard).await,
                }
                if round % 7 == 0 {
                    original_refill(&store, &mut conn, &prefix, shard).await;
                }
            }
            served
        })
    };
    let client = reqwest::Client::new();
    let mut after: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
    for round in 0..16 {
        let shard = shards[round % shards.len()];
        let url = server.url(&format!(
            "/v1/apps/{APP}/ids?gate_pass={}&count=40",
            gate_pass_for(shard)
        ));
        let (status, body) = fetch(&client, &url).await;
        assert_eq!(status, 200, "{body}");
        let ids = json(&body)["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect::<Vec<_>>();
        after.entry(shard).or_default().extend(ids);
    }
    let url = server.url(&format!(
        "/v1/apps/{APP}/ids?gate_pass={}&count=1",
        gate_pass_for(9)
    ));
    let (status, body) = fetch(&client, &url).await;
    assert_eq!(status, 200, "{body}");
    let first = json(&body)["ids"][0].as_u64().unwrap();
    assert_eq!(
        ShardedId::decode(first).unwrap().index,
        1001,
        "above the original's 1000"
    );

    for (shard, ids) in original.await.unwrap() {
        after.entry(shard).or_default().extend(ids);
    }
    let mut all = Vec::new();
    for &shard in &shards {
        let highest_before = before[&shard]
            .iter()
            .map(|&id| ShardedId::decode(id).unwrap().index)
            .max()
            .unwrap();
        let lowest_after = after[&shard]
            .iter()
            .map(|&id| ShardedId::decode(id).unwrap().index)
            .min()
            .unwrap();
        assert!(
            lowest_after > highest_before,
            "shard {shard}: {lowest_after} after {highest_before}"
        );
        all.extend(&before[&shard]);
        all.extend(&after[&shard]);
    }
    assert!(
        all.iter()
            .all(|&id| ShardedId::decode(id).unwrap().app_id == APP)
    );
    assert_no_equal(&all, "the original sharded service and uidgen");
    drop(server);
    uidgen_sharded::testing::delete_prefix(&redis_url, &prefix).await;
}
