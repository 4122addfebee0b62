//! The cached generator under more demand than its ring holds, in the real binary: callers
//! wait for padding without a thread each, and the IDs' time never runs further ahead of the
//! clock than `ring.max_borrow_seconds`; and `ring.take_rejection` decides whether a request
//! the ring cannot fill waits for padding or is answered `ring_empty` at once.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{Server, assert_unique, fetch, ids_in, json, sqlite_url};

/// Concurrent requests, far more than the runtime has threads.
const CALLERS: usize = 100;
/// IDs each asks for: together 3 seconds' worth of the layout below, which the ring (one
/// second) and the bound (one second ahead) cannot hold, so most callers wait for the clock.
const PER_CALL: usize = 16;

/// Baidu-style bits with a 9-bit sequence: 512 IDs a second; a ring of one second
/// (`boost_power` 0), padded at most one second ahead of the clock.
const SMALL_RING: &[(&str, &str)] = &[
    ("UIDGEN_SEGMENT_ENABLED", "false"),
    ("UIDGEN_LAYOUT_TIME_BITS", "31"),
    ("UIDGEN_LAYOUT_WORKER_BITS", "23"),
    ("UIDGEN_LAYOUT_SEQ_BITS", "9"),
    ("UIDGEN_RING_BOOST_POWER", "0"),
    ("UIDGEN_RING_MAX_BORROW_SECONDS", "1"),
    ("TOKIO_WORKER_THREADS", "2"),
];

/// More IDs than [`SMALL_RING`]'s ring holds: no request for them is served from what the
/// ring holds when it arrives, however long the server has been idle.
const MORE_THAN_THE_RING: usize = 1000;

/// Threads of process `pid` right now.
fn threads(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| dir.count() as u64)
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_waiting_for_an_empty_ring_hold_no_thread_and_borrowing_stays_bounded() {
    let store = sqlite_url("ring-load");
    let server = Server::start(&[], &[&[("UIDGEN_STORE", &*store)], SMALL_RING].concat());
    let pid = server.pid();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CALLERS)
        .build()
        .unwrap();
    let idle = threads(pid);
    assert!(idle > 0, "cannot read /proc/{pid}/task");

    // Watch the thread count and the borrowed units while the callers wait.
    let done = Arc::new(AtomicBool::new(false));
    let most_threads = Arc::new(AtomicU64::new(idle));
    let most_borrowed = Arc::new(AtomicU64::new(0));
    let watcher = {
        let (done, most_threads, most_borrowed) =
            (done.clone(), most_threads.clone(), most_borrowed.clone());
        let (client, status_url) = (client.clone(), server.url("/v1/status"));
        tokio::spawn(async move {
            while !done.load(Ordering::SeqCst) {
                most_threads.fetch_max(threads(pid), Ordering::SeqCst);
                let (_, body) = fetch(&client, &status_url).await;
                let borrowed = json(&body)["ring"]["borrowed_units"].as_u64().unwrap();
                most_borrowed.fetch_max(borrowed, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let url = server.url(&format!("/v1/ids?count={PER_CALL}"));
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (client, url) = (client.clone(), url.clone());
            tokio::spawn(async move { fetch(&client, &url).await })
        })
        .collect();
    let mut ids = Vec::new();
    for caller in callers {
        let (status, body) = caller.await.unwrap();
        assert_eq!(status, 200, "{body}");
        ids.extend(ids_in(&json(&body)));
    }
    done.store(true, Ordering::SeqCst);
    watcher.await.unwrap();
    assert_eq!(ids.len(), CALLERS * PER_CALL);
    assert_unique(ids.clone());

    let most_threads = most_threads.load(Ordering::SeqCst);
    eprintln!(
        "{CALLERS} callers: {idle} threads idle, at most {most_threads} under load, at most {} \
         units borrowed",
        most_borrowed.load(Ordering::SeqCst)
    );
    // Each waiting caller held a blocking-pool thread before (one per caller); now the
    // process keeps its idle threads, whatever the number of callers.
    assert!(
        most_threads < idle + 10 && most_threads < CALLERS as u64 / 2,
        "{most_threads} threads with {CALLERS} callers waiting ({idle} idle)"
    );
    // Never more than the bound ahead of the clock, however long the queue of callers.
    assert!(
        most_borrowed.load(Ordering::SeqCst) <= 1,
        "borrowed {} units",
        most_borrowed.load(Ordering::SeqCst)
    );
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let padding = metrics
        .lines()
        .find(|l| l.starts_with("uidgen_ring_padding_runs_total "))
        .unwrap_or_else(|| panic!("no padding runs counter: {metrics}"));
    assert!(!padding.ends_with(" 0"), "{padding}");
}

/// A server on [`SMALL_RING`] with its own store and `policy`, one `(variable, value)`.
fn small_ring_server(store_name: &str, policy: (&str, &str)) -> Server {
    let store = sqlite_url(store_name);
    let own = [("UIDGEN_STORE", &*store), policy];
    Server::start(&[], &[&own[..], SMALL_RING].concat())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_ring_cannot_fill_fails_at_once_with_fail_and_is_served_with_wait() {
    let client = reqwest::Client::new();
    let url = format!("/v1/ids?count={MORE_THAN_THE_RING}");
    let server = small_ring_server("reject-fail", ("UIDGEN_RING_TAKE_REJECTION", "fail"));
    let (status, body) = fetch(&client, &server.url(&url)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(json(&body)["code"], "ring_empty", "{body}");
    // (No follow-up request here: the refused one drained the ring, and whether padding has
    // refilled it by the next request depends on the clock.)
    drop(server);

    // Waiting (the default policy, here with an explicit bound well above a padding's second),
    // the same request is served once padding has caught up with the clock.
    let server = small_ring_server("reject-wait", ("UIDGEN_RING_TAKE_WAIT_MS", "10000"));
    let (status, body) = fetch(&client, &server.url(&url)).await;
    assert_eq!(status, 200, "{body}");
    let ids = ids_in(&json(&body));
    assert_eq!(ids.len(), MORE_THAN_THE_RING);
    assert_unique(ids);
}
