//! Issue 33, item 2, end to end: two real `uidgen serve` processes on one database, each
//! restarted 50 times (SIGTERM, start again) while a driver takes segment IDs from both over
//! HTTP. Counted: repeats (must be 0) and numbers skipped, which must not exceed what was in
//! flight when a server stopped.
//!
//! "In flight" is measured by the driver: a request that was sent (not refused at connect)
//! but did not come back 200 may have taken up to its `count` IDs before the server stopped,
//! IDs it never delivered; nothing else may be lost. Skipped = every number the servers
//! claimed from `leaf_alloc` (`max_id - 1`: the tag starts at 1 and only they claim), less the
//! distinct IDs delivered, less the numbers still handed back in `leaf_alloc_returned`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::Server;
use parking_lot::Mutex;
use uidgen_store::Store;
use uidgen_store::testing::{TestDb, fresh_url};

const TAG: &str = "restarts";
/// Small segments: a server loads one every five requests, so every stop has a partly used
/// current segment and, often, a prefetched one.
const STEP: i64 = 50;
/// IDs per request.
const COUNT: usize = 10;
const SERVERS: usize = 2;
const RESTARTS_PER_SERVER: usize = 50;
/// IDs each life delivers before its stop: the load is counted, not timed, so a slow or busy
/// machine runs longer rather than testing too little.
const PER_LIFE: usize = 100;

/// What one driver saw.
#[derive(Default)]
struct Driven {
    ids: Vec<i64>,
    /// Requests sent that did not come back 200: each may have taken `COUNT` IDs.
    unanswered: usize,
}

/// Take `COUNT` IDs at a time from whichever server `current` names, until `stop`.
async fn drive(
    current: Arc<Mutex<Option<String>>>,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicUsize>,
) -> Driven {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut driven = Driven::default();
    // SeqCst: a test flag.
    while !stop.load(Ordering::SeqCst) {
        let Some(base) = current.lock().clone() else {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        };
        let url = format!("{base}/v1/segments/{TAG}?count={COUNT}");
        match client.get(&url).send().await {
            Ok(response) if response.status() == 200 => match response.text().await {
                Ok(body) => {
                    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
                    let ids = value["ids"].as_array().unwrap();
                    driven.ids.extend(ids.iter().map(|v| v.as_i64().unwrap()));
                    // SeqCst: a test counter.
                    count.fetch_add(ids.len(), Ordering::SeqCst);
                }
                Err(_) => driven.unanswered += 1,
            },
            // Refused at connect: the server was gone (or not up yet), nothing was taken.
            Err(error) if error.is_connect() => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok(_) | Err(_) => driven.unanswered += 1,
        }
    }
    driven
}

