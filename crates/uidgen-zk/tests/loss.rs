//! A ZooKeeper that loses its data (restarted on an emptied data directory, restored from an
//! older snapshot): a private server per test, which the test empties or rolls back under
//! holders that keep issuing. No ID may repeat, and no newcomer may take an id below what its
//! forgotten holder stamped.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{duplicates, generator, options};
use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_worker::{Origin, WorkerIdRange, WorkerKeeper};
use uidgen_zk::testing::{PrivateZooKeeper, test_connect};
use uidgen_zk::{ZkAssignment, ZkError, ZkOptions, ZooKeeperWorkerIdAssigner};

/// Options on `connect` for port `port`, ids 5 to 7, a reservation long enough for a holder
/// whose reports failed while ZooKeeper restarted to take its id up again.
fn short(connect: &str, port: u16, dir: &std::path::Path) -> ZkOptions {
    let mut options = options(connect, port, dir);
    options.range = Some(WorkerIdRange::new(5, 7).unwrap());
    options.reservation = Duration::from_secs(15);
    options
}

/// IDs from `generator` on a blocking thread until `stop`, and the error that stopped it.
fn load(
    generator: Arc<SnowflakeGenerator<SystemClock>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<u64>, Option<String>)> {
    tokio::task::spawn_blocking(move || {
        let mut ids = Vec::new();
        // SeqCst: a test flag.
        while !stop.load(Ordering::SeqCst) {
            match generator.next_ids(50) {
                Ok(batch) => ids.extend(batch),
                Err(error) => return (ids, Some(error.to_string())),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (ids, None)
    })
}

fn reports(held: &ZkAssignment) -> uidgen_worker::KeeperReports {
    WorkerKeeper::status(&held.holder).reports.unwrap()
}

/// Start `options` until the namespace fence lets it in (it must be refused at least once).
async fn start_after_the_fence(options: &ZkOptions, within: Duration) -> ZkAssignment {
    let deadline = Instant::now() + within;
    let mut refused = 0;
    loop {
        match ZooKeeperWorkerIdAssigner::new(options.clone())
            .start(&Layout::leaf().unwrap())
            .await
        {
            Ok(held) => {
                assert!(refused > 0, "started inside the fence");
                return held;
            }
            Err(ZkError::NamespaceFenced { .. }) if Instant::now() < deadline => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_emptied_zookeeper_never_gives_a_held_id_to_a_newcomer_and_its_holders_go_on() {
    let mut server = PrivateZooKeeper::start();
    let connect = format!("{}/wipe", server.address());
    let dir = tempfile::tempdir().unwrap();
    let a = common::start(&short(&connect, 1, dir.path()))
        .await
        .unwrap();
    let b = common::start(&short(&connect, 2, dir.path()))
        .await
        .unwrap();
    assert_eq!((a.assignment.worker_id, b.assignment.worker_id), (5, 6));
    let stop = Arc::new(AtomicBool::new(false));
    let (gen_a, gen_b) = (
        Arc::new(generator(&a, SystemClock)),
        Arc::new(generator(&b, SystemClock)),
    );
    let loads = [
        load(Arc::clone(&gen_a), Arc::clone(&stop)),
        load(Arc::clone(&gen_b), Arc::clone(&stop)),
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;
    server.restart_empty();
    // A newcomer at once: ZooKeeper holds nothing, so every id waits out what a forgotten
    // holder may still stamp.
    let newcomer = short(&connect, 3, dir.path());
    let refused = ZooKeeperWorkerIdAssigner::new(newcomer.clone())
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ZkError::NamespaceFenced { .. }),
        "{refused}"
    );
    assert!(refused.to_string().contains("uidgen zk init"), "{refused}");
    // The holders take their ids up again once they have a session.
    let deadline = Instant::now() + Duration::from_secs(40);
    while reports(&a).reestablished == 0 || reports(&b).reestablished == 0 {
        assert!(
            Instant::now() < deadline,
            "{:?} {:?}",
            a.holder.status(),
            b.holder.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for held in [&a, &b] {
        assert!(
            held.holder.status().health.lost.is_none(),
            "{:?}",
            held.holder.status()
        );
        assert!(reports(held).data_losses >= 1);
    }
    let c = start_after_the_fence(&newcomer, Duration::from_secs(60)).await;
    assert_eq!(c.assignment.worker_id, 7);
    let mut ids = generator(&c, SystemClock).next_ids(1_000).unwrap();
    // SeqCst: a test flag.
    stop.store(true, Ordering::SeqCst);
    for load in loads {
        let (issued, error) = load.await.unwrap();
        assert!(error.is_none(), "a holder stopped: {error:?}");
        ids.extend(issued);
    }
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    for held in [a, b, c] {
        common::stop(&held).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_from_an_older_snapshot_is_seen_by_a_holder_and_fences_the_forgotten_ids() {
    let mut server = PrivateZooKeeper::start();
    let connect = format!("{}/restore", server.address());
    let dir = tempfile::tempdir().unwrap();
    let a = common::start(&short(&connect, 1, dir.path()))
        .await
        .unwrap();
    assert_eq!(a.assignment.worker_id, 5);
    let gen_a = generator(&a, SystemClock);
    let mut ids = gen_a.next_ids(1_000).unwrap();
    let snapshot = server.snapshot();
    server.resume();
    // After the snapshot: b takes id 6, issues, and stops; only the live ZooKeeper records it.
    let b = common::start(&short(&connect, 2, dir.path()))
        .await
        .unwrap();
    assert_eq!(b.assignment.worker_id, 6);
    ids.extend(generator(&b, SystemClock).next_ids(2_000).unwrap());
    common::stop(&b).await;
    server.restore(&snapshot);
    let deadline = Instant::now() + Duration::from_secs(40);
    while reports(&a).data_losses == 0 {
        assert!(Instant::now() < deadline, "{:?}", a.holder.status());
        if let Ok(batch) = gen_a.next_ids(50) {
            ids.extend(batch);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Id 6 has no node in the restored tree: fenced, not handed out below b's IDs. A new
    // address, so it cannot continue b's node either.
    let newcomer = short(&connect, 3, dir.path());
    let refused = ZooKeeperWorkerIdAssigner::new(newcomer.clone())
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap_err();
    let ZkError::NamespaceFenced { origin, .. } = &refused else {
        panic!("{refused}")
    };
    assert_eq!(*origin, Origin::DataLoss);
    let c = start_after_the_fence(&newcomer, Duration::from_secs(60)).await;
    assert_eq!(c.assignment.worker_id, 6);
    ids.extend(generator(&c, SystemClock).next_ids(2_000).unwrap());
    assert!(a.holder.check().is_ok(), "{:?}", a.holder.status());
    ids.extend(gen_a.next_ids(1_000).unwrap());
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    for held in [a, c] {
        common::stop(&held).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_namespace_is_fenced_until_declared_new_and_recover_fences_it_again() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&connect, 1, dir.path());
    opts.reservation = Duration::from_secs(600);
    let assigner = ZooKeeperWorkerIdAssigner::new(opts.clone());
    let refused = assigner.start(&Layout::leaf().unwrap()).await.unwrap_err();
    let ZkError::NamespaceFenced { origin, .. } = &refused else {
        panic!("{refused}")
    };
    assert_eq!(*origin, Origin::UnknownPast);
    for words in ["uidgen zk init", "never issued an ID", "s from now"] {
        assert!(refused.to_string().contains(words), "{words}: {refused}");
    }
    let record = assigner.init_namespace().await.unwrap();
    assert_eq!(record.origin, Origin::Init);
    let held = assigner.start(&Layout::leaf().unwrap()).await.unwrap();
    common::stop(&held).await;
    // Again: nothing to do. A recorded loss fences every node written before it, and an init
    // does not undo it.
    assert_eq!(assigner.init_namespace().await.unwrap(), record);
    assigner
        .recover_namespace("restored from last night's snapshot")
        .await
        .unwrap();
    let refused = assigner.init_namespace().await.unwrap_err();
    assert!(matches!(refused, ZkError::NotNew { .. }), "{refused}");
    let other = ZooKeeperWorkerIdAssigner::new(options(&connect, 2, dir.path()));
    let refused = other.start(&Layout::leaf().unwrap()).await.unwrap_err();
    assert!(
        refused.to_string().contains("last night's snapshot"),
        "{refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tree_leaf_or_an_earlier_uidgen_wrote_is_adopted_as_it_is() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    // An earlier uidgen's node, no namespace record: a restart on its address continues it.
    let held = common::start(&options(&connect, 1, dir.path()))
        .await
        .unwrap();
    let worker = held.assignment.worker_id;
    common::stop(&held).await;
    drop(held); // its cache file's lock
    let client = zookeeper_client::Client::connect(&connect).await.unwrap();
    client
        .delete("/snowflake/orders/namespace", None)
        .await
        .unwrap();
    let again = ZooKeeperWorkerIdAssigner::new(options(&connect, 1, dir.path()))
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap();
    assert_eq!(again.assignment.worker_id, worker);
    let (bytes, _) = client
        .get_data("/snowflake/orders/namespace")
        .await
        .unwrap();
    let record = uidgen_worker::NamespaceRecord::parse(&bytes).unwrap();
    assert_eq!(record.origin, Origin::Adopted);
    common::stop(&again).await;
}
