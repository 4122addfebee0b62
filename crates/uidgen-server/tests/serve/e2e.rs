//! The real `uidgen` binary, end to end: `serve` on an ephemeral port against SQLite, PostgreSQL
//! and MariaDB, called over HTTP; the CLI subcommands; configuration errors; graceful shutdown.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::HashMap;

use common::{Server, assert_unique, fetch, ids_in, run, sqlite_url, temp_dir};
use uidgen_store::testing::{TestDb, fresh_url};

/// The worker id a server logged at start.
fn worker_id(server: &Server) -> u64 {
    server.worker_id()
}

/// A leased worker id with Leaf's 10-bit snowflake layout and generator, on `store`.
fn leased_snowflake(store: &str) -> [(&'static str, &str); 4] {
    [
        ("UIDGEN_STORE", store),
        ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ("UIDGEN_LAYOUT", "snowflake"),
        ("UIDGEN_GENERATOR", "snowflake"),
    ]
}

/// 8 clients x 10,000 requests, rotating over the single-ID routes, a batch route and Leaf's
/// segment route; every ID comes back exactly once (segment IDs are their own number space).
async fn hammer(server: &Server) {
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for client_no in 0..8u64 {
        let client = client.clone();
        let base = server.base.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ids, mut segment_ids) = (Vec::new(), Vec::new());
            for i in 0..10_000u64 {
                let url = match (client_no + i) % 4 {
                    0 => format!("{base}/api/snowflake/get/e2e"),
                    1 => format!("{base}/genid"),
                    2 => format!("{base}/v1/ids?count=5"),
                    _ => format!("{base}/api/segment/get/leaf-segment-test"),
                };
                let (status, body) = fetch(&client, &url).await;
                assert_eq!(status, 200, "{url}: {body}");
                if body.starts_with('{') {
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    for id in v["ids"].as_array().unwrap() {
                        ids.push(id.as_u64().unwrap());
                    }
                } else if url.contains("/segment/") {
                    segment_ids.push(body.trim().parse::<u64>().unwrap());
                } else {
                    ids.push(body.trim().parse::<u64>().unwrap());
                }
            }
            (ids, segment_ids)
        }));
    }
    let (mut all, mut segment_all) = (Vec::new(), Vec::new());
    for task in tasks {
        let (ids, segment_ids) = task.await.unwrap();
        all.extend(ids);
        segment_all.extend(segment_ids);
    }
    assert_eq!(all.len(), 8 * (2_500 * 2 + 2_500 * 5));
    assert_eq!(segment_all.len(), 8 * 2_500);
    assert_unique(all);
    assert_unique(segment_all);
}

