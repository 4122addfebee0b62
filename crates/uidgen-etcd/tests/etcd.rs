//! The etcd assigner against real etcd processes: the shared one (`UIDGEN_TEST_ETCD`, default
//! http://127.0.0.1:2379; never skipped) with a key prefix per test, and private ones a test
//! kills. Worker processes are `uidgen-etcd-worker` (uidgen-testkit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_etcd::testing::{PrivateEtcd, free_port, test_endpoint, test_prefix};
use uidgen_etcd::{EtcdAssignment, EtcdError, EtcdOptions, EtcdWorkerIdAssigner};

/// How many IDs of `ids` repeat one already seen.
fn duplicates(ids: &[u64]) -> usize {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).filter(|w| w[0] == w[1]).count()
}

/// The IDs a worker process wrote (little-endian u64s).
fn read_ids(path: &Path) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap_or_default();
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// The millisecond (Leaf's unit) an ID was stamped in.
fn stamped_ms(id: u64) -> u64 {
    let layout = Layout::leaf().unwrap();
    layout.epoch_ms() + layout.decompose(id).unwrap().time
}

/// A worker process under `prefix`, writing its IDs to `out`.
fn spawn_worker(endpoint: &str, prefix: &str, out: &Path, extra: &[&str]) -> Child {
    Command::new(uidgen_testkit::worker_binary("uidgen-etcd-worker"))
        .args(["--endpoint", endpoint, "--prefix", prefix, "--holder"])
        .arg(format!("test:{}", out.display()))
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Its first line: `worker_id floor_ms`.
fn claimed(child: &mut Child) -> Option<(u64, u64)> {
    use std::io::BufRead;
    let stdout = child.stdout.as_mut().unwrap();
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line).ok()?;
    let mut words = line.split_whitespace();
    Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
}

fn options(endpoint: &str, prefix: &str, holder: &str) -> EtcdOptions {
    let mut options = EtcdOptions::new([endpoint], prefix, holder);
    options.lease_ttl = Duration::from_secs(2);
    options.reservation = Duration::from_secs(3);
    options
}

/// A held id on Leaf's layout and a Snowflake generator fenced by its holder.
async fn start_fenced(options: EtcdOptions) -> (EtcdAssignment, SnowflakeGenerator<SystemClock>) {
    let layout = Layout::leaf().unwrap();
    let held = EtcdWorkerIdAssigner::new(options)
        .start(&layout)
        .await
        .unwrap();
    let generator = SnowflakeGenerator::new(layout, held.assignment.worker_id, SystemClock)
        .unwrap()
        .fenced(held.assignment.fence.clone().unwrap());
    (held, generator)
}

#[test]
fn processes_claim_distinct_ids_and_no_id_repeats_across_them() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let dir = tempfile::tempdir().unwrap();
    // All claim at the same instant, once every process is up: the claims race.
    let start_at = (uidgen_core::Clock::now_millis(&SystemClock) + 1_500).to_string();
    let mut children: Vec<_> = (0..4)
        .map(|i| {
            let out = dir.path().join(format!("ids-{i}"));
            let child = spawn_worker(
                &endpoint,
                &prefix,
                &out,
                &[
                    "--secs",
                    "1.5",
                    "--range",
                    "0-9",
                    "--start-at-ms",
                    &start_at,
                ],
            );
            (child, out)
        })
        .collect();
    let mut workers = Vec::new();
    let mut ids = Vec::new();
    for (child, out) in &mut children {
        let (worker_id, _) = claimed(child).expect("a worker process claimed no id");
        workers.push(worker_id);
        let status = child.wait().unwrap();
        assert!(status.success(), "a worker process failed: {status}");
        ids.extend(read_ids(out));
    }
    workers.sort_unstable();
    workers.dedup();
    assert_eq!(
        workers.len(),
        4,
        "four processes, four distinct ids: {workers:?}"
    );
    assert!(
        workers.iter().all(|w| *w <= 9),
        "ids outside the range: {workers:?}"
    );
    assert!(
        ids.len() >= 4_000,
        "the processes issued only {} IDs",
        ids.len()
    );
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    eprintln!(
        "4 racing processes: worker ids {workers:?}, {} IDs, {} duplicates",
        ids.len(),
        duplicates(&ids)
    );
}

