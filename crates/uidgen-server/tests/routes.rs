//! The router answered without a socket (axum's `oneshot` testing pattern): every ID route's
//! body and status, and the bad-input table.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidGenerator};
use uidgen_server::http::{AppState, app};

const NOW_MS: u64 = 1_800_000_000_000;

fn router_with(layout: Layout) -> axum::Router {
    let clock = ManualClock::auto_advancing(NOW_MS);
    let generator = SnowflakeGenerator::new(layout, 5, clock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.batch_cap = 1000;
    app(Arc::new(state))
}

fn router() -> axum::Router {
    router_with(Layout::snowflake().unwrap())
}

async fn call(router: &axum::Router, method: &str, uri: &str, body: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn get(router: &axum::Router, uri: &str) -> (StatusCode, String) {
    call(router, "GET", uri, "").await
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

#[tokio::test]
async fn leaf_snowflake_route_returns_a_bare_decimal_id() {
    let r = router();
    let (status, body) = get(&r, "/api/snowflake/get/any-key").await;
    assert_eq!(status, StatusCode::OK);
    let id: u64 = body.parse().unwrap();
    let decoded = Layout::snowflake().unwrap().decode(id).unwrap();
    assert_eq!(decoded.parts.worker, 5);
    assert_eq!(decoded.timestamp_ms, NOW_MS);
}

#[tokio::test]
async fn vesta_routes_generate_explain_make_and_translate() {
    let r = router_with(Layout::vesta_max_peak().unwrap());
    let (status, body) = get(&r, "/genid").await;
    assert_eq!(status, StatusCode::OK);
    let id: u64 = body.parse().unwrap();

    let (status, body) = get(&r, &format!("/expid?id={id}")).await;
    assert_eq!(status, StatusCode::OK);
    let fields = json(&body);
    assert_eq!(fields["machine"], 5);
    assert_eq!(fields["type"], 0);
    let (time, seq) = (
        fields["time"].as_u64().unwrap(),
        fields["seq"].as_u64().unwrap(),
    );

    let (status, body) = get(&r, &format!("/makeid?time={time}&seq={seq}&machine=5")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, id.to_string(), "makeid inverts expid");

    let (status, body) = get(&r, "/transtime?time=0").await;
    assert_eq!(
        (status, body.as_str()),
        (StatusCode::OK, "2014-12-31T16:00:00.000Z")
    );
}

#[tokio::test]
async fn batch_route_returns_distinct_ids() {
    let r = router();
    let (status, body) = get(&r, "/v1/ids?count=1000").await;
    assert_eq!(status, StatusCode::OK);
    let mut ids: Vec<u64> = json(&body)["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ids.len(), 1000);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1000);
    let (_, body) = get(&r, "/v1/ids").await;
    assert_eq!(
        json(&body)["ids"].as_array().unwrap().len(),
        1,
        "count defaults to 1"
    );
}

#[tokio::test]
async fn decode_and_make_are_inverses() {
    let r = router();
    let (status, body) = call(
        &r,
        "POST",
        "/v1/ids/make",
        r#"{"timestamp":"2027-01-15T08:00:00Z","worker":7,"sequence":42}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let made = json(&body);
    assert_eq!(made["timestamp"], "2027-01-15T08:00:00.000Z");
    let id = made["id"].as_u64().unwrap();
    let (status, body) = get(&r, &format!("/v1/ids/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let decoded = json(&body);
    assert_eq!(decoded, made);
    assert_eq!(decoded["worker"], 7);
    assert_eq!(decoded["sequence"], 42);
    assert_eq!(decoded["layout"], "snowflake");
    assert!(
        decoded.get("version").is_none(),
        "snowflake has no version field"
    );
}

#[tokio::test]
async fn health_readiness_and_metrics_answer() {
    let r = router();
    assert_eq!(get(&r, "/healthz").await, (StatusCode::OK, "ok".into()));
    assert_eq!(get(&r, "/readyz").await, (StatusCode::OK, "ready".into()));
    get(&r, "/v1/ids?count=10").await;
    get(&r, "/v1/ids/abc").await;
    let (status, body) = get(&r, "/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        body.contains(r#"uidgen_ids_issued_total{route="/v1/ids"} 10"#),
        "{body}"
    );
    assert!(
        body.contains(r#"uidgen_errors_total{kind="malformed_id"} 1"#),
        "{body}"
    );
    assert!(
        body.contains("uidgen_http_request_duration_seconds_bucket"),
        "{body}"
    );
}

#[tokio::test]
async fn bad_input_gets_the_documented_status_and_message() {
    let r = router();
    let big = "x".repeat(64 * 1024);
    let cases: Vec<(&str, String, &str, StatusCode, &str)> = vec![
        (
            "GET",
            "/v1/ids/abc".into(),
            "",
            StatusCode::BAD_REQUEST,
            "malformed id abc: not a non-negative decimal integer",
        ),
        (
            "GET",
            "/v1/ids/-5".into(),
            "",
            StatusCode::BAD_REQUEST,
            "malformed id -5: not a non-negative decimal integer",
        ),
        (
            "GET",
            "/v1/ids/9223372036854775808".into(),
            "",
            StatusCode::BAD_REQUEST,
            "the sign bit is set",
        ),
        (
            "GET",
            "/v1/ids/18446744073709551616".into(),
            "",
            StatusCode::BAD_REQUEST,
            "larger than 64 bits",
        ),
        (
            "GET",
            "/v1/ids?count=0".into(),
            "",
            StatusCode::BAD_REQUEST,
            "count 0 is out of range; ask for 1 to 1000 IDs",
        ),
        (
            "GET",
            "/v1/ids?count=1000000000".into(),
            "",
            StatusCode::BAD_REQUEST,
            "count 1000000000 is out of range",
        ),
        (
            "GET",
            "/v1/ids?count=-1".into(),
            "",
            StatusCode::BAD_REQUEST,
            "`count` must be a non-negative integer",
        ),
        (
            "GET",
            "/v1/ids?count=99999999999999999999999".into(),
            "",
            StatusCode::BAD_REQUEST,
            "`count` is larger than 64 bits",
        ),
        (
            "GET",
            "/expid".into(),
            "",
            StatusCode::BAD_REQUEST,
            "missing query parameter `id`",
        ),
        (
            "GET",
            "/makeid?time=1&seq=1".into(),
            "",
            StatusCode::BAD_REQUEST,
            "missing query parameter `machine`",
        ),
        (
            "GET",
            "/makeid?time=1&seq=1&machine=1024".into(),
            "",
            StatusCode::BAD_REQUEST,
            "worker id 1024 exceeds the layout's maximum 1023",
        ),
        (
            "GET",
            "/makeid?time=1&seq=4096&machine=1".into(),
            "",
            StatusCode::BAD_REQUEST,
            "sequence value 4096 does not fit in 12 bits",
        ),
        (
            "GET",
            "/transtime?time=99999999999999".into(),
            "",
            StatusCode::BAD_REQUEST,
            "timestamp bits exhausted",
        ),
        (
            "POST",
            "/v1/ids/make".into(),
            "{",
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
        ),
        (
            "POST",
            "/v1/ids/make".into(),
            r#"{"worker":1,"sequence":1}"#,
            StatusCode::BAD_REQUEST,
            "give exactly one of `time`",
        ),
        (
            "POST",
            "/v1/ids/make".into(),
            r#"{"timestamp":"yesterday","worker":1,"sequence":1}"#,
            StatusCode::BAD_REQUEST,
            "`timestamp` must be ISO-8601",
        ),
        (
            "POST",
            "/v1/ids/make".into(),
            r#"{"time":1,"worker":1,"sequence":1,"colour":2}"#,
            StatusCode::BAD_REQUEST,
            "unknown field `colour`",
        ),
        (
            "POST",
            "/v1/ids/make".into(),
            &big,
            StatusCode::PAYLOAD_TOO_LARGE,
            "",
        ),
        (
            "GET",
            "/no/such/route".into(),
            "",
            StatusCode::NOT_FOUND,
            "no such route",
        ),
    ];
    for (method, uri, body, status, message) in cases {
        let (got_status, got_body) = call(&r, method, &uri, body).await;
        let shown = &uri[..uri.len().min(60)];
        assert_eq!(got_status, status, "{method} {shown}: {got_body}");
        if !message.is_empty() {
            let err = json(&got_body);
            assert!(err["code"].is_string(), "{shown}: {got_body}");
            let text = err["message"].as_str().unwrap();
            assert!(
                text.contains(message),
                "{method} {shown}: {text:?} lacks {message:?}"
            );
        }
    }
}

#[tokio::test]
async fn generation_failures_are_503_with_a_reason() {
    let layout = Layout::snowflake().unwrap();
    let clock = ManualClock::new(NOW_MS);
    let generator = Arc::new(SnowflakeGenerator::new(layout, 5, clock.clone()).unwrap());
    generator.next_id().unwrap();
    clock.rewind(1_000);
    let r = app(Arc::new(AppState::embedded(generator, 5)));
    let (status, body) = get(&r, "/v1/ids").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(&body)["code"], "clock_moved_backwards");
    let (status, body) = get(&r, "/api/snowflake/get/k").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        body,
        "clock moved backwards by 1000 ms; refusing to issue IDs"
    );
}
