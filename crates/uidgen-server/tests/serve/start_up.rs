//! `uidgen serve` between binding its ports and serving (issue 18): a start that waits never
//! holds a request, and a leased restart right after a burst is served. Real processes on
//! SQLite, PostgreSQL (`UIDGEN_TEST_POSTGRES_URL`) and MariaDB (`UIDGEN_TEST_MYSQL_URL`).
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::time::{Duration, Instant};

use common::{Server, assert_unique, fetch, ids_in, json, sqlite_url};
use tonic::Code;
use uidgen_client::{ClientBuilder, Peer};
use uidgen_core::{Clock, Layout, SystemClock};
use uidgen_proto::v1::NextIdRequest;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_store::testing::{TestDb, fresh_store, fresh_url};

/// The clients' timeout in these tests: what a request to a server that accepts connections
/// but answers nothing would cost.
const TIMEOUT: Duration = Duration::from_secs(8);

/// "At once": a quarter of [`TIMEOUT`]. A starting server answers from memory, and so does the
/// ready one, so either takes milliseconds; the bound is this loose so that a loaded test
/// machine never fails it, while a request held for the timeout always does.
const AT_ONCE: Duration = Duration::from_secs(2);

/// How far ahead of the clock worker id 5's previous holder issued (recorded at its release):
/// what a start on it must wait out. Long enough for every check below to run meanwhile, and
/// inside the takeover wait of a 60 s lease (30 s).
const PREVIOUS_LEAD_MS: u64 = 25_000;