#[test]
fn a_restart_on_the_only_id_starts_above_its_killed_predecessors_mark() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let dir = tempfile::tempdir().unwrap();
    let short = [
        "--range",
        "5-5",
        "--ttl-ms",
        "2000",
        "--reservation-ms",
        "2000",
        "--start-wait-ms",
        "10000",
    ];
    // The first life runs until it is killed (no release: its lease expires on its own).
    let first_out = dir.path().join("first");
    let mut first = spawn_worker(
        &endpoint,
        &prefix,
        &first_out,
        &[&short[..], &["--secs", "60"]].concat(),
    );
    assert_eq!(claimed(&mut first).map(|c| c.0), Some(5));
    let deadline = Instant::now() + Duration::from_secs(30);
    while read_ids(&first_out).len() < 10_000 {
        assert!(
            Instant::now() < deadline,
            "the first life issued too few IDs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    first.kill().unwrap();
    first.wait().unwrap();
    let first_ids = read_ids(&first_out);
    let marks = || {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(
                EtcdWorkerIdAssigner::new(EtcdOptions::new([endpoint.as_str()], &prefix, "x"))
                    .marks(),
            )
            .unwrap()
    };
    // What the killed life left: its last accepted reservation.
    let first_mark = marks()[&5].reserved_until;

    // The next life retries while the first one's claim key lives (its lease ttl) and waits out
    // the first's reservation.
    let second_out = dir.path().join("second");
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut second, (worker_id, floor_ms)) = loop {
        let mut child = spawn_worker(
            &endpoint,
            &prefix,
            &second_out,
            &[&short[..], &["--secs", "1"]].concat(),
        );
        if let Some(claim) = claimed(&mut child) {
            break (child, claim);
        }
        let output = child.wait_with_output().unwrap();
        let refusal = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            refusal.contains("range used up"),
            "unexpected refusal: {refusal}"
        );
        assert!(
            Instant::now() < deadline,
            "the id never came back: {refusal}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(worker_id, 5, "the only id of the range is reused");
    assert!(second.wait().unwrap().success());
    assert!(
        floor_ms >= first_mark,
        "floor {floor_ms} is below the killed life's mark {first_mark}"
    );
    let last_first = first_ids.iter().map(|id| stamped_ms(*id)).max().unwrap();
    assert!(
        floor_ms > last_first,
        "floor {floor_ms} is not above the first life's last ID, stamped at {last_first}"
    );
    let second_ids = read_ids(&second_out);
    assert!(!second_ids.is_empty());
    let first_second = second_ids.iter().map(|id| stamped_ms(*id)).min().unwrap();
    assert!(
        first_second >= floor_ms,
        "stamped {first_second} below the floor {floor_ms}"
    );
    assert!(
        marks()[&5].reserved_until >= floor_ms,
        "the mark moved on with the second life"
    );
    let all: Vec<u64> = first_ids.iter().chain(&second_ids).copied().collect();
    assert_eq!(duplicates(&all), 0, "of {} IDs", all.len());
    eprintln!(
        "restart on id 5: {} + {} IDs, killed life's last ID at {last_first} ms, its mark \
         {first_mark}, new floor {floor_ms}, {} duplicates",
        first_ids.len(),
        second_ids.len(),
        duplicates(&all)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn etcd_killed_under_load_serves_until_the_reservation_then_refuses() {
    let mut etcd = PrivateEtcd::start();
    let options = options(&etcd.endpoint(), &test_prefix(), "outage:1");
    let (held, generator) = start_fenced(options).await;
    let generator = std::sync::Arc::new(generator);
    let load = {
        let generator = std::sync::Arc::clone(&generator);
        tokio::task::spawn_blocking(move || {
            let mut ids = Vec::new();
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                match generator.next_ids(100) {
                    Ok(batch) => ids.extend(batch),
                    Err(error) => return (ids, Some(error.to_string())),
                }
                if Instant::now() > deadline {
                    return (ids, None);
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    // Serving with etcd up for a while: keep-alives accepted.
    let before = held.holder.status().last_report_ms;
    while held.holder.status().last_report_ms == before {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    etcd.kill();
    let killed_ms = uidgen_core::Clock::now_millis(&SystemClock);
    let (ids, refusal) = load.await.unwrap();
    let refusal = refusal.expect("the holder never stopped issuing after etcd was killed");
    let status = held.holder.status();
    assert!(!status.connected, "{status:?}");
    assert!(status.keepalive_failures > 0, "{status:?}");
    let cap = status.reserved_until_ms;
    let after_kill = ids.iter().filter(|id| stamped_ms(**id) > killed_ms).count();
    assert!(
        after_kill > 0,
        "nothing was issued between the kill and the reservation"
    );
    let last = ids.iter().map(|id| stamped_ms(*id)).max().unwrap();
    assert!(last < cap, "stamped {last}, at or past the cap {cap}");
    assert!(
        refusal.contains("etcd"),
        "refusal does not name etcd: {refusal}"
    );
    assert!(
        matches!(held.holder.check(), Err(EtcdError::Lost { .. })),
        "{:?}",
        held.holder.check()
    );
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    eprintln!(
        "etcd killed under load: {} IDs, {after_kill} after the kill, last stamped {} ms after \
         it, cap {} ms after it, {} duplicates",
        ids.len(),
        last - killed_ms,
        cap - killed_ms,
        duplicates(&ids)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holders_in_one_process_take_distinct_ids_and_release_frees_the_claim_only() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let layout = Layout::leaf().unwrap();
    let a = EtcdWorkerIdAssigner::new(options(&endpoint, &prefix, "a:1"))
        .start(&layout)
        .await
        .unwrap();
    let b = EtcdWorkerIdAssigner::new(options(&endpoint, &prefix, "b:1"))
        .start(&layout)
        .await
        .unwrap();
    assert_eq!((a.assignment.worker_id, b.assignment.worker_id), (0, 1));
    let reserved = a.holder.status().reserved_until_ms;
    a.holder.release().await.unwrap();
    assert!(
        a.holder.check().is_err(),
        "a released holder issues nothing"
    );
    // The claim is gone but the mark stays: the next start skips id 0 while it is reserved.
    let c = EtcdWorkerIdAssigner::new(options(&endpoint, &prefix, "c:1"))
        .start(&layout)
        .await
        .unwrap();
    let marks = EtcdWorkerIdAssigner::new(options(&endpoint, &prefix, "x"))
        .marks()
        .await
        .unwrap();
    assert!(marks[&0].reserved_until >= reserved);
    if c.assignment.worker_id == 0 {
        // Only when this clock came within max_start_wait of the reservation.
        assert!(c.holder.floor_ms() >= reserved);
    } else {
        assert_eq!(c.assignment.worker_id, 2);
    }
}

/// The system clock, this far behind: a host whose clock is late.
#[derive(Debug, Clone, Copy)]
struct Behind(u64);

impl uidgen_core::Clock for Behind {
    fn now_millis(&self) -> u64 {
        uidgen_core::Clock::now_millis(&SystemClock) - self.0
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_waits_longer_than_the_lease_ttl_keeps_its_lease() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let layout = Layout::leaf().unwrap();
    let mut first = options(&endpoint, &prefix, "first:1");
    first.range = Some("3-3".parse().unwrap());
    let held = EtcdWorkerIdAssigner::new(first.clone())
        .start(&layout)
        .await
        .unwrap();
    let reserved = held.holder.status().reserved_until_ms;
    held.holder.release().await.unwrap();
    // A host 4 s late takes the id: it waits about 4 s + the reservation for its clock to pass
    // the mark, twice the 2 s lease ttl.
    let mut late = options(&endpoint, &prefix, "late:1");
    late.range = first.range;
    late.max_start_wait = Duration::from_secs(15);
    let clock = Behind(4_000);
    let held = EtcdWorkerIdAssigner::new(late)
        .with_clock(clock)
        .start(&layout)
        .await
        .unwrap();
    assert_eq!(held.assignment.worker_id, 3);
    assert!(held.holder.floor_ms() >= reserved);
    // Rounds after the wait still find the lease and the claim.
    let after = held.holder.status().keepalive_failures;
    let until = uidgen_core::Clock::now_millis(&clock) + 2_000;
    while held.holder.status().last_report_ms < until {
        assert!(
            held.holder.status().lost.is_none(),
            "{:?}",
            held.holder.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held.holder.check().is_ok(), "{:?}", held.holder.status());
    assert_eq!(held.holder.status().keepalive_failures, after);
}

#[tokio::test]
async fn an_unreachable_etcd_is_a_typed_error_naming_it() {
    let endpoint = format!("http://127.0.0.1:{}", free_port());
    let error = EtcdWorkerIdAssigner::new(options(&endpoint, "/unreachable", "a:1"))
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error}");
    assert!(error.to_string().contains(&endpoint), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_claim_key_is_deleted_loses_the_id_and_refuses_at_once() {
    use base64::Engine as _;
    let endpoint = test_endpoint();
    let mut options = options(&endpoint, &test_prefix(), "deleted:1");
    options.reservation = Duration::from_secs(60);
    let (held, generator) = start_fenced(options).await;
    assert!(generator.next_id().is_ok());
    // An operator (or anyone) deletes the claim: the next round's transaction, which holds only
    // while the claim key is the one this holder created, fails, and the fence closes although
    // the reservation has not run out.
    let key = base64::engine::general_purpose::STANDARD.encode(held.holder.claim_key());
    let deleted = reqwest::Client::new()
        .post(format!("{endpoint}/v3/kv/deleterange"))
        .json(&serde_json::json!({ "key": key }))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while held.holder.status().lost.is_none() {
        assert!(Instant::now() < deadline, "{:?}", held.holder.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = held.holder.status();
    let now = uidgen_core::Clock::now_millis(&SystemClock);
    assert!(
        status.reserved_until_ms > now,
        "the reservation was still running: {status:?}"
    );
    let reason = status.lost.unwrap();
    assert!(
        reason.contains("is no longer the one it created"),
        "{reason}"
    );
    let refused = generator.next_id().unwrap_err().to_string();
    assert!(refused.contains("lost"), "{refused}");
}
