//! `uidgen serve` with its worker id from etcd: the shared etcd (`UIDGEN_TEST_ETCD`, default
//! http://127.0.0.1:2379; never skipped) under a key prefix per test, and a private etcd a test
//! kills.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::time::{Duration, Instant};

use common::{Server, assert_unique, fetch, run, start_with, temp_dir};
use uidgen_core::Layout;
use uidgen_etcd::testing::{PrivateEtcd, test_endpoint, test_namespace, test_prefix};
use uidgen_worker::testing::free_port;

/// Leaf's layout and generator, the worker id from etcd at `endpoint` under `prefix`.
fn etcd_env(endpoint: &str, prefix: &str, dir: &std::path::Path) -> Vec<(String, String)> {
    common::leaf_env(
        dir,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "etcd".to_owned()),
            ("UIDGEN_ETCD_ENDPOINTS", endpoint.to_owned()),
            ("UIDGEN_ETCD_PREFIX", prefix.to_owned()),
        ],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_take_distinct_worker_ids_from_etcd_and_their_ids_never_repeat() {
    let endpoint = test_endpoint();
    let prefix = test_namespace(&endpoint);
    let dir = temp_dir("etcd-serve");
    let first = start_with(&etcd_env(&endpoint, &prefix, &dir));
    let second = start_with(&etcd_env(&endpoint, &prefix, &dir));
    let layout = Layout::leaf().unwrap();
    let client = reqwest::Client::new();
    let (mut workers, mut ids) = (Vec::new(), Vec::new());
    for server in [&first, &second] {
        for _ in 0..200 {
            let (status, body) = fetch(&client, &server.url("/api/snowflake/get/order")).await;
            assert_eq!(status, 200, "{body}");
            ids.push(body.trim().parse::<u64>().unwrap());
        }
        workers.push(layout.decompose(ids[ids.len() - 1]).unwrap().worker);
        let (status, body) = fetch(&client, &server.url("/readyz")).await;
        assert_eq!((status, body.as_str()), (200, "ready"));
        let (_, body) = fetch(&client, &server.url("/v1/status")).await;
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["assigner"], "etcd", "{body}");
        // Keep-alive rounds are published as the coordinator's reports.
        assert_eq!(status["etcd"]["connected"], true, "{body}");
        assert_eq!(status["etcd"]["issuing"], true, "{body}");
        assert!(status.get("zookeeper").is_none(), "{body}");
        let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
        for line in [
            "uidgen_etcd_connected 1",
            "uidgen_etcd_report_failures_total 0",
            "uidgen_etcd_issuing 1",
        ] {
            assert!(metrics.contains(line), "{line} in {metrics}");
        }
    }
    // Leaf is not a Vesta layout: the whole worker field, lowest first.
    workers.sort_unstable();
    assert_eq!(workers, vec![0, 1]);
    assert_eq!(assert_unique(ids).len(), 400);
    for server in [first, second] {
        let (status, log) = server.terminate();
        assert!(status.success(), "{log}");
        assert!(log.contains("holding an etcd worker id"), "{log}");
        assert!(!log.contains("could not revoke"), "{log}");
        assert!(log.contains("released the etcd worker id"), "{log}");
        assert!(!log.contains("ERROR"), "{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cut_off_from_etcd_serves_until_the_reservation_then_turns_not_ready() {
    let mut etcd = PrivateEtcd::start();
    let dir = temp_dir("etcd-outage");
    let mut env = etcd_env(&etcd.endpoint(), &test_namespace(&etcd.endpoint()), &dir);
    common::set_env(
        &mut env,
        &[
            ("UIDGEN_ETCD_LEASE_TTL_SECS", "2"),
            ("UIDGEN_ETCD_RESERVATION_SECS", "3"),
        ],
    );
    let server = start_with(&env);
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    let get = |client: &reqwest::Client| {
        let url = server.url("/api/snowflake/get/order");
        let client = client.clone();
        async move { fetch(&client, &url).await }
    };
    for _ in 0..100 {
        let (status, body) = get(&client).await;
        assert_eq!(status, 200, "{body}");
        ids.push(body.trim().parse::<u64>().unwrap());
    }
    etcd.kill();
    // Still served while the reservation runs; refused, and not ready, once it has run out.
    let (mut served_after, mut refused) = (0, None);
    let deadline = Instant::now() + Duration::from_secs(60);
    while refused.is_none() {
        assert!(
            Instant::now() < deadline,
            "still serving 60 s after etcd was killed"
        );
        let (status, body) = get(&client).await;
        if status == 200 {
            ids.push(body.trim().parse::<u64>().unwrap());
            served_after += 1;
        } else {
            refused = Some((status, body));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        served_after > 0,
        "nothing served between the kill and the reservation"
    );
    let (status, body) = refused.unwrap();
    assert_eq!(status, 503, "{body}");
    let (status, body) = fetch(&client, &server.url("/readyz")).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("etcd"), "{body}");
    let total = ids.len();
    assert_eq!(assert_unique(ids).len(), total);
    drop(server);
}

#[test]
fn serve_refuses_to_start_when_etcd_cannot_be_reached_naming_it() {
    let dir = temp_dir("etcd-down");
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let env = etcd_env(&endpoint, "/down", &dir);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (status, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], &env);
    assert!(!status.success());
    assert!(
        stderr.contains("cannot obtain a worker id from etcd"),
        "{stderr}"
    );
    assert!(stderr.contains(&endpoint), "{stderr}");
}

