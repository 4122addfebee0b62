//! The router answered without a socket (axum's `oneshot` testing pattern): every ID route's
//! body and status, and the bad-input table.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{get, ids_in, json, put_tag};
use uidgen_core::{
    CachedOptions, CachedUidGenerator, Layout, ManualClock, SnowflakeGenerator, UidError,
    UidGenerator,
};
use uidgen_server::http::{app, auth::ct_eq};
use uidgen_server::service::state::AppState;

const NOW_MS: u64 = 1_800_000_000_000;

fn router_with(layout: Layout) -> uidgen_server::http::observe::App {
    let clock = ManualClock::auto_advancing(NOW_MS);
    let generator = SnowflakeGenerator::new(layout, 5, clock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.batch_cap = 1000;
    app(Arc::new(state))
}

fn router() -> uidgen_server::http::observe::App {
    router_with(Layout::snowflake().unwrap())
}

async fn call(
    router: &uidgen_server::http::observe::App,
    method: &str,
    uri: &str,
    body: &str,
) -> (StatusCode, String) {
    common::call(router, method, uri, &[], body).await
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
    assert_eq!(fields["genMethod"], 2, "issued over HTTP (REST)");
    let (time, seq) = (
        fields["time"].as_u64().unwrap(),
        fields["seq"].as_u64().unwrap(),
    );

    let (status, body) = get(
        &r,
        &format!("/makeid?time={time}&seq={seq}&machine=5&genMethod=2"),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, id.to_string(), "makeid inverts expid");
    // Vesta's makeId(time, seq): the rest is the serving instance's (worker 5, REST, the
    // layout's type and version), so time and sequence alone give the served ID back.
    let (status, body) = get(&r, &format!("/makeid?time={time}&seq={seq}")).await;
    assert_eq!((status, body), (StatusCode::OK, id.to_string()));
    let (status, body) = get(&r, &format!("/makeid?time={time}&seq={seq}&process=1")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(body.contains("`process` without `machine`"), "{body}");
    // On a layout with type 1 and a datacenter, the defaults are the layout's too.
    let layout = Layout::vesta_min_granularity().unwrap();
    let r2 = router_with(layout.clone());
    let (_, body) = get(&r2, "/genid").await;
    let served: u64 = body.parse().unwrap();
    let d = layout.decode(served).unwrap();
    let (status, body) = get(
        &r2,
        &format!("/makeid?time={}&seq={}", d.parts.time, d.parts.sequence),
    )
    .await;
    assert_eq!((status, body), (StatusCode::OK, served.to_string()));

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
    let mut ids = ids_in(&json(&body));
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
async fn bad_input_gets_the_documented_status_code_and_message() {
    let r = router();
    let big = "x".repeat(64 * 1024);
    let bad = StatusCode::BAD_REQUEST;
    // (method, uri, body, status, JSON code, part of the message)
    let cases: Vec<(&str, &str, &str, StatusCode, &str, &str)> = vec![
        (
            "GET",
            "/v1/ids/abc",
            "",
            bad,
            "malformed_id",
            "malformed id abc: not a non-negative decimal integer",
        ),
        (
            "GET",
            "/v1/ids/-5",
            "",
            bad,
            "malformed_id",
            "malformed id -5: not a non-negative decimal integer",
        ),
        (
            "GET",
            "/v1/ids/9223372036854775808",
            "",
            bad,
            "malformed_id",
            "the sign bit is set",
        ),
        // The document bounds an ID by this server's layout; a narrower preset named in
        // `layout` refuses what it cannot have made (scripts/schemathesis.toml explains why
        // the fuzz accepts this 400).
        (
            "GET",
            "/v1/ids/9223372036854775807?layout=safe_js",
            "",
            bad,
            "malformed_id",
            "bits above the layout's width are set",
        ),
        (
            "GET",
            "/v1/ids/18446744073709551616",
            "",
            bad,
            "malformed_id",
            "larger than 64 bits",
        ),
        (
            "GET",
            "/v1/ids/%FF",
            "",
            bad,
            "invalid_parameter",
            "invalid path",
        ),
        (
            "GET",
            "/v1/ids?count=0",
            "",
            bad,
            "invalid_count",
            "count 0 is out of range; ask for 1 to 1000 IDs",
        ),
        (
            "GET",
            "/v1/ids?count=1000000000",
            "",
            bad,
            "invalid_count",
            "count 1000000000 is out of range",
        ),
        (
            "GET",
            "/v1/ids?count=-1",
            "",
            bad,
            "invalid_parameter",
            "`count` must be a non-negative integer",
        ),
        (
            "GET",
            "/v1/ids?count=abc",
            "",
            bad,
            "invalid_parameter",
            "`count` must be a non-negative integer",
        ),
        (
            "GET",
            "/v1/ids?count=1&count=2",
            "",
            bad,
            "invalid_parameter",
            "query parameter `count` is given more than once",
        ),
        (
            "GET",
            "/v1/ids?count=99999999999999999999999",
            "",
            bad,
            "invalid_parameter",
            "`count` is larger than 64 bits",
        ),
        (
            "GET",
            "/v1/segments/t?count=1&count=2",
            "",
            bad,
            "invalid_parameter",
            "`count` is given more than once",
        ),
        (
            "GET",
            "/expid",
            "",
            bad,
            "invalid_parameter",
            "missing query parameter `id`",
        ),
        (
            "GET",
            "/makeid?machine=1&seq=1",
            "",
            bad,
            "invalid_parameter",
            "missing query parameter `time`",
        ),
        (
            "GET",
            "/makeid?time=1&seq=1&machine=1024",
            "",
            bad,
            "invalid_parameter",
            "worker id 1024 exceeds the layout's maximum 1023",
        ),
        (
            "GET",
            "/makeid?time=1&seq=4096&machine=1",
            "",
            bad,
            "invalid_parameter",
            "sequence value 4096 does not fit in 12 bits",
        ),
        (
            "GET",
            "/transtime?time=99999999999999",
            "",
            bad,
            "invalid_parameter",
            "timestamp bits exhausted",
        ),
        (
            "POST",
            "/v1/ids/make",
            "{",
            bad,
            "invalid_parameter",
            "invalid JSON body",
        ),
        (
            "POST",
            "/v1/ids/make",
            r#"{"worker":1,"sequence":1}"#,
            bad,
            "invalid_parameter",
            "give exactly one of `time`",
        ),
        (
            "POST",
            "/v1/ids/make",
            r#"{"timestamp":"yesterday","worker":1,"sequence":1}"#,
            bad,
            "invalid_parameter",
            "`timestamp`: must be ISO-8601",
        ),
        (
            "POST",
            "/v1/ids/make",
            r#"{"time":1,"worker":1,"sequence":1,"colour":2}"#,
            bad,
            "invalid_parameter",
            "unknown field `colour`",
        ),
        (
            "POST",
            "/v1/ids/make",
            &big,
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "larger than 16384 bytes",
        ),
        (
            "POST",
            "/v1/ids",
            "",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "does not take that method",
        ),
        (
            "DELETE",
            "/genid",
            "",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "does not take that method",
        ),
        (
            "GET",
            "/v1/ids/make",
            "",
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "does not take that method",
        ),
        (
            "GET",
            "/v1/segments/t",
            "",
            StatusCode::NOT_FOUND,
            "segments_disabled",
            "segment mode is disabled",
        ),
        (
            "PUT",
            "/v1/admin/segments/t",
            "{}",
            StatusCode::NOT_FOUND,
            "admin_disabled",
            "the admin API is disabled",
        ),
        (
            "GET",
            "/no/such/route",
            "",
            StatusCode::NOT_FOUND,
            "not_found",
            "no such route",
        ),
    ];
    // With credentials, so that the admin route's 404 shows (without them it is 401 first).
    let credentials = [("authorization", "Bearer a-token-of-a-client")];
    for (method, uri, body, status, code, message) in cases {
        let (got_status, got_body) = common::call(&r, method, uri, &credentials, body).await;
        let shown = &uri[..uri.len().min(60)];
        assert_eq!(got_status, status, "{method} {shown}: {got_body}");
        let err = json(&got_body);
        assert_eq!(err["code"], code, "{method} {shown}: {got_body}");
        let text = err["message"].as_str().unwrap();
        assert!(
            text.contains(message),
            "{method} {shown}: {text:?} lacks {message:?}"
        );
    }
    // The document's security scheme holds even where the admin API is off: no credentials is
    // 401, as a client generated from it expects.
    let (status, body) = call(&r, "PUT", "/v1/admin/segments/t", "{}").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(json(&body)["code"], "unauthorized", "{body}");
}

#[tokio::test]
async fn leaf_routes_answer_bad_requests_with_bare_text() {
    let r = router();
    for (method, uri, status) in [
        ("GET", "/api/snowflake/get/%FF", StatusCode::BAD_REQUEST),
        (
            "POST",
            "/api/snowflake/get/key",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        ("GET", "/api/segment/get/%FF", StatusCode::BAD_REQUEST),
    ] {
        let (got, body) = call(&r, method, uri, "").await;
        assert_eq!(got, status, "{method} {uri}: {body}");
        assert!(!body.is_empty() && !body.starts_with('{'), "{uri}: {body}");
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

/// A generator that has stopped, with a reason quoting the database (as a lost lease's does).
struct Stopped(Layout);

impl UidGenerator for Stopped {
    fn next_id(&self) -> uidgen_core::Result<u64> {
        Err(UidError::GeneratorStopped(
            "worker lease lost: database error at postgres://app:***@db/ids while renewing: error returned from database".into(),
        ))
    }
    fn layout(&self) -> &Layout {
        &self.0
    }
    fn issued_until_ms(&self) -> Option<u64> {
        None
    }
}

#[tokio::test]
async fn a_stopped_generator_is_503_without_the_database_text() {
    let r = app(Arc::new(AppState::embedded(
        Arc::new(Stopped(Layout::snowflake().unwrap())),
        5,
    )));
    for uri in ["/genid", "/v1/ids?count=3", "/api/snowflake/get/k"] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{uri}: {body}");
        assert!(body.contains("see the server log"), "{uri}: {body}");
        assert!(!body.contains("postgres://"), "{uri}: {body}");
        assert!(
            !body.contains("error returned from database"),
            "{uri}: {body}"
        );
    }
}

/// Log lines written by the tracing subscriber of the current thread.
#[derive(Clone, Default)]
struct CapturedLog(Arc<std::sync::Mutex<Vec<u8>>>);

impl CapturedLog {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLog {
    type Writer = Self;
    fn make_writer(&'a self) -> Self {
        self.clone()
    }
}

// A current-thread runtime: the subscriber set for this thread sees the middleware run.
#[tokio::test]
async fn the_middleware_logs_the_cause_the_client_is_not_told_with_its_route() {
    let log = CapturedLog::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(log.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let r = app(Arc::new(AppState::embedded(
        Arc::new(Stopped(Layout::snowflake().unwrap())),
        5,
    )));
    let (status, body) = get(&r, "/v1/ids?count=3").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(!body.contains("postgres://"), "{body}");
    let text = log.text();
    assert_eq!(text.lines().count(), 1, "logged once: {text}");
    for part in ["WARN", "/v1/ids", "not_ready", "postgres://app:***@db/ids"] {
        assert!(text.contains(part), "{part}: {text}");
    }
    let (status, _) = get(&r, "/v1/ids/abc").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(log.text(), text, "a client's mistake has no cause to log");
}

fn cached_router(
    batch_cap: usize,
) -> (
    Arc<CachedUidGenerator<ManualClock>>,
    uidgen_server::http::observe::App,
) {
    let clock = ManualClock::auto_advancing(NOW_MS);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::waiting(std::time::Duration::from_secs(1))
    };
    let layout = Layout::baidu(uidgen_core::layout::DEFAULT_EPOCH).unwrap();
    let generator = Arc::new(CachedUidGenerator::new(layout, 5, clock, options).unwrap());
    let mut state = AppState::embedded(generator.clone(), 5);
    state.batch_cap = batch_cap;
    (generator, app(Arc::new(state)))
}

#[tokio::test]
async fn cached_generator_serves_single_ids_and_batches_larger_than_its_ring() {
    let (generator, r) = cached_router(100_000);
    let capacity = generator.ring().buffer_size();
    assert!(capacity < 100_000, "the batch must outgrow the ring");
    let mut ids = Vec::new();
    for _ in 0..10 {
        let (status, body) = get(&r, "/genid").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        ids.push(body.parse::<u64>().unwrap());
    }
    for uri in ["/v1/ids?count=500", "/v1/ids?count=100000"] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}");
        ids.extend(ids_in(&json(&body)));
    }
    assert_eq!(ids.len(), 10 + 500 + 100_000);
    common::assert_unique(ids);
    let (_, metrics) = get(&r, "/metrics").await;
    assert!(
        metrics.contains(&format!("uidgen_ring_capacity {capacity}")),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_cached_generator_out_of_time_bits_answers_exhausted() {
    // Four bits of seconds, standing at the last one: one second of IDs, then the end.
    let layout = Layout::baidu_bits(4, 46, 13, "2026-01-01").unwrap();
    let clock = ManualClock::new(layout.epoch_ms() + 15_000);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::default()
    };
    let generator = Arc::new(CachedUidGenerator::new(layout, 5, clock, options).unwrap());
    let state = AppState::embedded(generator.clone(), 5);
    let r = app(Arc::new(state));
    let (status, _) = get(&r, "/v1/ids?count=8192").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = get(&r, "/v1/ids").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    // What the `uidgen_errors_total{kind="exhausted"}` alert in docs/OPERATIONS.md counts.
    assert_eq!(json(&body)["code"], "exhausted", "{body}");
    let (_, metrics) = get(&r, "/metrics").await;
    assert!(metrics.contains("kind=\"exhausted\""), "{metrics}");
}

#[tokio::test]
async fn readyz_reports_a_stopped_ring_without_its_reason() {
    let (generator, r) = cached_router(1000);
    assert_eq!(get(&r, "/readyz").await, (StatusCode::OK, "ready".into()));
    generator
        .ring()
        .stop("padding failed: sqlite://secret.db is gone");
    let (status, body) = get(&r, "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(json(&body)["code"], "not_ready");
    assert!(body.contains("the ID generator has stopped"), "{body}");
    assert!(!body.contains("sqlite://"), "{body}");
}

use common::{TOKEN, segment_router};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_description_over_256_characters_is_a_400_naming_the_field() {
    let (segments, r) = segment_router().await;
    let auth = format!("Bearer {TOKEN}");
    let body = |len: usize| format!(r#"{{"step": 10, "description": "{}"}}"#, "d".repeat(len));
    let (status, reply) = put_tag(&r, "order", Some(&auth), &body(256)).await;
    assert_eq!(status, StatusCode::OK, "{reply}");

    let (status, reply) = put_tag(&r, "order", Some(&auth), &body(257)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    let error = json(&reply);
    assert_eq!(error["code"], "invalid_parameter", "{reply}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("description"), "{message}");
    assert!(message.contains("at most 256"), "{message}");
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_token_is_checked_before_the_request_is_read() {
    let (segments, r) = segment_router().await;
    let wrong = "Bearer not-the-token-at-all";
    // A body that would be a 400 once read: without the right token it is never read.
    for (auth, status, code) in [
        (None, StatusCode::UNAUTHORIZED, "unauthorized"),
        (Some(wrong), StatusCode::FORBIDDEN, "forbidden"),
    ] {
        let (got, reply) = put_tag(&r, "order", auth, "{").await;
        assert_eq!(got, status, "{auth:?}: {reply}");
        assert_eq!(json(&reply)["code"], code, "{auth:?}: {reply}");
    }
    let auth = format!("Bearer {TOKEN}");
    let (status, reply) = put_tag(&r, "order", Some(&auth), "{").await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    let (status, reply) = call(&r, "GET", "/v1/admin/segments/order", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{reply}");
    let (_, metrics) = get(&r, "/metrics").await;
    for kind in [
        "unauthorized",
        "forbidden",
        "invalid_parameter",
        "method_not_allowed",
    ] {
        assert!(
            metrics.contains(&format!(r#"uidgen_errors_total{{kind="{kind}"}} 1"#)),
            "{kind}: {metrics}"
        );
    }
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issued_ids_are_counted_under_the_route_pattern_not_the_path() {
    let (segments, r) = segment_router().await;
    let auth = format!("Bearer {TOKEN}");
    for tag in ["order", "invoice"] {
        let (status, reply) = put_tag(&r, tag, Some(&auth), r#"{"step": 100}"#).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let (status, reply) = get(&r, &format!("/v1/segments/{tag}?count=3")).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
        let (status, reply) = get(&r, &format!("/api/segment/get/{tag}")).await;
        assert_eq!(status, StatusCode::OK, "{reply}");
    }
    get(&r, "/genid").await;
    get(&r, "/api/snowflake/get/k").await;
    let (_, metrics) = get(&r, "/metrics").await;
    for (route, count) in [
        ("/v1/segments/{tag}", 6),
        ("/api/segment/get/{key}", 2),
        ("/genid", 1),
        ("/api/snowflake/get/{key}", 1),
    ] {
        assert!(
            metrics.contains(&format!(
                r#"uidgen_ids_issued_total{{route="{route}"}} {count}"#
            )),
            "{route}: {metrics}"
        );
    }
    assert!(!metrics.contains("/v1/segments/order"), "{metrics}");
    segments.shutdown();
}

#[test]
fn token_comparison_needs_every_byte_and_the_length() {
    let secret = b"an-admin-token-of-some-length";
    assert!(ct_eq(secret, secret));
    assert!(!ct_eq(b"an-admin-token-of-some-lengtH", secret));
    assert!(!ct_eq(b"an-admin-token", secret), "a prefix");
    assert!(
        !ct_eq(b"an-admin-token-of-some-length!", secret),
        "an extension"
    );
    let mut padded = secret.to_vec();
    padded.push(0);
    assert!(!ct_eq(&padded, secret), "zero padding");
    assert!(!ct_eq(b"", secret));
    assert!(ct_eq(b"", b""));
}

#[tokio::test]
async fn layouts_lists_every_preset_with_its_bits_and_decode_takes_each() {
    let r = router();
    let (status, body) = get(&r, "/v1/layouts").await;
    assert_eq!(status, StatusCode::OK);
    let layouts = json(&body);
    let layouts = layouts.as_array().unwrap();
    assert_eq!(layouts[0]["name"], "snowflake");
    assert_eq!(layouts[0]["served"], true);
    let names: Vec<&str> = layouts
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    for preset in uidgen_core::layout::PRESET_NAMES {
        assert_eq!(
            names.iter().filter(|&&n| n == preset).count(),
            1,
            "{preset} once in {names:?}"
        );
    }
    assert_eq!(names.last(), Some(&"sharded"));
    // Fields tile the layout's bits from the top down: 64, or fewer for a narrower layout.
    for layout in layouts {
        let width = Layout::preset(layout["name"].as_str().unwrap()).map_or(64, |l| l.width());
        let mut top = u64::from(width);
        for field in layout["fields"].as_array().unwrap() {
            let (bits, shift) = (
                field["bits"].as_u64().unwrap(),
                field["shift"].as_u64().unwrap(),
            );
            assert_eq!(shift + bits, top, "{layout}");
            top = shift;
        }
        assert_eq!(top, 0, "{layout}");
    }
    // Every preset decodes what it composed.
    for preset in uidgen_core::layout::PRESET_NAMES {
        let layout = Layout::preset(preset).unwrap();
        let parts = layout.parts(12_345, 3, 9);
        let id = layout.compose(&parts).unwrap();
        let (status, body) = get(&r, &format!("/v1/ids/{id}?layout={preset}")).await;
        assert_eq!(status, StatusCode::OK, "{preset}: {body}");
        let d = json(&body);
        assert_eq!(d["layout"], preset);
        assert_eq!(
            (
                d["time"].as_u64(),
                d["worker"].as_u64(),
                d["sequence"].as_u64()
            ),
            (Some(12_345), Some(3), Some(9)),
            "{preset}: {body}"
        );
    }
    let (status, body) = get(&r, "/v1/ids/1?layout=nope").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let message = json(&body)["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("unknown layout \"nope\"") && message.contains("sonyflake"),
        "{message}"
    );
}

#[tokio::test]
async fn status_reports_the_worker_and_counts_issued_ids() {
    let r = router();
    let (status, body) = get(&r, "/v1/status").await;
    assert_eq!(status, StatusCode::OK);
    let before = json(&body);
    assert_eq!(before["worker_id"], 5);
    assert_eq!(before["layout"], "snowflake");
    assert_eq!(before["ring"], serde_json::Value::Null, "no ring: {body}");
    assert_eq!(before["segments_enabled"], false);
    assert_eq!(before["admin_enabled"], false);
    get(&r, "/v1/ids?count=7").await;
    get(&r, "/genid").await;
    let (_, body) = get(&r, "/v1/status").await;
    let after = json(&body);
    assert_eq!(
        after["ids_issued"].as_u64().unwrap() - before["ids_issued"].as_u64().unwrap(),
        8
    );
}
