#![allow(clippy::unwrap_used)]
//! Disposable and static worker ids, and the builder that wires them to generators.

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::narrow_layout;
use uidgen_core::{CachedOptions, Layout, ManualClock, SystemClock, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{DisposableWorkerIdAssigner, NodeType, StoreError, WorkerNode};
use uidgen_worker::{GeneratorBuilder, StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner};

fn node(host: &str, port: &str) -> WorkerNode {
    WorkerNode {
        host_name: host.to_owned(),
        port: port.to_owned(),
        node_type: NodeType::Container,
        launch_date: None,
    }
}

per_db! {
    async fn thirty_two_concurrent_assignments_get_distinct_ids(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Arc::new(Layout::baidu_default().unwrap());
        let tasks: Vec<_> = (0..32)
            .map(|i| {
                let assigner = DisposableWorkerIdAssigner::with_node(store.clone(), node("10.0.0.1", &i.to_string()));
                let layout = Arc::clone(&layout);
                tokio::spawn(async move { assigner.assign(&layout).await })
            })
            .collect();
        let mut ids = HashSet::new();
        for task in tasks {
            let assignment = task.await.unwrap().unwrap();
            assert_eq!(assignment.kind, DisposableWorkerIdAssigner::KIND);
            assert!(ids.insert(assignment.worker_id), "duplicate {}", assignment.worker_id);
        }
        assert_eq!(ids.len(), 32);
        assert_eq!(store.count_worker_nodes().await.unwrap(), 32);
    }
}

per_db! {
    async fn second_start_of_the_same_host_and_port_gets_a_new_id(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Layout::baidu_default().unwrap();
        let assigner = DisposableWorkerIdAssigner::with_node(store, node("host-a", "8080"));
        let first = assigner.assign(&layout).await.unwrap().worker_id;
        let second = assigner.assign(&layout).await.unwrap().worker_id;
        assert!(second > first, "{first} then {second}");
    }
}

per_db! {
    async fn detected_node_is_stored(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let node = WorkerNode::detect();
        let mut launched = node.clone();
        launched.launch_date = Some("2026-03-01".to_owned());
        let a = store.insert_worker_node(&node).await.unwrap();
        let b = store.insert_worker_node(&launched).await.unwrap();
        assert!(b > a && a >= 1);
    }
}

per_db! {
    async fn exhausted_worker_ids_are_a_clear_error(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(2); // worker ids 0..=3; worker_node ids start at 1
        let assigner = DisposableWorkerIdAssigner::with_node(store, node("h", "p"));
        for expected in 1..=3 {
            assert_eq!(assigner.assign(&layout).await.unwrap().worker_id, expected);
        }
        let error = assigner.assign(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::WorkerIdsExhausted { id: 4, max: 3 }), "{error:?}");
        assert_eq!(
            error.to_string(),
            "worker ids exhausted: 4 exceeds the layout's maximum 3; widen worker bits or archive worker_node rows"
        );
    }
}

per_db! {
    async fn builder_wires_a_disposable_id_into_each_generator_kind(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let builder = GeneratorBuilder::new(Layout::baidu_default().unwrap())
            .assigner(DisposableWorkerIdAssigner::with_node(store.clone(), node("h", "1")));
        let cached = builder.build_cached(SystemClock, CachedOptions::default()).await.unwrap();
        let default = builder.build_default(SystemClock).await.unwrap();
        let snowflake = GeneratorBuilder::new(Layout::snowflake().unwrap())
            .assigner(DisposableWorkerIdAssigner::with_node(store, node("h", "2")))
            .build_snowflake(ManualClock::auto_advancing(1_800_000_000_000))
            .await
            .unwrap();
        let ids = [cached.worker_id(), default.worker_id(), snowflake.worker_id()];
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), 3, "{ids:?}");
        let id = cached.generator.next_id().unwrap();
        assert_eq!(cached.generator.parse(id).unwrap().parts.worker, cached.worker_id());
        let id = default.generator.next_id().unwrap();
        assert_eq!(default.generator.parse(id).unwrap().parts.worker, default.worker_id());
        let id = snowflake.generator.next_id().unwrap();
        assert_eq!(snowflake.generator.parse(id).unwrap().parts.worker, snowflake.worker_id());
        assert!(cached.assignment.check().is_ok());
    }
}