#[test]
fn etcd_keys_are_checked_naming_the_key() {
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "etcd"),
                ("UIDGEN_ETCD_RESERVATION_SECS", "5"),
            ],
            "invalid config key `etcd.reservation_secs`",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "etcd"),
                ("UIDGEN_ETCD_ENDPOINTS", "127.0.0.1:2379"),
            ],
            "invalid config key `etcd.endpoints`",
        ),
        (
            &[
                ("UIDGEN_WORKER_ASSIGNER", "etcd"),
                ("UIDGEN_ETCD_LEASE_TTL_SECS", "1"),
            ],
            "invalid config key `etcd.lease_ttl_secs`",
        ),
    ];
    for (env, expected) in cases {
        let (status, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], env);
        assert!(!status.success());
        assert!(stderr.contains(expected), "{env:?}: {stderr}");
    }
}

#[test]
fn a_first_start_on_an_empty_prefix_names_uidgen_etcd_init_which_lets_it_start() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let dir = temp_dir("etcd-init");
    let env = etcd_env(&endpoint, &prefix, &dir);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    common::init_lets_a_fenced_start_through("etcd", &env);
    let refused = Server::try_start(&[], &env).map(drop).unwrap_err();
    assert!(refused.contains("restored a snapshot"), "{refused}");
}

/// Issue 36's hunt on etcd: see [`common::coordinator_wiped_under_three_servers`].
async fn an_emptied_etcd_under_three_servers_repeats_no_id(layout: &str, generator: &str) {
    let mut etcd = PrivateEtcd::start();
    let endpoint = etcd.endpoint();
    let prefix = test_namespace(&endpoint);
    let dir = temp_dir("etcd-wipe");
    let mut env = etcd_env(&endpoint, &prefix, &dir);
    common::set_env(
        &mut env,
        &[
            ("UIDGEN_LAYOUT", layout),
            ("UIDGEN_GENERATOR", generator),
            // Rounds every TTL/3: a 2 s lease once expired on a box loaded to 9 on 2 cores (the
            // holder takes its id up again, and `reestablished` counted 2).
            ("UIDGEN_ETCD_LEASE_TTL_SECS", "4"),
            // Long enough for a holder whose rounds failed while etcd restarted to take its id up
            // again (while `now + 5 s` is inside its reservation), short enough for C to get in.
            ("UIDGEN_ETCD_RESERVATION_SECS", "15"),
        ],
    );
    common::coordinator_wiped_under_three_servers(&env, layout, "etcd", || etcd.restart_empty())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_etcd_repeats_no_id_with_the_cached_generator() {
    an_emptied_etcd_under_three_servers_repeats_no_id("baidu", "cached").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_etcd_repeats_no_id_with_the_snowflake_generator() {
    an_emptied_etcd_under_three_servers_repeats_no_id("leaf", "snowflake").await;
}
