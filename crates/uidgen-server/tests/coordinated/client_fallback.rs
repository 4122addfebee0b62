//! The client's leased fallback (issue 18) against real `uidgen serve` processes: client
//! processes in their own working directories get distinct fallback leases and fall back
//! together with no equal IDs; a second process of one application starts beside the first;
//! no lease, no fallback; an expired lease stops it; a lease taken over is given up; claims
//! racing through several servers on PostgreSQL and MariaDB get distinct worker ids; a client
//! restarted while no server answers continues its lease.
//!
//! The client processes are this test binary itself, started again with `--ignored --exact
//! client_process` and told what to do through `UIDGEN_TEST_CLIENT_*` variables and lines on
//! stdin ([`client_process`]).
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::{cluster, common};

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::task::block_in_place;

use cluster::{Cluster, assert_from_server, builder, vesta};
use common::{fresh_cwd, temp_dir};
use uidgen_client::{ClientError, FallbackOptions, Peer};
use uidgen_store::testing::TestDb;

/// How many IDs each client process takes from its fallback while every server is down.
const FALLBACK_IDS: usize = 20_000;

/// One client process: its stdin, and the lines it printed, as they come.
struct ClientProcess {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    out: PathBuf,
}

impl ClientProcess {
    /// Start a client process in `cwd` with `peers`, its leased fallback's state in
    /// `fallback-state` under `cwd` (a relative path: each working directory has its own);
    /// `mode` is `fallback` or `serve` (see [`client_process`]).
    fn start(cwd: &Path, peers: &[Peer], mode: &str) -> ClientProcess {
        let peers: Vec<String> = peers
            .iter()
            .map(|peer| match peer {
                Peer::Grpc(uri) => format!("grpc={uri}"),
                Peer::Http(base) => format!("http={base}"),
            })
            .collect();
        let out = temp_dir("client-out").join("ids.bin");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                &client_process_name(),
                "--nocapture",
            ])
            .current_dir(cwd)
            .env("UIDGEN_TEST_CLIENT_PEERS", peers.join(","))
            .env("UIDGEN_TEST_CLIENT_MODE", mode)
            .env("UIDGEN_TEST_CLIENT_OUT", &out)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        ClientProcess {
            child,
            stdin,
            lines,
            out,
        }
    }

    /// The words after `prefix` on the first line that starts with it (within 90 s).
    fn expect(&mut self, prefix: &str) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    // Anywhere in the line: libtest may have printed the test's name before.
                    if let Some((_, rest)) = line.split_once(prefix) {
                        return rest.split_whitespace().map(str::to_owned).collect();
                    }
                    assert!(
                        !line.contains("FAILED"),
                        "the client process failed: {line}"
                    );
                }
                Err(_) => panic!("the client process never printed `{prefix}`"),
            }
        }
    }

    fn say(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The IDs it wrote.
    fn ids(&self) -> Vec<u64> {
        std::fs::read(&self.out)
            .unwrap()
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    /// Tell it to close its client (releasing its lease) and exit; wait for that.
    fn finish(mut self) {
        self.say("exit");
        let status = self.child.wait().unwrap();
        assert!(status.success(), "the client process exited with {status}");
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// [`client_process`]'s name as libtest filters it (its module path without the binary's
/// name), for the processes that run it: derived, so that moving the file cannot break it.
fn client_process_name() -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::client_process"),
        None => "client_process".to_owned(),
    }
}

/// A client process for the tests above; it does nothing unless started by them.
///
/// It connects to `UIDGEN_TEST_CLIENT_PEERS` (`grpc=URI` and `http=URL`, comma separated)
/// with a leased fallback on the Vesta layout, its state in `./fallback-state`, and prints
/// `LEASED <worker id>` once it holds a lease. Then, in mode `fallback`, it waits for `go` on
/// stdin and takes IDs until [`FALLBACK_IDS`] of them carry its fallback worker id (the servers
/// are down by then); in mode `serve` it takes [`FALLBACK_IDS`] IDs at once. It writes every ID
/// it took to `UIDGEN_TEST_CLIENT_OUT` (little-endian u64s), prints `DONE <count>`, and on
/// `exit` closes the client and returns. A failure prints `FAILED <error>`.
#[test]
#[ignore = "a client process the other tests start; not a test of its own"]
fn client_process() {
    let Ok(peers) = std::env::var("UIDGEN_TEST_CLIENT_PEERS") else {
        return;
    };
    let mode = std::env::var("UIDGEN_TEST_CLIENT_MODE").unwrap();
    let out = std::env::var("UIDGEN_TEST_CLIENT_OUT").unwrap();
    let peers: Vec<Peer> = peers
        .split(',')
        .map(|peer| match peer.split_once('=') {
            Some(("grpc", uri)) => Peer::grpc(uri),
            Some(("http", base)) => Peer::http(base),
            _ => panic!("bad peer {peer}"),
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let stdin = std::io::stdin();
    let mut commands = stdin.lock().lines().map_while(Result::ok);
    runtime.block_on(async {
        let fallback = FallbackOptions::leased(vesta(), "fallback-state");
        let client = match builder(peers).fallback(fallback).connect().await {
            Ok(client) => client,
            Err(error) => {
                println!("FAILED {error}");
                return;
            }
        };
        let Some(worker) = client.fallback_worker_id() else {
            println!("FAILED no fallback lease after connect");
            return;
        };
        println!("LEASED {worker}");
        if mode == "fallback" {
            assert_eq!(commands.next().as_deref(), Some("go"));
        }
        let (mut ids, mut fallback_ids) = (Vec::new(), 0);
        while ids.len() < FALLBACK_IDS || (mode == "fallback" && fallback_ids < FALLBACK_IDS) {
            match client.next_id().await {
                Ok(id) => {
                    if vesta().decompose(id).unwrap().worker == worker {
                        fallback_ids += 1;
                    }
                    ids.push(id);
                }
                Err(error) => {
                    println!("FAILED {error}");
                    return;
                }
            }
        }
        let bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        std::fs::write(&out, bytes).unwrap();
        println!("DONE {}", ids.len());
        assert_eq!(commands.next().as_deref(), Some("exit"));
        client.close().await;
    });
}

/// The issue's scenario: two client processes of one application, in two working directories,
/// lose every server at once and both fall back. Each took its own worker id from the
/// cluster, so their 20,000 fallback IDs each have no ID in common. Then a second process of
/// the first application starts on the same host, in the same directory, while the first
/// still holds its fallback lease and state file: it starts, takes its own lease and serves
/// from the servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_processes_falling_back_together_never_issue_equal_ids() {
    let mut cluster = Cluster::start(2, "vesta_max_peak", &[]).await;
    let peers = cluster.peers();
    let (cwd_a, cwd_b) = (fresh_cwd(), fresh_cwd());
    let mut a = ClientProcess::start(&cwd_a, &peers, "fallback");
    let mut b = ClientProcess::start(&cwd_b, &peers, "fallback");
    let (wa, wb): (u64, u64) = block_in_place(|| {
        (
            a.expect("LEASED ")[0].parse().unwrap(),
            b.expect("LEASED ")[0].parse().unwrap(),
        )
    });
    assert_ne!(wa, wb, "two client processes were leased one worker id");
    assert!(
        wa <= 923 && wb <= 923,
        "outside Vesta's embedded range: {wa}, {wb}"
    );
    let state_a = cwd_a.join("fallback-state");
    assert!(state_a.join(format!("fallback-{wa}.state")).exists());

    // Every server goes away at once; both processes fall back at once.
    cluster.kill_all().await;
    block_in_place(|| {
        a.say("go");
        b.say("go");
        a.expect("DONE ");
        b.expect("DONE ");
    });
    let (ids_a, ids_b) = (a.ids(), b.ids());
    let layout = vesta();
    for (ids, worker) in [(&ids_a, wa), (&ids_b, wb)] {
        let fallback: Vec<_> = ids
            .iter()
            .map(|id| layout.decompose(*id).unwrap())
            .filter(|parts| parts.worker == worker)
            .collect();
        assert!(fallback.len() >= 20_000, "{} fallback IDs", fallback.len());
        assert!(
            fallback.iter().all(|parts| parts.method == 0),
            "genMethod 0"
        );
    }
    let set_a: HashSet<u64> = ids_a.iter().copied().collect();
    let equal = ids_b.iter().filter(|id| set_a.contains(id)).count();
    assert_eq!(equal, 0, "{equal} IDs issued by both processes");
    common::assert_unique(ids_a.iter().chain(&ids_b).copied().collect());

    // A second process of the first application, same host and directory, while the first
    // holds its lease and state file: it starts and serves from the servers.
    cluster.restart(0).await;
    let server = cluster.worker_id(0);
    let peers = cluster.peers();
    let mut c = ClientProcess::start(&cwd_a, &peers, "serve");
    let wc: u64 = block_in_place(|| {
        let wc = c.expect("LEASED ")[0].parse().unwrap();
        c.expect("DONE ");
        wc
    });
    assert!(
        wc != wa && wc != wb,
        "a live lease ({wa}, {wb}) was leased again: {wc}"
    );
    assert!(
        state_a.join(format!("fallback-{wa}.state")).exists(),
        "the first process's lease"
    );
    let ids_c = c.ids();
    for id in &ids_c {
        assert_from_server(*id, &HashSet::from([server]));
    }
    common::assert_unique(ids_a.iter().chain(&ids_b).chain(&ids_c).copied().collect());
    eprintln!(
        "fallback workers {wa} and {wb}: {} and {} IDs, 0 equal; the second process: {} IDs \
         from worker {server}",
        ids_a.len(),
        ids_b.len(),
        ids_c.len()
    );
    block_in_place(|| {
        a.finish();
        b.finish();
        c.finish();
    });
    // Closed clients gave their leases back and deleted their state files.
    assert!(!state_a.join(format!("fallback-{wa}.state")).exists());
}

/// Issue 36, point 4: a client process falling back (every server down) is restarted the way
/// a supervisor does, the new process started while the old one is being killed, and no server
/// answers. The new process continues the old one's lease (the same worker id, recorded in
/// its state directory), takes its 20,000 IDs from it without one failed call (a failure
/// prints `FAILED`, which `expect` refuses), and no ID is issued by both processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_restarted_while_no_server_answers_continues_its_lease() {
    let mut cluster = Cluster::start(1, "vesta_max_peak", &[]).await;
    let peers = cluster.peers();
    let cwd = fresh_cwd();
    let mut old = ClientProcess::start(&cwd, &peers, "fallback");
    let worker: u64 = block_in_place(|| old.expect("LEASED ")[0].parse().unwrap());
    cluster.kill_all().await;
    block_in_place(|| {
        old.say("go");
        old.expect("DONE ");
    });
    let old_ids = old.ids();
    let state = cwd.join("fallback-state");
    assert!(state.join(format!("fallback-{worker}.state")).exists());

    let mut new = ClientProcess::start(&cwd, &peers, "fallback");
    drop(old); // kill -9, while the new process starts
    let (continued, new_ids) = block_in_place(|| {
        let continued: u64 = new.expect("LEASED ")[0].parse().unwrap();
        new.say("go");
        new.expect("DONE ");
        (continued, new.ids())
    });
    assert_eq!(continued, worker, "the old process's lease");
    let layout = vesta();
    let from_lease = new_ids
        .iter()
        .filter(|id| layout.decompose(**id).unwrap().worker == worker)
        .count();
    assert!(
        from_lease >= FALLBACK_IDS,
        "{from_lease} IDs from the lease"
    );
    let old_set: HashSet<u64> = old_ids.iter().copied().collect();
    let equal = new_ids.iter().filter(|id| old_set.contains(id)).count();
    assert_eq!(equal, 0, "{equal} IDs issued by both processes");
    common::assert_unique(old_ids.iter().chain(&new_ids).copied().collect());
    eprintln!(
        "worker {worker}: {} IDs before the restart, {} after, 0 equal",
        old_ids.len(),
        new_ids.len()
    );
    block_in_place(|| new.finish());
}

/// Servers that lease no fallback ids (a layout without a default embedded range, none
/// configured): the client gets no lease, and when they are all down it has no fallback, with
/// an error naming the key to set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_lease_ever_obtained_means_no_fallback() {
    let mut cluster = Cluster::start(1, "snowflake", &[]).await;
    let state = tempfile::tempdir().unwrap();
    let layout = uidgen_core::Layout::snowflake().unwrap();
    let client = builder(cluster.peers())
        .fallback(FallbackOptions::leased(layout, state.path()))
        .connect()
        .await
        .unwrap();
    assert_eq!(client.fallback_worker_id(), None);
    client.next_id().await.unwrap();
    // Killed perhaps while a new claim is in flight: the error then says no server answered,
    // and still carries what the last server to answer said of the lease.
    cluster.kill(0).await;
    let error = drain_until_error(&client).await;
    match &error {
        ClientError::NoFallbackLease { reason, .. } => {
            assert!(reason.contains("worker.fallback_range"), "{error}");
        }
        other => panic!("expected NoFallbackLease, got {other:?}"),
    }
}

