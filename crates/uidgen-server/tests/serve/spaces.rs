//! Several ID spaces in one server (issue 21), with the real `uidgen` binary on a real
//! PostgreSQL (leased worker ids): each space leases a worker id of its own in its own name,
//! every ID decodes under its space's layout with that space's worker id, no ID repeats within
//! a space however many requests race over HTTP, Leaf's route and gRPC, nor across a restart;
//! an unknown space is a 404 / NOT_FOUND, and an assigner that holds one id per process refuses
//! spaces. Issue 36: spaces never starve each other; two servers with four spaces, one of
//! them 2 bits wide, both start and serve every space with no equal ID in a space.
//! PostgreSQL comes from `UIDGEN_TEST_POSTGRES_URL` (default 127.0.0.1:5432, database `test`).
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::BTreeMap;

use common::{Server, assert_unique, fetch, ids_in, json, run, temp_dir};
use tonic::Code;
use uidgen_core::Layout;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{ExplainIdRequest, NextIdRequest, NextIdsRequest, StreamIdsRequest};
use uidgen_store::testing::{TestDb, fresh_url};

/// The default space is Baidu's layout; `order` is Snowflake from 2020 on the per-call
/// generator; `user` is Leaf's layout on the cached generator.
fn config(store: &str, cache_dir: &std::path::Path) -> String {
    format!(
        "store = \"{store}\"\n\
         [segment]\nenabled = false\n\
         [worker]\nassigner = \"leased\"\ncache_file = \"{}\"\n\
         [spaces.order.layout]\npreset = \"snowflake\"\nepoch = \"2020-01-01\"\n\
         [spaces.order.generator]\nkind = \"snowflake\"\n\
         [spaces.user.layout]\npreset = \"leaf\"\n",
        cache_dir.join("lease.cache").display()
    )
}

/// Each space's layout, as the test decodes with it.
fn layouts() -> BTreeMap<&'static str, Layout> {
    BTreeMap::from([
        ("default", Layout::baidu_default().unwrap()),
        (
            "order",
            Layout::preset_with_epoch("snowflake", Some("2020-01-01")).unwrap(),
        ),
        ("user", Layout::preset("leaf").unwrap()),
    ])
}

/// A server of the three spaces on `store`, its config file in `dir`.
fn start(store: &str, dir: &std::path::Path) -> Server {
    let path = dir.join("uidgen.toml");
    std::fs::write(&path, config(store, dir)).unwrap();
    Server::start(&["--config", path.to_str().unwrap()], &[])
}

/// `GET /v1/spaces`: each space's worker id, checking its layout's name.
async fn worker_ids(server: &Server) -> BTreeMap<String, u64> {
    let (status, body) = fetch(&reqwest::Client::new(), &server.url("/v1/spaces")).await;
    assert_eq!(status, 200, "{body}");
    let listed = json(&body);
    let mut out = BTreeMap::new();
    for space in listed.as_array().unwrap() {
        let name = space["name"].as_str().unwrap().to_owned();
        let layout = &layouts()[name.as_str()];
        assert_eq!(space["layout"], layout.name(), "{body}");
        assert_eq!(space["epoch_ms"], layout.epoch_ms(), "{body}");
        assert_eq!(space["ready"], true, "{body}");
        out.insert(name, space["worker_id"].as_u64().unwrap());
    }
    assert_eq!(
        out.keys().collect::<Vec<_>>(),
        ["default", "order", "user"],
        "{body}"
    );
    out
}

