//! `uidgen serve` with its worker id from ZooKeeper (`UIDGEN_TEST_ZK`, default 127.0.0.1:2181;
//! never skipped), and `uidgen zk reclaim`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use common::{Server, assert_unique, fetch, run, start_with, temp_dir};
use uidgen_core::Layout;
use uidgen_worker::testing::free_port;
use uidgen_zk::testing::test_connect;

/// Leaf's layout and generator, the worker id from ZooKeeper under `connect`.
fn zk_env(connect: &str, dir: &std::path::Path, n: u32) -> Vec<(String, String)> {
    common::leaf_env(
        dir,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "zookeeper".to_owned()),
            ("UIDGEN_ZK_CONNECT", connect.to_owned()),
            ("UIDGEN_ZK_NAME", "leaf-e2e".to_owned()),
            (
                "UIDGEN_ZK_CACHE_FILE",
                dir.join(format!("zk-{n}.state")).display().to_string(),
            ),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_its_worker_id_from_zookeeper_and_leafs_route_stamps_it() {
    let connect = test_connect();
    uidgen_zk::testing::init_namespace(&connect, "leaf-e2e")
        .await
        .unwrap();
    let dir = temp_dir("zk-serve");
    let first = start_with(&zk_env(&connect, &dir, 1));
    let second = start_with(&zk_env(&connect, &dir, 2));
    let layout = Layout::leaf().unwrap();
    let mut workers = Vec::new();
    for server in [&first, &second] {
        let (status, body) = fetch(
            &reqwest::Client::new(),
            &server.url("/api/snowflake/get/order"),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let id: u64 = body.trim().parse().unwrap();
        workers.push(layout.decompose(id).unwrap().worker);
        let (status, body) = fetch(&reqwest::Client::new(), &server.url("/readyz")).await;
        assert_eq!((status, body.as_str()), (200, "ready"));
        let (_, metrics) = fetch(&reqwest::Client::new(), &server.url("/metrics")).await;
        assert!(metrics.contains("uidgen_zk_connected 1"), "{metrics}");
        assert!(
            metrics.contains("uidgen_zk_report_failures_total 0"),
            "{metrics}"
        );
        assert!(metrics.contains("uidgen_zk_issuing 1"), "{metrics}");
        // The console's status: the assigner and the holder's state.
        let (_, body) = fetch(&reqwest::Client::new(), &server.url("/v1/status")).await;
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["assigner"], "zookeeper", "{body}");
        let zk = &status["zookeeper"];
        assert_eq!(
            (
                zk["connected"].as_bool(),
                zk["issuing"].as_bool(),
                zk["lost"].as_bool()
            ),
            (Some(true), Some(true), Some(false)),
            "{body}"
        );
    }
    // Vesta's server range on Leaf's 10-bit worker field: 924 up.
    workers.sort_unstable();
    assert_eq!(workers, vec![924, 925]);
    for server in [first, second] {
        let (status, log) = server.terminate();
        assert!(status.success(), "{log}");
        assert!(log.contains("holding a ZooKeeper worker id"), "{log}");
        // A first claim has no cache to record into until it starts one: no warning that the
        // id "was given up" (there used to be one on every fresh claim).
        let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
        assert!(
            !warnings
                .iter()
                .any(|l| l.contains("given up") || l.contains("local cache")),
            "{warnings:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_killed_and_started_again_without_its_cache_file_keeps_its_worker_id() {
    let connect = test_connect();
    uidgen_zk::testing::init_namespace(&connect, "leaf-e2e")
        .await
        .unwrap();
    let dir = temp_dir("zk-restart");
    let listen = format!("127.0.0.1:{}", free_port());
    let mut env = zk_env(&connect, &dir, 1);
    // A short reservation, so that the test need not wait ten minutes for it to pass.
    common::set_env(
        &mut env,
        &[
            ("UIDGEN_ZK_REPORT_INTERVAL_MS", "500"),
            ("UIDGEN_ZK_RESERVATION_SECS", "2"),
            ("UIDGEN_ZK_SESSION_TIMEOUT_MS", "4000"),
        ],
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let client = reqwest::Client::new();
    let (mut workers, mut ids) = (Vec::new(), Vec::new());
    for _life in 0..3 {
        // A container re-created without a volume: no cache file, the same ip:port.
        let _ = std::fs::remove_file(dir.join("zk-1.state"));
        let server = Server::start_listening(&listen, &[], &env);
        workers.push(server.worker_id());
        for _ in 0..100 {
            let (status, body) = fetch(&client, &server.url("/api/snowflake/get/order")).await;
            assert_eq!(status, 200, "{body}");
            ids.push(body.trim().parse::<u64>().unwrap());
        }
        server.kill();
        // Past the reservation of the killed life's last report.
        tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
    }
    assert!(workers.windows(2).all(|w| w[0] == w[1]), "{workers:?}");
    assert_eq!(assert_unique(ids).len(), 300);
}

#[test]
fn zk_reclaim_refuses_a_threshold_below_the_reservation_and_lists_in_a_dry_run() {
    let connect = test_connect();
    let env = [
        ("UIDGEN_ZK_CONNECT", connect.as_str()),
        ("UIDGEN_ZK_NAME", "reclaim-e2e"),
    ];
    // The reservation is ten minutes: a dead holder's id may come back the same day.
    let (status, _, stderr) = run(&["zk", "reclaim", "--older-than", "5m"], &env);
    assert!(!status.success());
    assert!(stderr.contains("below the reservation"), "{stderr}");
    let (status, stdout, stderr) = run(&["zk", "reclaim", "--older-than", "7d", "--dry-run"], &env);
    assert!(status.success(), "{stderr}");
    assert!(
        stdout.contains("0 of 0 dead forever nodes (dry run: nothing freed)"),
        "{stdout}"
    );
}

#[test]
fn zookeeper_keys_are_checked_naming_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        // The static fallback is gone (one id for every host starting while ZooKeeper is down):
        // refused whatever its value, as a key uidgen does not know.
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_LAYOUT", "leaf"),
                ("UIDGEN_WORKER_FALLBACK_STATIC", "1000"),
            ],
            "unknown environment variable UIDGEN_WORKER_FALLBACK_STATIC",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_LAYOUT", "vesta_max_peak"),
                ("UIDGEN_WORKER_FALLBACK_STATIC", "5"),
            ],
            "unknown environment variable UIDGEN_WORKER_FALLBACK_STATIC",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_ZK_AUTO_RECLAIM_AFTER_SECS", "60"),
            ],
            "invalid config key `zookeeper.auto_reclaim_after_secs`",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_ZK_REPORT_INTERVAL_MS", "0"),
            ],
            "invalid config key `zookeeper.report_interval_ms`",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_ZK_RESERVATION_SECS", "1"),
            ],
            "invalid config key `zookeeper.reservation_secs`: invalid ZooKeeper options: \
             reservation 1s must be at least \
             twice the report interval 3s",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
                ("UIDGEN_ZK_RESERVATION_SECS", "7200"),
                ("UIDGEN_ZK_MAX_OUTAGE_SECS", "3600"),
            ],
            "invalid config key `zookeeper.reservation_secs`: invalid ZooKeeper options: \
             reservation 7200s is longer than \
             max_outage 3600s",
        ),
        (
            &[("UIDGEN_WORKER_FALLBACK_STATIC", "3")],
            "unknown environment variable UIDGEN_WORKER_FALLBACK_STATIC",
        ),
    ];
    for (env, expected) in cases {
        let (status, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], env);
        assert!(!status.success());
        assert!(stderr.contains(expected), "{env:?}: {stderr}");
    }
}

