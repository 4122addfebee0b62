//! ZooKeeper's clock read against this host's (`ZkClock`), on a real ZooKeeper
//! (`UIDGEN_TEST_ZK`, default 127.0.0.1:2181; never skipped), each test under a chroot of its
//! own; the session-loss test runs a private server it empties.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{options, start, stop};
use uidgen_zk::testing::{PrivateZooKeeper, test_connect};
use uidgen_zk::{ZkClock, ZooKeeperWorkerIdAssigner};
use zookeeper_client as zk;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_s_clock_agrees_with_this_host_s_within_its_uncertainty_over_one_session() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let clock = ZkClock::new(&options(&connect, 7001, dir.path())).unwrap();
    for _ in 0..3 {
        let reading = clock.read().await.unwrap();
        // ZooKeeper runs on this host: one clock, so the offset is the round trip's doubt.
        assert!(
            reading.offset_ms.unsigned_abs() <= reading.uncertainty_ms,
            "{reading:?}"
        );
    }
    // One node, created once and written three times by one session: no reconnect per read
    // (a new session would have found the node gone with the old one and made it again).
    let look = zk::Client::connect(&connect).await.unwrap();
    assert_eq!(clock.node(), "/snowflake/orders/clock/127.0.0.1:7001");
    let (data, stat) = look.get_data(clock.node()).await.unwrap();
    assert_eq!(stat.version, 3, "{stat:?}");
    assert_ne!(stat.ephemeral_owner, 0, "an ephemeral node: {stat:?}");
    let written: i64 = String::from_utf8(data).unwrap().parse().unwrap();
    assert!(
        (stat.mtime - written).abs() < 60_000,
        "data: this host's ms"
    );
    // Gone with the clock's session.
    drop(clock);
    let gone = async {
        while look
            .check_stat("/snowflake/orders/clock/127.0.0.1:7001")
            .await
            .unwrap()
            .is_some()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), gone)
        .await
        .expect("the clock node is removed when its session closes");
}

/// The clock node sits beside Leaf's `forever/`: a namespace whose only node is a clock node
/// is still new (`uidgen zk init` accepts it), a claim takes the range's lowest id, and the
/// operators' listings and reclaim see no worker id in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_node_is_never_taken_for_a_worker_id() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let clock = ZkClock::new(&options(&connect, 7002, dir.path())).unwrap();
    clock.read().await.unwrap();
    // And one whose name reads like a forever node's.
    let look = zk::Client::connect(&connect).await.unwrap();
    let (clock_dir, _) = clock.node().rsplit_once('/').unwrap();
    look.create(
        &format!("{clock_dir}/127.0.0.1:7003-0000000000"),
        b"1",
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let assigner = ZooKeeperWorkerIdAssigner::new(options(&connect, 7002, dir.path()));
    assigner.init_namespace().await.unwrap();
    assert!(assigner.nodes().await.unwrap().is_empty());
    let candidates = assigner
        .reclaim(Duration::from_secs(7 * 24 * 3600), true)
        .await
        .unwrap();
    assert!(candidates.is_empty(), "{candidates:?}");
    let held = start(&options(&connect, 7002, dir.path())).await.unwrap();
    assert_eq!(held.assignment.worker_id, 0);
    // The clock keeps reading beside a holder of the same ip:port.
    clock.read().await.unwrap();
    assert_eq!(assigner.nodes().await.unwrap().len(), 1);
    stop(&held).await;
}

/// A ZooKeeper that lost its sessions (here: restarted empty) ends the clock's; the next
/// readings open a new session and make the node again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reading_after_zookeeper_ended_the_session_opens_a_new_one() {
    let mut server = PrivateZooKeeper::start();
    let dir = tempfile::tempdir().unwrap();
    let connect = format!("{}/clock-loss", server.address());
    let mut opts = options(&connect, 7004, dir.path());
    opts.session_timeout = Duration::from_secs(2);
    let clock = ZkClock::new(&opts).unwrap();
    clock.read().await.unwrap();
    let owner = |connect: String, node: String| async move {
        let look = zk::Client::connect(&connect).await.unwrap();
        look.get_data(&node).await.unwrap().1.ephemeral_owner
    };
    let before = owner(connect.clone(), clock.node().to_owned()).await;
    server.restart_empty();
    let mut failures = 0;
    let reading = loop {
        match tokio::time::timeout(Duration::from_secs(5), clock.read()).await {
            Ok(Ok(reading)) => break reading,
            Ok(Err(error)) => assert!(
                error.is_unreachable(),
                "a typed connectivity error: {error}"
            ),
            Err(_) => {}
        }
        failures += 1;
        assert!(
            failures < 30,
            "no reading within 30 attempts after the restart"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        reading.offset_ms.unsigned_abs() <= reading.uncertainty_ms,
        "{reading:?}"
    );
    let after = owner(connect.clone(), clock.node().to_owned()).await;
    assert!(
        after != 0 && after != before,
        "a new session's node: {before} -> {after}"
    );
}