/// `uidgen serve` with a leased worker id that must wait: the only id of its range (5) was
/// released by a holder that issued [`PREVIOUS_LEAD_MS`] ahead of the clock.
async fn slow_starting_server() -> Server {
    let (store, url) = fresh_store(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (set UIDGEN_TEST_POSTGRES_URL): {e}"));
    let now = SystemClock.now_millis();
    assert!(
        store
            .try_insert_lease(uidgen_store::DEFAULT_SPACE, 5, "earlier#0", now + 1)
            .await
            .unwrap()
    );
    assert!(
        store
            .release_lease(
                uidgen_store::DEFAULT_SPACE,
                5,
                "earlier#0",
                now + PREVIOUS_LEAD_MS
            )
            .await
            .unwrap()
    );
    store.close().await;
    tokio::task::spawn_blocking(move || {
        Server::start_answering(
            &[],
            &[
                ("UIDGEN_STORE", &url),
                ("UIDGEN_WORKER_ASSIGNER", "leased"),
                ("UIDGEN_WORKER_RANGE", "5-5"),
                ("UIDGEN_WORKER_LEASE_TTL_SECS", "60"),
                ("UIDGEN_SEGMENT_ENABLED", "false"),
            ],
        )
    })
    .await
    .unwrap()
}

async fn ready_server() -> Server {
    let store = sqlite_url("ready-peer");
    tokio::task::spawn_blocking(move || {
        Server::start(
            &[],
            &[
                ("UIDGEN_STORE", &store),
                ("UIDGEN_SEGMENT_ENABLED", "false"),
            ],
        )
    })
    .await
    .unwrap()
}

/// `GET path` on `server`, checked to be `503 starting` with `Retry-After`, within [`AT_ONCE`].
async fn expect_starting(http: &reqwest::Client, server: &Server, path: &str) {
    let asked = Instant::now();
    let response = http.get(server.url(path)).send().await.unwrap();
    let took = asked.elapsed();
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").cloned();
    let body = response.text().await.unwrap();
    assert_eq!(status, 503, "{path}: {body}");
    assert!(took < AT_ONCE, "{path} took {took:?}");
    assert_eq!(retry_after.unwrap(), "1", "{path}");
    let body = json(&body);
    assert_eq!(body["code"], "starting", "{path}: {body}");
    assert!(
        body["message"].as_str().unwrap().contains("starting"),
        "{body}"
    );
}

/// The first ID a fresh client of `peers` gets, and how long it took.
async fn first_id(peers: Vec<Peer>) -> (u64, Duration) {
    let client = ClientBuilder::new(peers)
        .timeout(TIMEOUT)
        .wait(TIMEOUT)
        .connect()
        .await
        .unwrap();
    let asked = Instant::now();
    let id = client.next_id().await.unwrap();
    let took = asked.elapsed();
    client.close().await;
    (id, took)
}

/// A starting server (its worker id waits out the previous holder's IDs) answers every HTTP
/// route but `/healthz` with `503 starting` at once, and gRPC with `UNAVAILABLE`; a client
/// whose first peer it is fails over to the ready peer well within its timeout, over HTTP and
/// gRPC. Once the id is held, the same server serves. Before the fix its ports accepted
/// connections and answered nothing until then, holding each request for the whole timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_starting_server_answers_at_once_and_clients_fail_over_to_a_ready_one() {
    let ready = ready_server().await;
    let starting = slow_starting_server().await;
    let http = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();

    for path in [
        "/v1/ids?count=1",
        "/api/snowflake/get/x",
        "/readyz",
        "/metrics",
    ] {
        expect_starting(&http, &starting, path).await;
    }
    let (status, body) = fetch(&http, &starting.url("/healthz")).await;
    assert_eq!((status, body.as_str()), (200, "ok"), "the process is up");

    let mut grpc = IdServiceClient::connect(starting.grpc.clone().unwrap())
        .await
        .unwrap();
    let asked = Instant::now();
    let status = grpc.next_id(NextIdRequest::default()).await.unwrap_err();
    assert!(
        asked.elapsed() < AT_ONCE,
        "NextId took {:?}",
        asked.elapsed()
    );
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert!(status.message().contains("starting"), "{status:?}");
    let channel = tonic::transport::Endpoint::new(starting.grpc.clone().unwrap())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let serving = health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .status;
    assert_eq!(
        serving,
        tonic_health::pb::health_check_response::ServingStatus::NotServing as i32
    );

    let layout = Layout::baidu_default().unwrap();
    let ready_worker = ready.worker_id();
    for (transport, peers) in [
        (
            "HTTP",
            vec![Peer::http(&starting.base), Peer::http(&ready.base)],
        ),
        (
            "gRPC",
            vec![
                Peer::grpc(starting.grpc.clone().unwrap()),
                Peer::grpc(ready.grpc.clone().unwrap()),
            ],
        ),
    ] {
        let (id, took) = first_id(peers).await;
        assert!(took < AT_ONCE, "{transport}: the first ID took {took:?}");
        let worker = layout.decompose(id).unwrap().worker;
        assert_eq!(worker, ready_worker, "{transport}: from the ready peer");
    }
    assert!(
        !starting.log().contains("uidgen serving"),
        "the start ended before the checks did, so they proved nothing; its log:\n{}",
        starting.log()
    );

    // Once the previous holder's IDs are behind the clock, the same process serves.
    let became_ready = tokio::task::block_in_place(|| {
        starting.wait_for_log("uidgen serving", Duration::from_secs(60))
    });
    assert!(became_ready, "never served; its log:\n{}", starting.log());
    let (status, body) = fetch(&http, &starting.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = fetch(&http, &starting.url("/v1/ids?count=10")).await;
    assert_eq!(status, 200, "{body}");
    for id in ids_in(&json(&body)) {
        assert_eq!(layout.decompose(id).unwrap().worker, 5);
    }
}

/// SIGTERM while the server starts (here: while its worker id waits out the previous
/// holder's IDs) stops it cleanly; it does not wait for the start to finish first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shutdown_signal_while_starting_stops_the_server() {
    let starting = slow_starting_server().await;
    let http = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();
    expect_starting(&http, &starting, "/v1/ids?count=1").await;
    let (exit, log) = tokio::task::block_in_place(|| starting.terminate());
    assert!(exit.success(), "{log}");
    assert!(log.contains("stopped while starting"), "{log}");
    assert!(!log.contains("uidgen serving"), "{log}");
}

