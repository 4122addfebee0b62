//! The ZooKeeper assigner against a real ZooKeeper (`UIDGEN_TEST_ZK`, default 127.0.0.1:2181;
//! never skipped). Each test works under a chroot of its own, so they run in parallel; the
//! outage test runs a private server it can kill.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{declare_new, generator, now, options, start, start_on, stop};
use uidgen_core::{Layout, ManualClock, SystemClock, UidError, UidGenerator};
use uidgen_worker::testing::{RecordingRegistry, free_port};
use uidgen_worker::{WorkerIdAssigner, WorkerIdRange, WorkerKeeper};
use uidgen_zk::testing::{PrivateZooKeeper, ReplyDropper, test_connect, unique};
use uidgen_zk::{ZkError, ZkSource, ZooKeeperWorkerIdAssigner};
use zookeeper_client as zk;

const DAY_MS: u64 = 24 * 60 * 60 * 1000;

/// A client on the test's chroot, to look at the tree the way an operator would.
async fn client(connect: &str) -> zk::Client {
    zk::Client::connect(connect).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn twenty_processes_started_at_once_get_distinct_worker_ids_and_issue_no_duplicate() {
    let connect = test_connect();
    uidgen_zk::testing::init_namespace(&connect, "crowd")
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut children = Vec::new();
    for i in 0..20u16 {
        let out = dir.path().join(format!("ids-{i}"));
        let child = tokio::process::Command::new(uidgen_testkit::worker_binary("uidgen-zk-worker"))
            .args([
                "--connect",
                &connect,
                "--name",
                "crowd",
                "--port",
                &(9000 + i).to_string(),
            ])
            .arg("--cache")
            .arg(dir.path().join(format!("cache-{i}")))
            .arg("--out")
            .arg(&out)
            .args(["--secs", "2", "--max-count", "300000", "--range", "0-1023"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        children.push((child, out));
    }
    let mut worker_ids = HashSet::new();
    let mut ids = Vec::new();
    for (child, out) in children {
        let output = child.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "a worker failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let worker_id: u64 = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap();
        assert!(
            worker_ids.insert(worker_id),
            "worker id {worker_id} was handed out twice"
        );
        let bytes = std::fs::read(out).unwrap();
        ids.extend(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap())),
        );
    }
    assert_eq!(worker_ids.len(), 20);
    let total = ids.len();
    assert!(total > 20_000, "only {total} IDs were taken");
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total, "duplicate IDs among {total}");
}

#[tokio::test]
async fn a_restart_with_the_same_address_keeps_its_worker_id_and_another_port_gets_a_new_one() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let first = options(&connect, 8080, dir.path());
    let a = start(&first).await.unwrap();
    assert_eq!(a.source, ZkSource::ZooKeeper);
    let id = a.assignment.worker_id;
    let issued = generator(&a, SystemClock).next_ids(1000).unwrap();
    stop(&a).await;
    drop(a); // the process ends: its cache file is unlocked
    // The same ip:port (and its cache): Leaf's rule, the same worker id, above what it issued.
    let again = start(&first).await.unwrap();
    assert_eq!(again.assignment.worker_id, id);
    let later = generator(&again, SystemClock).next_id().unwrap();
    assert!(later > *issued.iter().max().unwrap());
    // Another port: another id.
    let other = start(&options(&connect, 8081, dir.path())).await.unwrap();
    assert_ne!(other.assignment.worker_id, id);
    stop(&again).await;
    stop(&other).await;
}

#[tokio::test]
async fn a_restart_without_its_cache_leaves_a_reserved_id_alone_and_claims_another() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let first = options(&connect, 8080, dir.path());
    let a = start(&first).await.unwrap();
    let a_id = a.assignment.worker_id;
    stop(&a).await;
    drop(a);
    std::fs::remove_file(&first.cache_file).unwrap();
    // Nothing proves how far the last life issued but its reservation (a day ahead).
    let b = start(&first).await.unwrap();
    assert_ne!(b.assignment.worker_id, a_id);
    stop(&b).await;
}

