//! Clocks watched while serving (issue 33, item 4), in the real binary: three servers on one
//! PostgreSQL (or MariaDB) store, one of them under libfaketime with a clock the test steps while
//! it serves. Stepped 10 s ahead, past `clock_watch.fence_ms`, that server fences itself
//! (`/readyz?mode=ids` 503 naming the offset, its ID calls over HTTP and gRPC refused) while the
//! other two keep serving; stepped back, it serves again, and no ID came out twice. On SQLite the
//! store's clock is the server's own: the same step is not seen, and the status says the source
//! is `local`. With an etcd or a ZooKeeper worker id, the coordinator's clock fences the
//! stepped server too.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::path::{Path, PathBuf};

use common::{Server, assert_unique, fetch, ids_in, json};
use uidgen_proto::v1::NextIdRequest;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_store::testing::{TestDb, fresh_url};

/// Where libfaketime is looked for when `UIDGEN_TEST_LIBFAKETIME` does not say.
const LIBFAKETIME_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
];

/// How far the test steps the clock ahead: past the fence below, well inside the time a
/// generator waits for its clock to come back to what it stamped.
const STEP_S: i64 = 10;

/// The library, or a failure naming the package and the variable.
fn libfaketime() -> String {
    if let Ok(path) = std::env::var("UIDGEN_TEST_LIBFAKETIME") {
        return path;
    }
    LIBFAKETIME_PATHS
        .iter()
        .find(|p| Path::new(p).exists())
        .map(|p| (*p).to_owned())
        .unwrap_or_else(|| {
            panic!(
                "libfaketime not found (install the Debian package `faketime`, or point \
                 UIDGEN_TEST_LIBFAKETIME at libfaketime.so.1)"
            )
        })
}

/// A clock offset libfaketime re-reads on every call (`FAKETIME_NO_CACHE`), from a file the
/// test rewrites. Monotonic time is left alone, so the server's timers keep their pace.
struct SteppedClock {
    file: PathBuf,
}

impl SteppedClock {
    fn new(name: &str) -> SteppedClock {
        let file = common::temp_dir(name).join("faketime");
        let clock = SteppedClock { file };
        clock.step_to(0);
        clock
    }

    /// Set the offset to `secs` seconds from the real clock.
    fn step_to(&self, secs: i64) {
        // Written whole, then renamed: a reader never sees half a line.
        let part = self.file.with_extension("part");
        std::fs::write(&part, format!("{secs:+}\n")).unwrap();
        std::fs::rename(&part, &self.file).unwrap();
    }

    fn envs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("LD_PRELOAD", libfaketime()),
            ("FAKETIME_TIMESTAMP_FILE", self.file.display().to_string()),
            ("FAKETIME_NO_CACHE", "1".to_owned()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
        ]
    }
}

/// Every server's settings: its own store, several servers on it, the clocks compared every
/// 300 ms, a warning from 500 ms and a fence from 3 s apart.
fn envs(store: &str) -> Vec<(&'static str, String)> {
    vec![
        ("UIDGEN_STORE", store.to_owned()),
        ("UIDGEN_WORKER_SINGLE_INSTANCE", "false".to_owned()),
        ("UIDGEN_CLOCK_WATCH_INTERVAL_MS", "300".to_owned()),
        ("UIDGEN_CLOCK_WATCH_WARN_MS", "500".to_owned()),
        ("UIDGEN_CLOCK_WATCH_FENCE_MS", "3000".to_owned()),
    ]
}

fn start(envs: &[(&'static str, String)]) -> Server {
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Server::start(&[], &envs)
}

/// Poll `probe` for up to 60 s (the watch measures every 300 ms; a generator whose clock came
/// back waits until it passes what it stamped, 10 s here).
async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, probe: impl FnMut() -> F) -> T {
    uidgen_testkit::eventually_some(what, 60, probe).await
}

/// The store's entry in `GET /v1/status`'s `clock`.
async fn store_clock(client: &reqwest::Client, server: &Server) -> serde_json::Value {
    source_clock(client, server, "store").await
}

/// `source`'s entry in `GET /v1/status`'s `clock` (null until it is read).
async fn source_clock(
    client: &reqwest::Client,
    server: &Server,
    source: &str,
) -> serde_json::Value {
    let (status, body) = fetch(client, &server.url("/v1/status")).await;
    assert_eq!(status, 200, "{body}");
    let status = json(&body);
    status["clock"]["sources"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["source"] == source).cloned())
        .unwrap_or(serde_json::Value::Null)
}

/// 20 IDs from `/v1/ids`, or the status and body of a refusal.
async fn ids(client: &reqwest::Client, server: &Server) -> Result<Vec<u64>, (u16, String)> {
    let (status, body) = fetch(client, &server.url("/v1/ids?count=20")).await;
    if status == 200 {
        Ok(ids_in(&json(&body)))
    } else {
        Err((status, body))
    }
}