/// A leased server on a range of one worker id issues a burst of 100,000 IDs (twelve
/// seconds' worth of Baidu's 13-bit sequence, so its ring borrows as far as the lease lets it),
/// stops, and a new server starts at once on the same id: it is served, not refused for its
/// clock, and repeats none of the burst's IDs.
async fn a_leased_restart_right_after_a_burst_is_served(store: String) {
    let envs = [
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ("UIDGEN_WORKER_RANGE", "7-7"),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
    ];
    let http = reqwest::Client::new();
    let first = tokio::task::block_in_place(|| Server::start(&[], &envs));
    let (status, body) = fetch(&http, &first.url("/v1/ids?count=100000")).await;
    assert_eq!(status, 200, "{body}");
    let mut ids = ids_in(&json(&body));
    assert_eq!(ids.len(), 100_000);
    let (exit, log) = tokio::task::block_in_place(|| first.terminate());
    assert!(exit.success(), "{log}");

    // Waits for the burst's last second to pass, inside its takeover wait.
    let second = tokio::task::block_in_place(|| Server::start(&[], &envs));
    assert_eq!(second.worker_id(), 7);
    let (status, body) = fetch(&http, &second.url("/v1/ids?count=10000")).await;
    assert_eq!(status, 200, "{body}");
    let later = ids_in(&json(&body));
    let layout = Layout::baidu_default().unwrap();
    let last_second = |ids: &[u64]| {
        ids.iter()
            .map(|&id| layout.decompose(id).unwrap().time)
            .max()
    };
    let first_second = later
        .iter()
        .map(|&id| layout.decompose(id).unwrap().time)
        .min();
    assert!(
        last_second(&ids) < first_second,
        "the restart stamped a second of the burst"
    );
    ids.extend(later);
    assert_unique(ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_restart_right_after_a_burst_is_served_on_sqlite() {
    a_leased_restart_right_after_a_burst_is_served(sqlite_url("burst")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_restart_right_after_a_burst_is_served_on_postgres() {
    let store = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (set UIDGEN_TEST_POSTGRES_URL): {e}"));
    a_leased_restart_right_after_a_burst_is_served(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_restart_right_after_a_burst_is_served_on_mariadb() {
    let store = fresh_url(TestDb::MySql)
        .await
        .unwrap_or_else(|e| panic!("MariaDB is needed (set UIDGEN_TEST_MYSQL_URL): {e}"));
    a_leased_restart_right_after_a_burst_is_served(store).await;
}

/// Take IDs from the server at `base` with `tasks` tasks at once, `count` a request, until
/// `enough` IDs were taken or a request fails (the server was killed): every ID a request
/// returned.
async fn hammer(base: &str, tasks: usize, count: usize, enough: usize) -> Vec<u64> {
    let taken = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let url = format!("{base}/v1/ids?count={count}");
    let workers: Vec<_> = (0..tasks)
        .map(|_| {
            let (taken, url) = (std::sync::Arc::clone(&taken), url.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap();
                while taken.lock().unwrap().len() < enough {
                    let Ok(response) = http.get(&url).send().await else {
                        return;
                    };
                    if response.status() != 200 {
                        return;
                    }
                    let Ok(body) = response.text().await else {
                        return;
                    };
                    taken.lock().unwrap().extend(ids_in(&json(&body)));
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    std::mem::take(&mut *taken.lock().unwrap())
}

/// Issue 36, point 3: a leased server on a range of one worker id with a cache file is
/// hammered by several tasks and killed with `kill -9` while they run; a server started at
/// once on the same state directory (the database up) continues the crashed life's lease from
/// the cache. It is served, never refused (a refused start exits, and [`Server::start`] waits
/// 60 s for `uidgen serving`, while the crashed lease runs 90 s: ttl and cache reserve), and
/// the two lives, hammered alike, issue no ID twice.
async fn a_leased_restart_after_kill_9_continues_its_cached_lease(store: String) {
    let state_dir = common::temp_dir("kill-9-state");
    let state_dir = state_dir.to_str().unwrap();
    let envs = [
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_STATE_DIR", state_dir),
        ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ("UIDGEN_WORKER_RANGE", "5-5"),
        ("UIDGEN_WORKER_CACHE_FILE", "lease.cache"),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
    ];
    let first = tokio::task::block_in_place(|| Server::start(&[], &envs));
    let base = first.base.clone();
    let crashing = hammer(&base, 4, 500, usize::MAX);
    let killer = async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::task::block_in_place(|| first.kill());
    };
    let (mut ids, ()) = tokio::join!(crashing, killer);
    assert!(
        ids.len() >= 1_000,
        "the first life issued {} IDs",
        ids.len()
    );

    let second = tokio::task::block_in_place(|| Server::start(&[], &envs));
    let log = second.log();
    assert!(
        log.contains("continuing the worker lease an earlier life of this host recorded"),
        "{log}"
    );
    assert!(!log.contains("no free worker id"), "{log}");
    assert_eq!(second.worker_id(), 5);
    let later = hammer(&second.base, 4, 500, 20_000).await;
    assert!(later.len() >= 20_000, "{} IDs", later.len());
    let layout = Layout::baidu_default().unwrap();
    let (crashed, restarted) = (ids.len(), later.len());
    ids.extend(later);
    for &id in &ids {
        assert_eq!(layout.decompose(id).unwrap().worker, 5);
    }
    assert_unique(ids);
    eprintln!("kill -9 after {crashed} IDs; the restart issued {restarted}; 0 equal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leased_restart_after_kill_9_continues_its_cached_lease_on_sqlite() {
    a_leased_restart_after_kill_9_continues_its_cached_lease(sqlite_url("kill-9")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leased_restart_after_kill_9_continues_its_cached_lease_on_postgres() {
    let store = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (set UIDGEN_TEST_POSTGRES_URL): {e}"));
    a_leased_restart_after_kill_9_continues_its_cached_lease(store).await;
}
