//! Issue 22 point 4 with the real `uidgen` binary on a real PostgreSQL: the `statefulset`
//! assigner takes the pod's ordinal (+ `statefulset.offset`) as its worker id, leased in the
//! shared store, so two pods believing they have one ordinal are refused (naming the holder),
//! never duplicated; and a start on the zero-config store, one host's own, is refused.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use common::{Server, assert_unique, fetch, fresh_cwd, ids_in, json, run};
use uidgen_store::testing::{TestDb, fresh_url};

/// A fresh PostgreSQL database every "pod" of one test shares (PostgreSQL on 127.0.0.1:5432,
/// or `UIDGEN_TEST_POSTGRES_URL`; the error names both when it is unreachable).
async fn shared_postgres() -> String {
    fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The environment of a pod with `ordinal`, its own state directory (as a pod on its own host
/// has) and `store`.
fn pod_env<'a>(ordinal: &'a str, state_dir: &'a str, store: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("UIDGEN_WORKER_ASSIGNER", "statefulset"),
        ("UIDGEN_POD_ORDINAL", ordinal),
        ("UIDGEN_STATEFULSET_OFFSET", "100"),
        ("UIDGEN_LAYOUT", "snowflake"),
        ("UIDGEN_STORE", store),
        ("UIDGEN_STATE_DIR", state_dir),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
    ]
}

/// A state directory of its own, as text.
fn own_state_dir() -> String {
    fresh_cwd().display().to_string()
}

/// `count` IDs from `server` in batches of 1,000, and the worker each carries.
async fn ids_and_workers(server: &Server, count: usize) -> (Vec<u64>, Vec<u64>) {
    let client = reqwest::Client::new();
    let layout = uidgen_core::Layout::snowflake().unwrap();
    let mut ids = Vec::new();
    while ids.len() < count {
        let body = common::text(client.get(server.url("/v1/ids?count=1000"))).await;
        ids.extend(ids_in(&json(&body)));
    }
    let workers = ids
        .iter()
        .map(|&id| layout.decompose(id).unwrap().worker)
        .collect();
    (ids, workers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_different_ordinals_serve_with_ordinal_plus_offset_and_never_collide() {
    let store = shared_postgres().await;
    let (dir_a, dir_b) = (own_state_dir(), own_state_dir());
    let a = Server::start(&[], &pod_env("0", &dir_a, &store));
    let b = Server::start(&[], &pod_env("3", &dir_b, &store));
    assert_eq!((a.worker_id(), b.worker_id()), (100, 103));
    let (_, body) = fetch(&reqwest::Client::new(), &a.url("/v1/status")).await;
    assert_eq!(json(&body)["assigner"], "statefulset", "{body}");
    let (ids_a, workers_a) = ids_and_workers(&a, 5_000).await;
    let (ids_b, workers_b) = ids_and_workers(&b, 5_000).await;
    assert!(workers_a.iter().all(|&w| w == 100), "pod 0 stamps 100");
    assert!(workers_b.iter().all(|&w| w == 103), "pod 3 stamps 103");
    let total = ids_a.len() + ids_b.len();
    assert_eq!(assert_unique([ids_a, ids_b].concat()).len(), total);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_pod_with_the_same_ordinal_is_refused_naming_the_holder() {
    let store = shared_postgres().await;
    let (dir_a, dir_b) = (own_state_dir(), own_state_dir());
    let holder = Server::start(&[], &pod_env("2", &dir_a, &store));
    assert_eq!(holder.worker_id(), 102);
    let (status, _, stderr) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &pod_env("2", &dir_b, &store),
    );
    assert!(
        !status.success(),
        "a second pod 2 must not serve:\n{stderr}"
    );
    assert!(stderr.contains("102"), "names the worker id:\n{stderr}");
    assert!(
        stderr.contains(&format!("/{}", holder.pid())),
        "names the holder (host/pid {}):\n{stderr}",
        holder.pid()
    );
    // The holder still serves, alone on worker 102.
    let (ids, workers) = ids_and_workers(&holder, 2_000).await;
    assert!(workers.iter().all(|&w| w == 102));
    assert_unique(ids);
}

/// `uidgen gen` with the statefulset assigner and `envs`, on the zero-config store in a state
/// directory of its own: it must fail; its stderr.
fn refused_gen(envs: &[(&str, &str)]) -> String {
    let dir = own_state_dir();
    let mut all = vec![
        ("UIDGEN_WORKER_ASSIGNER", "statefulset"),
        ("UIDGEN_STATE_DIR", dir.as_str()),
    ];
    all.extend_from_slice(envs);
    let (status, _, stderr) = run(&["gen", "-n", "1"], &all);
    assert!(!status.success(), "must refuse:\n{stderr}");
    stderr
}

#[test]
fn a_start_on_the_zero_config_store_is_refused() {
    let stderr = refused_gen(&[("UIDGEN_POD_ORDINAL", "1")]);
    assert!(
        stderr.contains("needs a store every pod shares"),
        "says what to configure:\n{stderr}"
    );
}

#[test]
fn a_hostname_without_an_ordinal_is_refused_naming_it() {
    let stderr = refused_gen(&[("HOSTNAME", "not-a-pod")]);
    assert!(
        stderr.contains("`not-a-pod`"),
        "names the hostname:\n{stderr}"
    );
}