/// Many concurrent requests over every channel and space: the IDs each space issued.
async fn hammer(server: &Server) -> BTreeMap<&'static str, Vec<u64>> {
    let client = reqwest::Client::new();
    let grpc = IdServiceClient::connect(server.grpc.clone().unwrap())
        .await
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..12 {
        let (client, mut grpc, base) = (client.clone(), grpc.clone(), server.base.clone());
        tasks.spawn(async move {
            let mut got: Vec<(&'static str, u64)> = Vec::new();
            for round in 0..15 {
                let space = ["order", "user", "default"][(task + round) % 3];
                let url = format!("{base}/v1/spaces/{space}/ids?count=200");
                let (status, body) = fetch(&client, &url).await;
                assert_eq!(status, 200, "{url}: {body}");
                got.extend(ids_in(&json(&body)).into_iter().map(|id| (space, id)));
                // Leaf's route: a key naming a space takes from it.
                let (status, body) =
                    fetch(&client, &format!("{base}/api/snowflake/get/{space}")).await;
                assert_eq!(status, 200, "{body}");
                got.push((space, body.trim().parse().unwrap()));
                let batch = grpc
                    .next_ids(NextIdsRequest {
                        count: 100,
                        space: space.to_owned(),
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner();
                got.extend(batch.ids.into_iter().map(|id| (space, id)));
                let one = grpc
                    .next_id(NextIdRequest {
                        space: space.to_owned(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                got.push((space, one.id));
            }
            got
        });
    }
    let mut by_space: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    while let Some(done) = tasks.join_next().await {
        for (space, id) in done.unwrap() {
            by_space.entry(space).or_default().push(id);
        }
    }
    by_space
}

/// Each space's worker id is leased in the store under that space's name: a live row of its
/// own, whatever worker ids the other spaces hold (on a fresh store each space takes id 0).
async fn assert_leased_per_space(url: &str, workers: &BTreeMap<String, u64>) {
    let store = uidgen_store::Store::connect(url).await.unwrap();
    let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
    for (space, &worker) in workers {
        let row = store.lease_row(space, worker).await.unwrap();
        let row = row.unwrap_or_else(|| panic!("{space}: no lease row for worker {worker}"));
        assert!(
            !row.holder.is_empty() && row.expires_at_ms > now,
            "{space}: {row:?}"
        );
    }
    store.close().await;
}

/// Every ID of each space decodes under its layout with its worker id, and none repeats.
fn check(by_space: &BTreeMap<&'static str, Vec<u64>>, workers: &BTreeMap<String, u64>) {
    let layouts = layouts();
    for (space, ids) in by_space {
        let layout = &layouts[space];
        for &id in ids {
            let parts = layout.decompose(id).unwrap();
            assert_eq!(parts.worker, workers[*space], "{space}: {id}");
        }
        let n = ids.len();
        assert_eq!(assert_unique(ids.clone()).len(), n, "{space}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spaces_hold_their_own_worker_ids_and_never_repeat_an_id_across_channels_and_restarts() {
    let store = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("spaces");
    let server = start(&store, &dir);
    let first = worker_ids(&server).await;
    assert_leased_per_space(&store, &first).await;
    let before = hammer(&server).await;
    for (space, ids) in &before {
        // 12 tasks x 15 rounds, a third of the rounds per space, 302 IDs a round.
        assert_eq!(ids.len(), 60 * 302, "{space}");
    }
    check(&before, &first);

    // Status and metrics list each space.
    let client = reqwest::Client::new();
    let (_, body) = fetch(&client, &server.url("/v1/status")).await;
    let status = json(&body);
    let listed: Vec<_> = status["spaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["worker_id"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(listed.len(), 3, "{body}");
    assert!(listed.contains(&("order", first["order"])), "{body}");
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let order_ids = before["order"].len();
    assert!(
        metrics.contains(&format!(
            "uidgen_space_ids_issued_total{{space=\"order\"}} {order_ids}"
        )),
        "{metrics}"
    );

    // An unknown space: 404 over HTTP, NOT_FOUND over gRPC; Leaf's route keeps the default.
    let (code, body) = fetch(&client, &server.url("/v1/spaces/nope/ids")).await;
    assert_eq!(
        (code, json(&body)["code"].as_str()),
        (404, Some("unknown_space"))
    );
    let (code, _) = fetch(&client, &server.url("/v1/spaces/nope/ids/5")).await;
    assert_eq!(code, 404);
    let (code, body) = fetch(&client, &server.url("/api/snowflake/get/nope")).await;
    assert_eq!(code, 200, "{body}");
    let leaf_default: u64 = body.trim().parse().unwrap();
    assert_eq!(
        layouts()["default"].decompose(leaf_default).unwrap().worker,
        first["default"]
    );
    let mut grpc = IdServiceClient::connect(server.grpc.clone().unwrap())
        .await
        .unwrap();
    for status in [
        grpc.next_id(NextIdRequest {
            space: "nope".into(),
        })
        .await
        .map(drop),
        grpc.stream_ids(StreamIdsRequest {
            batch_size: 1,
            max_ids: 1,
            space: "nope".into(),
            ..Default::default()
        })
        .await
        .map(drop),
    ] {
        assert_eq!(status.unwrap_err().code(), Code::NotFound);
    }
    // Decoding with the space's layout, over HTTP and gRPC.
    let order_id = before["order"][0];
    let (code, body) = fetch(
        &client,
        &server.url(&format!("/v1/spaces/order/ids/{order_id}")),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(json(&body)["layout"], "snowflake");
    assert_eq!(json(&body)["worker"], first["order"]);
    let explained = grpc
        .explain_id(ExplainIdRequest {
            id: order_id.to_string(),
            space: "order".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(explained.layout, "snowflake");
    drop(grpc);

    // A clean stop releases every space's lease; a restart claims again and repeats nothing.
    let (exit, log) = server.terminate();
    assert!(exit.success(), "{log}");
    for space in ["default", "order", "user"] {
        assert!(
            log.lines()
                .any(|l| l.contains("released the worker id lease")
                    && l.contains(&format!("space=\"{space}\""))),
            "{space} released: {log}"
        );
    }
    let server = start(&store, &dir);
    let second = worker_ids(&server).await;
    assert_leased_per_space(&store, &second).await;
    let after = hammer(&server).await;
    check(&after, &second);
    for (space, ids) in &before {
        let n = ids.len() + after[space].len();
        let all = [ids.clone(), after[space].clone()].concat();
        assert_eq!(assert_unique(all).len(), n, "{space} across the restart");
    }
}

#[test]
fn spaces_are_refused_with_an_assigner_that_holds_one_worker_id_per_process() {
    let dir = temp_dir("spaces-refused");
    let path = dir.join("uidgen.toml");
    std::fs::write(
        &path,
        "[worker]\nassigner = \"zookeeper\"\n[spaces.order.layout]\npreset = \"leaf\"\n",
    )
    .unwrap();
    let (status, _, stderr) = run(&["serve", "--config", path.to_str().unwrap()], &[]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("invalid config key `spaces.order`")
            && stderr.contains("worker.assigner = \"zookeeper\""),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_that_loses_its_lease_stops_alone_and_readiness_names_it() {
    let url = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = temp_dir("spaces-lost");
    let path = dir.join("uidgen.toml");
    // A short ttl: the keeper renews every second, so it learns of the loss soon.
    std::fs::write(
        &path,
        format!(
            "store = \"{url}\"\n[layout]\npreset = \"snowflake\"\n[segment]\nenabled = false\n\
             [worker]\nassigner = \"leased\"\nlease_ttl_secs = 3\n\
             [spaces.order.layout]\npreset = \"snowflake\"\nepoch = \"2020-01-01\"\n"
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()], &[]);
    let client = reqwest::Client::new();
    let (_, body) = fetch(&client, &server.url("/v1/spaces")).await;
    let order = json(&body)[1]["worker_id"].as_u64().unwrap();
    // Another holder takes the space's lease over (as after an expiry): its renewal fails.
    let store = uidgen_store::Store::connect(&url).await.unwrap();
    uidgen_store::testing::run_script(
        &store,
        &format!(
            "UPDATE worker_lease SET holder = 'thief#0' WHERE space = 'order' AND worker_id = \
             {order}"
        ),
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let refused = loop {
        let (code, body) = fetch(&client, &server.url("/v1/spaces/order/ids")).await;
        if code == 503 || std::time::Instant::now() > deadline {
            break (code, body);
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(
        refused.0, 503,
        "the space stops once its lease is lost: {}",
        refused.1
    );
    // The default space still serves; readiness stays up, degraded, naming the space.
    let (code, body) = fetch(&client, &server.url("/v1/ids?count=3")).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = fetch(&client, &server.url("/readyz")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("space `order` cannot issue"), "{body}");
    let (_, body) = fetch(&client, &server.url("/v1/spaces")).await;
    let listed = json(&body);
    assert_eq!(listed[0]["ready"], true, "{body}");
    assert_eq!(listed[1]["ready"], false, "{body}");
    assert!(listed[1]["reason"].is_string(), "{body}");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disposable_worker_ids_give_each_space_a_row_of_its_own() {
    let dir = temp_dir("spaces-disposable");
    let path = dir.join("uidgen.toml");
    // As wide as the default space's: every space's start draws from the one counter.
    std::fs::write(
        &path,
        format!(
            "store = \"{}\"\n[segment]\nenabled = false\n[worker]\nassigner = \"disposable\"\n\
             [spaces.user.layout]\npreset = \"baidu\"\nepoch = \"2020-01-01\"\n",
            common::sqlite_url("spaces-disposable")
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", path.to_str().unwrap()], &[]);
    let client = reqwest::Client::new();
    let (_, body) = fetch(&client, &server.url("/v1/spaces")).await;
    let listed = json(&body);
    let (default, user) = (
        listed[0]["worker_id"].as_u64().unwrap(),
        listed[1]["worker_id"].as_u64().unwrap(),
    );
    assert_ne!(default, user, "{body}");
    let (code, body) = fetch(&client, &server.url("/v1/spaces/user/ids?count=1000")).await;
    assert_eq!(code, 200, "{body}");
    let ids = assert_unique(ids_in(&json(&body)));
    let user_layout = Layout::preset_with_epoch("baidu", Some("2020-01-01")).unwrap();
    assert!(
        ids.iter()
            .all(|&id| user_layout.decompose(id).unwrap().worker == user)
    );
}

/// Issue 36, point 2: the four spaces of the issue (`default`, `order`, `user`, and `small` with
/// 2 worker bits) on two servers sharing one store, the leased assigner, `worker.fleet_size =
/// 2`. Before leases were kept per space, the first server took ids 0-3 (one per space) and the
/// second was refused: "cannot start the space `small`: ... all 4 worker ids (0 to 3) are
/// leased by live holders". Now both start, each holds one worker id in every space (the two
/// servers' differ within a space), and every space serves from both at once with no ID
/// issued twice within it.
async fn two_servers_with_four_spaces_both_serve_every_space(store: &str) {
    let config = |dir: &std::path::Path| {
        let path = dir.join("uidgen.toml");
        std::fs::write(
            &path,
            format!(
                "store = \"{store}\"\n[segment]\nenabled = false\n\
                 [worker]\nassigner = \"leased\"\nfleet_size = 2\n\
                 [spaces.order.layout]\npreset = \"snowflake\"\n\
                 [spaces.user.layout]\npreset = \"leaf\"\n\
                 [spaces.small.layout]\ntime_bits = 41\nworker_bits = 2\nseq_bits = 20\n"
            ),
        )
        .unwrap();
        path
    };
    let (dir_a, dir_b) = (temp_dir("four-spaces-a"), temp_dir("four-spaces-b"));
    let (path_a, path_b) = (config(&dir_a), config(&dir_b));
    let a = Server::start(&["--config", path_a.to_str().unwrap()], &[]);
    let b = Server::start(&["--config", path_b.to_str().unwrap()], &[]);
    let client = reqwest::Client::new();
    let spaces = ["default", "order", "small", "user"];
    let mut workers: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for server in [&a, &b] {
        let (status, body) = fetch(&client, &server.url("/v1/spaces")).await;
        assert_eq!(status, 200, "{body}");
        for (listed, name) in json(&body).as_array().unwrap().iter().zip(spaces) {
            assert_eq!(
                (listed["name"].as_str(), listed["ready"].as_bool()),
                (Some(name), Some(true)),
                "{body}"
            );
            workers
                .entry(name)
                .or_default()
                .push(listed["worker_id"].as_u64().unwrap());
        }
    }
    for (space, ids) in &workers {
        assert_ne!(
            ids[0], ids[1],
            "{space}: both servers hold worker {}",
            ids[0]
        );
        assert!(
            *space != "small" || ids.iter().all(|&w| w <= 3),
            "{workers:?}"
        );
    }

    // Every space from both servers at once: 4 tasks a server and space, 10 batches each.
    let mut tasks = tokio::task::JoinSet::new();
    for server in [&a, &b] {
        for space in spaces {
            for _ in 0..4 {
                let (client, url) = (
                    client.clone(),
                    server.url(&format!("/v1/spaces/{space}/ids?count=500")),
                );
                tasks.spawn(async move {
                    let mut got = Vec::new();
                    for _ in 0..10 {
                        let (status, body) = fetch(&client, &url).await;
                        assert_eq!(status, 200, "{url}: {body}");
                        got.extend(ids_in(&json(&body)));
                    }
                    (space, got)
                });
            }
        }
    }
    let mut by_space: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    while let Some(done) = tasks.join_next().await {
        let (space, ids) = done.unwrap();
        by_space.entry(space).or_default().extend(ids);
    }
    for (space, ids) in by_space {
        assert_eq!(ids.len(), 2 * 4 * 10 * 500, "{space}");
        assert_unique(ids);
    }
    // One ID of the narrow space from each server carries that server's worker id.
    for (server, &worker) in [&a, &b].into_iter().zip(&workers["small"]) {
        let (_, body) = fetch(&client, &server.url("/v1/spaces/small/ids?count=1")).await;
        let id = ids_in(&json(&body))[0];
        let (_, body) = fetch(&client, &server.url(&format!("/v1/spaces/small/ids/{id}"))).await;
        assert_eq!(json(&body)["worker"], worker, "{body}");
    }
    eprintln!("two servers, four spaces: worker ids {workers:?}; 0 equal IDs in any space");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_with_four_spaces_both_serve_every_space_on_postgres() {
    let store = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (set UIDGEN_TEST_POSTGRES_URL): {e}"));
    two_servers_with_four_spaces_both_serve_every_space(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_with_four_spaces_both_serve_every_space_on_a_shared_sqlite_file() {
    let store = common::sqlite_url("four-spaces");
    two_servers_with_four_spaces_both_serve_every_space(&store).await;
}
