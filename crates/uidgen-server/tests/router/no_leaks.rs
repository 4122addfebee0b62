//! HTTP answers never carry database internals (URLs, driver text, table names), on any of the
//! three databases: a failing store is logged and the client gets a fixed sentence.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::{get, json, put_tag};
use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, SystemClock};
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_server::http::app;
use uidgen_server::service::ready::store_readiness;
use uidgen_server::service::state::AppState;
use uidgen_store::testing::{all_dbs, fresh_store, run_script};

const TOKEN: &str = "an-admin-token-of-some-length";

/// Text that must never reach a client.
const INTERNALS: &[&str] = &[
    "mysql://",
    "mariadb://",
    "postgres://",
    "sqlite://",
    "sqlx",
    "leaf_alloc",
    "error returned from database",
    "no such table",
    "doesn't exist",
    "does not exist",
    "pool",
];

fn assert_clean(what: &str, body: &str) {
    for internal in INTERNALS {
        assert!(
            !body.to_lowercase().contains(internal),
            "{what} leaks {internal:?}: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_store_is_not_quoted_to_clients() {
    for db in all_dbs() {
        let (store, _) = fresh_store(db).await.unwrap();
        let options = SegmentOptions {
            wait_timeout: Duration::from_millis(50),
            ..SegmentOptions::default()
        };
        let segments = SegmentService::start(store.clone(), options, SystemClock)
            .await
            .unwrap();
        segments.upsert_tag("order", 100, None).await.unwrap();
        let generator = SnowflakeGenerator::new(
            Layout::snowflake().unwrap(),
            5,
            ManualClock::auto_advancing(1_800_000_000_000),
        )
        .unwrap();
        let mut state = AppState::embedded(Arc::new(generator), 5);
        state.segments = Some(segments.clone());
        state.admin_token = Some(TOKEN.into());
        state.store_check = store_readiness(store.clone());
        let r = app(Arc::new(state));
        assert_eq!(get(&r, "/readyz").await.0, StatusCode::OK, "{db:?}");

        // The table goes away under the running service: every load now fails in the driver.
        run_script(&store, "DROP TABLE leaf_alloc").await.unwrap();
        let (status, body) = get(&r, "/v1/segments/order?count=5").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{db:?}: {body}");
        assert!(body.contains("see the server log"), "{db:?}: {body}");
        assert_clean("GET /v1/segments/order", &body);
        let (status, body) = get(&r, "/api/segment/get/order").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{db:?}: {body}");
        assert_clean("GET /api/segment/get/order", &body);

        let auth = format!("Bearer {TOKEN}");
        let (status, body) = put_tag(&r, "invoice", Some(&auth), r#"{"step": 10}"#).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{db:?}: {body}");
        assert_eq!(json(&body)["code"], "store_unavailable");
        assert_eq!(
            json(&body)["message"],
            "segment store unavailable; see the server log (leaf code -4)"
        );

        let (status, body) = get(&r, "/v1/segments").await;
        assert_eq!(status, StatusCode::OK, "{db:?}: {body}");
        let monitor = json(&body);
        assert_eq!(monitor[0]["tag"], "order");
        assert_eq!(monitor[0]["load_failing"], true, "{db:?}: {body}");
        assert_clean("GET /v1/segments", &body);

        let (status, body) = get(&r, "/api/segment/get/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{db:?}: {body}");
        assert!(body.contains("PUT /v1/admin/segments/{tag}"), "{body}");
        assert_clean("GET /api/segment/get/nope", &body);

        store.close().await;
        // The generator needs no store: the server stays ready, segment mode does not.
        let (status, body) = get(&r, "/readyz").await;
        assert_eq!(status, StatusCode::OK, "{db:?}: {body}");
        assert_eq!(
            body,
            "ready (degraded: segment mode: the store does not answer)"
        );
        let (status, body) = get(&r, "/readyz?mode=segment").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{db:?}: {body}");
        assert_eq!(
            json(&body)["message"],
            "the store does not answer; see the server log"
        );
        assert_clean("GET /readyz?mode=segment", &body);
        segments.shutdown();
    }
}
