//! The sharded mode end to end: two real `uidgen` processes on one database and one Redis, 8
//! client threads each, over HTTP; Redis flushed and restarted under them; the CLI.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{Server, assert_unique, fetch, run};
use uidgen_sharded::testing::{PrivateRedis, check_redis, delete_prefix, redis_url, unique_prefix};
use uidgen_sharded::{ShardedId, shard_of};
use uidgen_store::testing::{TestDb, fresh_url};
use uidgen_store::{AppSpec, Store};

/// The app every test here uses.
const APP: u8 = 11;

/// A database of `kind` with app [`APP`] created (64 shards, `step`), and its URL.
async fn database_with_app(kind: TestDb, step: i64) -> String {
    let url = fresh_url(kind).await.unwrap();
    let store = Store::connect(&url).await.unwrap();
    store
        .create_or_update_app(&AppSpec {
            step,
            ..AppSpec::new(APP, "e2e")
        })
        .await
        .unwrap();
    store.close().await;
    url
}

/// Two `uidgen serve` processes with the sharded mode on `store` and `redis`.
fn two_servers(store: &str, redis: &str, prefix: &str) -> [Server; 2] {
    let envs = [
        ("UIDGEN_STORE", store),
        ("UIDGEN_SHARDED_ENABLED", "true"),
        ("UIDGEN_REDIS_URL", redis),
        ("UIDGEN_SHARDED_KEY_PREFIX", prefix),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
    ];
    [Server::start(&[], &envs), Server::start(&[], &envs)]
}

/// What one client thread saw.
#[derive(Default)]
struct Seen {
    ids: Vec<u64>,
    /// 503s during a fault, by code.
    unavailable: u64,
}

/// One client thread: `requests` requests to `base` (4 single IDs for each batch of `batch`),
/// over users that cover many shards; every ID must decode to [`APP`] and the user's shard.
/// With `stop`, it runs until told to stop and tolerates 503s (Redis faults).
fn client_thread(
    base: String,
    thread: u64,
    requests: u64,
    batch: u64,
    stop: Option<Arc<AtomicBool>>,
) -> std::thread::JoinHandle<Seen> {
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let client = reqwest::Client::new();
            let mut seen = Seen::default();
            let mut i = 0_u64;
            loop {
                match &stop {
                    Some(stop) if stop.load(Ordering::Relaxed) => break,
                    None if i == requests => break,
                    _ => {}
                }
                i += 1;
                let user = format!("user{thread}-{}@example.com", i % 40);
                let single = !i.is_multiple_of(5);
                let url = if single {
                    format!("{base}/api/shard/get/{APP}?gatePass={user}")
                } else {
                    format!("{base}/v1/apps/{APP}/ids?gate_pass={user}&count={batch}")
                };
                let response = client.get(&url).send().await.unwrap();
                let status = response.status().as_u16();
                let body = response.text().await.unwrap();
                if status == 503 && stop.is_some() {
                    let code = serde_json::from_str::<serde_json::Value>(&body).unwrap()["code"]
                        .as_str()
                        .unwrap()
                        .to_owned();
                    assert!(
                        ["redis_unavailable", "queue_empty"].contains(&code.as_str()),
                        "{url}: {body}"
                    );
                    seen.unavailable += 1;
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                assert_eq!(status, 200, "{url}: {body}");
                let ids: Vec<u64> = if single {
                    vec![body.trim().parse().unwrap()]
                } else {
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    v["ids"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|id| id.as_u64().unwrap())
                        .collect()
                };
                for &id in &ids {
                    let parts = ShardedId::decode(id).unwrap();
                    assert_eq!((parts.app_id, parts.shard), (APP, shard_of(&user)), "{id}");
                }
                seen.ids.extend(ids);
            }
            seen
        })
    })
}

