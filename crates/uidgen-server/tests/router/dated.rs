//! Segment IDs with a random skip (`segment.random_skip_max`) and dated numbers
//! (`segment.dated_tags`, `GET /v1/segments/{tag}/dated`, `GET /v1/dated/{text}`): through the
//! router, two services on one store, and the real binary reading its configuration.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{get, ids_in, json};
use uidgen_core::{Layout, ManualClock, SnowflakeGenerator};
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_server::http::app;
use uidgen_server::service::state::AppState;
use uidgen_store::testing::{TestDb, fresh_store};

/// 2027-01-15T08:00:00Z.
const NOW_MS: u64 = 1_799_913_600_000;

/// The 400 `code` of an answer, asserting the status.
fn code_of(answer: &(StatusCode, String)) -> String {
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{}", answer.1);
    json(&answer.1)["code"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn segment_routes_with_a_random_skip_serve_increasing_ids_with_gaps() {
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let options = SegmentOptions {
        random_skip_max: 5,
        ..SegmentOptions::default()
    };
    let (segments, r) = segment_router(store, options).await;
    segments.upsert_tag("orders", 100, None).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (status, body) = get(&r, "/v1/segments/orders?count=300").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        ids.extend(ids_in(&json(&body)));
        let (status, body) = get(&r, "/api/segment/get/orders").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        ids.push(body.parse().unwrap());
    }
    assert_eq!(ids.len(), 1505);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "increasing, so no repeat"
    );
    let gaps = ids.windows(2).filter(|w| w[1] - w[0] > 1).count();
    assert!(gaps > 1000, "only {gaps} gaps: the skip is not applied");
    segments.shutdown();
}

/// A router serving segment tags from `store`, with `orders` dated.
async fn segment_router(
    store: uidgen_store::Store,
    options: SegmentOptions,
) -> (Arc<SegmentService>, uidgen_server::http::observe::App) {
    let segments = SegmentService::start(store, options, uidgen_core::SystemClock)
        .await
        .unwrap();
    let generator = SnowflakeGenerator::new(
        Layout::snowflake().unwrap(),
        5,
        ManualClock::auto_advancing(NOW_MS),
    )
    .unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.segments = Some(segments.clone());
    state.dated_tags = vec!["orders".to_owned()];
    (segments, app(Arc::new(state)))
}

/// The texts of a dated batch, and its day tag.
fn dated_ids(body: &str) -> (Vec<String>, String) {
    let batch = json(body);
    let ids = batch["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_owned())
        .collect();
    (ids, batch["day_tag"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dated_numbers_restart_per_day_tag_never_repeat_across_servers_and_read_back() {
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    // Two servers on one store: each creates the day's tag on its first request.
    let (a_service, a) = segment_router(store.clone(), SegmentOptions::default()).await;
    let (b_service, b) = segment_router(store.clone(), SegmentOptions::default()).await;
    let shanghai = uidgen_core::Zone::parse("Asia/Shanghai").unwrap();
    let before = shanghai
        .date_at(uidgen_core::Clock::now_millis(&uidgen_core::SystemClock))
        .unwrap();
    let uri = "/v1/segments/orders/dated?prefix=ORD&digits=6&tz=Asia/Shanghai&count=3";
    let (status, body) = get(&a, uri).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (first, day_tag) = dated_ids(&body);
    let date = &day_tag["orders:".len()..];
    let after = shanghai
        .date_at(uidgen_core::Clock::now_millis(&uidgen_core::SystemClock))
        .unwrap();
    assert!(
        [before.compact(), after.compact()].contains(&date.to_owned()),
        "{day_tag}: the day in Shanghai"
    );
    assert_eq!(
        first,
        (1..=3)
            .map(|n| format!("ORD{date}-{n:06}"))
            .collect::<Vec<_>>(),
        "a new day starts at 1"
    );
    let mut all: Vec<String> = first;
    for r in [&b, &a, &b] {
        let (status, body) = get(r, uri).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        all.extend(dated_ids(&body).0);
    }
    let count = all.len();
    all.sort();
    all.dedup();
    assert_eq!(
        all.len(),
        count,
        "no number twice, whichever server drew it"
    );
    // Read back.
    let (status, body) = get(&a, &format!("/v1/dated/{}?prefix=ORD&digits=6", all[0])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["number"], 1);
    let (status, body) = get(&a, "/v1/dated/ORD20261125-000123?prefix=ORD").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        (json(&body)["date"].as_str(), json(&body)["number"].as_u64()),
        (Some("2026-11-25"), Some(123))
    );
    for (bad, want) in [
        ("/v1/dated/INV20261125-000123?prefix=ORD", "malformed_id"),
        ("/v1/dated/ORD20261131-000123?prefix=ORD", "malformed_id"),
        ("/v1/dated/ORD20261125-123?prefix=ORD", "malformed_id"),
        (
            "/v1/dated/ORD20261125-000123?prefix=OR-D",
            "invalid_parameter",
        ),
        ("/v1/segments/orders/dated?digits=21", "invalid_parameter"),
        (
            "/v1/segments/orders/dated?tz=Mars/Olympus",
            "invalid_parameter",
        ),
        ("/v1/segments/orders/dated?count=0", "invalid_count"),
    ] {
        let answer = get(&a, bad).await;
        assert_eq!(code_of(&answer), want, "{bad}: {}", answer.1);
    }
    // Only a dated tag is served so.
    let (status, body) = get(&a, "/v1/segments/invoices/dated").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(json(&body)["code"], "unknown_tag");
    assert!(body.contains("segment.dated_tags"), "{body}");
    // A width the day has outgrown is refused in words: one digit holds 9 numbers, and ten
    // more cannot all fit.
    let answer = get(&a, "/v1/segments/orders/dated?digits=1&count=10").await;
    assert_eq!(code_of(&answer), "invalid_parameter");
    assert!(answer.1.contains("more digits"), "{}", answer.1);
    a_service.shutdown();
    b_service.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_binary_reads_dated_tags_and_the_random_skip_from_its_configuration() {
    let file = common::temp_dir("forms-config").join("uidgen.toml");
    std::fs::write(
        &file,
        "[segment]\ndated_tags = [\"orders\"]\nrandom_skip_max = 5\n",
    )
    .unwrap();
    let server = common::Server::start(
        &["--config", file.to_str().unwrap()],
        &[
            ("UIDGEN_STORE", &common::sqlite_url("forms-config")),
            ("UIDGEN_GRPC_LISTEN", ""),
        ],
    );
    let client = reqwest::Client::new();
    let (status, body) = common::fetch(
        &client,
        &server.url("/v1/segments/orders/dated?prefix=ORD&count=3"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (texts, day_tag) = dated_ids(&body);
    let date = &day_tag["orders:".len()..];
    assert!(
        texts.iter().all(|t| t.starts_with(&format!("ORD{date}-"))),
        "{body}"
    );
    // The skip applies to dated numbers too: the day starts within its first gap.
    let numbers: Vec<u64> = texts
        .iter()
        .map(|t| t[t.len() - 6..].parse().unwrap())
        .collect();
    assert!((1..=6).contains(&numbers[0]), "{numbers:?}");
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    let (status, body) = common::fetch(
        &client,
        &server.url("/v1/segments/leaf-segment-test?count=200"),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let ids = ids_in(&json(&body));
    let gaps = ids.windows(2).filter(|w| w[1] - w[0] > 1).count();
    assert!(gaps > 100, "only {gaps} gaps in {ids:?}");
    let (status, body) = common::fetch(&client, &server.url("/v1/segments/other/dated")).await;
    assert_eq!(status, 404, "{body}");
    server.terminate();
}
