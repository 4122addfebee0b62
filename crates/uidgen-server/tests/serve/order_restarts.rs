//! Issue 33, item 1, "order across restarts", end to end: real `uidgen serve` processes sharing one
//! order mark (one store, or each its own store and one etcd or ZooKeeper), each under a burst of
//! large batches (so the cached generator's ring borrows seconds ahead of the clock), killed with
//! `kill -9` at a random moment and started again, several times. Every ID returned to a client is
//! recorded with the life (one start of one server) that returned it. Checked: every ID of a life
//! is above every ID of every life that was killed before it started, whichever server either was
//! (the IDs of one space never go back in time across a restart). Before the order mark, a
//! restarted server began at its clock, up to the borrowing bound (a minute) below the IDs its
//! previous life had handed out.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Server, sqlite_url};
use parking_lot::Mutex;
use uidgen_store::testing::{TestDb, fresh_url};
use uidgen_worker::MarkRaise;

/// IDs per request: large batches from several clients at once, far above the 8,192 a second
/// one worker id sustains, so that the ring borrows seconds ahead within a second of load; and
/// no larger than a second of that rate, so that a life starting at the borrowing bound (its
/// earlier lives borrowed the whole bound) still answers within its short life.
const COUNT: usize = 4_000;
/// Requests each server has in flight at once.
const CLIENTS: usize = 4;
/// Starts of each server.
const LIVES: usize = 4;

/// One start of one server: the IDs it returned, and where it stands among the starts and
/// kills of the whole run (one counter for every server).
#[derive(Debug, Default, Clone)]
struct Life {
    server: usize,
    /// The event number of its start (taken before the process was spawned).
    started: u64,
    /// The event number of its kill (taken once the process had exited); `u64::MAX` alive.
    killed: u64,
    min: Option<u64>,
    max: Option<u64>,
    ids: u64,
}

/// The lives of a run, and the one event counter.
#[derive(Default)]
struct Record {
    lives: Mutex<Vec<Life>>,
    events: AtomicU64,
}

impl Record {
    fn event(&self) -> u64 {
        // SeqCst: the order of starts and kills is what the test checks against.
        self.events.fetch_add(1, Ordering::SeqCst)
    }

    fn took(&self, life: usize, ids: &[u64]) {
        let (Some(&lo), Some(&hi)) = (ids.iter().min(), ids.iter().max()) else {
            return;
        };
        let mut lives = self.lives.lock();
        let life = &mut lives[life];
        life.min = Some(life.min.map_or(lo, |m| m.min(lo)));
        life.max = Some(life.max.map_or(hi, |m| m.max(hi)));
        life.ids += ids.len() as u64;
    }
}

/// Take `COUNT` IDs at a time from the life `current` names (its base URL and index), until
/// `stop`; each batch is credited to the life whose server answered it.
async fn drive(
    current: Arc<Mutex<Option<(String, usize)>>>,
    record: Arc<Record>,
    stop: Arc<AtomicBool>,
) {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    // SeqCst: a test flag.
    while !stop.load(Ordering::SeqCst) {
        let Some((base, life)) = current.lock().clone() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let url = format!("{base}/v1/ids?count={COUNT}");
        let answer = match client.get(&url).send().await {
            Ok(response) if response.status() == 200 => response.text().await.ok(),
            _ => None,
        };
        match answer {
            Some(body) => {
                let value: serde_json::Value = serde_json::from_str(&body).unwrap();
                record.took(life, &common::ids_in(&value));
            }
            // Killed mid-request, or not up: nothing was returned to this client.
            None => tokio::time::sleep(Duration::from_millis(5)).await,
        }
    }
}

/// One server slot: start, serve a random 1-3 s under the burst, `kill -9`, again. `staggered`:
/// the first start waits until another server's life has been killed.
async fn lives_of(
    server: usize,
    env: Vec<(String, String)>,
    record: Arc<Record>,
    current: Arc<Mutex<Option<(String, usize)>>>,
    staggered: bool,
) {
    while staggered
        && !record
            .lives
            .lock()
            .iter()
            .any(|life| life.killed != u64::MAX)
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..LIVES {
        let started = record.event();
        let env = env.clone();
        let process = tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::start(&[], &env)
        })
        .await
        .unwrap();
        let life = {
            let mut lives = record.lives.lock();
            lives.push(Life {
                server,
                started,
                killed: u64::MAX,
                ..Life::default()
            });
            lives.len() - 1
        };
        *current.lock() = Some((process.base.clone(), life));
        tokio::time::sleep(Duration::from_millis(1_000 + fastrand::u64(..2_000))).await;
        tokio::task::spawn_blocking(move || process.kill())
            .await
            .unwrap();
        *current.lock() = None;
        record.lives.lock()[life].killed = record.event();
    }
}

/// `env` for each of `servers` servers.
fn same_env(servers: usize, env: &[(&str, &str)]) -> Vec<Vec<(String, String)>> {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    vec![env; servers]
}

