//! Readiness per mode, in the real binary against PostgreSQL behind a TCP proxy the test cuts:
//! the ID generator needs no database once it runs, so a store outage takes segment mode out
//! of `/readyz?mode=segment` and the gRPC health service's segment name, while `/readyz` and
//! `""` stay ready and `/genid` keeps answering.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use common::{Server, fetch, json};
use tonic::transport::Channel;
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
use uidgen_store::testing::{TestDb, fresh_url};

/// The health service's status for `service`.
async fn health(channel: &Channel, service: &str) -> ServingStatus {
    HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .unwrap_or_else(|e| panic!("health of {service:?}: {e}"))
        .into_inner()
        .status()
}

/// Poll `probe` until it returns true, failing with `what` after 30 s: readiness is re-read
/// every 2 s, and a cut connection may take a ping's 2 s to notice.
async fn eventually<F: Future<Output = bool>>(what: &str, mut probe: impl FnMut() -> F) {
    uidgen_testkit::eventually_some(what, 30, || {
        let held = probe();
        async move { held.await.then_some(()) }
    })
    .await;
}

/// `ready` of `mode` in `GET /v1/status`.
async fn status_says(client: &reqwest::Client, server: &Server, mode: &str) -> Option<bool> {
    let (_, body) = fetch(client, &server.url("/v1/status")).await;
    let status = json(&body);
    status["modes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mode"] == mode)
        .map(|m| m["ready"].as_bool().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_outage_takes_segment_mode_out_not_the_server() {
    let url = fresh_url(TestDb::Postgres).await.unwrap_or_else(|e| {
        panic!(
            "PostgreSQL test server ({}): {e}",
            uidgen_store::testing::POSTGRES_URL_VAR
        )
    });
    let proxy = Proxy::start(server_addr(&url)).await;
    let store = with_addr(&url, proxy.addr);
    let server = Server::start(&[], &[("UIDGEN_STORE", &store)]);
    let client = reqwest::Client::new();
    let channel = Channel::from_shared(server.grpc.clone().unwrap())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let segment = uidgen_server::grpc::server::mode_service_name(
        uidgen_server::service::readiness::Mode::Segment,
    );
    let ids = uidgen_server::grpc::server::mode_service_name(
        uidgen_server::service::readiness::Mode::Ids,
    );

    assert_eq!(
        fetch(&client, &server.url("/readyz")).await,
        (200, "ready".to_owned())
    );
    assert_eq!(status_says(&client, &server, "ids").await, Some(true));
    assert_eq!(status_says(&client, &server, "segment").await, Some(true));
    assert_eq!(
        status_says(&client, &server, "sharded").await,
        None,
        "not enabled"
    );
    for service in ["", "uidgen.v1.IdService", &ids, &segment] {
        assert_eq!(
            health(&channel, service).await,
            ServingStatus::Serving,
            "{service}"
        );
    }

    proxy.cut();
    // The generator serves on: its worker id was taken at start and needs no database now.
    let (status, body) = fetch(&client, &server.url("/genid")).await;
    assert_eq!(status, 200, "{body}");
    eventually("/readyz?mode=segment turns 503", || async {
        fetch(&client, &server.url("/readyz?mode=segment")).await.0 == 503
    })
    .await;
    let (status, body) = fetch(&client, &server.url("/readyz?mode=segment")).await;
    assert_eq!(status, 503);
    assert_eq!(
        json(&body)["message"],
        "the store does not answer; see the server log"
    );
    assert!(!body.contains("postgres"), "{body}");
    assert_eq!(
        fetch(&client, &server.url("/readyz")).await,
        (
            200,
            "ready (degraded: segment mode: the store does not answer)".to_owned()
        )
    );
    assert_eq!(
        fetch(&client, &server.url("/readyz?mode=ids")).await,
        (200, "ready".to_owned())
    );
    let (status, body) = fetch(&client, &server.url("/readyz?mode=sharded")).await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(json(&body)["code"], "mode_disabled");
    let (status, body) = fetch(&client, &server.url("/readyz?mode=leaf")).await;
    assert_eq!(status, 400, "{body}");
    eventually("/v1/status shows segment mode down", || async {
        status_says(&client, &server, "segment").await == Some(false)
    })
    .await;
    assert_eq!(status_says(&client, &server, "ids").await, Some(true));
    eventually("gRPC health marks segment mode NOT_SERVING", || async {
        health(&channel, &segment).await == ServingStatus::NotServing
    })
    .await;
    for service in ["", "uidgen.v1.IdService", &ids] {
        assert_eq!(
            health(&channel, service).await,
            ServingStatus::Serving,
            "{service}"
        );
    }
    let (status, body) = fetch(&client, &server.url("/genid")).await;
    assert_eq!(status, 200, "{body}");

    proxy.restore();
    eventually("/readyz is plain ready again", || async {
        fetch(&client, &server.url("/readyz")).await == (200, "ready".to_owned())
    })
    .await;
    eventually("gRPC health serves segment mode again", || async {
        health(&channel, &segment).await == ServingStatus::Serving
    })
    .await;
    let (status, body) = fetch(&client, &server.url("/api/segment/get/leaf-segment-test")).await;
    assert_eq!(status, 200, "{body}");
    let log = server.log();
    assert!(log.contains("mode cannot serve"), "{log}");
    assert!(log.contains("mode can serve again"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_only_when_no_mode_can_serve() {
    use std::sync::Arc;

    use axum::http::StatusCode;
    use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock};
    use uidgen_segment::{SegmentOptions, SegmentService};
    use uidgen_server::http::app;
    use uidgen_server::service::ready::store_readiness;
    use uidgen_server::service::state::AppState;

    let (store, _) = uidgen_store::testing::fresh_store(TestDb::Sqlite)
        .await
        .unwrap();
    let segments = SegmentService::start(store.clone(), SegmentOptions::default(), SystemClock)
        .await
        .unwrap();
    let layout = Layout::baidu_default().unwrap();
    let generator = Arc::new(
        CachedUidGenerator::new(layout, 5, SystemClock, CachedOptions::default()).unwrap(),
    );
    let mut state = AppState::embedded(generator.clone(), 5);
    state.segments = Some(segments.clone());
    state.store_check = store_readiness(store.clone());
    let r = app(Arc::new(state));

    // The generator stops: segment mode still serves, so the server stays in.
    generator
        .ring()
        .stop("padding failed: sqlite://secret.db is gone");
    let (status, body) = common::get(&r, "/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        "ready (degraded: ids mode: the ID generator has stopped)"
    );
    let (status, body) = common::get(&r, "/readyz?mode=ids").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(!body.contains("secret"), "{body}");
    let (_, body) = common::get(&r, "/v1/status").await;
    let modes = &json(&body)["modes"];
    assert_eq!(modes[0]["mode"], "ids", "{body}");
    assert_eq!(modes[0]["ready"], false, "{body}");
    assert_eq!(modes[0]["reason"], "the ID generator has stopped", "{body}");
    assert_eq!(modes[1]["mode"], "segment", "{body}");
    assert_eq!(modes[1]["ready"], true, "{body}");
    assert_eq!(json(&body)["ready"], true, "{body}");

    // And the store goes away too: now nothing can serve.
    store.close().await;
    let (status, body) = common::get(&r, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(json(&body)["code"], "not_ready");
    assert_eq!(
        json(&body)["message"],
        "no mode can serve: ids: the ID generator has stopped; segment: the store does not \
         answer; see the server log"
    );
    segments.shutdown();
}