/// Every ID route once, with the body checked.
async fn tour(server: &Server) {
    let client = reqwest::Client::new();
    let worker = worker_id(server);

    let (status, body) = fetch(&client, &server.url("/api/snowflake/get/anything")).await;
    assert_eq!(status, 200);
    let id: u64 = body.parse().unwrap();

    let (status, body) = fetch(&client, &server.url(&format!("/v1/ids/{id}"))).await;
    assert_eq!(status, 200, "{body}");
    let decoded: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(decoded["worker"], worker);
    assert_eq!(decoded["layout"], "baidu");
    assert!(decoded["timestamp"].as_str().unwrap().starts_with("20"));

    let (status, body) = fetch(&client, &server.url("/v1/ids?count=1000")).await;
    assert_eq!(status, 200);
    let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(batch["ids"].as_array().unwrap().len(), 1000);

    let (status, body) = fetch(&client, &server.url(&format!("/expid?id={id}"))).await;
    assert_eq!(status, 200, "{body}");
    let explained: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(explained["machine"], worker);

    let seq = decoded["sequence"].as_u64().unwrap();
    let time = decoded["time"].as_u64().unwrap();
    let (status, body) = fetch(
        &client,
        &server.url(&format!("/makeid?time={time}&seq={seq}&machine={worker}")),
    )
    .await;
    assert_eq!((status, body), (200, id.to_string()));

    let (status, body) = fetch(&client, &server.url(&format!("/transtime?time={time}"))).await;
    assert_eq!(status, 200);
    assert!(body.starts_with("20"), "{body}");

    let response = client
        .post(server.url("/v1/ids/make"))
        .json(&serde_json::json!({"time": time, "worker": worker, "sequence": seq}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let made: serde_json::Value = response.json().await.unwrap();
    assert_eq!(made["id"], id);

    for (path, status) in [("/healthz", 200), ("/readyz", 200), ("/metrics", 200)] {
        let (got, body) = fetch(&client, &server.url(path)).await;
        assert_eq!(got, status, "{path}: {body}");
    }
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    assert!(metrics.contains("uidgen_ids_issued_total"), "{metrics}");
    assert!(metrics.contains("uidgen_ring_capacity 65536"), "{metrics}");
    // A segment ID from the sample tag makes its buffer load at least one segment.
    let (status, _) = fetch(&client, &server.url("/api/segment/get/leaf-segment-test")).await;
    assert_eq!(status, 200);
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let loads = metrics
        .lines()
        .find(|l| l.starts_with("uidgen_segment_loads_total{tag=\"leaf-segment-test\"}"))
        .unwrap_or_else(|| panic!("no segment_loads for the sample tag: {metrics}"));
    assert!(!loads.ends_with(" 0"), "{loads}");

    let (status, body) = fetch(&client, &server.url("/no/such/route")).await;
    assert_eq!(status, 404, "{body}");

    // Leaf segment mode, with the sample tag created at start.
    let (status, body) = fetch(&client, &server.url("/api/segment/get/leaf-segment-test")).await;
    assert_eq!(status, 200, "{body}");
    let first: u64 = body.parse().unwrap();
    let (status, body) = fetch(
        &client,
        &server.url("/v1/segments/leaf-segment-test?count=100"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let batch: serde_json::Value = serde_json::from_str(&body).unwrap();
    let ids = ids_in(&batch);
    assert_eq!(ids.len(), 100);
    assert!(ids[0] > first && ids.windows(2).all(|w| w[0] < w[1]));
    let (status, body) = fetch(&client, &server.url("/v1/segments")).await;
    assert_eq!(status, 200);
    let monitor: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(monitor[0]["tag"], "leaf-segment-test");
    assert_eq!(monitor[0]["init"], true);
    let (status, body) = fetch(&client, &server.url("/api/segment/get/no-such-tag")).await;
    assert_eq!(status, 404);
    assert!(body.contains("leaf code -2"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_on_sqlite_answers_every_route_and_never_repeats_an_id() {
    let store = sqlite_url("sqlite");
    let server = Server::start(&[], &[("UIDGEN_STORE", &store)]);
    tour(&server).await;
    hammer(&server).await;
    let (status, log) = server.terminate();
    assert!(status.success(), "exit {status:?}; log:\n{log}");
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn serve_on_postgres_and_mariadb_answers_and_never_repeats_an_id() {
    for kind in [TestDb::Postgres, TestDb::MySql] {
        let store = fresh_url(kind).await.unwrap();
        let server = Server::start(&[], &[("UIDGEN_STORE", &store)]);
        tour(&server).await;
        hammer(&server).await;
        let (status, log) = server.terminate();
        assert!(status.success(), "{kind:?}: exit {status:?}; log:\n{log}");
    }
}

#[test]
fn a_second_serve_on_the_same_store_gets_a_new_worker_id() {
    let store = sqlite_url("second");
    let first = Server::start(&[], &[("UIDGEN_STORE", &store)]);
    let second = Server::start(&[], &[("UIDGEN_STORE", &store)]);
    assert_ne!(worker_id(&first), worker_id(&second));
    let restarted = {
        drop(first);
        Server::start(&[], &[("UIDGEN_STORE", &store)])
    };
    assert!(worker_id(&restarted) > worker_id(&second));
}

#[test]
fn leased_worker_id_is_released_on_sigterm_recording_how_far_it_issued() {
    let dir = temp_dir("lease");
    let store = format!("sqlite://{}", dir.join("uidgen.db").display());
    let envs = leased_snowflake(&store);
    let server = Server::start(&[], &envs);
    let id = worker_id(&server);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (status, _) = runtime.block_on(fetch(
        &reqwest::Client::new(),
        &server.url("/api/snowflake/get/x"),
    ));
    assert_eq!(status, 200);
    let (status, log) = server.terminate();
    assert!(status.success(), "{log}");
    assert!(log.contains("released the worker id lease"), "{log}");
    // The lease row says so: expired now, with the time issued up to recorded for a successor.
    let row = runtime.block_on(async {
        let store = uidgen_store::Store::connect(&store).await.unwrap();
        store
            .lease_row(uidgen_store::DEFAULT_SPACE, id)
            .await
            .unwrap()
            .unwrap()
    });
    let now_ms = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
    assert!(row.expires_at_ms <= now_ms, "{row:?}");
    assert!(row.last_issued_ms > 0, "{row:?}");
}

#[test]
fn invalid_configuration_stops_start_up_naming_the_key() {
    let store = sqlite_url("config");
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[("UIDGEN_RING_PADDING_FACTOR", "0")],
            "invalid config key `ring.padding_factor`",
        ),
        (
            &[("UIDGEN_LAYOUT", "nope")],
            "invalid config key `layout.preset`",
        ),
        (
            &[("UIDGEN_LISTEN", "not-an-address")],
            "invalid config key `listen`",
        ),
        (
            &[("UIDGEN_GENERATOR", "fastest")],
            "key `generator.kind`: unknown variant `fastest`",
        ),
        (
            &[("UIDGEN_BATCH_CAP", "0")],
            "invalid config key `batch_cap`",
        ),
        (
            &[("UIDGEN_WORKER_ASSIGNER", "static")],
            "invalid config key `worker.id`",
        ),
    ];
    for (envs, expected) in cases {
        let mut envs = envs.to_vec();
        envs.push(("UIDGEN_STORE", &store));
        let (status, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], &envs);
        assert!(!status.success(), "{envs:?} started");
        assert!(stderr.contains(expected), "{envs:?}: {stderr}");
    }
    let dir = temp_dir("badfile");
    let file = dir.join("uidgen.toml");
    std::fs::write(&file, "[ring]\nboost_powr = 3\n").unwrap();
    let (status, _, stderr) = run(&["serve", "--config", file.to_str().unwrap()], &[]);
    assert!(!status.success());
    assert!(stderr.contains("boost_powr"), "{stderr}");
}

#[test]
fn an_unreachable_store_is_named_with_its_password_redacted() {
    let (status, _, stderr) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("UIDGEN_STORE", "postgres://app:s3cret@127.0.0.1:1/ids")],
    );
    assert!(!status.success());
    assert!(
        stderr.contains("postgres://app:***@127.0.0.1:1/ids"),
        "{stderr}"
    );
    assert!(!stderr.contains("s3cret"), "{stderr}");
}

#[test]
fn cli_generates_decodes_makes_and_migrates() {
    let store = sqlite_url("cli");
    let (status, out, err) = run(&["migrate", "--store", &store], &[]);
    assert!(status.success(), "{err}");
    assert!(out.contains("migrated sqlite://"), "{out}");

    let (status, out, err) = run(&["gen", "-n", "5", "--store", &store], &[]);
    assert!(status.success(), "{err}");
    let ids: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), 5);
    assert_unique(ids.clone());

    let (status, out, _) = run(&["decode", &ids[0].to_string()], &[]);
    assert!(status.success());
    let fields: HashMap<&str, &str> = out
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect();
    let (worker, sequence) = (fields["worker"], fields["sequence"]);
    let time = fields["time"];

    let (status, out, err) = run(
        &[
            "make", "--time", time, "--worker", worker, "--seq", sequence,
        ],
        &[],
    );
    assert!(status.success(), "{err}");
    assert_eq!(out.trim(), ids[0].to_string());

    let (status, out, _) = run(&["decode", "--json", &ids[0].to_string()], &[]);
    assert!(status.success());
    assert!(out.contains("\"workerId\""), "{out}");

    let (status, out, _) = run(
        &["gen", "-n", "3", "--worker", "7", "--layout", "snowflake"],
        &[],
    );
    assert!(status.success());
    assert_eq!(out.lines().count(), 3);
}

#[test]
fn cli_errors_exit_non_zero_with_one_line() {
    let cases: &[&[&str]] = &[
        &["decode", "-5"],
        &["decode", "abc"],
        &["decode", "9223372036854775808"],
        &["make", "--units", "1", "--worker", "99999999", "--seq", "0"],
        &["gen", "-n", "0", "--worker", "1"],
        &[
            "gen",
            "-n",
            "1",
            "--worker",
            "1",
            "--layout",
            "baidu_legacy",
        ],
    ];
    for args in cases {
        let (status, out, err) = run(args, &[]);
        assert!(!status.success(), "{args:?} succeeded: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_the_token_and_create_usable_tags() {
    let store = sqlite_url("admin");
    let token = "an-admin-token-of-some-length";
    let server = Server::start(
        &[],
        &[("UIDGEN_STORE", &store), ("UIDGEN_ADMIN_TOKEN", token)],
    );
    let client = reqwest::Client::new();
    let put = |auth: Option<String>, body: &'static str| {
        let mut request = client
            .put(server.url("/v1/admin/segments/order"))
            .body(body);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        request.send()
    };
    let body = r#"{"step": 500, "description": "orders"}"#;
    assert_eq!(put(None, body).await.unwrap().status().as_u16(), 401);
    let wrong = Some("Bearer not-the-token-at-all".to_owned());
    assert_eq!(put(wrong, body).await.unwrap().status().as_u16(), 403);
    let right = || Some(format!("Bearer {token}"));
    let response = put(right(), body).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let row: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        (row["step"].as_i64(), row["max_id"].as_i64()),
        (Some(500), Some(1))
    );
    let bad = put(right(), r#"{"step": 0}"#).await.unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    let (status, body) = fetch(&client, &server.url("/api/segment/get/order")).await;
    assert_eq!(status, 200, "{body}");

    // Without a configured token the admin API does not exist.
    let plain = Server::start(&[], &[("UIDGEN_STORE", &store)]);
    let response = client
        .put(plain.url("/v1/admin/segments/order"))
        .header("authorization", format!("Bearer {token}"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 404);
}

#[test]
fn a_port_in_use_stops_start_up_before_a_worker_id_is_leased() {
    let dir = temp_dir("busy-port");
    let store = format!("sqlite://{}", dir.join("uidgen.db").display());
    let envs = leased_snowflake(&store);
    let first = Server::start(&[], &envs);
    let held = worker_id(&first);
    let addr = first.base.trim_start_matches("http://").to_owned();
    let (status, _, stderr) = run(&["serve", "--listen", &addr], &envs);
    assert!(!status.success(), "a second server on {addr} started");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let leased: Vec<u64> = runtime.block_on(async {
        let store = uidgen_store::Store::connect(&store).await.unwrap();
        let mut leased = Vec::new();
        for id in 0..32 {
            if store
                .lease_row(uidgen_store::DEFAULT_SPACE, id)
                .await
                .unwrap()
                .is_some()
            {
                leased.push(id);
            }
        }
        leased
    });
    assert_eq!(leased, vec![held], "only the first server's lease exists");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_worker_id_survives_a_database_outage_at_start_through_the_cache_file() {
    let store = fresh_url(TestDb::Postgres).await.unwrap();
    let cache = temp_dir("cache").join("worker.cache");
    let cache_path = cache.to_str().unwrap();
    let common = [
        ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ("UIDGEN_WORKER_CACHE_FILE", cache_path),
        ("UIDGEN_LAYOUT", "snowflake"),
        ("UIDGEN_GENERATOR", "snowflake"),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
        // The shortest ttl whose takeover wait (half of it) covers the cache's mark, which
        // runs up to two steps of a second ahead of the clock: a restart right after the
        // crash waits for the mark instead of being refused.
        ("UIDGEN_WORKER_LEASE_TTL_SECS", "5"),
    ];
    let client = reqwest::Client::new();
    // First life: the database is up; the worker id is leased and cached, then the process dies
    // without releasing it (Drop sends SIGKILL).
    let first = {
        let mut envs = common.to_vec();
        envs.push(("UIDGEN_STORE", &store));
        let server = Server::start(&[], &envs);
        let (status, body) = fetch(&client, &server.url("/api/snowflake/get/x")).await;
        assert_eq!(status, 200, "{body}");
        (worker_id(&server), body.parse::<u64>().unwrap())
    };
    assert!(cache.exists(), "the lease was not cached");
    // Second life: the database is unreachable; the cached id is used, and IDs come after the
    // first life's.
    let mut envs = common.to_vec();
    envs.push(("UIDGEN_STORE", "postgres://postgres@127.0.0.1:1/gone"));
    let server = Server::start(&[], &envs);
    assert_eq!(worker_id(&server), first.0, "{}", server.log());
    let (status, body) = fetch(&client, &server.url("/api/snowflake/get/x")).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.parse::<u64>().unwrap() > first.1);
    // Without a cache file the same outage stops start-up, naming the store.
    let (status, _, stderr) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[
            ("UIDGEN_WORKER_ASSIGNER", "leased"),
            ("UIDGEN_SEGMENT_ENABLED", "false"),
            ("UIDGEN_STORE", "postgres://postgres@127.0.0.1:1/gone"),
        ],
    );
    assert!(!status.success());
    assert!(stderr.contains("127.0.0.1:1/gone"), "{stderr}");
}