/// One server per environment of `envs`, `LIVES` lives each; panics naming the first life
/// that began below an earlier one. `staggered`: the first server starts alone, the others once
/// one of its lives has been killed (a first life of a server then starts after another's).
async fn burst_kill_restart(what: &str, envs: Vec<Vec<(String, String)>>, staggered: bool) {
    let record = Arc::new(Record::default());
    let stop = Arc::new(AtomicBool::new(false));
    let (mut drivers, mut slots) = (Vec::new(), Vec::new());
    for (server, env) in envs.into_iter().enumerate() {
        let current = Arc::new(Mutex::new(None));
        for _ in 0..CLIENTS {
            drivers.push(tokio::spawn(drive(
                current.clone(),
                record.clone(),
                stop.clone(),
            )));
        }
        slots.push(tokio::spawn(lives_of(
            server,
            env,
            record.clone(),
            current,
            staggered && server > 0,
        )));
    }
    for slot in slots {
        slot.await.unwrap();
    }
    // SeqCst: a test flag.
    stop.store(true, Ordering::SeqCst);
    for driver in drivers {
        driver.await.unwrap();
    }
    let lives = record.lives.lock().clone();
    let layout = uidgen_core::Layout::baidu_default().unwrap();
    let second = |id: Option<u64>| id.map(|id| layout.decode(id).unwrap().parts.time);
    for (n, life) in lives.iter().enumerate() {
        eprintln!(
            "{what}: life {n} (server {}): {} IDs, seconds {:?} to {:?}",
            life.server,
            life.ids,
            second(life.min),
            second(life.max)
        );
    }
    let served = lives.iter().filter(|life| life.ids > 0).count();
    assert!(
        served > lives.len() / 2,
        "{what}: too few lives returned IDs to mean anything: {served} of {}",
        lives.len()
    );
    for (n, life) in lives.iter().enumerate() {
        let Some(first) = life.min else { continue };
        for (m, earlier) in lives.iter().enumerate() {
            let Some(last) = earlier.max else { continue };
            if earlier.killed < life.started {
                assert!(
                    first > last,
                    "{what}: life {n} (server {}) began at {first} (second {:?}), below the \
                     last ID {last} (second {:?}) of life {m} (server {}), killed before it \
                     started",
                    life.server,
                    second(Some(first)),
                    second(Some(last)),
                    earlier.server
                );
            }
        }
    }
}

/// The default configuration: one server on its own embedded SQLite store, the disposable
/// (`worker_node`) assigner and the cached generator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restarted_default_server_starts_above_its_earlier_lives() {
    let store = sqlite_url("order-restarts");
    burst_kill_restart(
        "sqlite",
        same_env(1, &[("UIDGEN_STORE", store.as_str())]),
        false,
    )
    .await;
}

async fn three_servers_on(db: TestDb) {
    let url = fresh_url(db)
        .await
        .unwrap_or_else(|e| panic!("{db:?} is needed for this test: {e}"));
    burst_kill_restart(
        &format!("{db:?}"),
        same_env(3, &[("UIDGEN_STORE", url.as_str())]),
        false,
    )
    .await;
}

/// Three servers on one PostgreSQL store, the default assigner and generator.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_on_postgres_start_above_every_earlier_life() {
    three_servers_on(TestDb::Postgres).await;
}

/// Three servers on one MariaDB store.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_on_mariadb_start_above_every_earlier_life() {
    three_servers_on(TestDb::MySql).await;
}

/// Three servers holding leased worker ids (the store's lease assigner) on PostgreSQL: a
/// reused worker id's lease fence and the order mark together.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_leased_servers_start_above_every_earlier_life() {
    let url = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed for this test: {e}"));
    burst_kill_restart(
        "leased",
        same_env(
            3,
            &[
                ("UIDGEN_STORE", url.as_str()),
                ("UIDGEN_WORKER_ASSIGNER", "leased"),
            ],
        ),
        false,
    )
    .await;
}

/// Three servers, each on an embedded SQLite store of its own, with `coordinator`'s keys
/// (the worker ids, and so the order mark, come from it).
fn own_stores(what: &str, coordinator: &[(&str, &str)]) -> Vec<Vec<(String, String)>> {
    (0..3)
        .map(|server| {
            let store = sqlite_url(&format!("order-{what}-{server}"));
            let mut env = vec![("UIDGEN_STORE".to_owned(), store)];
            env.extend(
                coordinator
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
            );
            env
        })
        .collect()
}

/// Three servers with worker ids from etcd, each keeping its own SQLite store (a fleet that
/// shares nothing but etcd), the second and third started once a life of the first has been
/// killed: the order mark in etcd orders every life after every earlier one, whichever server
/// either was. With the mark in each server's store, the second server's first life began at
/// its clock, below the IDs the first had borrowed ahead and handed out.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_with_own_stores_and_etcd_worker_ids_start_above_every_earlier_life() {
    let endpoint = uidgen_etcd::testing::test_endpoint();
    let prefix = uidgen_etcd::testing::test_namespace(&endpoint);
    let coordinator = [
        ("UIDGEN_WORKER_ASSIGNER", "etcd"),
        ("UIDGEN_ETCD_ENDPOINTS", endpoint.as_str()),
        ("UIDGEN_ETCD_PREFIX", prefix.as_str()),
    ];
    burst_kill_restart("etcd", own_stores("etcd", &coordinator), true).await;
}

