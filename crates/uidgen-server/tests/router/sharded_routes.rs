//! The sharded-mode routes answered without a socket, over a real service (the shared test
//! Redis, SQLite): IDs, batches, decoding, the admin route, and every error as a status with a
//! `{"code", "message"}` body that never shows Redis or database internals.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::{call, get, ids_in, json};
use uidgen_core::{Layout, ManualClock, SnowflakeGenerator};
use uidgen_server::http::app;
use uidgen_server::service::state::AppState;
use uidgen_sharded::testing::{check_redis, delete_prefix, redis_url, unique_prefix};
use uidgen_sharded::{RedisLock, ShardedId, ShardedOptions, ShardedService, shard_of};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{AppSpec, Store, StoreOptions};

const TOKEN: &str = "an-admin-token-of-some-length";

/// A router with a snowflake generator and, when given, a sharded service.
fn router(sharded: Option<Arc<ShardedService>>) -> uidgen_server::http::observe::App {
    let clock = ManualClock::auto_advancing(1_800_000_000_000);
    let generator = SnowflakeGenerator::new(Layout::snowflake().unwrap(), 5, clock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.batch_cap = 1000;
    state.admin_token = Some(TOKEN.to_owned());
    state.sharded = sharded;
    app(Arc::new(state))
}

/// A service on the shared test Redis under a fresh prefix, and that prefix.
async fn service_on(store: Store, redis: &str) -> (Arc<ShardedService>, String) {
    let prefix = unique_prefix("routes");
    let options = ShardedOptions {
        redis_url: redis.to_owned(),
        key_prefix: prefix.clone(),
        max_batch: 1000,
        sync_interval: Duration::from_secs(3600),
        refill_interval: Duration::from_secs(3600),
        ..ShardedOptions::default()
    };
    (ShardedService::start(store, options).await.unwrap(), prefix)
}

async fn shared_redis() -> String {
    let url = redis_url();
    check_redis(&url).await.unwrap_or_else(|e| panic!("{e}"));
    url
}

async fn sqlite() -> Store {
    fresh_store(TestDb::Sqlite).await.unwrap().0
}

async fn put_app(
    router: &uidgen_server::http::observe::App,
    app: &str,
    body: &str,
) -> (StatusCode, String) {
    let auth = format!("Bearer {TOKEN}");
    call(
        router,
        "PUT",
        &format!("/v1/admin/apps/{app}"),
        &[("authorization", &auth)],
        body,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_routes_hand_out_ids_batches_and_decode_them() {
    let redis = shared_redis().await;
    let (service, prefix) = service_on(sqlite().await, &redis).await;
    let r = router(Some(Arc::clone(&service)));
    let (status, body) = put_app(&r, "7", r#"{"name":"orders","step":100,"max_limit_id":0}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let created = json(&body);
    assert_eq!(created["shards"], 64);
    assert_eq!(
        created["largest_id"],
        ((1_u64 << 49) - 1) << 14 | 63 << 8 | 7
    );

    // The original's route: a bare number, in the gate pass's shard.
    let (status, body) = get(&r, "/api/shard/get/7?gatePass=alice@example.com").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let id: u64 = body.parse().unwrap();
    let parts = ShardedId::decode(id).unwrap();
    assert_eq!(
        (parts.app_id, parts.shard),
        (7, shard_of("alice@example.com"))
    );

    // The JSON batch: LPOP with a count.
    let (status, body) = get(&r, "/v1/apps/7/ids?gate_pass=%E5%BC%A0%E4%B8%89&count=150").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let batch = json(&body);
    assert_eq!(
        (batch["app_id"].as_u64(), batch["shard"].as_u64()),
        (Some(7), Some(41))
    );
    let ids = ids_in(&batch);
    assert_eq!(ids.len(), 150);
    assert!(
        ids.iter()
            .all(|&id| ShardedId::decode(id).unwrap().shard == shard_of("张三"))
    );

    // Decoding.
    let (status, body) = get(&r, &format!("/v1/ids/{id}?layout=sharded")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let decoded = json(&body);
    assert_eq!(decoded["layout"], "sharded");
    assert_eq!(decoded["app_id"], 7);
    assert_eq!(decoded["shard"].as_u64(), Some(u64::from(parts.shard)));
    assert_eq!(decoded["index"].as_u64(), Some(parts.index));

    let (status, body) = get(&r, "/v1/apps").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json(&body)[0]["name"], "orders");

    // The console's status shows the mode's counters.
    let (status, body) = get(&r, "/v1/status").await;
    assert_eq!(status, StatusCode::OK);
    let sharded = &json(&body)["sharded"];
    assert!(sharded["ids_popped"].as_u64().unwrap() >= 151, "{body}");
    assert!(sharded["refills"].as_u64().unwrap() >= 1, "{body}");
    service.shutdown();
    delete_prefix(&redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_4xx_json_error() {
    let redis = shared_redis().await;
    let (service, prefix) = service_on(sqlite().await, &redis).await;
    service
        .upsert_app(&AppSpec::new(7, "orders"))
        .await
        .unwrap();
    let r = router(Some(Arc::clone(&service)));
    let cases: &[(&str, StatusCode, &str)] = &[
        (
            "/api/shard/get/abc?gatePass=a",
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
        (
            "/api/shard/get/-1?gatePass=a",
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
        (
            "/api/shard/get/256?gatePass=a",
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
        (
            "/api/shard/get/99999999999999999999?gatePass=a",
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
        (
            "/api/shard/get/9?gatePass=a",
            StatusCode::NOT_FOUND,
            "app_not_found",
        ),
        (
            "/api/shard/get/7",
            StatusCode::BAD_REQUEST,
            "invalid_gate_pass",
        ),
        (
            "/api/shard/get/7?gatePass=",
            StatusCode::BAD_REQUEST,
            "invalid_gate_pass",
        ),
        (
            "/api/shard/get/7?gatePass=a&gatePass=b",
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "/v1/apps/7/ids?gate_pass=a&count=0",
            StatusCode::BAD_REQUEST,
            "invalid_count",
        ),
        (
            "/v1/apps/7/ids?gate_pass=a&count=1001",
            StatusCode::BAD_REQUEST,
            "invalid_count",
        ),
        (
            "/v1/apps/7/ids?gate_pass=a&count=many",
            StatusCode::BAD_REQUEST,
            "invalid_count",
        ),
        (
            "/v1/apps/7/ids?count=3",
            StatusCode::BAD_REQUEST,
            "invalid_gate_pass",
        ),
        (
            "/v1/apps/x/ids?gate_pass=a",
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
        (
            "/v1/apps/9/ids?gate_pass=a",
            StatusCode::NOT_FOUND,
            "app_not_found",
        ),
        (
            "/v1/ids/-5?layout=sharded",
            StatusCode::BAD_REQUEST,
            "malformed_id",
        ),
        (
            "/v1/ids/9223372036854775808?layout=sharded",
            StatusCode::BAD_REQUEST,
            "malformed_id",
        ),
        (
            "/v1/ids/1?layout=nope",
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
    ];
    for (uri, status, code) in cases {
        let (got, body) = get(&r, uri).await;
        assert_eq!(got, *status, "{uri}: {body}");
        let body = json(&body);
        assert_eq!(body["code"], *code, "{uri}: {body}");
        assert!(!body["message"].as_str().unwrap().is_empty());
    }
    let admin: &[(&str, &str, StatusCode, &str)] = &[
        (
            "7",
            r#"{"name":"","step":10}"#,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "7",
            r#"{"name":"a","step":0}"#,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "7",
            r#"{"name":"a","max_limit_id":-1}"#,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "7",
            r#"{"nme":"a"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "7",
            "not json",
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
        ),
        (
            "256",
            r#"{"name":"a"}"#,
            StatusCode::BAD_REQUEST,
            "invalid_app",
        ),
    ];
    for (app, body, status, code) in admin {
        let (got, answer) = put_app(&r, app, body).await;
        assert_eq!(got, *status, "{app} {body}: {answer}");
        assert_eq!(json(&answer)["code"], *code, "{app} {body}: {answer}");
    }
    let (status, body) = call(&r, "PUT", "/v1/admin/apps/7", &[], r#"{"name":"a"}"#).await;
    assert_eq!(
        (status, json(&body)["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    service.shutdown();
    delete_prefix(&redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_failures_are_503_with_a_fixed_sentence() {
    // Redis that does not answer: 503 redis_unavailable, nothing about the server in the body.
    let store = sqlite().await;
    store
        .create_or_update_app(&AppSpec::new(7, "orders"))
        .await
        .unwrap();
    let (service, _) = service_on(store, "redis://:secret@127.0.0.1:1").await;
    let r = router(Some(Arc::clone(&service)));
    let (status, body) = get(&r, "/api/shard/get/7?gatePass=a").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(json(&body)["code"], "redis_unavailable");
    for secret in ["127.0.0.1", "secret", "redis://", "refused"] {
        assert!(!body.contains(secret), "{body} shows {secret}");
    }
    service.shutdown();

    // A database that never answered: 503 not_initialised.
    let options = StoreOptions {
        migrate: false,
        connect_timeout: Duration::from_millis(200),
        ..StoreOptions::default()
    };
    let dead = Store::connect_lazy("postgres://postgres:pw@127.0.0.1:1/none", options).unwrap();
    let redis = shared_redis().await;
    let (service, prefix) = service_on(dead, &redis).await;
    let r = router(Some(Arc::clone(&service)));
    let (status, body) = get(&r, "/v1/apps/7/ids?gate_pass=a").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(json(&body)["code"], "not_initialised");
    assert!(
        !body.contains("127.0.0.1") && !body.contains("pw"),
        "{body}"
    );
    service.shutdown();
    delete_prefix(&redis, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_app_is_409_and_an_empty_queue_503() {
    let redis = shared_redis().await;
    let (service, prefix) = service_on(sqlite().await, &redis).await;
    let r = router(Some(Arc::clone(&service)));
    // The limit is on the whole ID: the gate pass's shard gets indexes 1 to 15 under it.
    let shard = shard_of("a");
    let limit = 15_u64 << 14 | u64::from(shard) << 8 | 3;
    let app = format!(r#"{{"name":"tiny","step":10,"max_limit_id":{limit}}}"#);
    let (status, body) = put_app(&r, "3", &app).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(json(&body)["largest_id"], limit);
    let (status, body) = get(&r, "/v1/apps/3/ids?gate_pass=a&count=15").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = get(&r, "/api/shard/get/3?gatePass=a").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(json(&body)["code"], "app_exhausted");
    assert!(
        json(&body)["message"]
            .as_str()
            .unwrap()
            .contains("raise max_limit_id")
    );

    // Another server holds the refill lock of an empty list and never pushes.
    service.upsert_app(&AppSpec::new(4, "other")).await.unwrap();
    let client = redis::Client::open(redis.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let lock = format!("{prefix}lock_4_{shard}");
    let _held = RedisLock::acquire(&mut conn, &lock, Duration::from_secs(30))
        .await
        .unwrap()
        .unwrap();
    let (status, body) = get(&r, "/api/shard/get/4?gatePass=a").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(json(&body)["code"], "queue_empty");
    service.shutdown();
    delete_prefix(&redis, &prefix).await;
}

#[tokio::test]
async fn with_the_mode_off_its_routes_are_404_but_decoding_works() {
    let r = router(None);
    let (status, body) = get(&r, "/api/shard/get/7?gatePass=a").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(json(&body)["code"], "sharded_disabled");
    let (status, body) = get(&r, "/v1/ids/16416519?layout=sharded").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        json(&body),
        serde_json::json!({"id": 16416519, "layout": "sharded", "app_id": 7, "shard": 63, "index": 1001})
    );
}
