//! Several service processes on one database and tag, and `kill -9`: the union of their IDs
//! has no duplicate, their segments never overlap, and a successor never reissues an ID a killed
//! process could have served. Runs on SQLite, MariaDB and PostgreSQL.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::LazyLock;
use std::time::Duration;

use common::{all_dbs, assert_unique, fresh, max_id, service};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::Barrier;
use uidgen_core::SystemClock;
use uidgen_segment::SegmentOptions;

/// The worker binary (built on first use: it is uidgen-testkit's).
static WORKER: LazyLock<PathBuf> =
    LazyLock::new(|| uidgen_testkit::worker_binary("uidgen-segment-worker"));
const STEP: i64 = 1_000;

async fn run_worker(url: &str, tag: &str, count: u64) -> Vec<i64> {
    let output = Command::new(&*WORKER)
        .args([url, tag, &count.to_string()])
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "worker failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| line.parse().unwrap())
        .collect()
}

/// Segment index of an ID: the worker runs with a fixed step, so segment `k` is
/// `[1 + k * STEP, 1 + (k + 1) * STEP)`.
fn segments(ids: &[i64]) -> HashSet<i64> {
    ids.iter().map(|id| (id - 1) / STEP).collect()
}

/// A worker in `forever` mode, killed when dropped.
fn spawn_forever(url: &str, tag: &str) -> Child {
    Command::new(&*WORKER)
        .args([url, tag, "forever"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Read `count` IDs from a worker's stdout, reporting the moment of its first line.
async fn read_ids(
    lines: &mut Lines<BufReader<ChildStdout>>,
    count: usize,
    started: &Barrier,
) -> Vec<i64> {
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("worker ended early");
        ids.push(line.parse::<i64>().unwrap());
        if ids.len() == 1 {
            // Both workers have started serving before either is read further.
            started.wait().await;
        }
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_concurrent_processes_on_one_tag_share_no_id_and_no_segment() {
    const EACH: usize = 150_000;
    for db in all_dbs() {
        let (store, url) = fresh(db).await;
        store.upsert_tag("shared", STEP, None).await.unwrap();
        let (mut a, mut b) = (spawn_forever(&url, "shared"), spawn_forever(&url, "shared"));
        let mut a_lines = BufReader::new(a.stdout.take().unwrap()).lines();
        let mut b_lines = BufReader::new(b.stdout.take().unwrap()).lines();
        // Each worker blocks on its full pipe while unread, so neither can run far ahead of the
        // other before both have started; then both are read at once.
        let started = Barrier::new(2);
        let read = async {
            tokio::join!(
                read_ids(&mut a_lines, EACH, &started),
                read_ids(&mut b_lines, EACH, &started)
            )
        };
        let (ids_a, ids_b) = tokio::time::timeout(Duration::from_secs(120), read)
            .await
            .unwrap_or_else(|_| panic!("{db:?}: workers too slow or stuck"));
        for child in [&mut a, &mut b] {
            child.start_kill().unwrap();
            child.wait().await.unwrap();
        }
        let (sa, sb) = (segments(&ids_a), segments(&ids_b));
        assert!(
            sa.is_disjoint(&sb),
            "{db:?}: segments overlap: {:?}",
            sa.intersection(&sb).collect::<Vec<_>>()
        );
        // They really ran side by side: their segments interleave in the table, rather than one
        // process claiming everything before the other started.
        let span = |s: &HashSet<i64>| (*s.iter().min().unwrap(), *s.iter().max().unwrap());
        let ((a_lo, a_hi), (b_lo, b_hi)) = (span(&sa), span(&sb));
        assert!(
            a_lo < b_hi && b_lo < a_hi,
            "{db:?}: no overlap in time: A claimed segments {a_lo}..={a_hi}, B {b_lo}..={b_hi}"
        );
        let mut union: Vec<i64> = ids_a.into_iter().chain(ids_b).collect();
        assert_unique(&mut union, &format!("{db:?}"));
        assert!(*union.last().unwrap() < max_id(&store, "shared").await);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_kill_9_the_next_instance_never_reissues_what_the_dead_one_could_serve() {
    for db in all_dbs() {
        let (store, url) = fresh(db).await;
        store.upsert_tag("crash", STEP, None).await.unwrap();
        // A clean run first: a restart continues above it.
        let first = run_worker(&url, "crash", 2_500).await;
        let after_first = max_id(&store, "crash").await;

        let mut child = Command::new(&*WORKER)
            .args([url.as_str(), "crash", "forever"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut dead = Vec::new();
        while dead.len() < 20_000 {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("worker ended early");
            dead.push(line.parse::<i64>().unwrap());
        }
        child.start_kill().unwrap(); // SIGKILL: no shutdown, no flush
        child.wait().await.unwrap();
        while let Ok(Some(line)) = lines.next_line().await {
            dead.push(line.parse().unwrap()); // what it printed before dying
        }
        // The server may still be finishing the dead connection's last statement.
        tokio::time::sleep(Duration::from_millis(300)).await;
        // Everything the dead process could serve lies below the committed max_id.
        let fence = max_id(&store, "crash").await;
        assert!(
            dead.iter().all(|&id| id >= after_first && id < fence),
            "{db:?}"
        );

        let options = SegmentOptions {
            dynamic_step: false,
            ..SegmentOptions::default()
        };
        let next = service(store.clone(), options, SystemClock).await;
        let fresh_ids = next.get_batch_async("crash", 5_000).await.unwrap();
        assert!(
            fresh_ids.iter().all(|&id| id >= fence),
            "{db:?}: the successor served an ID below the dead one's max_id {fence}"
        );
        let mut all: Vec<i64> = first.into_iter().chain(dead).chain(fresh_ids).collect();
        assert_unique(&mut all, &format!("{db:?}"));
    }
}