/// Take IDs until a call fails (within 60 s); the error.
async fn drain_until_error(client: &uidgen_client::Client) -> ClientError {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "no error within 60 s");
        if let Err(error) = client.next_id().await {
            return error;
        }
    }
}

/// A short lease: once every server is down, the fallback issues only until the lease's last
/// confirmed `valid_until`, then refuses with `FallbackLeaseExpired`; every fallback ID's time
/// unit ends by that instant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_stops_when_its_lease_runs_out() {
    let mut cluster = Cluster::start(1, "vesta_max_peak", &[]).await;
    let state = tempfile::tempdir().unwrap();
    let client = builder(cluster.peers())
        .fallback(FallbackOptions::leased(vesta(), state.path()).ttl(Duration::from_secs(3)))
        .connect()
        .await
        .unwrap();
    let worker = client.fallback_worker_id().unwrap();
    client.next_id().await.unwrap();
    cluster.kill(0).await;
    let layout = vesta();
    let (mut fallback_ids, mut max_unit_end) = (0u64, 0u64);
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        assert!(Instant::now() < deadline, "the fallback never stopped");
        match client.next_id().await {
            Ok(id) => {
                let parts = layout.decompose(id).unwrap();
                if parts.worker == worker {
                    fallback_ids += 1;
                    max_unit_end = max_unit_end.max(layout.millis_of(parts.time + 1));
                }
            }
            Err(error) => break error,
        }
    };
    let valid_until = match error {
        ClientError::FallbackLeaseExpired {
            worker_id,
            valid_until_ms,
            ..
        } => {
            assert_eq!(worker_id, worker);
            valid_until_ms
        }
        other => panic!("expected FallbackLeaseExpired, got {other:?}"),
    };
    assert!(fallback_ids > 0, "the fallback never issued");
    assert!(
        max_unit_end <= valid_until,
        "an ID's unit ends at {max_unit_end}, past the lease's {valid_until}"
    );
    // It stays stopped while no server answers.
    assert!(matches!(
        client.next_id().await,
        Err(ClientError::FallbackLeaseExpired { .. })
    ));
    eprintln!("{fallback_ids} fallback IDs until the lease ran out at {valid_until} ms");
}