/// A fresh state file for a static worker id, in a directory that lives as long as the test
/// process (the assigner keeps it locked).
fn state_file() -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    dir.join("worker.state")
}

#[tokio::test]
async fn static_assigner_is_range_checked() {
    let layout = narrow_layout(2);
    assert_eq!(
        StaticWorkerIdAssigner::new(3, state_file())
            .assign(&layout)
            .await
            .unwrap()
            .worker_id,
        3
    );
    let error = StaticWorkerIdAssigner::new(4, state_file())
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(
        matches!(error, WorkerError::WorkerIdOutOfRange { id: 4, max: 3 }),
        "{error:?}"
    );
    let error = GeneratorBuilder::new(layout.clone())
        .build_default(SystemClock)
        .await
        .unwrap_err();
    assert!(matches!(error, WorkerError::InvalidInput(_)), "{error:?}");
}

#[test]
fn blocking_builder_works_outside_a_runtime() {
    let built = GeneratorBuilder::new(Layout::snowflake().unwrap())
        .assigner(StaticWorkerIdAssigner::new(9, state_file()))
        .build_snowflake_blocking(SystemClock)
        .unwrap();
    assert_eq!(built.worker_id(), 9);
    let assignment =
        StaticWorkerIdAssigner::new(1, state_file()).assign_blocking(&Layout::snowflake().unwrap());
    assert_eq!(assignment.unwrap().worker_id, 1);
}

#[tokio::test]
async fn blocking_calls_inside_a_runtime_are_refused() {
    let error = StaticWorkerIdAssigner::new(1, state_file())
        .assign_blocking(&Layout::snowflake().unwrap())
        .unwrap_err();
    assert!(
        error.to_string().contains("inside a tokio runtime"),
        "{error}"
    );
}

#[test]
fn container_env_gives_a_container_node_else_an_actual_one() {
    let container = WorkerNode::from_lookup(|k| match k {
        "UIDGEN_HOST" => Some("pod-7".to_owned()),
        "UIDGEN_PORT" => Some("9000".to_owned()),
        _ => None,
    });
    assert_eq!(container.node_type, NodeType::Container);
    assert_eq!(
        (container.host_name.as_str(), container.port.as_str()),
        ("pod-7", "9000")
    );
    let actual = WorkerNode::from_lookup(|_| None);
    assert_eq!(actual.node_type, NodeType::Actual);
    let (millis, random) = actual.port.split_once('-').unwrap();
    assert!(millis.parse::<u64>().unwrap() > 1_600_000_000_000);
    assert!(random.parse::<u32>().unwrap() < 100_000);
    assert_eq!(NodeType::Container.code(), 1);
}

#[test]
fn half_set_container_env_is_an_error_naming_the_missing_variable() {
    let host_only =
        WorkerNode::try_from_lookup(|k| (k == "UIDGEN_HOST").then(|| "pod-7".to_owned()));
    assert!(
        matches!(
            &host_only,
            Err(StoreError::IncompleteNodeEnv {
                set: "UIDGEN_HOST",
                missing: "UIDGEN_PORT"
            })
        ),
        "{host_only:?}"
    );
    // An empty value counts as unset.
    let port_only = WorkerNode::try_from_lookup(|k| match k {
        "UIDGEN_HOST" => Some("  ".to_owned()),
        "UIDGEN_PORT" => Some("9000".to_owned()),
        _ => None,
    })
    .unwrap_err();
    assert!(
        port_only
            .to_string()
            .starts_with("UIDGEN_PORT is set but UIDGEN_HOST is not"),
        "{port_only}"
    );
    let both = WorkerNode::try_from_lookup(|k| Some(format!("{k}-value"))).unwrap();
    assert_eq!(both.node_type, NodeType::Container);
    let neither = WorkerNode::try_from_lookup(|_| None).unwrap();
    assert_eq!(neither.node_type, NodeType::Actual);
}