async fn three_servers_one_stepped(db: TestDb, name: &str) {
    let store = fresh_url(db).await.unwrap_or_else(|e| {
        let var = match db {
            TestDb::Postgres => uidgen_store::testing::POSTGRES_URL_VAR,
            _ => uidgen_store::testing::MYSQL_URL_VAR,
        };
        panic!("{db:?} test server ({var}): {e}")
    });
    let clock = SteppedClock::new(name);
    let plain = envs(&store);
    let faked: Vec<_> = plain.iter().cloned().chain(clock.envs()).collect();
    let others = [start(&plain), start(&plain)];
    let stepped = start(&faked);
    let client = reqwest::Client::new();
    let mut issued = Vec::new();

    // In step, the watch reads the store's clock and finds it close.
    let first = eventually("the stepped server's first reading", || async {
        let entry = store_clock(&client, &stepped).await;
        (entry["state"] == "ok").then_some(entry)
    })
    .await;
    assert!(first["offset_ms"].as_i64().unwrap().abs() < 3000, "{first}");
    for server in others.iter().chain([&stepped]) {
        issued.extend(ids(&client, server).await.unwrap());
    }

    // 10 s ahead: the stepped server fences itself, naming the offset.
    clock.step_to(STEP_S);
    let why = eventually("the stepped server's ID readiness to turn 503", || async {
        let (status, body) = fetch(&client, &stepped.url("/readyz?mode=ids")).await;
        (status == 503).then_some(body)
    })
    .await;
    let why = json(&why);
    let message = why["message"].as_str().unwrap();
    assert!(
        message.contains("ms ahead of the store's") && message.contains("clock_watch.fence_ms"),
        "{why}"
    );
    // Segment mode, whose IDs carry no time, still serves: the server as a whole is degraded.
    let (status, body) = fetch(&client, &stepped.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("ids mode: this server's clock is"), "{body}");
    let (status, body) = fetch(&client, &stepped.url("/v1/ids?count=5")).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(json(&body)["code"], "clock_skewed", "{body}");
    let (status, body) = fetch(&client, &stepped.url("/genid")).await;
    assert_eq!(status, 503, "{body}");
    let mut grpc = IdServiceClient::connect(stepped.grpc.clone().unwrap())
        .await
        .unwrap();
    let refused = grpc.next_id(NextIdRequest::default()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unavailable, "{refused:?}");
    assert!(
        refused.message().contains("ahead of the store's"),
        "{refused:?}"
    );
    let entry = store_clock(&client, &stepped).await;
    assert_eq!(entry["state"], "fenced", "{entry}");
    let offset = entry["offset_ms"].as_i64().unwrap();
    assert!(
        offset <= -3000,
        "this host ahead: a negative offset, {entry}"
    );
    let (_, metrics) = fetch(&client, &stepped.url("/metrics")).await;
    let gauge = metrics
        .lines()
        .find_map(|l| l.strip_prefix(r#"uidgen_clock_offset_seconds{source="store"} "#))
        .unwrap_or_else(|| panic!("no offset gauge in\n{metrics}"));
    assert!(gauge.parse::<f64>().unwrap() <= -3.0, "{gauge}");
    assert!(
        stepped.log().contains("refusing time-stamped IDs"),
        "{}",
        stepped.log()
    );

    // The other two keep serving.
    for server in &others {
        let (status, body) = fetch(&client, &server.url("/readyz?mode=ids")).await;
        assert_eq!(status, 200, "{body}");
        issued.extend(ids(&client, server).await.unwrap());
        assert_eq!(store_clock(&client, server).await["state"], "ok");
    }

    // Back in step: it serves again, once its generator is past what it stamped ahead.
    clock.step_to(0);
    let resumed = eventually("the stepped server to issue again", || async {
        ids(&client, &stepped).await.ok()
    })
    .await;
    issued.extend(resumed);
    let (status, body) = fetch(&client, &stepped.url("/readyz?mode=ids")).await;
    assert_eq!(status, 200, "{body}");
    assert!(stepped.log().contains("issuing time-stamped IDs again"));
    for server in &others {
        issued.extend(ids(&client, server).await.unwrap());
    }
    assert_unique(issued);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_clock_steps_ahead_of_postgres_fences_itself_while_the_others_serve() {
    three_servers_one_stepped(TestDb::Postgres, "clock-watch-pg").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_clock_steps_ahead_of_mariadb_fences_itself_while_the_others_serve() {
    three_servers_one_stepped(TestDb::MySql, "clock-watch-mariadb").await;
}

/// SQLite runs inside the server: its clock is the server's, so a stepped clock is not seen.
/// The status says so (`local`, no offset) rather than reporting a comparison that cannot be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_the_store_clock_is_local_and_a_step_is_not_seen() {
    let clock = SteppedClock::new("clock-watch-sqlite");
    let store = common::sqlite_url("clock-watch-sqlite");
    let faked: Vec<_> = envs(&store).into_iter().chain(clock.envs()).collect();
    let server = start(&faked);
    let client = reqwest::Client::new();
    clock.step_to(STEP_S);
    let entry = eventually("the SQLite store's clock entry", || async {
        let entry = store_clock(&client, &server).await;
        (!entry.is_null()).then_some(entry)
    })
    .await;
    assert_eq!(entry["state"], "local", "{entry}");
    assert!(entry.get("offset_ms").is_none(), "{entry}");
    let (status, body) = fetch(&client, &server.url("/readyz")).await;
    assert_eq!(status, 200, "{body}");
    assert!(ids(&client, &server).await.is_ok());
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    assert!(
        !metrics.contains("uidgen_clock_offset_seconds{"),
        "no offset is published for a local clock:\n{metrics}"
    );
    assert!(server.log().contains("its clock is this host's"));
}

/// A server on SQLite whose worker id comes from a coordinator (`coordinator`'s variables),
/// its clock stepped 10 s ahead: it fences itself on the coordinator's clock (`source`, named
/// `whose` in sentences) alone, its SQLite store's clock being its own. Returns the source's
/// entry once fenced.
async fn a_coordinator_s_clock_fences(
    name: &str,
    coordinator: Vec<(&'static str, String)>,
    source: &'static str,
    whose: &str,
) -> serde_json::Value {
    let clock = SteppedClock::new(name);
    let store = common::sqlite_url(name);
    let mut faked: Vec<_> = envs(&store).into_iter().chain(clock.envs()).collect();
    faked.extend(coordinator);
    faked.extend([
        ("UIDGEN_LAYOUT", "leaf".to_owned()),
        ("UIDGEN_GENERATOR", "snowflake".to_owned()),
    ]);
    let server = start(&faked);
    let client = reqwest::Client::new();
    eventually(&format!("{whose} clock to be read"), || async {
        (source_clock(&client, &server, source).await["state"] == "ok").then_some(())
    })
    .await;
    clock.step_to(STEP_S);
    let entry = eventually(&format!("{whose} clock to fence the server"), || async {
        let entry = source_clock(&client, &server, source).await;
        (entry["state"] == "fenced").then_some(entry)
    })
    .await;
    assert!(entry["offset_ms"].as_i64().unwrap() <= -3000, "{entry}");
    assert_eq!(
        source_clock(&client, &server, "store").await["state"],
        "local"
    );
    let (status, body) = fetch(&client, &server.url("/readyz?mode=ids")).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(&format!("ahead of {whose}")), "{body}");
    let (status, body) = fetch(&client, &server.url("/v1/ids")).await;
    assert_eq!(
        (status, json(&body)["code"].as_str()),
        (503, Some("clock_skewed")),
        "{body}"
    );
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let gauge = format!(r#"uidgen_clock_offset_seconds{{source="{source}"}} "#);
    let gauge = metrics
        .lines()
        .find_map(|l| l.strip_prefix(gauge.as_str()))
        .unwrap_or_else(|| panic!("no {source} offset gauge in\n{metrics}"));
    assert!(gauge.parse::<f64>().unwrap() <= -3.0, "{gauge}");
    entry
}

/// With the worker id from etcd, etcd's clock is compared too (from its HTTP `Date` header, to
/// the second): stepped 10 s ahead, the server fences itself on etcd's clock alone, its SQLite
/// store's clock being its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_clock_steps_ahead_of_etcd_fences_itself() {
    let endpoint = uidgen_etcd::testing::test_endpoint();
    let prefix = uidgen_etcd::testing::test_namespace(&endpoint);
    let etcd = vec![
        ("UIDGEN_WORKER_ASSIGNER", "etcd".to_owned()),
        ("UIDGEN_ETCD_ENDPOINTS", endpoint),
        ("UIDGEN_ETCD_PREFIX", prefix),
    ];
    let entry = a_coordinator_s_clock_fences("clock-watch-etcd", etcd, "etcd", "etcd's").await;
    // The header's whole second.
    assert!(entry["uncertainty_ms"].as_u64().unwrap() >= 500, "{entry}");
}

/// With the worker id from ZooKeeper, ZooKeeper's clock is compared too (the `mtime` its
/// leader stamps on a write of the server's clock node, to the millisecond): stepped 10 s
/// ahead, the server fences itself on ZooKeeper's clock alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_clock_steps_ahead_of_zookeeper_fences_itself() {
    let connect = uidgen_zk::testing::test_connect();
    uidgen_zk::testing::init_namespace(&connect, "clock-watch")
        .await
        .unwrap();
    let cache = common::temp_dir("clock-watch-zk").join("zk.state");
    let zookeeper = vec![
        ("UIDGEN_WORKER_ASSIGNER", "zookeeper".to_owned()),
        ("UIDGEN_ZK_CONNECT", connect),
        ("UIDGEN_ZK_NAME", "clock-watch".to_owned()),
        ("UIDGEN_ZK_CACHE_FILE", cache.display().to_string()),
    ];
    let entry =
        a_coordinator_s_clock_fences("clock-watch-zk", zookeeper, "zookeeper", "ZooKeeper's").await;
    assert!(entry["uncertainty_ms"].as_u64().is_some(), "{entry}");
}
