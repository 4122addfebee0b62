//! The etcd assigner against real etcd processes: the shared one (`UIDGEN_TEST_ETCD`, default
//! http://127.0.0.1:2379; never skipped) with a key prefix per test, and private ones a test
//! kills. Worker processes are `uidgen-etcd-worker` (uidgen-testkit).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_etcd::testing::{PrivateEtcd, test_endpoint, test_namespace, test_prefix};
use uidgen_etcd::{EtcdAssignment, EtcdError, EtcdOptions, EtcdWorkerIdAssigner};
use uidgen_worker::testing::{RecordingRegistry, free_port};
use uidgen_worker::{WorkerIdAssigner, WorkerIdRange, WorkerKeeper};

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
/// [`options`] limited to `range` (`"LO-HI"`).
fn ranged(endpoint: &str, prefix: &str, holder: &str, range: &str) -> EtcdOptions {
    let mut options = options(endpoint, prefix, holder);
    options.range = Some(range.parse().unwrap());
    options
}

/// A private etcd and holder `a:1`'s options there, limited to `range`, with room for a holder
/// to take its id up again once etcd is back (`now + 5 s` inside a 15 s reservation).
fn private_namespace(range: &str) -> (PrivateEtcd, EtcdOptions) {
    let etcd = PrivateEtcd::start();
    let endpoint = etcd.endpoint();
    let mut opts = ranged(&endpoint, &test_namespace(&endpoint), "a:1", range);
    opts.reservation = Duration::from_secs(15);
    (etcd, opts)
}

