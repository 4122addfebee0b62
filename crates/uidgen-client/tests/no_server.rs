//! What the client does with no server listening (a closed port refuses every connection):
//! option errors, the typed all-down error, the explicit fallback's IDs and state file, a
//! leased fallback that never got a lease, and a restarted leased fallback continuing the lease
//! its previous process left (issue 36, point 4).
//! The failover between live servers is tested against real `uidgen serve` processes in
//! `crates/uidgen-server/tests/client.rs`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uidgen_client::{BlockingClient, ClientBuilder, ClientError, FallbackOptions, Peer};
use uidgen_core::{Clock, DefaultUidGenerator, Layout, SystemClock, TimeFence, UidGenerator};
use uidgen_worker::{LeaseGrant, RemoteLease};

/// An address nothing listens on: a port the OS handed out and that was closed again.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", listener.local_addr().unwrap())
}

fn quick(peers: Vec<Peer>) -> ClientBuilder {
    ClientBuilder::new(peers)
        .timeout(Duration::from_millis(300))
        .backoff(Duration::from_millis(1), Duration::from_millis(5))
        .probe_interval(Duration::from_millis(50))
}

#[tokio::test]
async fn invalid_options_are_typed_errors() {
    let none = ClientBuilder::new(Vec::<Peer>::new()).connect().await;
    assert!(
        matches!(none, Err(ClientError::InvalidOption { name: "peers", .. })),
        "{none:?}"
    );
    let odd = quick(vec![Peer::http(closed_port())])
        .buffer_size(1000)
        .connect()
        .await;
    assert!(
        matches!(
            odd,
            Err(ClientError::InvalidOption {
                name: "buffer_size",
                ..
            })
        ),
        "{odd:?}"
    );
    let scheme = quick(vec![Peer::http("ftp://example.invalid")])
        .connect()
        .await;
    assert!(
        matches!(
            scheme,
            Err(ClientError::InvalidOption { name: "peers", .. })
        ),
        "{scheme:?}"
    );
    let grpc = quick(vec![Peer::grpc("not a uri")]).connect().await;
    assert!(
        matches!(grpc, Err(ClientError::InvalidOption { name: "peers", .. })),
        "{grpc:?}"
    );
}

#[tokio::test]
async fn every_peer_down_without_fallback_names_the_peers() {
    let (a, b) = (closed_port(), closed_port());
    let client = quick(vec![Peer::grpc(a.clone()), Peer::http(b.clone())])
        .connect()
        .await
        .unwrap();
    let error = client.next_id().await.unwrap_err();
    match &error {
        ClientError::AllPeersDown { peers, .. } => {
            assert!(peers.contains(&a) && peers.contains(&b), "{error}");
        }
        other => panic!("expected AllPeersDown, got {other:?}"),
    }
    assert!(client.all_peers_down());
    let bad_tag = client.segment(" orders");
    assert!(
        matches!(bad_tag, Err(ClientError::InvalidOption { name: "tag", .. })),
        "{bad_tag:?}"
    );
    let segment = client.segment("orders").unwrap().next().await;
    assert!(
        matches!(&segment, Err(ClientError::SegmentPeersDown { tag, .. }) if tag == "orders"),
        "{segment:?}"
    );
}