#[tokio::test]
async fn a_node_reporting_a_time_ahead_of_the_clock_refuses_the_start() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let first = options(&connect, 8080, dir.path());
    let a = start(&first).await.unwrap();
    stop(&a).await;
    drop(a);
    // The clock went back a minute across the restart (Leaf refuses this too).
    let behind = ManualClock::new(now() - 60_000);
    let error = start_on(&first, &behind).await.unwrap_err();
    assert!(
        matches!(error, ZkError::ClockBehind { what, .. } if what.contains("forever node")),
        "{error}"
    );
}

#[tokio::test]
async fn the_peer_average_check_refuses_a_skewed_clock() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let a = start(&options(&connect, 1, dir.path())).await.unwrap();
    let b = start(&options(&connect, 2, dir.path())).await.unwrap();
    // A clock a minute ahead sees every report as stale: it waits for fresh ones (two session
    // timeouts and two intervals), then is refused all the same.
    let mut new_node = options(&connect, 3, dir.path());
    new_node.session_timeout = Duration::from_secs(1);
    for skew in [60_000i64, -60_000] {
        let clock = ManualClock::new(now().checked_add_signed(skew).unwrap());
        let error = start_on(&new_node, &clock).await.unwrap_err();
        assert!(
            matches!(error, ZkError::PeerSkew { peers: 2, .. }),
            "{error}"
        );
    }
    // A clock within the bound starts.
    let fine = start(&new_node).await.unwrap();
    stop(&fine).await;
    // A restart on its own node is checked against that node's last report only (Leaf): a
    // clock ahead of the peers starts there.
    let a_id = a.assignment.worker_id;
    stop(&a).await;
    drop(a);
    let ahead = ManualClock::new(now() + 60_000);
    let again = start_on(&options(&connect, 1, dir.path()), &ahead)
        .await
        .unwrap();
    assert_eq!(again.assignment.worker_id, a_id);
    for held in [&again, &b] {
        stop(held).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_holder_started_right_after_a_zookeeper_outage_is_not_refused_for_skew() {
    let mut server = PrivateZooKeeper::start();
    let dir = tempfile::tempdir().unwrap();
    let connect = format!("{}/after-outage", server.address());
    let opts = |port| {
        let mut o = options(&connect, port, dir.path());
        o.report_interval = Duration::from_millis(500);
        o.session_timeout = Duration::from_secs(2);
        o
    };
    let peers = [
        start(&opts(1)).await.unwrap(),
        start(&opts(2)).await.unwrap(),
    ];
    // Away for longer than the session timeout and the skew allowed (5 s) plus an interval:
    // the peers' last reports are that old when it returns.
    server.stop();
    tokio::time::sleep(Duration::from_secs(8)).await;
    server.resume();
    let fresh = start(&opts(3)).await.unwrap();
    assert_eq!(fresh.source, ZkSource::ZooKeeper);
    let ids: HashSet<u64> = peers
        .iter()
        .chain([&fresh])
        .map(|p| p.assignment.worker_id)
        .collect();
    assert_eq!(ids.len(), 3);
    for held in peers.iter().chain([&fresh]) {
        stop(held).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn zookeeper_killed_mid_run_keeps_ids_flowing_and_reports_resume_when_it_returns() {
    let mut server = PrivateZooKeeper::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&format!("{}/outage", server.address()), 7000, dir.path());
    opts.session_timeout = Duration::from_secs(2);
    let held = start(&opts).await.unwrap();
    let holder = held.holder.clone();
    let generator = Arc::new(generator(&held, SystemClock));
    let first_session = live_owner(&server.address(), holder.worker_id())
        .await
        .unwrap();
    let mut ids = generator.next_ids(1000).unwrap();

    server.stop();
    let stopped_at = now();
    // Past the session timeout (the client declares the session expired): IDs keep coming.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        ids.extend(generator.next_ids(100).unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = holder.status();
    assert!(!status.health.connected, "{status:?}");
    assert!(status.health.failures > 0, "{status:?}");
    assert!(
        status.health.outage_since_ms.is_some() && status.issuing(now()),
        "{status:?}"
    );
    holder.check().unwrap();

    server.resume();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = holder.status();
        if status.health.connected && status.health.last_report_ms.is_some_and(|t| t > stopped_at) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "reports did not resume: {status:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The client gave the session up after 7/5 of its timeout: the live node comes back
    // under a new one.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match live_owner(&server.address(), holder.worker_id()).await {
            Some(owner) if owner != first_session => break,
            owner => assert!(
                Instant::now() < deadline,
                "live node owner {owner:?}, first session {first_session}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ids.extend(generator.next_ids(1000).unwrap());
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total);
    holder.shutdown();
}

/// The session that owns the id's live node, if any.
async fn live_owner(address: &str, worker_id: u64) -> Option<i64> {
    let client = client(&format!("{address}/outage")).await;
    let stat = client
        .check_stat(&format!("/snowflake/orders/live/{worker_id}"))
        .await
        .ok()??;
    Some(stat.ephemeral_owner)
}

#[tokio::test]
async fn zookeeper_down_at_start_up_runs_on_the_cache_and_refuses_a_cache_ahead_of_the_clock() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let up = options(&connect, 8080, dir.path());
    let a = start(&up).await.unwrap();
    let id = a.assignment.worker_id;
    let issued = generator(&a, SystemClock).next_ids(1000).unwrap();
    stop(&a).await;
    drop(a);

    let mut down = up.clone();
    down.connect = format!("127.0.0.1:{}", free_port());
    down.session_timeout = Duration::from_secs(1);
    // The cache: the same id, above everything its last life issued.
    let cached = start(&down).await.unwrap();
    assert_eq!(
        (cached.source, cached.assignment.worker_id),
        (ZkSource::LocalCache, id)
    );
    let next = generator(&cached, SystemClock).next_id().unwrap();
    assert!(next > *issued.iter().max().unwrap());
    assert!(!cached.holder.status().health.connected);
    stop(&cached).await;
    drop(cached);

    // A clock behind the cache's mark is refused.
    let behind = ManualClock::new(now() - 60_000);
    let error = start_on(&down, &behind).await.unwrap_err();
    assert!(
        matches!(error, ZkError::ClockBehind { what, .. } if what.contains("cache")),
        "{error}"
    );

    // No cache: refused, naming both and saying what to keep (there is no static fallback: it
    // would be one id for every host starting while ZooKeeper is down).
    let mut no_cache = down.clone();
    no_cache.cache_file = dir.path().join("missing.state");
    let error = start(&no_cache).await.unwrap_err();
    assert!(matches!(error, ZkError::NoUsableCache { .. }), "{error}");
    assert!(
        error.to_string().contains("missing.state")
            && error.to_string().contains("keep `zookeeper.cache_file`"),
        "{error}"
    );
}

#[tokio::test]
async fn reclaim_frees_dead_holders_ids_but_never_a_live_nodes() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    // Both last reported ten days ago by their own clocks.
    let old = ManualClock::new(now() - 10 * DAY_MS);
    let live = start_on(&options(&connect, 1, dir.path()), &old)
        .await
        .unwrap();
    let dead = start_on(&options(&connect, 2, dir.path()), &old)
        .await
        .unwrap();
    stop(&dead).await;
    let live_id = live.assignment.worker_id;
    let reclaimer = ZooKeeperWorkerIdAssigner::new(options(&connect, 3, dir.path()));
    let week = Duration::from_secs(7 * 24 * 3600);
    let deadline = Instant::now() + Duration::from_secs(15);
    // The dead one's live node goes with its session.
    let freed = loop {
        let freed = reclaimer.reclaim(week, false).await.unwrap();
        if !freed.is_empty() || Instant::now() > deadline {
            break freed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        freed.iter().map(|c| c.worker_id).collect::<Vec<_>>(),
        vec![dead.assignment.worker_id]
    );
    assert!(freed[0].freed);
    assert!(reclaimer.nodes().await.unwrap().contains_key(&live_id));
    // A threshold below the reservation (ten minutes) is refused.
    let error = reclaimer
        .reclaim(Duration::from_secs(60), true)
        .await
        .unwrap_err();
    assert!(matches!(error, ZkError::ReclaimThreshold { .. }), "{error}");
    stop(&live).await;
}

#[tokio::test]
async fn a_reclaimed_id_never_issues_in_a_time_unit_its_old_holder_used() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let only = Some(WorkerIdRange::new(5, 5).unwrap());
    // The old holder, ten days ago by its clock, issues IDs and dies.
    let t0 = now() - 10 * DAY_MS;
    let old_clock = ManualClock::new(t0);
    let mut old_opts = options(&connect, 1, dir.path());
    old_opts.range = only;
    let old = start_on(&old_opts, &old_clock).await.unwrap();
    let old_gen = generator(&old, old_clock.clone());
    let mut old_ids = Vec::new();
    for _ in 0..50 {
        old_ids.extend(old_gen.next_ids(100).unwrap());
        old_clock.advance(1);
    }
    let reserved = old.holder.status().health.accepted_until_ms;
    stop(&old).await;
    let layout = Layout::leaf().unwrap();
    let old_last = old_ids
        .iter()
        .map(|&id| layout.decompose(id).unwrap().time)
        .max()
        .unwrap();

    let mut new_opts = options(&connect, 2, dir.path());
    new_opts.range = only;
    let reclaimer = ZooKeeperWorkerIdAssigner::new(new_opts.clone());
    let week = Duration::from_secs(7 * 24 * 3600);
    let deadline = Instant::now() + Duration::from_secs(15);
    let freed = loop {
        let freed = reclaimer.reclaim(week, false).await.unwrap();
        if freed.iter().any(|c| c.freed) || Instant::now() > deadline {
            break freed;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(freed[0].freed && freed[0].floor_ms >= reserved, "{freed:?}");

    // A new holder whose clock reads a unit the old holder used: refused, not overlapping.
    let skewed = ManualClock::new(t0 + 10);
    let error = start_on(&new_opts, &skewed).await.unwrap_err();
    assert!(matches!(error, ZkError::ClockBehind { .. }), "{error}");
    // Past the floor: it takes the id, and its units lie above every unit the old one used.
    let clock = ManualClock::new(freed[0].floor_ms + 1);
    let new = start_on(&new_opts, &clock).await.unwrap();
    assert_eq!(new.assignment.worker_id, 5);
    let new_gen = generator(&new, clock.clone());
    let new_first = layout.decompose(new_gen.next_id().unwrap()).unwrap().time;
    assert!(new_first > old_last, "{new_first} <= {old_last}");
    // And a clock that steps back below the floor is refused, not served from used units.
    clock.set(t0 + 10);
    assert!(matches!(
        new_gen.next_id(),
        Err(UidError::ClockMovedBackwards { .. } | UidError::BeyondFence { .. })
    ));
    stop(&new).await;
}

#[tokio::test]
async fn a_used_up_range_is_a_typed_error_naming_it() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let range = Some(WorkerIdRange::new(7, 8).unwrap());
    let mut held = Vec::new();
    for port in 1..=2 {
        let mut opts = options(&connect, port, dir.path());
        opts.range = range;
        held.push(start(&opts).await.unwrap());
    }
    let mut third = options(&connect, 3, dir.path());
    third.range = range;
    let error = start(&third).await.unwrap_err();
    assert!(matches!(error, ZkError::RangeUsedUp { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("range used up: every worker id of 7-8"),
        "{error}"
    );
    // Through the worker crate's trait the error keeps its type.
    let via_trait = uidgen_worker::WorkerIdAssigner::assign(
        &ZooKeeperWorkerIdAssigner::new(third),
        &Layout::leaf().unwrap(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&via_trait, uidgen_worker::WorkerError::Backend(e) if e.downcast_ref::<ZkError>().is_some())
    );
    // A node outside the configured range refuses the start (Vesta).
    let mut moved = options(&connect, 1, dir.path());
    moved.range = Some(WorkerIdRange::new(100, 200).unwrap());
    held[0].holder.shutdown();
    let error = start(&moved).await.unwrap_err();
    assert!(
        matches!(error, ZkError::OutsideRange { id: 7, .. }),
        "{error}"
    );
    for h in &held {
        stop(h).await;
    }
}

#[tokio::test]
async fn java_leaf_nodes_count_as_used_and_their_address_keeps_its_id() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    // What Java Leaf leaves: a persistent sequential node, no `ids` claim, no live node.
    let raw = client(&connect).await;
    let (_, chroot) = connect.split_once('/').unwrap();
    let root = raw.clone().chroot("/").unwrap();
    root.mkdir(
        &format!("/{chroot}"),
        &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
    )
    .await
    .unwrap();
    let options_ = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    raw.mkdir("/snowflake/orders/forever", &options_)
        .await
        .unwrap();
    let leaf_time = now() - 60_000;
    let data = format!(r#"{{"ip":"127.0.0.1","port":"9999","timestamp":{leaf_time}}}"#);
    raw.create(
        "/snowflake/orders/forever/127.0.0.1:9999-0000000000",
        data.as_bytes(),
        &options_,
    )
    .await
    .unwrap();
    let mut fresh = options(&connect, 1, dir.path());
    fresh.range = Some(WorkerIdRange::new(0, 3).unwrap());
    let a = start(&fresh).await.unwrap();
    assert_eq!(a.assignment.worker_id, 1);
    let mut leaf = options(&connect, 9999, dir.path());
    leaf.range = fresh.range;
    let b = start(&leaf).await.unwrap();
    assert_eq!(b.assignment.worker_id, 0);
    // Taken over: the node now carries our reservation as well.
    let (bytes, _) = raw
        .get_data("/snowflake/orders/forever/127.0.0.1:9999-0000000000")
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&bytes).contains("reserved_until"));
    stop(&a).await;
    stop(&b).await;
}

#[tokio::test]
async fn automatic_reclaim_frees_a_dead_holders_id_after_the_threshold() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let short = |port| {
        let mut o = options(&connect, port, dir.path());
        o.reservation = Duration::from_secs(1);
        o
    };
    let dead = start(&short(1)).await.unwrap();
    stop(&dead).await;
    let mut reclaiming = short(2);
    reclaiming.auto_reclaim_after = Some(Duration::from_secs(1));
    let held = start(&reclaiming).await.unwrap();
    let holder = held.holder.clone();
    let deadline = Instant::now() + Duration::from_secs(20);
    while holder.status().reports.unwrap().reclaimed == 0 {
        assert!(
            Instant::now() < deadline,
            "nothing reclaimed: {:?}",
            holder.status()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let nodes = ZooKeeperWorkerIdAssigner::new(short(3))
        .nodes()
        .await
        .unwrap();
    assert!(!nodes.contains_key(&dead.assignment.worker_id));
    assert!(unique("x") != unique("x"));
    holder.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_start_from_the_cache_reports_once_zookeeper_returns_and_loses_a_node_written_meanwhile()
{
    let mut server = PrivateZooKeeper::start();
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&format!("{}/cached", server.address()), 7100, dir.path());
    opts.session_timeout = Duration::from_secs(2);
    let first = start(&opts).await.unwrap();
    let id = first.assignment.worker_id;
    stop(&first).await;
    drop(first);

    // Down at start: the cache; back: the node is still at the write the cache saw.
    server.stop();
    let cached = start(&opts).await.unwrap();
    assert_eq!(
        (cached.source, cached.assignment.worker_id),
        (ZkSource::LocalCache, id)
    );
    let holder = cached.holder.clone();
    server.resume();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !holder.status().health.connected {
        assert!(
            Instant::now() < deadline,
            "no report after ZooKeeper returned: {:?}",
            holder.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(holder.status().health.lost, None);
    holder.check().unwrap();
    stop(&cached).await;
    drop((cached, holder));

    // Someone else writes the node while this host is away: its cache start loses the id.
    let raw = client(&format!("{}/cached", server.address())).await;
    let node = format!("/snowflake/orders/forever/127.0.0.1:7100-{id:010}");
    let (bytes, _) = raw.get_data(&node).await.unwrap();
    raw.set_data(&node, &bytes, None).await.unwrap();
    drop(raw);
    server.stop();
    let cached = start(&opts).await.unwrap();
    assert_eq!(cached.source, ZkSource::LocalCache);
    let holder = cached.holder.clone();
    let gen_ = generator(&cached, SystemClock);
    gen_.next_id().unwrap();
    server.resume();
    let deadline = Instant::now() + Duration::from_secs(30);
    while holder.status().health.lost.is_none() {
        assert!(
            Instant::now() < deadline,
            "the id was not given up: {:?}",
            holder.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(matches!(holder.check(), Err(ZkError::Lost { .. })));
    assert!(gen_.next_id().is_err());
    // The cache is forgotten: a later start while ZooKeeper is down cannot take the id.
    assert!(!opts.cache_file.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_report_reply_or_request_keeps_the_worker_id_and_refuses_nothing() {
    let connect = test_connect();
    let (upstream, chroot) = connect.split_once('/').unwrap();
    let proxy = ReplyDropper::start(upstream);
    let dir = tempfile::tempdir().unwrap();
    let opts = options(&format!("{}/{chroot}", proxy.address()), 7200, dir.path());
    let held = start(&opts).await.unwrap();
    let holder = held.holder.clone();
    let id = held.assignment.worker_id;
    let generator = generator(&held, SystemClock);
    let mut ids = Vec::new();
    let mut refusals = 0;
    let mut issue = |ids: &mut Vec<u64>| match generator.next_ids(100) {
        Ok(batch) => ids.extend(batch),
        Err(_) => refusals += 1,
    };
    // First the server writes a report and its reply is lost with the connection (the next
    // report would fail on the version and give the id up); then a report is lost before it
    // reaches the server.
    for (round, lose) in [
        ReplyDropper::drop_next_set_data_reply as fn(&ReplyDropper),
        ReplyDropper::drop_next_set_data_request,
    ]
    .into_iter()
    .enumerate()
    {
        lose(&proxy);
        let deadline = Instant::now() + Duration::from_secs(20);
        while proxy.dropped() == round as u64 {
            assert!(Instant::now() < deadline, "no report passed the proxy");
            issue(&mut ids);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let lost_at = now();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            issue(&mut ids);
            let status = holder.status();
            assert_eq!(status.health.lost, None, "round {round}: {status:?}");
            if status.health.connected
                && status
                    .health
                    .last_report_ms
                    .is_some_and(|t| t > lost_at + 500)
            {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "round {round}: reports did not resume: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(holder.status().health.failures > round as u64);
    }
    holder.check().unwrap();
    assert_eq!(refusals, 0);
    assert!(opts.cache_file.exists(), "the cache was given up");
    let nodes = ZooKeeperWorkerIdAssigner::new(opts.clone())
        .nodes()
        .await
        .unwrap();
    assert!(nodes.contains_key(&id));
    let total = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), total);
    holder.shutdown();
}

#[tokio::test]
async fn a_registered_assigner_records_its_range_before_it_takes_an_id_and_takes_none_when_refused()
{
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(&test_connect(), free_port(), dir.path());
    let range = WorkerIdRange::new(924, 1023).unwrap();
    opts.range = Some(range);
    declare_new(&opts).await;
    let layout = Layout::leaf().unwrap();

    // Another assigner on the store holds part of the range: refused, nothing claimed.
    let refusing = RecordingRegistry::taken(WorkerIdRange::new(1000, 1023).unwrap());
    let refused = ZooKeeperWorkerIdAssigner::new(opts.clone())
        .registered_in(refusing.clone())
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("overlaps"), "{refused}");
    assert_eq!(refusing.asked(), vec![("zookeeper".to_owned(), range)]);
    let assigner = ZooKeeperWorkerIdAssigner::new(opts.clone());
    assert!(
        assigner.nodes().await.unwrap().is_empty(),
        "a refused start claimed a node"
    );

    // Through the trait, as the service takes it: recorded under the assigner's own name.
    let registry = RecordingRegistry::default();
    let assigned = ZooKeeperWorkerIdAssigner::new(opts)
        .registered_in(registry.clone())
        .assign(&layout)
        .await
        .unwrap();
    assert!(range.contains(assigned.worker_id), "{}", assigned.worker_id);
    assert_eq!(
        registry.asked(),
        vec![(ZooKeeperWorkerIdAssigner::REGISTRY_NAME.to_owned(), range)]
    );
    assigned.keeper.unwrap().release().await.unwrap();
}

/// An ID space's order mark in ZooKeeper only rises (the contract of every keeper:
/// `check_order_marks_only_rise`, concurrent raises, a lower raise, spaces apart), and the
/// mark is not among the nodes Leaf and the claim list (`forever`, `ids`, `live`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_mark_in_zookeeper_only_rises_under_concurrent_raises() {
    use uidgen_zk::{ZkOptions, ZkOrderMarks};
    let connect = test_connect();
    let options = ZkOptions::new(&connect, "marks", "127.0.0.1", "1");
    uidgen_worker::testing::check_order_marks_only_rise(Arc::new(ZkOrderMarks::new(&options)))
        .await;
    let zk = client(&connect).await;
    let mut names = zk.list_children("/snowflake/marks").await.unwrap();
    names.sort();
    assert_eq!(names, vec!["order".to_owned()]);
    let mut spaces = zk.list_children("/snowflake/marks/order").await.unwrap();
    spaces.sort();
    assert_eq!(spaces, vec!["a%2Fb".to_owned(), "default".to_owned()]);
}

/// A lenient order fence over ZooKeeper goes on past its mark once ZooKeeper is gone: the
/// client holds a raise while it tries to reconnect (for as long as the session may live, a
/// minute here), so the fence counts a raise without an answer as failed instead of waiting
/// for it, and says it is past the mark. When ZooKeeper is back, a raise covers it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lenient_order_fence_over_a_silent_zookeeper_goes_on_past_its_mark() {
    use uidgen_core::{Clock, TimeFence};
    use uidgen_worker::{OrderFence, OrderOptions};
    use uidgen_zk::{ZkOptions, ZkOrderMarks};
    let mut server = PrivateZooKeeper::start();
    let mut options = ZkOptions::new(server.address(), "silent", "127.0.0.1", "1");
    options.session_timeout = Duration::from_secs(60);
    let clock = ManualClock::new(SystemClock.now_millis());
    let fence = OrderFence::open(
        Arc::new(ZkOrderMarks::new(&options)),
        Arc::new(clock.clone()),
        "default",
        "one",
        OrderOptions::not_borrowing(),
    )
    .await
    .unwrap();
    let limit = fence.limit_ms();
    server.stop();
    // Inside half a lead of the limit: the writer raises, and the generator asks past it.
    clock.set(limit - 500);
    let wanted = limit + 1_000;
    let started = Instant::now();
    while fence.extend(wanted).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the fence still refuses with ZooKeeper gone: {:?}",
            fence.extend(wanted)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(fence.status().past_mark);
    assert!(fence.status().failures >= 1);
    server.resume();
    let started = Instant::now();
    while fence.status().past_mark {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no raise covered the mark again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(fence.limit_ms() >= wanted);
}
