//! `uidgen-client` against real `uidgen serve` processes on one PostgreSQL database: failover
//! under `kill -9` and SIGTERM, the embedded fallback, the typed all-down error, and segment
//! leases that never overlap.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::{cluster, common};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{Cluster, TAG, assert_from_server, builder, vesta};
use common::assert_unique;
use uidgen_client::{Client, ClientError, FallbackOptions};

/// The explicit fallback worker id of the clash tests (its servers lease no fallback ids).
const FALLBACK_WORKER: u64 = 900;

/// `[start, end)` leased over HTTP.
async fn http_lease(http: &reqwest::Client, base: &str, size: u64) -> (u64, u64) {
    let url = format!("{base}/v1/segments/{TAG}/lease?size={size}");
    let response = http.post(&url).send().await.unwrap();
    let status = response.status();
    let body = response.text().await.unwrap();
    assert!(status.is_success(), "{url}: {status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    (v["start"].as_u64().unwrap(), v["end"].as_u64().unwrap())
}

/// 8 tasks take IDs and segment numbers from one client for 10 s while one server is killed
/// with -9 and another gets SIGTERM, then both come back; a second client and the HTTP lease
/// route take segment numbers meanwhile. No caller sees an error (a server is always up), no
/// ID and no segment number comes back twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn client_rides_out_kill_and_sigterm_without_errors_or_duplicates() {
    let mut cluster = Cluster::start(3, "vesta_max_peak", &[]).await;
    let client = builder(cluster.peers()).connect().await.unwrap();
    let other = builder(cluster.peers()).connect().await.unwrap();
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let deadline = Instant::now() + Duration::from_secs(10);

    let mut tasks = Vec::new();
    for task in 0..8u64 {
        let (client, errors) = (client.clone(), Arc::clone(&errors));
        tasks.push(tokio::spawn(async move {
            let segment = client.segment(TAG).unwrap();
            let (mut ids, mut numbers) = (Vec::new(), Vec::new());
            let mut i = 0u64;
            while Instant::now() < deadline {
                i += 1;
                let result = if (task + i).is_multiple_of(4) {
                    segment.next().await.map(|n| numbers.push(n))
                } else {
                    client.next_id().await.map(|id| ids.push(id))
                };
                if let Err(error) = result {
                    errors.lock().unwrap().push(error.to_string());
                }
                if i.is_multiple_of(256) {
                    tokio::task::yield_now().await;
                }
            }
            (ids, numbers)
        }));
    }
    // The second client and the HTTP route lease from the same tag at a slower pace.
    let side = {
        let (other, errors) = (other.clone(), Arc::clone(&errors));
        let bases: Vec<String> = (0..3).map(|i| cluster.http_base(i)).collect();
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            let segment = other.segment(TAG).unwrap();
            let (mut numbers, mut ranges) = (Vec::new(), Vec::new());
            let mut round = 0usize;
            while Instant::now() < deadline {
                round += 1;
                for _ in 0..50 {
                    match segment.next().await {
                        Ok(n) => numbers.push(n),
                        Err(error) => errors.lock().unwrap().push(error.to_string()),
                    }
                }
                // Whichever server answers: some are down on purpose meanwhile.
                for offset in 0..bases.len() {
                    let base = &bases[(round + offset) % bases.len()];
                    let url = format!("{base}/v1/segments/{TAG}/lease?size=7");
                    if let Ok(response) = http.post(&url).send().await
                        && response.status().is_success()
                    {
                        let v: serde_json::Value = response.json().await.unwrap();
                        ranges.push((v["start"].as_u64().unwrap(), v["end"].as_u64().unwrap()));
                        break;
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            (numbers, ranges)
        })
    };

    let workers_before: Vec<u64> = (0..3).map(|i| cluster.worker_id(i)).collect();
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.kill(0).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.terminate(1).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restart(0).await;
    cluster.restart(1).await;
    let workers_after = [cluster.worker_id(0), cluster.worker_id(1)];

    let (mut ids, mut numbers) = (Vec::new(), Vec::new());
    for task in tasks {
        let (i, n) = task.await.unwrap();
        ids.extend(i);
        numbers.extend(n);
    }
    let (side_numbers, ranges) = side.await.unwrap();
    let errors = errors.lock().unwrap().clone();
    assert!(
        errors.is_empty(),
        "{} errors reached callers while a server was up, first: {}",
        errors.len(),
        errors[0]
    );
    assert!(!ranges.is_empty(), "no lease over HTTP succeeded");
    let id_count = ids.len();
    let ids = assert_unique(ids);
    // Every ID came from a server (no fallback configured), stamped with a server's worker id.
    let layout = vesta();
    let servers: HashSet<u64> = workers_before
        .iter()
        .chain(&workers_after)
        .copied()
        .collect();
    for id in &ids {
        assert_from_server(*id, &servers);
    }
    // The restarted servers issued to this client again.
    let seen: HashSet<u64> = ids
        .iter()
        .map(|id| layout.decompose(*id).unwrap().worker)
        .collect();
    assert!(
        workers_after.iter().any(|w| seen.contains(w)),
        "no ID from a restarted server (workers {workers_after:?}, seen {seen:?})"
    );
    // Segment numbers of both clients and the HTTP leases never overlap.
    let mut all = numbers;
    all.extend(side_numbers);
    for (start, end) in &ranges {
        all.extend(*start..*end);
    }
    let number_count = all.len();
    assert_unique(all);
    eprintln!(
        "{id_count} IDs, {number_count} segment numbers, {} HTTP leases",
        ranges.len()
    );
}

/// Take IDs from `client` into `ids` until `n` of them carry a worker id that `from`
/// accepts, failing on any error or after 60 s.
async fn take_until(client: &Client, ids: &mut Vec<u64>, n: usize, from: impl Fn(u64) -> bool) {
    let (layout, mut count) = (vesta(), 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while count < n {
        assert!(Instant::now() < deadline, "{count} of {n} IDs within 60 s");
        let id = client.next_id().await.unwrap();
        ids.push(id);
        if from(layout.decompose(id).unwrap().worker) {
            count += 1;
        }
    }
}

/// Every server down: the fallback issues (the worker id the server leased it, from the
/// embedded range, genMethod 0); a server back: the client takes its IDs again (its new worker
/// id, from the server range, genMethod 1 or 2). No ID twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fallback_issues_while_every_server_is_down_and_the_client_switches_back() {
    let mut cluster = Cluster::start(1, "vesta_max_peak", &[]).await;
    let state = tempfile::tempdir().unwrap();
    let client = builder(cluster.peers())
        .fallback(FallbackOptions::leased(vesta(), state.path()))
        .connect()
        .await
        .unwrap();
    let layout = vesta();
    let first_worker = cluster.worker_id(0);
    assert!((924..=1023).contains(&first_worker), "Vesta's server range");
    let fallback_worker = client.fallback_worker_id().unwrap();
    assert!(fallback_worker <= 923, "Vesta's embedded range");
    let mut ids = Vec::new();
    take_until(&client, &mut ids, 2_000, |_| true).await;

    cluster.kill(0).await;
    take_until(&client, &mut ids, 5_000, |w| w == fallback_worker).await;
    assert!(client.all_peers_down());

    cluster.restart(0).await;
    let second_worker = cluster.worker_id(0);
    assert_ne!(
        first_worker, second_worker,
        "a disposable worker id is fresh per start"
    );
    take_until(&client, &mut ids, 2_000, |w| w == second_worker).await;

    let mut by_source = [0usize; 3];
    for id in &ids {
        let parts = layout.decompose(*id).unwrap();
        if parts.worker == fallback_worker {
            assert_eq!(parts.method, 0, "fallback ID {id} must say genMethod 0");
            by_source[1] += 1;
        } else {
            assert_from_server(*id, &HashSet::from([first_worker, second_worker]));
            by_source[if parts.worker == first_worker { 0 } else { 2 }] += 1;
        }
    }
    assert!(by_source.iter().all(|n| *n > 0), "{by_source:?}");
    assert_unique(ids);
}

/// Without a fallback, every server down is `AllPeersDown`, naming the peers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_fallback_every_server_down_is_a_typed_error_naming_the_peers() {
    let mut cluster = Cluster::start(1, "vesta_max_peak", &[]).await;
    let client = builder(vec![cluster.grpc_peer(0), cluster.http_peer(0)])
        .connect()
        .await
        .unwrap();
    client.next_id().await.unwrap();
    cluster.kill(0).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        assert!(Instant::now() < deadline, "the buffer never ran dry");
        match client.next_id().await {
            Ok(_) => {}
            Err(error) => break error,
        }
    };
    match &error {
        ClientError::AllPeersDown { peers, .. } => {
            assert!(peers.contains(&cluster.http_base(0)), "{error}");
            assert!(
                peers.contains(&format!("127.0.0.1:{}", cluster.nodes[0].grpc)),
                "{error}"
            );
        }
        other => panic!("expected AllPeersDown, got {other:?}"),
    }
    let segment = client.segment(TAG).unwrap();
    assert!(
        matches!(
            segment.next().await,
            Err(ClientError::SegmentPeersDown { .. })
        ),
        "segment numbers have no fallback"
    );
}

