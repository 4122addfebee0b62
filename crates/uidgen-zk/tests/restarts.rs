//! Restarts without a cache file (a container without a volume) against a real ZooKeeper
//! (`UIDGEN_TEST_ZK`, default 127.0.0.1:2181; never skipped).
//!
//! A restart on its own ip:port reuses its node once the previous life's reservation (minutes,
//! rolling with its reports) has passed, so restarts do not use the range up; and no life
//! stamps a time unit an earlier life of the id used, even an earlier life that is still
//! issuing, cut off from ZooKeeper, right up to the reservation of its last accepted report.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{duplicates, generator, now, options, start_on};
use uidgen_core::{Clock, ManualClock, UidGenerator};
use uidgen_testkit::worker_binary;
use uidgen_worker::{WorkerIdRange, WorkerKeeper};
use uidgen_zk::testing::test_connect;
use uidgen_zk::{ZkAssignment, ZkSource};

const MINUTE_MS: u64 = 60_000;

/// Wait (real time) until the holder's reports carry this clock's reading `at_ms`.
async fn wait_for_report(held: &ZkAssignment, at_ms: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while held.holder.status().health.last_report_ms < Some(at_ms) {
        assert!(
            Instant::now() < deadline,
            "no report at {at_ms}: {:?}",
            held.holder.status()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_hundred_fifty_restarts_without_a_cache_fit_a_range_of_one_hundred_ids() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    let range = WorkerIdRange::new(0, 99).unwrap();
    // Stepped clocks: life i starts 12 minutes after life i-1 (so 100 lives take 20 hours,
    // well within the day the old reservation blocked an id for); it runs for a minute, and
    // the ten-minute reservation of its last report ends before the next life starts. Every
    // fifth life restarts a second after the one before instead (a crash loop).
    let t0 = now() - 30 * 24 * 60 * MINUTE_MS;
    let mut ids = Vec::new();
    let mut workers = BTreeSet::new();
    let mut reused = 0;
    let mut end_ms = t0;
    for life in 0..150u64 {
        let mut o = options(&connect, 8080, &dir.path().join(format!("life-{life}")));
        o.range = Some(range);
        o.report_interval = Duration::from_millis(100);
        let at_once = life % 5 == 4;
        let start_ms = if at_once {
            end_ms + 1_000
        } else {
            t0 + life * 12 * MINUTE_MS + fastrand::u64(0..30_000)
        };
        let clock = ManualClock::new(start_ms);
        let held = start_on(&o, &clock)
            .await
            .unwrap_or_else(|e| panic!("life {life} was refused: {e}"));
        assert_eq!(held.source, ZkSource::ZooKeeper);
        if !workers.insert(held.assignment.worker_id) {
            reused += 1;
        }
        let generator = generator(&held, clock.clone());
        ids.extend(generator.next_ids(100).unwrap());
        // A minute on, a report carries the reservation forward.
        clock.advance(MINUTE_MS);
        wait_for_report(&held, clock.now_millis()).await;
        ids.extend(generator.next_ids(100).unwrap());
        end_ms = clock.now_millis();
        // Cut off from ZooKeeper: no more reports, the session closes, the live node goes; but
        // this life still issues, up to the reservation of its last accepted report.
        let reserved = held.holder.status().health.accepted_until_ms;
        held.holder.shutdown();
        clock.set(reserved - 1);
        ids.extend(generator.next_ids(100).unwrap());
    }
    assert_eq!(duplicates(&ids), 0, "{} IDs", ids.len());
    assert_eq!(ids.len(), 150 * 300);
    // The crash-looping restarts take a second node; every other restart reuses one.
    assert!(workers.len() <= 3, "{workers:?}");
    assert!(reused >= 147, "{reused}");
}

/// One host restarting `lives` times in separate processes on `127.0.0.1:{port}`, without a
/// cache (a new file each life), its clock stepped between -2 s and +3 s at each restart;
/// every other life is killed (SIGKILL) midway. Returns the IDs every life wrote and the
/// worker ids they held.
async fn host_restarting(
    connect: &str,
    dir: &std::path::Path,
    port: u16,
    lives: u32,
) -> (Vec<u64>, Vec<u64>) {
    host_restarting_with(connect, dir, port, lives, 0, "0-1").await
}

/// [`host_restarting`], each life also holding `extra` more worker ids of `range` (issue 30).
async fn host_restarting_with(
    connect: &str,
    dir: &std::path::Path,
    port: u16,
    lives: u32,
    extra: u32,
    range: &str,
) -> (Vec<u64>, Vec<u64>) {
    use tokio::io::AsyncBufReadExt;
    uidgen_zk::testing::init_namespace(connect, "restarts")
        .await
        .unwrap();
    let mut offset_ms: i64 = 0;
    let (mut ids, mut workers) = (Vec::new(), Vec::new());
    for life in 0..lives {
        let out = dir.join(format!("ids-{port}-{life}"));
        let mut child = tokio::process::Command::new(worker_binary("uidgen-zk-worker"))
            .args(["--connect", connect, "--name", "restarts", "--port"])
            .arg(port.to_string())
            .arg("--cache")
            .arg(dir.join(format!("cache-{port}-{life}")))
            .arg("--out")
            .arg(&out)
            .args(["--secs", "1", "--max-count", "200000", "--range", range])
            .args(["--extra", &extra.to_string()])
            .args(["--reservation-ms", "2000", "--report-ms", "100"])
            .args(["--session-ms", "4000", "--clock-offset-ms"])
            .arg(offset_ms.to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next_line().await.unwrap();
        let Some(worker) = first.and_then(|l| l.trim().parse().ok()) else {
            let output = child.wait_with_output().await.unwrap();
            panic!(
                "life {life} on port {port} was refused: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        workers.push(worker);
        if life % 2 == 1 {
            tokio::time::sleep(Duration::from_millis(fastrand::u64(200..700))).await;
            child.start_kill().unwrap();
            child.wait().await.unwrap();
        } else {
            let output = child.wait_with_output().await.unwrap();
            assert!(
                output.status.success(),
                "life {life} on port {port} failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        let bytes = std::fs::read(&out).unwrap();
        ids.extend(
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap())),
        );
        offset_ms += fastrand::i64(-2_000..=3_000);
    }
    (ids, workers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_restarting_in_processes_without_a_cache_on_stepped_clocks_repeat_no_id() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    // Two hosts share a range of two ids: each restart must reuse its own node (a refused or
    // fresh claim would find the range used up).
    let (a, b) = tokio::join!(
        host_restarting(&connect, dir.path(), 9100, 6),
        host_restarting(&connect, dir.path(), 9101, 6),
    );
    let mut ids = a.0;
    ids.extend(b.0);
    assert!(ids.len() > 100_000, "only {} IDs", ids.len());
    assert_eq!(duplicates(&ids), 0, "{} IDs", ids.len());
    // Each host kept one worker id across its lives, and the two differ.
    for workers in [&a.1, &b.1] {
        assert!(workers.windows(2).all(|w| w[0] == w[1]), "{workers:?}");
    }
    assert_ne!(a.1[0], b.1[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hosts_restarting_with_extra_worker_ids_on_stepped_clocks_repeat_no_id() {
    let connect = test_connect();
    let dir = tempfile::tempdir().unwrap();
    // Each life holds three ids (its address's node and two extras, `{port}.1` and `.2`), each
    // killed or stopped, its clock stepped: six ids for two hosts, every restart reusing its
    // own three nodes.
    let (a, b) = tokio::join!(
        host_restarting_with(&connect, dir.path(), 9110, 4, 2, "0-5"),
        host_restarting_with(&connect, dir.path(), 9111, 4, 2, "0-5"),
    );
    let layout = uidgen_core::Layout::leaf().unwrap();
    let stamped = |ids: &[u64]| -> std::collections::BTreeSet<u64> {
        ids.iter()
            .map(|id| layout.decompose(*id).unwrap().worker)
            .collect()
    };
    let (stamped_a, stamped_b) = (stamped(&a.0), stamped(&b.0));
    assert!(
        stamped_a.len() > 1 && stamped_b.len() > 1,
        "{stamped_a:?} {stamped_b:?}"
    );
    assert!(
        stamped_a.is_disjoint(&stamped_b),
        "{stamped_a:?} {stamped_b:?}"
    );
    let mut ids = a.0;
    ids.extend(b.0);
    assert!(ids.len() > 50_000, "only {} IDs", ids.len());
    assert_eq!(duplicates(&ids), 0, "{} IDs", ids.len());
}