/// A lease that ran out while the client could not reach its servers is taken over through
/// a server the client does not know; when the client's server is back, its renewal is refused
/// as lost: it gives the worker id up (its state file too) and issues nothing under it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_after_a_takeover_fails_and_the_client_stops_falling_back() {
    // One fallback id only, so the takeover must take the client's.
    let mut cluster = Cluster::start(
        1,
        "vesta_max_peak",
        &[("UIDGEN_WORKER_FALLBACK_RANGE", "7")],
    )
    .await;
    let state = tempfile::tempdir().unwrap();
    let client = builder(vec![cluster.grpc_peer(0), cluster.http_peer(0)])
        .fallback(FallbackOptions::leased(vesta(), state.path()).ttl(Duration::from_secs(2)))
        .connect()
        .await
        .unwrap();
    assert_eq!(client.fallback_worker_id(), Some(7));
    let file = state.path().join("fallback-7.state");
    assert!(file.exists());
    cluster.kill(0).await;

    // Another server on the store, unknown to the client, leases id 7 once it has expired.
    let other = cluster.add_node();
    cluster.restart(other).await;
    let http = reqwest::Client::new();
    let url = format!("{}/v1/fallback/leases", cluster.http_base(other));
    let deadline = Instant::now() + Duration::from_secs(60);
    let intruder = loop {
        assert!(
            Instant::now() < deadline,
            "the client's lease never expired"
        );
        let response = http
            .post(&url)
            .json(&serde_json::json!({"holder": "intruder", "ttl_ms": 600_000}))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.unwrap();
        match status {
            200 => break body,
            409 => assert_eq!(body["code"], "fallback_range_full", "{body}"),
            _ => panic!("{status} {body}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(intruder["worker_id"], 7);
    // Meanwhile the client's fallback ran out with its lease.
    let error = drain_until_error(&client).await;
    assert!(
        matches!(
            error,
            ClientError::FallbackLeaseExpired { worker_id: 7, .. }
        ),
        "{error:?}"
    );

    // The client's server is back: its next renewal is refused, and it gives the id up.
    cluster.restart(0).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while client.fallback_worker_id().is_some() {
        assert!(
            Instant::now() < deadline,
            "the client kept a lease that was taken over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!file.exists(), "the lost lease's state file is still there");
    // Killed perhaps while a new claim is in flight: the error then says no server answered,
    // and still carries what the last server to answer said of the lease.
    cluster.kill(0).await;
    let error = drain_until_error(&client).await;
    match &error {
        ClientError::NoFallbackLease { reason, .. } => {
            assert!(
                reason.contains("was lost")
                    || reason.contains("fallback_range_full")
                    || reason.contains("leased by a live client"),
                "{error}"
            );
        }
        other => panic!("expected NoFallbackLease, got {other:?}"),
    }
}

/// Fallback claims racing through three servers (over HTTP and gRPC) on one database get
/// distinct worker ids, on PostgreSQL and on MariaDB; one claim more than the range holds is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_through_several_servers_get_distinct_ids_on_postgres() {
    racing_claims(TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_claims_through_several_servers_get_distinct_ids_on_mariadb() {
    racing_claims(TestDb::MySql).await;
}

async fn racing_claims(db: TestDb) {
    const RANGE: u64 = 30;
    let cluster = Cluster::start_on(
        db,
        3,
        "vesta_max_peak",
        &[("UIDGEN_WORKER_FALLBACK_RANGE", "100-129")],
    )
    .await;
    let mut tasks = Vec::new();
    for i in 0..RANGE {
        let base = cluster.http_base(usize::try_from(i % 3).unwrap());
        let grpc = cluster.grpc_peer(usize::try_from(i % 3).unwrap());
        tasks.push(tokio::spawn(async move {
            if i % 2 == 0 {
                let response = reqwest::Client::new()
                    .post(format!("{base}/v1/fallback/leases"))
                    .json(&serde_json::json!({"holder": format!("racer-{i}"), "ttl_ms": 60_000}))
                    .send()
                    .await
                    .unwrap();
                let status = response.status();
                let body: serde_json::Value = response.json().await.unwrap();
                assert!(status.is_success(), "{status} {body}");
                body["worker_id"].as_u64().unwrap()
            } else {
                let Peer::Grpc(uri) = grpc else {
                    unreachable!()
                };
                let mut client = uidgen_proto::v1::id_service_client::IdServiceClient::connect(uri)
                    .await
                    .unwrap();
                let request = uidgen_proto::v1::ClaimFallbackLeaseRequest {
                    holder: format!("racer-{i}"),
                    ttl_ms: 60_000,
                };
                client
                    .claim_fallback_lease(request)
                    .await
                    .unwrap()
                    .into_inner()
                    .worker_id
            }
        }));
    }
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(task.await.unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, (100..100 + RANGE).collect::<Vec<_>>(), "{db:?}");
    let response = reqwest::Client::new()
        .post(format!("{}/v1/fallback/leases", cluster.http_base(0)))
        .json(&serde_json::json!({"holder": "late", "ttl_ms": 60_000}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 409);
    let mut grpc = uidgen_proto::v1::id_service_client::IdServiceClient::connect(format!(
        "http://127.0.0.1:{}",
        cluster.nodes[1].grpc
    ))
    .await
    .unwrap();
    let refused = grpc
        .claim_fallback_lease(uidgen_proto::v1::ClaimFallbackLeaseRequest {
            holder: "late".into(),
            ttl_ms: 60_000,
        })
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::FailedPrecondition,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("worker.fallback_range"),
        "{refused:?}"
    );
    // Out-of-bounds input is INVALID_ARGUMENT; a renewal of a lease not held is ABORTED.
    let short = grpc
        .claim_fallback_lease(uidgen_proto::v1::ClaimFallbackLeaseRequest {
            holder: "late".into(),
            ttl_ms: 999,
        })
        .await
        .unwrap_err();
    assert_eq!(short.code(), tonic::Code::InvalidArgument, "{short:?}");
    let forged = grpc
        .renew_fallback_lease(uidgen_proto::v1::RenewFallbackLeaseRequest {
            worker_id: 100,
            holder: "racer-0#0000000000000000".into(),
            ttl_ms: 60_000,
            issued_until_ms: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(forged.code(), tonic::Code::Aborted, "{forged:?}");
}