/// 16 client threads over `servers`, taking batches of 20 and single IDs until `stop`, 503s
/// allowed (a fault is under way).
fn fault_threads(
    servers: &[Server; 2],
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Seen>> {
    (0..16_u64)
        .map(|t| {
            let base = servers[usize::from(t % 2 == 1)].base.clone();
            client_thread(base, t, 0, 20, Some(Arc::clone(stop)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_server_processes_hand_out_half_a_million_distinct_ids() {
    let redis = redis_url();
    check_redis(&redis).await.unwrap_or_else(|e| panic!("{e}"));
    let prefix = unique_prefix("e2e-500k");
    let store = database_with_app(TestDb::Postgres, 1000).await;
    let servers = two_servers(&store, &redis, &prefix);
    let started = Instant::now();
    // 16 threads x 800 requests: 640 single IDs and 160 batches of 200 each, 522,240 IDs.
    let threads: Vec<_> = (0..16_u64)
        .map(|t| {
            let base = servers[usize::from(t % 2 == 1)].base.clone();
            client_thread(base, t, 800, 200, None)
        })
        .collect();
    let ids: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap().ids)
        .collect();
    let elapsed = started.elapsed();
    assert_eq!(ids.len(), 16 * (640 + 160 * 200));
    assert!(ids.len() >= 500_000);
    let count = ids.len();
    assert_unique(ids);
    eprintln!(
        "{count} distinct IDs from 2 processes in {elapsed:.1?} ({:.0} IDs/s)",
        count as f64 / elapsed.as_secs_f64()
    );
    for server in servers {
        let (status, log) = server.terminate();
        assert!(status.success(), "{log}");
    }
    delete_prefix(&redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flushall_then_a_redis_restart_mid_run_repeat_nothing_and_the_servers_recover() {
    let mut redis = PrivateRedis::start();
    let prefix = unique_prefix("e2e-faults");
    let store = database_with_app(TestDb::MySql, 200).await;
    let servers = two_servers(&store, &redis.url(), &prefix);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = fault_threads(&servers, &stop);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(redis.command(&["FLUSHALL"]), "+OK");
    std::thread::sleep(Duration::from_millis(1500));
    redis.restart(); // a new process, empty: nothing was saved
    std::thread::sleep(Duration::from_millis(2000));
    stop.store(true, Ordering::Relaxed);
    let (mut ids, unavailable) = threads
        .into_iter()
        .fold((Vec::new(), 0), |(mut ids, n), t| {
            let seen = t.join().unwrap();
            ids.extend(seen.ids);
            (ids, n + seen.unavailable)
        });
    // Both servers answer again by themselves.
    let after = AtomicU64::new(0);
    for server in &servers {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let response = reqwest::get(server.url(&format!("/api/shard/get/{APP}?gatePass=z")))
                .await
                .unwrap();
            if response.status() == 200 {
                ids.push(response.text().await.unwrap().parse().unwrap());
                after.fetch_add(1, Ordering::Relaxed);
                break;
            }
            assert!(Instant::now() < deadline, "{} did not recover", server.base);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let count = ids.len();
    assert!(count > 2000, "only {count} IDs");
    assert_unique(ids);
    eprintln!("{count} distinct IDs across FLUSHALL and a restart; {unavailable} 503s meanwhile");
    let logs: Vec<String> = servers.into_iter().map(|s| s.terminate().1).collect();
    // The restarted Redis is another instance: one of the servers deleted every list before
    // popping from it (the other found its marker).
    assert!(
        logs.iter().any(|log| log.contains("deleted every list")),
        "{logs:?}"
    );
}

/// Issue 18: lists backed up (`LRANGE`) and written back (`RPUSH`) into the same Redis process
/// while two server processes pop from them, five times over: the instance stays the same, so
/// only the lists' marks can tell; no ID is served twice, and the servers count the restored
/// lists they found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_written_back_under_two_server_processes_repeat_nothing() {
    let redis = PrivateRedis::start();
    let prefix = unique_prefix("e2e-restore");
    let store = database_with_app(TestDb::Postgres, 200).await;
    let servers = two_servers(&store, &redis.url(), &prefix);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = fault_threads(&servers, &stop);
    let mut conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lists: Vec<String> = (0..64)
        .map(|s| format!("{prefix}idList_{APP}_{s}"))
        .collect();
    let mut restored = 0;
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut backups = Vec::new();
        for list in &lists {
            let backup: Vec<String> = redis::cmd("LRANGE")
                .arg(list)
                .arg(0)
                .arg(-1)
                .query_async(&mut conn)
                .await
                .unwrap();
            backups.push(backup);
        }
        // Pops go on meanwhile, then every backup goes back behind what is left.
        tokio::time::sleep(Duration::from_millis(300)).await;
        for (list, backup) in lists.iter().zip(&backups) {
            if !backup.is_empty() {
                let _: u64 = redis::cmd("RPUSH")
                    .arg(list)
                    .arg(backup)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                restored += 1;
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    stop.store(true, Ordering::Relaxed);
    let ids: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap().ids)
        .collect();
    let count = ids.len();
    assert!(restored > 0, "nothing was backed up");
    assert_unique(ids);
    let (http, mut noticed) = (reqwest::Client::new(), 0);
    for server in &servers {
        let (_, metrics) = fetch(&http, &server.url("/metrics")).await;
        noticed += metrics
            .lines()
            .find_map(|l| l.strip_prefix("uidgen_sharded_events_total{event=\"restored_lists\"} "))
            .unwrap_or_else(|| panic!("no restored_lists counter in:\n{metrics}"))
            .trim()
            .parse::<u64>()
            .unwrap();
    }
    eprintln!("{count} distinct IDs across {restored} list restores; {noticed} noticed");
    assert!(noticed > 0, "no server noticed a restored list");
    for server in servers {
        let (status, log) = server.terminate();
        assert!(status.success(), "{log}");
    }
}

#[test]
fn the_cli_decodes_and_makes_sharded_ids() {
    let (status, out, err) = run(
        &[
            "make", "--layout", "sharded", "--app", "7", "--shard", "63", "--index", "1001",
        ],
        &[],
    );
    assert!(status.success(), "{err}");
    assert_eq!(out.trim(), "16416519");
    let (status, out, err) = run(&["decode", "--layout", "sharded", "16416519"], &[]);
    assert!(status.success(), "{err}");
    assert_eq!(
        out.trim(),
        "16416519 app_id=7 shard=63 index=1001 layout=sharded"
    );
    let (status, out, _) = run(
        &["decode", "--layout", "sharded", "--json", "16416519"],
        &[],
    );
    assert!(status.success());
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (
            v["app_id"].as_u64(),
            v["shard"].as_u64(),
            v["index"].as_u64()
        ),
        (Some(7), Some(63), Some(1001))
    );
    for (args, expected) in [
        (
            &[
                "make", "--layout", "sharded", "--app", "300", "--shard", "1", "--index", "1",
            ][..],
            "300 is not in 0..=255",
        ),
        (
            &[
                "make", "--layout", "sharded", "--app", "1", "--shard", "64", "--index", "1",
            ][..],
            "shard 64 is out of range",
        ),
        (
            &[
                "make",
                "--layout",
                "sharded",
                "--app",
                "1",
                "--shard",
                "1",
                "--index",
                "562949953421312",
            ][..],
            "does not fit the sharded layout's 49 index bits",
        ),
        (
            &["make", "--app", "1", "--shard", "1", "--index", "1"][..],
            "add --layout sharded",
        ),
        (
            &["decode", "--layout", "sharded", "-5"][..],
            "not a non-negative decimal integer",
        ),
        (
            &["decode", "--layout", "sharded", "9223372036854775808"][..],
            "the sign bit is set",
        ),
    ] {
        let (status, _, err) = run(args, &[]);
        assert!(!status.success(), "{args:?}");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
}