/// A fallback whose layout differs from the servers', or whose worker id a server stamps,
/// is refused at connect with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_that_clashes_with_a_server_is_refused() {
    let state = tempfile::tempdir().unwrap();
    let baidu = Cluster::start(1, "baidu", &[]).await;
    let fallback = FallbackOptions::leased(vesta(), state.path());
    let refused = builder(vec![baidu.grpc_peer(0)])
        .fallback(fallback)
        .connect()
        .await;
    assert!(
        matches!(refused, Err(ClientError::LayoutMismatch { .. })),
        "{refused:?}"
    );
    drop(baidu);

    let worker = FALLBACK_WORKER.to_string();
    let server_state = state.path().join("server.state");
    let clash = Cluster::start(
        1,
        "vesta_max_peak",
        &[
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", &worker),
            ("UIDGEN_WORKER_RANGE", "0-max"),
            ("UIDGEN_WORKER_FALLBACK_RANGE", "off"),
            ("UIDGEN_WORKER_STATE_FILE", server_state.to_str().unwrap()),
        ],
    )
    .await;
    let fallback =
        FallbackOptions::explicit(vesta(), FALLBACK_WORKER, state.path().join("b.state"));
    let refused = builder(vec![clash.grpc_peer(0)])
        .fallback(fallback)
        .connect()
        .await;
    assert!(
        matches!(
            refused,
            Err(ClientError::FallbackWorkerConflict {
                worker_id: FALLBACK_WORKER,
                ..
            })
        ),
        "{refused:?}"
    );

    // Over HTTP there is no GetInfo: the clash shows in the first batch's IDs, which stay
    // good (the server issued them), and the fallback is off for good from then on.
    let mut clash = clash;
    let fallback =
        FallbackOptions::explicit(vesta(), FALLBACK_WORKER, state.path().join("c.state"));
    let client = builder(vec![clash.http_peer(0)])
        .fallback(fallback)
        .connect()
        .await
        .unwrap();
    let first = client.next_id().await.unwrap();
    assert_eq!(vesta().decompose(first).unwrap().method, 2);
    clash.kill(0).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let error = loop {
        assert!(Instant::now() < deadline, "the buffer never ran dry");
        if let Err(error) = client.next_id().await {
            break error;
        }
    };
    assert!(
        matches!(
            error,
            ClientError::FallbackWorkerConflict {
                worker_id: FALLBACK_WORKER,
                ..
            }
        ),
        "{error:?}"
    );
}

