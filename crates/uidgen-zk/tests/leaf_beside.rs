//! uidgen and Java Leaf in one ZooKeeper namespace (issue 31): a Leaf server started after
//! uidgen numbers its node with ZooKeeper's sequence counter, which uidgen keeps above every id
//! it holds. Leaf's side is written out as `SnowflakeZookeeperHolder` issues it (`init`,
//! `createNode`, `updateNewData`), against the real ZooKeeper (`UIDGEN_TEST_ZK`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{declare_new, generator, now, options, stop};
use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_worker::WorkerIdRange;
use uidgen_zk::testing::{JavaLeaf, test_connect};
use uidgen_zk::{ZkError, ZooKeeperWorkerIdAssigner};
use zookeeper_client as zk;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_java_leaf_started_after_uidgen_never_numbers_its_node_with_an_id_uidgen_holds() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let mut low = options(&connect, 8080, dir.path());
    low.range = Some(WorkerIdRange::new(5, 1023).unwrap());
    declare_new(&low).await;
    // Three Leaf servers ran first: ids 0, 1, 2.
    let mut leaf_ids = Vec::new();
    for port in 7000..7003 {
        leaf_ids.push(
            JavaLeaf::new(&connect, "orders", port)
                .await
                .init()
                .await
                .unwrap(),
        );
    }
    assert_eq!(leaf_ids, [0, 1, 2]);

    // uidgen joins with ids the counter has not reached: 5 (a range from 5), and Vesta's
    // server range 924-1023 (uidgen's default on a 10-bit field).
    let a = ZooKeeperWorkerIdAssigner::new(low.clone())
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap();
    assert_eq!(a.assignment.worker_id, 5);
    let mut vesta = options(&connect, 8081, dir.path());
    vesta.range = Some(uidgen_zk::ReleaseMode::Server.default_range(&Layout::leaf().unwrap()));
    let b = ZooKeeperWorkerIdAssigner::new(vesta)
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap();
    assert_eq!(b.assignment.worker_id, 924);
    let ours = [a.assignment.worker_id, b.assignment.worker_id];

    // Leaf servers started now, while uidgen serves: none gets an id uidgen holds, and IDs
    // made on both sides at once are all distinct.
    let mut leaves = Vec::new();
    for port in 7003..7013 {
        let leaf = JavaLeaf::new(&connect, "orders", port).await;
        let id = leaf.init().await.unwrap();
        assert!(
            !ours.contains(&id),
            "Leaf on port {port} got uidgen's worker id {id}"
        );
        leaf_ids.push(id);
        leaves.push((leaf, id));
    }
    let distinct: HashSet<u64> = leaf_ids.iter().chain(&ours).copied().collect();
    assert_eq!(
        distinct.len(),
        leaf_ids.len() + ours.len(),
        "{leaf_ids:?} {ours:?}"
    );
    assert!(leaf_ids.iter().all(|&id| id <= 1023), "{leaf_ids:?}");

    let leaf_side = tokio::spawn(async move {
        let mut ids = Vec::new();
        for round in 0..5 {
            for (leaf, worker_id) in &leaves {
                leaf.report(*worker_id).await;
                let generator =
                    SnowflakeGenerator::new(Layout::leaf().unwrap(), *worker_id, SystemClock)
                        .unwrap();
                ids.extend(generator.next_ids(2_000).unwrap());
            }
            tokio::time::sleep(Duration::from_millis(20 * round)).await;
        }
        ids
    });
    let mut all = Vec::new();
    for assigned in [&a, &b] {
        all.extend(generator(assigned, SystemClock).next_ids(20_000).unwrap());
    }
    all.extend(leaf_side.await.unwrap());
    let total = all.len();
    assert_eq!(common::duplicates(&all), 0, "equal IDs among {total}");
    stop(&a).await;
    stop(&b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_an_older_uidgen_left_above_the_counter_raises_it_on_restart() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&connect, 8090, dir.path());
    declare_new(&opts).await;
    // An older uidgen's claim of id 300, while the counter stood at 0.
    older_uidgen_node(&connect, 8090, 300).await;
    let a = start_in_full_range(&opts).await.unwrap();
    assert_eq!(
        a.assignment.worker_id, 300,
        "the restart continues its node"
    );
    let leaf = JavaLeaf::new(&connect, "orders", 7100).await;
    let id = leaf.init().await.unwrap();
    assert!(id > 300, "Leaf took {id}, at or below uidgen's 300");
    stop(&a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_a_leaf_node_shares_with_an_older_uidgen_node_is_refused() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&connect, 8095, dir.path());
    declare_new(&opts).await;
    // Before issue 31: an older uidgen held id 1 with the counter at 0, then a Java Leaf
    // started, and ZooKeeper numbered its node 1 as well.
    older_uidgen_node(&connect, 8095, 1).await;
    // The counter stood at 1 (one create under forever/): a Java Leaf started then got 1 too.
    let leaf = JavaLeaf::new(&connect, "orders", 7200).await;
    assert_eq!(
        leaf.init().await.unwrap(),
        1,
        "the collision issue 31 describes"
    );
    let error = start_in_full_range(&opts).await.unwrap_err();
    assert!(
        matches!(&error, ZkError::SequenceTaken { worker_id: 1, others, .. }
            if others == &["10.9.8.7:7200-0000000001".to_owned()]),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("Stop the process of that node"),
        "{error}"
    );
}

/// An older uidgen's claim of `id` for 127.0.0.1:`port` in namespace `orders`, as its multi
/// wrote it (the ids claim and the forever node), long past its reservation, with the sequence
/// counter left where it stood.
async fn older_uidgen_node(connect: &str, port: u16, id: u64) {
    let client = zk::Client::connect(connect).await.unwrap();
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for dir in ["forever", "ids", "live"] {
        client
            .mkdir(&format!("/snowflake/orders/{dir}"), &persistent)
            .await
            .unwrap();
    }
    let old = now() - 3_600_000;
    let data = format!(
        r#"{{"ip":"127.0.0.1","port":"{port}","timestamp":{old},"reserved_until":{}}}"#,
        old + 600_000
    );
    client
        .create(
            &format!("/snowflake/orders/ids/{id}"),
            format!("127.0.0.1:{port}").as_bytes(),
            &persistent,
        )
        .await
        .unwrap();
    client
        .create(
            &format!("/snowflake/orders/forever/127.0.0.1:{port}-{id:010}"),
            data.as_bytes(),
            &persistent,
        )
        .await
        .unwrap();
}

/// A start with `opts` over the whole 10-bit range.
async fn start_in_full_range(
    opts: &uidgen_zk::ZkOptions,
) -> uidgen_zk::Result<uidgen_zk::ZkAssignment> {
    let mut range = opts.clone();
    range.range = Some(WorkerIdRange::new(0, 1023).unwrap());
    ZooKeeperWorkerIdAssigner::new(range)
        .start(&Layout::leaf().unwrap())
        .await
}