/// A `name=value` figure of a log line containing `marker`, summed over the log.
fn logged(log: &str, marker: &str, name: &str) -> u64 {
    log.lines()
        .filter(|line| line.contains(marker))
        .filter_map(|line| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

/// `uidgen_segment_reused_ids_total{tag}` of a running server.
async fn reused_ids(client: &reqwest::Client, server: &Server) -> u64 {
    let text = common::text(client.get(server.url("/metrics"))).await;
    let series = format!("uidgen_segment_reused_ids_total{{tag=\"{TAG}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .map_or(0, |v| v.parse().unwrap())
}

/// One server slot: start, serve a moment under load, SIGTERM, again; the handed-back and
/// reused figures of every run.
async fn restart_loop(
    env: Vec<(String, String)>,
    current: Arc<Mutex<Option<String>>>,
    count: Arc<AtomicUsize>,
) -> (u64, u64) {
    let client = reqwest::Client::new();
    let (mut handed_back, mut reused) = (0, 0);
    for _ in 0..RESTARTS_PER_SERVER {
        let env = env.clone();
        let server = tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> =
                env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::start(&[], &env)
        })
        .await
        .unwrap();
        // SeqCst: a test counter.
        let before = count.load(Ordering::SeqCst);
        *current.lock() = Some(server.base.clone());
        tokio::time::sleep(Duration::from_millis(150)).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while count.load(Ordering::SeqCst) < before + PER_LIFE {
            assert!(
                std::time::Instant::now() < deadline,
                "a server delivered fewer than {PER_LIFE} IDs in a minute"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        reused += reused_ids(&client, &server).await;
        let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
            .await
            .unwrap();
        *current.lock() = None;
        assert!(status.success(), "a clean stop: {status}\n{log}");
        handed_back += logged(&log, "handed back the untouched rest", "ids");
        assert!(
            !log.contains("handing back the rest of the segments failed"),
            "{log}"
        );
    }
    (handed_back, reused)
}

async fn restarts_under_load_skip_no_more_than_was_in_flight(db: TestDb) {
    let url = fresh_url(db)
        .await
        .unwrap_or_else(|e| panic!("{db:?} is needed for this test: {e}"));
    let store = Store::connect(&url).await.unwrap();
    store.upsert_tag(TAG, STEP, None).await.unwrap();
    let env: Vec<(String, String)> = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_SEGMENT_DYNAMIC_STEP", "false"),
        ("UIDGEN_SEGMENT_SAMPLE_TAG", ""),
        // The per-call generator: no ring to pad at each of the 100 starts.
        ("UIDGEN_GENERATOR", "default"),
        ("RUST_LOG", "info"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    let started = std::time::Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut drivers = Vec::new();
    let mut slots = Vec::new();
    for _ in 0..SERVERS {
        let current = Arc::new(Mutex::new(None));
        let count = Arc::new(AtomicUsize::new(0));
        drivers.push(tokio::spawn(drive(
            current.clone(),
            stop.clone(),
            count.clone(),
        )));
        slots.push(tokio::spawn(restart_loop(env.clone(), current, count)));
    }
    let (mut handed_back, mut reused) = (0, 0);
    for slot in slots {
        let (back, again) = slot.await.unwrap();
        handed_back += back;
        reused += again;
    }
    // SeqCst: a test flag.
    stop.store(true, Ordering::SeqCst);
    let (mut ids, mut unanswered) = (Vec::new(), 0);
    for driver in drivers {
        let driven = driver.await.unwrap();
        ids.extend(driven.ids);
        unanswered += driven.unanswered;
    }

    let delivered = ids.len();
    let distinct: HashSet<i64> = ids.into_iter().collect();
    let repeats = delivered - distinct.len();
    let left: Vec<i64> = store
        .returned_ranges(TAG)
        .await
        .unwrap()
        .iter()
        .flat_map(|r| r.start..r.end)
        .collect();
    let both = left.iter().filter(|id| distinct.contains(id)).count();
    let claimed = store.get_tag(TAG).await.unwrap().unwrap().max_id - 1;
    let accounted = i64::try_from(distinct.len() + left.len()).unwrap();
    let skipped = claimed - accounted;
    let in_flight = i64::try_from(unanswered * COUNT).unwrap();
    eprintln!(
        "{db:?}: {} restarts in {:.1} s; {delivered} IDs delivered, {repeats} repeats, \
         {claimed} claimed, {} left handed back, {skipped} skipped, in flight at most \
         {in_flight} ({unanswered} unanswered requests); {handed_back} handed back and \
         {reused} reused in all",
        SERVERS * RESTARTS_PER_SERVER,
        started.elapsed().as_secs_f64(),
        left.len(),
    );
    assert_eq!(repeats, 0, "{db:?}: an ID was delivered twice");
    assert_eq!(
        both, 0,
        "{db:?}: an ID was delivered and is still handed back"
    );
    assert!(
        (0..=in_flight).contains(&skipped),
        "{db:?}: {skipped} numbers skipped, more than the {in_flight} in flight"
    );
    assert!(
        delivered >= SERVERS * RESTARTS_PER_SERVER * PER_LIFE,
        "{db:?}: every life delivers {PER_LIFE}: {delivered}"
    );
    assert!(
        handed_back > 0 && reused > 0,
        "{db:?}: nothing handed back or reused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restarts_under_load_skip_no_more_than_was_in_flight() {
    restarts_under_load_skip_no_more_than_was_in_flight(TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_restarts_under_load_skip_no_more_than_was_in_flight() {
    restarts_under_load_skip_no_more_than_was_in_flight(TestDb::MySql).await;
}