/// Leases from two clients, over gRPC and HTTP, and from the HTTP route, across a server
/// restart, never overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_ranges_never_overlap_across_clients_routes_and_a_restart() {
    let mut cluster = Cluster::start(1, "vesta_max_peak", &[]).await;
    let grpc = builder(vec![cluster.grpc_peer(0)]).connect().await.unwrap();
    let http_client = builder(vec![cluster.http_peer(0)]).connect().await.unwrap();
    let http = reqwest::Client::new();
    let mut numbers = Vec::new();
    for round in 0..2 {
        for _ in 0..1_000 {
            numbers.push(grpc.next_segment_id(TAG).await.unwrap());
            numbers.push(http_client.next_segment_id(TAG).await.unwrap());
        }
        let (start, end) = http_lease(&http, &cluster.http_base(0), 50).await;
        assert_eq!(end - start, 50);
        numbers.extend(start..end);
        if round == 0 {
            cluster.terminate(0).await;
            cluster.restart(0).await;
        }
    }
    assert_unique(numbers);
}

/// Masked texts through the client (issue 33), from gRPC and HTTP peers alike: none alike, each
/// unmasked by another server of the cluster (they share the keys) to an ID of the server's
/// worker. A cluster without keys refuses `masked` as a wrong request, not as an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_takes_masked_texts_from_grpc_and_http_peers() {
    let keys = "1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
    let cluster = Cluster::start(2, "baidu", &[("UIDGEN_MASK_KEYS", keys)]).await;
    let http = reqwest::Client::new();
    let mut seen = HashSet::new();
    for (index, peer) in [
        (0, cluster.grpc_peer(0)),
        (0, cluster.http_peer(0)),
        (1, cluster.grpc_peer(1)),
    ] {
        let client = builder(vec![peer.clone()]).connect().await.unwrap();
        let texts = client.next_texts("masked", 300).await.unwrap();
        assert_eq!(texts.len(), 300, "{peer}");
        // Unmasked by the other server.
        let other = cluster.http_base(1 - index);
        for text in &texts[..20] {
            assert!(text.starts_with("1_"), "{peer}: {text}");
            let url = format!("{other}/v1/ids/{text}?form=masked");
            let body = http.get(&url).send().await.unwrap().text().await.unwrap();
            let decoded: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(
                decoded["text"].as_str(),
                Some(text.as_str()),
                "{url}: {body}"
            );
            assert_eq!(
                decoded["worker"].as_u64(),
                Some(cluster.worker_id(index)),
                "{body}"
            );
        }
        for text in texts {
            assert!(seen.insert(text.clone()), "{text} twice");
        }
        client.close().await;
    }
    drop(cluster);
    let keyless = Cluster::start(1, "baidu", &[]).await;
    let client = builder(vec![keyless.grpc_peer(0)]).connect().await.unwrap();
    match client.next_texts("masked", 3).await {
        Err(ClientError::Refused { message, .. }) => {
            assert!(message.contains("mask.keys"), "{message}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(!client.all_peers_down(), "a refusal ejects no peer");
}