#[test]
fn worker_range_takes_rusts_inclusive_form_from_the_file_or_the_environment() {
    use uidgen_server::config::Config;
    let parse = |text: &str, env: &[(&str, &str)]| {
        Config::from_toml_str(
            text,
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    };
    let range = |c: Config| c.worker.id_range().unwrap().unwrap().to_string();
    let c = parse(
        "[layout]\npreset = \"leaf\"\n[worker]\nrange = \"924..=1023\"",
        &[],
    )
    .unwrap();
    assert_eq!(range(c), "924-1023");
    let c = parse(
        "[worker]\nrange = \"5-9\"",
        &[("UIDGEN_WORKER_RANGE", "7..=8")],
    )
    .unwrap();
    assert_eq!(range(c), "7-8");
    // Vesta's default for the service: the server range on a 10-bit worker field.
    let c = parse(
        "[layout]\npreset = \"leaf\"\n[worker]\nassigner = \"zookeeper\"",
        &[],
    )
    .unwrap();
    let layout = c.build_layout().unwrap();
    let options = c.zookeeper_options(&layout).unwrap();
    assert_eq!(
        options.range.map(|r| r.to_string()).as_deref(),
        Some("924-1023")
    );
}

/// Issue 36's hunt on ZooKeeper: see [`common::coordinator_wiped_under_three_servers`].
async fn an_emptied_zookeeper_under_three_servers_repeats_no_id(layout: &str, generator: &str) {
    let mut server = uidgen_zk::testing::PrivateZooKeeper::start();
    let connect = format!("{}/wipe", server.address());
    uidgen_zk::testing::init_namespace(&connect, "leaf-e2e")
        .await
        .unwrap();
    let dir = temp_dir("zk-wipe");
    let mut env = zk_env(&connect, &dir, 0);
    // One cache file per server: each gets its own state directory's default.
    env.retain(|(k, _)| k != "UIDGEN_ZK_CACHE_FILE");
    common::set_env(
        &mut env,
        &[
            ("UIDGEN_LAYOUT", layout),
            ("UIDGEN_GENERATOR", generator),
            ("UIDGEN_ZK_REPORT_INTERVAL_MS", "500"),
            ("UIDGEN_ZK_SESSION_TIMEOUT_MS", "4000"),
            // Long enough for a holder whose reports failed while ZooKeeper restarted (a JVM start)
            // to take its id up again (while `now + 5 s` is inside it), short enough for C.
            ("UIDGEN_ZK_RESERVATION_SECS", "20"),
        ],
    );
    common::coordinator_wiped_under_three_servers(&env, layout, "zookeeper", || {
        server.restart_empty();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_zookeeper_repeats_no_id_with_the_cached_generator() {
    an_emptied_zookeeper_under_three_servers_repeats_no_id("baidu", "cached").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_zookeeper_repeats_no_id_with_the_snowflake_generator() {
    an_emptied_zookeeper_under_three_servers_repeats_no_id("leaf", "snowflake").await;
}

#[test]
fn a_first_start_on_an_empty_namespace_names_uidgen_zk_init_which_lets_it_start() {
    let connect = test_connect();
    let dir = temp_dir("zk-init");
    let mut env = zk_env(&connect, &dir, 1);
    env.retain(|(k, _)| k != "UIDGEN_ZK_NAME");
    env.push(("UIDGEN_ZK_NAME".to_owned(), "init-e2e".to_owned()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    common::init_lets_a_fenced_start_through("zk", &env);
}