/// The same with worker ids from ZooKeeper: the order mark in ZooKeeper.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_servers_with_own_stores_and_zookeeper_worker_ids_start_above_every_earlier_life() {
    let connect = uidgen_zk::testing::test_connect();
    uidgen_zk::testing::init_namespace(&connect, "order")
        .await
        .unwrap();
    let coordinator = [
        ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
        ("UIDGEN_ZK_CONNECT", connect.as_str()),
        ("UIDGEN_ZK_NAME", "order"),
    ];
    burst_kill_restart("zookeeper", own_stores("zk", &coordinator), true).await;
}

/// A start whose clock is behind the space's mark by more than it may borrow waits for its
/// clock (logging why) and then issues above the mark; one whose mark is far ahead is refused,
/// saying what to fix.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_waits_for_a_mark_ahead_of_its_clock_and_refuses_one_far_ahead() {
    use uidgen_core::{Clock, SystemClock};
    let url = sqlite_url("order-wait");
    let store = uidgen_store::Store::connect(&url).await.unwrap();
    let layout = uidgen_core::Layout::baidu_default().unwrap();
    // Three seconds past what the cached generator may borrow (60 s, the default).
    let mark = SystemClock.now_millis() + 63_000;
    store
        .raise_order_mark(MarkRaise::new("default", "test", mark, 0))
        .await
        .unwrap();
    let store_url = url.clone();
    let server = tokio::task::spawn_blocking(move || {
        Server::start(&[], &[("UIDGEN_STORE", store_url.as_str())])
    })
    .await
    .unwrap();
    assert!(
        server
            .log()
            .contains("the ID space's order mark is ahead of this host's clock"),
        "{}",
        server.log()
    );
    let body = reqwest::get(server.url("/v1/ids?count=1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let id = common::ids_in(&common::json(&body))[0];
    let unit = layout.decode(id).unwrap().parts.time;
    assert!(
        unit >= layout.time_at(mark).unwrap(),
        "{id} is below the mark {mark}"
    );
    server.kill();

    store
        .raise_order_mark(MarkRaise::new(
            "default",
            "test",
            SystemClock.now_millis() + 20 * 60_000,
            0,
        ))
        .await
        .unwrap();
    let refused = tokio::task::spawn_blocking(move || {
        Server::try_start(&[], &[("UIDGEN_STORE", url.as_str())])
    })
    .await
    .unwrap();
    let log = refused
        .err()
        .expect("a start 20 minutes behind the mark is refused");
    assert!(log.contains("has issued IDs up to"), "{log}");
    assert!(log.contains("check the clocks"), "{log}");
}

/// A `disposable` server (the default assigner, which needs the store only at start) with the
/// per-call generator (2 s of lead): its store cut off for 6 s, three leads, it goes on issuing
/// (unique by its worker id; the order mark cannot rise), says so in
/// `uidgen_order_mark_passed`, and once the store answers the mark covers it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_does_not_stop_a_disposable_server() {
    use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
    let url = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed for this test: {e}"));
    let proxy = Proxy::start(server_addr(&url)).await;
    let through = with_addr(&url, proxy.addr);
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", through.as_str()),
            ("UIDGEN_GENERATOR", "default"),
        ],
    );
    let client = reqwest::Client::new();
    let passed = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("uidgen_order_mark_passed{space=\"default\"} "))
            .map(str::to_owned)
    };
    let metrics = || async {
        let response = client.get(server.url("/metrics")).send().await.unwrap();
        response.text().await.unwrap()
    };
    let mut ids = Vec::new();
    let take = || async {
        let response = client
            .get(server.url("/v1/ids?count=10"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        (status, body)
    };
    let (status, body) = take().await;
    assert_eq!(status, 200, "{body}");
    ids.push(body);
    proxy.cut();
    let cut = std::time::Instant::now();
    while cut.elapsed() < Duration::from_secs(6) {
        let (status, body) = take().await;
        assert_eq!(
            status, 200,
            "an ID request failed with the store cut off: {body}"
        );
        ids.push(body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(passed(&metrics().await).as_deref(), Some("1"));
    proxy.restore();
    uidgen_testkit::eventually_some("the order mark to cover the IDs again", 30, || async {
        (passed(&metrics().await).as_deref() == Some("0")).then_some(())
    })
    .await;
    let (status, body) = take().await;
    assert_eq!(status, 200, "{body}");
    let (status, log) = server.terminate();
    assert!(status.success(), "{log}");
    assert!(
        log.contains("issuing past the ID space's order mark"),
        "{log}"
    );
}