#[tokio::test]
async fn an_explicit_fallback_issues_with_its_worker_id_and_genmethod_0_when_every_peer_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::vesta_max_peak().unwrap();
    let state = dir.path().join("fallback-900.state");
    let explicit = || FallbackOptions::explicit(layout.clone(), 900, &state);
    let client = quick(vec![Peer::grpc(closed_port())])
        .fallback(explicit())
        .connect()
        .await
        .unwrap();
    assert_eq!(client.fallback_worker_id(), Some(900));
    // Nothing is locked before the fallback issues: a second process of the same application
    // starts side by side.
    assert!(!state.exists());
    let second = quick(vec![Peer::grpc(closed_port())])
        .fallback(explicit())
        .connect()
        .await
        .unwrap();
    let mut seen = HashSet::new();
    for _ in 0..2_000 {
        let id = client.next_id().await.unwrap();
        let parts = layout.decompose(id).unwrap();
        assert_eq!((parts.worker, parts.method), (900, 0), "ID {id}");
        assert!(seen.insert(id), "duplicate ID {id}");
    }
    // The state file is locked once the first falls back: the second is refused its fallback.
    let refused = second.next_id().await;
    assert!(
        matches!(refused, Err(ClientError::Fallback(_))),
        "{refused:?}"
    );

    // A restart reuses the worker id only above its earlier life's reserved-until mark.
    let last_time = seen
        .iter()
        .map(|id| layout.decompose(*id).unwrap().time)
        .max()
        .unwrap();
    drop(client);
    drop(second);
    let restarted = quick(vec![Peer::grpc(closed_port())])
        .fallback(explicit())
        .connect()
        .await
        .unwrap();
    let first = loop {
        // The old tasks let go of the state file once the runtime has dropped them.
        match restarted.next_id().await {
            Ok(id) => break id,
            Err(ClientError::Fallback(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(other) => panic!("{other:?}"),
        }
    };
    assert!(seen.insert(first));
    for _ in 0..2_000 {
        let id = restarted.next_id().await.unwrap();
        assert!(
            layout.decompose(id).unwrap().time > last_time,
            "ID {id} reuses a second"
        );
        assert!(seen.insert(id), "duplicate ID {id} after a restart");
    }
}

#[tokio::test]
async fn an_explicit_fallback_needs_an_absolute_state_path_and_a_worker_id_that_fits() {
    let layout = Layout::vesta_max_peak().unwrap();
    for options in [
        FallbackOptions::explicit(layout.clone(), 900, "fallback-900.state"),
        FallbackOptions::explicit(layout.clone(), 1024, "/tmp/fallback-1024.state"),
        FallbackOptions::leased(layout.clone(), "state").ttl(Duration::from_millis(10)),
        FallbackOptions::leased(layout.clone(), "state").holder(""),
    ] {
        let refused = quick(vec![Peer::grpc(closed_port())])
            .fallback(options.clone())
            .connect()
            .await;
        assert!(
            matches!(
                refused,
                Err(ClientError::InvalidOption {
                    name: "fallback",
                    ..
                })
            ),
            "{options:?}: {refused:?}"
        );
    }
}

/// No server ever answered: a leased fallback never got a worker id, so it issues nothing,
/// with an error that says why; and a state directory holding only an expired lease is no help.
#[tokio::test]
async fn a_leased_fallback_that_never_got_a_lease_does_not_issue() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::vesta_max_peak().unwrap();
    // An earlier process's lease that has expired.
    let expired = dir.path().join("fallback-4.state");
    uidgen_worker::write_cache(
        &expired,
        &uidgen_worker::CachedWorker {
            worker_id: 4,
            until_ms: 1,
            holder: Some("old/1#0000000000000001".to_owned()),
            lease_expires_ms: Some(2),
        },
    )
    .unwrap();
    let peer = closed_port();
    let client = quick(vec![Peer::grpc(peer.clone())])
        .fallback(FallbackOptions::leased(layout.clone(), dir.path()))
        .connect()
        .await
        .unwrap();
    assert_eq!(client.fallback_worker_id(), None);
    let error = client.next_id().await.unwrap_err();
    match &error {
        ClientError::NoFallbackLease { peers, reason, .. } => {
            assert!(peers.contains(&peer), "{error}");
            assert!(reason.contains("no unexpired lease"), "{error}");
        }
        other => panic!("expected NoFallbackLease, got {other:?}"),
    }
    assert!(!expired.exists(), "an expired lease's file is deleted");
}

#[test]
fn the_blocking_client_issues_from_an_explicit_fallback_too() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::baidu_default().unwrap();
    let client = BlockingClient::connect(quick(vec![Peer::http(closed_port())]).fallback(
        FallbackOptions::explicit(layout.clone(), 4_000_000, dir.path().join("fallback.state")),
    ))
    .unwrap();
    let (a, b) = (client.next_id().unwrap(), client.next_id().unwrap());
    assert_ne!(a, b);
    assert_eq!(layout.decompose(a).unwrap().worker, 4_000_000);
    assert!(matches!(
        client.next_segment_id("orders"),
        Err(ClientError::SegmentPeersDown { .. })
    ));
    client.close();
}