/// A claim with `options`, which must succeed.
async fn hold(options: &EtcdOptions, layout: &Layout) -> EtcdAssignment {
    EtcdWorkerIdAssigner::new(options.clone())
        .start(layout)
        .await
        .unwrap()
}

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
    let prefix = test_namespace(&endpoint);
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
    let prefix = test_namespace(&endpoint);
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
    let options = options(
        &etcd.endpoint(),
        &test_namespace(&etcd.endpoint()),
        "outage:1",
    );
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
    let before = held.holder.status().health.last_report_ms;
    while held.holder.status().health.last_report_ms == before {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    etcd.kill();
    let killed_ms = uidgen_core::Clock::now_millis(&SystemClock);
    let (ids, refusal) = load.await.unwrap();
    let refusal = refusal.expect("the holder never stopped issuing after etcd was killed");
    let status = held.holder.status();
    assert!(!status.health.connected, "{status:?}");
    assert!(status.health.failures > 0, "{status:?}");
    let cap = status.health.accepted_until_ms;
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
    let prefix = test_namespace(&endpoint);
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
    let reserved = a.holder.status().health.accepted_until_ms;
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
    let prefix = test_namespace(&endpoint);
    let layout = Layout::leaf().unwrap();
    let first = ranged(&endpoint, &prefix, "first:1", "3-3");
    let held = hold(&first, &layout).await;
    let reserved = held.holder.status().health.accepted_until_ms;
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
    let after = held.holder.status().health.failures;
    let until = uidgen_core::Clock::now_millis(&clock) + 2_000;
    while held.holder.status().health.last_report_ms < Some(until) {
        assert!(
            held.holder.status().health.lost.is_none(),
            "{:?}",
            held.holder.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held.holder.check().is_ok(), "{:?}", held.holder.status());
    assert_eq!(held.holder.status().health.failures, after);
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
async fn a_holder_whose_claim_key_is_taken_loses_the_id_and_refuses_at_once() {
    let endpoint = test_endpoint();
    let mut options = options(&endpoint, &test_namespace(&endpoint), "taken:1");
    options.reservation = Duration::from_secs(60);
    let (held, generator) = start_fenced(options).await;
    assert!(generator.next_id().is_ok());
    // Someone else's claim stands in the key: the next round's transaction, which holds only
    // while the claim key is the one this holder created, fails, the claim is not this life's,
    // and the fence closes although the reservation has not run out.
    let other = uidgen_etcd::Record {
        holder: "other:1".into(),
        life: 1,
        timestamp: 1,
        reserved_until: 1,
    };
    etcd_delete(&endpoint, &held.holder.claim_key()).await;
    etcd_put(&endpoint, &held.holder.claim_key(), &other.to_json()).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while held.holder.status().health.lost.is_none() {
        assert!(Instant::now() < deadline, "{:?}", held.holder.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = held.holder.status();
    let now = uidgen_core::Clock::now_millis(&SystemClock);
    assert!(
        status.health.accepted_until_ms > now,
        "the reservation was still running: {status:?}"
    );
    let reason = status.health.lost.unwrap();
    assert!(
        reason.contains("is no longer the one it created"),
        "{reason}"
    );
    let refused = generator.next_id().unwrap_err().to_string();
    assert!(refused.contains("lost"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_whose_claim_key_is_deleted_takes_its_id_up_again_without_a_gap() {
    let endpoint = test_endpoint();
    let prefix = test_namespace(&endpoint);
    let mut options = options(&endpoint, &prefix, "deleted:1");
    options.reservation = Duration::from_secs(60);
    let (held, generator) = start_fenced(options.clone()).await;
    let mut ids = generator.next_ids(1_000).unwrap();
    // The claim key goes (an operator, or a lease etcd expired while the holder was cut off);
    // the mark is still this life's, so nobody claimed the id since: the holder claims it again
    // under a new lease and keeps issuing.
    etcd_delete(&endpoint, &held.holder.claim_key()).await;
    let lease = held.holder.lease_id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while held.holder.lease_id() == lease {
        assert!(Instant::now() < deadline, "{:?}", held.holder.status());
        ids.extend(generator.next_ids(100).unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        held.holder.status().health.lost.is_none(),
        "{:?}",
        held.holder.status()
    );
    ids.extend(generator.next_ids(1_000).unwrap());
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    // A claimant meanwhile finds the id held again.
    let other = EtcdWorkerIdAssigner::new(options.clone())
        .start(&Layout::leaf().unwrap())
        .await
        .unwrap();
    assert_ne!(other.assignment.worker_id, held.assignment.worker_id);
    other.holder.release().await.unwrap();
    held.holder.release().await.unwrap();
}

/// Put `value` at `key` on the etcd at `endpoint` (no lease).
async fn etcd_put(endpoint: &str, key: &str, value: &[u8]) {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let put = reqwest::Client::new()
        .post(format!("{endpoint}/v3/kv/put"))
        .json(&serde_json::json!({ "key": b64.encode(key), "value": b64.encode(value) }))
        .send()
        .await
        .unwrap();
    assert!(put.status().is_success());
}

/// Delete `key` on the etcd at `endpoint`.
async fn etcd_delete(endpoint: &str, key: &str) {
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD.encode(key);
    let deleted = reqwest::Client::new()
        .post(format!("{endpoint}/v3/kv/deleterange"))
        .json(&serde_json::json!({ "key": key }))
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success());
}

/// IDs from `generator` on a blocking thread until `stop` is set, then whatever error stopped
/// it (if one did).
fn load(
    generator: std::sync::Arc<SnowflakeGenerator<SystemClock>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<u64>, Option<String>)> {
    tokio::task::spawn_blocking(move || {
        let mut ids = Vec::new();
        // SeqCst: a test flag, not a hot path.
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            match generator.next_ids(50) {
                Ok(batch) => ids.extend(batch),
                Err(error) => return (ids, Some(error.to_string())),
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (ids, None)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_emptied_etcd_never_gives_a_held_id_to_a_newcomer_and_its_holders_go_on() {
    let (mut etcd, opts) = private_namespace("5-7");
    let layout = Layout::leaf().unwrap();
    let (a, gen_a) = start_fenced(opts.clone()).await;
    let (b, gen_b) = start_fenced(EtcdOptions {
        holder: "b:1".into(),
        ..opts.clone()
    })
    .await;
    assert_eq!((a.assignment.worker_id, b.assignment.worker_id), (5, 6));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (gen_a, gen_b) = (std::sync::Arc::new(gen_a), std::sync::Arc::new(gen_b));
    let loads = [
        load(std::sync::Arc::clone(&gen_a), std::sync::Arc::clone(&stop)),
        load(std::sync::Arc::clone(&gen_b), std::sync::Arc::clone(&stop)),
    ];
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (lease_a, lease_b) = (a.holder.lease_id(), b.holder.lease_id());
    // etcd comes back with nothing: no marks, no claims, no namespace record.
    etcd.restart_empty();
    // A newcomer at once: the namespace is unknown, so every id is fenced past the reservation
    // a forgotten holder may still be issuing under.
    let newcomer = EtcdOptions {
        holder: "c:1".into(),
        ..opts.clone()
    };
    let refused = EtcdWorkerIdAssigner::new(newcomer.clone())
        .start(&layout)
        .await
        .unwrap_err();
    assert!(
        matches!(refused, EtcdError::NamespaceFenced { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("uidgen etcd init"),
        "{refused}"
    );
    // The holders see their lease gone and take their ids up again, without a gap.
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.holder.lease_id() == lease_a || b.holder.lease_id() == lease_b {
        assert!(
            Instant::now() < deadline,
            "{:?} {:?}",
            a.holder.status(),
            b.holder.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for held in [&a, &b] {
        let status = held.holder.status();
        assert!(status.health.lost.is_none(), "{status:?}");
        let reports = uidgen_worker::WorkerKeeper::status(&held.holder)
            .reports
            .unwrap();
        assert_eq!(reports.reestablished, 1, "{status:?}");
        assert!(reports.data_losses >= 1, "{status:?}");
    }
    // Once the fence has passed, the newcomer takes the one id nobody holds.
    let c = start_after_the_fence(&newcomer, &layout).await;
    assert_eq!(c.assignment.worker_id, 7);
    let gen_c = SnowflakeGenerator::new(layout, 7, SystemClock)
        .unwrap()
        .fenced(c.assignment.fence.clone().unwrap());
    let mut ids = gen_c.next_ids(1_000).unwrap();
    // SeqCst: a test flag.
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for load in loads {
        let (issued, error) = load.await.unwrap();
        assert!(error.is_none(), "a holder stopped: {error:?}");
        assert!(!issued.is_empty());
        ids.extend(issued);
    }
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
    eprintln!("etcd emptied under load: {} IDs, 0 duplicates", ids.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_prefix_is_fenced_until_declared_new_and_a_used_one_cannot_be() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let layout = Layout::leaf().unwrap();
    let mut opts = options(&endpoint, &prefix, "first:1");
    opts.reservation = Duration::from_secs(600);
    // Nothing under the prefix: a new namespace or an emptied one, which a start cannot tell
    // apart, so it waits out the reservation.
    let refused = EtcdWorkerIdAssigner::new(opts.clone())
        .start(&layout)
        .await
        .unwrap_err();
    let EtcdError::NamespaceFenced {
        origin, floor_ms, ..
    } = &refused
    else {
        panic!("{refused}")
    };
    assert_eq!(*origin, uidgen_worker::Origin::UnknownPast);
    let now = uidgen_core::Clock::now_millis(&SystemClock);
    assert!(*floor_ms >= now + 590_000, "{refused}");
    for words in ["uidgen etcd init", "s from now", "never issued an ID"] {
        assert!(refused.to_string().contains(words), "{words}: {refused}");
    }
    // The operator declares it new: starts go at once, and twice is harmless.
    let assigner = EtcdWorkerIdAssigner::new(opts.clone());
    let record = assigner.init_namespace().await.unwrap();
    assert_eq!(record.origin, uidgen_worker::Origin::Init);
    assert_eq!(assigner.init_namespace().await.unwrap(), record);
    let held = assigner.start(&layout).await.unwrap();
    held.holder.release().await.unwrap();
    // Now it records an id: not new any more.
    let other = EtcdWorkerIdAssigner::new(EtcdOptions {
        prefix: test_prefix(),
        ..opts.clone()
    });
    etcd_put(
        &endpoint,
        &format!("{}/marks/3", other.options().prefix),
        b"{}",
    )
    .await;
    let refused = other.init_namespace().await.unwrap_err();
    assert!(matches!(refused, EtcdError::NotNew { .. }), "{refused}");
    assert!(refused.to_string().contains("marks"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_an_earlier_uidgen_wrote_is_adopted_with_its_marks() {
    let endpoint = test_endpoint();
    let prefix = test_prefix();
    let layout = Layout::leaf().unwrap();
    let now = uidgen_core::Clock::now_millis(&SystemClock);
    // What an earlier uidgen leaves: a mark of id 0 reserved 2 s ahead, no namespace record.
    let mark = uidgen_etcd::Record {
        holder: "old:1".into(),
        life: 9,
        timestamp: now,
        reserved_until: now + 2_000,
    };
    etcd_put(&endpoint, &format!("{prefix}/marks/0"), &mark.to_json()).await;
    let held = EtcdWorkerIdAssigner::new(options(&endpoint, &prefix, "new:1"))
        .start(&layout)
        .await
        .unwrap();
    // Id 0 is within the start wait of its mark: taken above it, not fenced by the namespace.
    assert_eq!(held.assignment.worker_id, 0);
    assert!(held.holder.floor_ms() >= mark.reserved_until);
    held.holder.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_from_an_older_snapshot_is_seen_by_a_holder_and_fences_the_forgotten_ids() {
    let (mut etcd, opts) = private_namespace("5-6");
    let layout = Layout::leaf().unwrap();
    let (a, gen_a) = start_fenced(opts.clone()).await;
    assert_eq!(a.assignment.worker_id, 5);
    let mut ids = gen_a.next_ids(1_000).unwrap();
    let snapshot = etcd.snapshot();
    etcd.restart();
    // After the snapshot: b takes id 6, issues, and stops; only the live etcd records it.
    let b_opts = EtcdOptions {
        holder: "b:1".into(),
        ..opts.clone()
    };
    let (b, gen_b) = start_fenced(b_opts.clone()).await;
    assert_eq!(b.assignment.worker_id, 6);
    ids.extend(gen_b.next_ids(2_000).unwrap());
    b.holder.release().await.unwrap();
    // a must have seen the history the restore forgets: an answer carrying a revision above
    // the snapshot's, from a round begun after b's writes. A holder that saw nothing newer
    // cannot tell a restore from a quiet spell (the operator's `uidgen etcd recover` is for
    // that case); a round every lease_ttl/3 came after b only by luck, which CI once lacked.
    let released = uidgen_core::Clock::now_millis(&SystemClock);
    let deadline = Instant::now() + Duration::from_secs(10);
    while a.holder.status().health.last_report_ms <= Some(released) {
        assert!(Instant::now() < deadline, "{:?}", a.holder.status());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // etcd is rolled back: id 6 has no mark again, and the namespace record is the old one.
    etcd.restore(&snapshot);
    // The surviving holder sees the revision go back and fences every id marked before.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let reports = uidgen_worker::WorkerKeeper::status(&a.holder)
            .reports
            .unwrap();
        if reports.data_losses > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{:?}", a.holder.status());
        ids.extend(gen_a.next_ids(100).unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let refused = EtcdWorkerIdAssigner::new(EtcdOptions {
        holder: "c:1".into(),
        ..opts.clone()
    })
    .start(&layout)
    .await
    .unwrap_err();
    let EtcdError::NamespaceFenced { origin, .. } = &refused else {
        panic!("{refused}")
    };
    assert_eq!(*origin, uidgen_worker::Origin::DataLoss);
    assert!(refused.to_string().contains("went back"), "{refused}");
    // The holder keeps issuing throughout; after the fence id 6 goes above what b stamped.
    ids.extend(gen_a.next_ids(1_000).unwrap());
    let c = start_after_the_fence(&b_opts, &layout).await;
    assert_eq!(c.assignment.worker_id, 6);
    let gen_c = SnowflakeGenerator::new(layout, 6, SystemClock)
        .unwrap()
        .fenced(c.assignment.fence.clone().unwrap());
    ids.extend(gen_c.next_ids(2_000).unwrap());
    assert!(a.holder.check().is_ok(), "{:?}", a.holder.status());
    assert_eq!(duplicates(&ids), 0, "of {} IDs", ids.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_fences_every_id_marked_before_it() {
    let endpoint = test_endpoint();
    let prefix = test_namespace(&endpoint);
    let layout = Layout::leaf().unwrap();
    let opts = ranged(&endpoint, &prefix, "a:1", "0-1");
    let held = hold(&opts, &layout).await;
    let assigner = EtcdWorkerIdAssigner::new(opts.clone());
    let record = assigner
        .recover_namespace("restored from last night's snapshot")
        .await
        .unwrap();
    assert_eq!(record.origin, uidgen_worker::Origin::DataLoss);
    // Id 1 has no mark, id 0's mark predates the record: both fenced; the holder of 0 goes on.
    let refused = assigner.start(&layout).await.unwrap_err();
    assert!(
        refused.to_string().contains("last night's snapshot"),
        "{refused}"
    );
    assert!(held.holder.check().is_ok());
    // init refuses to undo a recorded loss.
    let refused = assigner.init_namespace().await.unwrap_err();
    assert!(matches!(refused, EtcdError::NotNew { .. }), "{refused}");
    held.holder.release().await.unwrap();
}

/// Start `options` once the namespace fence lets it in, retrying while it is refused for it
/// (for at most a minute).
async fn start_after_the_fence(options: &EtcdOptions, layout: &Layout) -> EtcdAssignment {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match EtcdWorkerIdAssigner::new(options.clone())
            .start(layout)
            .await
        {
            Ok(held) => return held,
            Err(EtcdError::NamespaceFenced { .. }) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[tokio::test]
async fn a_registered_assigner_records_its_range_before_it_claims_and_claims_none_when_refused() {
    let endpoint = test_endpoint();
    let prefix = test_namespace(&endpoint);
    let mut opts = options(&endpoint, &prefix, "a:1");
    let range = WorkerIdRange::new(924, 1023).unwrap();
    opts.range = Some(range);
    let layout = Layout::leaf().unwrap();

    // Another assigner on the store holds part of the range: refused, nothing claimed.
    let refusing = RecordingRegistry::taken(WorkerIdRange::new(1000, 1023).unwrap());
    let refused = EtcdWorkerIdAssigner::new(opts.clone())
        .registered_in(refusing.clone())
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(refused.to_string().contains("overlaps"), "{refused}");
    assert_eq!(refusing.asked(), vec![("etcd".to_owned(), range)]);
    let assigner = EtcdWorkerIdAssigner::new(opts.clone());
    assert!(
        assigner.marks().await.unwrap().is_empty(),
        "a refused start claimed an id"
    );

    // Through the trait, as the service takes it: recorded under the assigner's own name.
    let registry = RecordingRegistry::default();
    let assigned = EtcdWorkerIdAssigner::new(opts)
        .registered_in(registry.clone())
        .assign(&layout)
        .await
        .unwrap();
    assert_eq!(assigned.worker_id, 924);
    assert_eq!(
        registry.asked(),
        vec![(EtcdWorkerIdAssigner::REGISTRY_NAME.to_owned(), range)]
    );
    assigned.keeper.unwrap().release().await.unwrap();
}

/// An ID space's order mark in etcd only rises, as every keeper's must
/// (`check_order_marks_only_rise`: concurrent raises leave the highest, a lower raise changes
/// nothing, spaces, even ones with `/` in the name, keep marks of their own).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_mark_in_etcd_only_rises_under_concurrent_raises() {
    let options = EtcdOptions::new([test_endpoint()], test_prefix(), "test");
    let marks = uidgen_etcd::EtcdOrderMarks::new(&options).unwrap();
    uidgen_worker::testing::check_order_marks_only_rise(std::sync::Arc::new(marks)).await;
}