/// A previous process of the application on `dir`: it holds a fallback lease on worker 17
/// (valid a minute, as a server granted it) and issued `count` IDs under it, so its state
/// file's mark lies ahead of the clock. Dropping the lease is the process exiting.
async fn previous_process(
    dir: &std::path::Path,
    layout: &Layout,
    count: usize,
) -> (Arc<RemoteLease>, Vec<u64>) {
    let now = SystemClock.now_millis();
    let grant = LeaseGrant {
        worker_id: 17,
        holder: "app/1#00000000000000aa".to_owned(),
        valid_until_ms: now + 60_000,
        floor_ms: now - 1,
    };
    let lease = RemoteLease::start(dir, layout, &grant, Arc::new(SystemClock))
        .await
        .unwrap()
        .unwrap();
    let lease = Arc::new(lease);
    let generator = DefaultUidGenerator::new(layout.clone(), 17, SystemClock)
        .unwrap()
        .fenced(Arc::clone(&lease) as Arc<dyn TimeFence>);
    let ids = (0..count).map(|_| generator.next_id().unwrap()).collect();
    (lease, ids)
}

/// Issue 36, point 4: a client restarted while no server answers, its previous process still
/// exiting (holding its lease's file a moment longer), waits for that process to let go and
/// for the clock to pass the file's mark, then continues the lease: no call fails, and no ID
/// repeats one of the previous process's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_while_the_previous_process_exits_continues_its_lease() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::vesta_max_peak().unwrap();
    let (previous, before) = previous_process(dir.path(), &layout, 5_000).await;
    let exiting = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(previous);
    });
    let client = quick(vec![Peer::http(closed_port())])
        .fallback(FallbackOptions::leased(layout.clone(), dir.path()))
        .connect()
        .await
        .unwrap();
    exiting.await.unwrap();
    assert_eq!(
        client.fallback_worker_id(),
        Some(17),
        "the previous process's lease"
    );
    let before: HashSet<u64> = before.into_iter().collect();
    let last_unit = before
        .iter()
        .map(|&id| layout.decompose(id).unwrap().time)
        .max();
    for _ in 0..5_000 {
        let id = client.next_id().await.unwrap();
        assert!(
            !before.contains(&id),
            "{id} was issued by the previous process"
        );
        assert!(Some(layout.decompose(id).unwrap().time) > last_unit);
    }
    client.close().await;
}

/// While another process that keeps running holds the lease file, a restarted client's calls
/// fail naming that lease, its file and that another process holds it, never claiming that
/// no lease exists; once that process exits, the client continues the lease, and every call
/// that failed meanwhile named what it waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_file_held_by_a_running_process_is_named_until_it_can_be_continued() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::vesta_max_peak().unwrap();
    let (previous, before) = previous_process(dir.path(), &layout, 5_000).await;
    let client = quick(vec![Peer::http(closed_port())])
        .wait(Duration::from_millis(200))
        .fallback(FallbackOptions::leased(layout.clone(), dir.path()))
        .connect()
        .await
        .unwrap();
    assert_eq!(client.fallback_worker_id(), None);
    let file = RemoteLease::state_file(dir.path(), 17)
        .display()
        .to_string();
    match client.next_id().await.unwrap_err() {
        ClientError::NoFallbackLease { reason, .. } => {
            assert!(reason.contains("lease on worker id 17"), "{reason}");
            assert!(reason.contains("another process"), "{reason}");
            assert!(reason.contains(&file), "{reason}");
            assert!(!reason.contains("no unexpired lease"), "{reason}");
        }
        other => panic!("expected NoFallbackLease, got {other:?}"),
    }

    drop(previous);
    let deadline = Instant::now() + Duration::from_secs(30);
    let first = loop {
        match client.next_id().await {
            Ok(id) => break id,
            Err(ClientError::NoFallbackLease { reason, .. }) => {
                assert!(reason.contains("worker id 17"), "{reason}");
                assert!(
                    reason.contains("another process holds its file")
                        || reason.contains("waiting until the clock passes its mark"),
                    "{reason}"
                );
            }
            Err(other) => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "the lease was never continued");
    };
    assert_eq!(client.fallback_worker_id(), Some(17));
    assert!(!before.contains(&first));
    let last_unit = before
        .iter()
        .map(|&id| layout.decompose(id).unwrap().time)
        .max();
    assert!(Some(layout.decompose(first).unwrap().time) > last_unit);
    client.close().await;
}
