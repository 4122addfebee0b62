//! Errors that say what is wrong, over HTTP (the router without a socket) and gRPC (the
//! service called in process): each names the field the caller sent, once, in its own words.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::{call, get, json, put_tag};
use tonic::Request;
use uidgen_core::{Layout, ManualClock, SnowflakeGenerator};
use uidgen_proto::v1::id_service_server::IdService;
use uidgen_proto::v1::{MakeIdRequest, SegmentIdsRequest, StreamIdsRequest};
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_server::grpc::GrpcService;
use uidgen_server::http::app;
use uidgen_server::service::state::AppState;
use uidgen_store::testing::{TestDb, fresh_store};

const NOW_MS: u64 = 1_800_000_000_000;
const TOKEN: &str = "an-admin-token-of-some-length";
/// 1999-01-01T00:00:00Z, before every preset's epoch but Twitter's.
const IN_1999_MS: u64 = 915_148_800_000;

/// State over a Baidu layout (epoch 2026-01-01), segment mode on a fresh SQLite store with
/// the tag `order`, and the admin API enabled.
async fn state() -> (Arc<SegmentService>, Arc<AppState>) {
    let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let segments =
        SegmentService::start(store, SegmentOptions::default(), uidgen_core::SystemClock)
            .await
            .unwrap();
    segments.upsert_tag("order", 100, None).await.unwrap();
    let layout = Layout::baidu(uidgen_core::layout::DEFAULT_EPOCH).unwrap();
    let clock = ManualClock::auto_advancing(NOW_MS);
    let generator = SnowflakeGenerator::new(layout, 5, clock).unwrap();
    let mut state = AppState::embedded(Arc::new(generator), 5);
    state.batch_cap = 1000;
    state.segments = Some(segments.clone());
    state.admin_token = Some(TOKEN.into());
    (segments, Arc::new(state))
}

fn grpc(state: &Arc<AppState>) -> GrpcService {
    let (_stop, stopping) = tokio::sync::watch::channel(false);
    GrpcService::new(Arc::clone(state), 1000, stopping)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_accepted_in_any_case() {
    let (segments, state) = state().await;
    let r = app(state);
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("{scheme} {TOKEN}");
        let (status, body) = put_tag(&r, "invoice", Some(&auth), r#"{"step": 10}"#).await;
        assert_eq!(status, StatusCode::OK, "{scheme}: {body}");
    }
    let wrong = "bearer not-the-token-at-all";
    let (status, body) = put_tag(&r, "invoice", Some(wrong), r#"{"step": 10}"#).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_is_named_as_a_number_and_a_non_number_as_what_was_sent() {
    let (segments, state) = state().await;
    let r = app(state);
    for (uri, message) in [
        (
            "/v1/segments/order?count=0",
            "count 0 is out of range; ask for 1 to 1000 IDs",
        ),
        (
            "/v1/segments/order?count=1001",
            "count 1001 is out of range; ask for 1 to 1000 IDs",
        ),
        (
            "/v1/segments/order?count=many",
            "`count` must be a whole number from 1 to 1000, got \"many\"",
        ),
        (
            "/v1/ids?count=0",
            "count 0 is out of range; ask for 1 to 1000 IDs",
        ),
    ] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(json(&body)["code"], "invalid_count", "{uri}");
        assert_eq!(json(&body)["message"], message, "{uri}");
    }
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_before_the_epoch_is_said_to_be_so_not_blamed_on_the_clock() {
    let (segments, state) = state().await;
    let before = "time 1999-01-01T00:00:00.000Z is before the layout's epoch \
                  2026-01-01T00:00:00.000Z: no ID of this layout holds it";
    let r = app(Arc::clone(&state));
    let body = format!(r#"{{"timestamp": {IN_1999_MS}, "worker": 1, "sequence": 1}}"#);
    let (status, reply) = call(&r, "POST", "/v1/ids/make", &[], &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    let timestamp = json(&reply)["fields"]["timestamp"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(timestamp.starts_with(before), "{timestamp}");
    assert!(!reply.contains("clock"), "{reply}");

    let status = grpc(&state)
        .make_id(Request::new(MakeIdRequest {
            timestamp_ms: Some(IN_1999_MS),
            worker: 1,
            sequence: 1,
            ..MakeIdRequest::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status
            .message()
            .starts_with(&format!("`timestamp_ms`: {before}")),
        "{}",
        status.message()
    );
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_make_id_names_every_bad_field_as_http_does() {
    let (segments, state) = state().await;
    let status = grpc(&state)
        .make_id(Request::new(MakeIdRequest {
            time: Some(1),
            worker: 1 << 40,
            sequence: 1 << 20,
            version: 1,
            ..MakeIdRequest::default()
        }))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let message = status.message();
    for field in ["`sequence`: ", "`version`: ", "`worker`: "] {
        assert!(message.contains(field), "{field} missing: {message}");
    }
    // The same fields, the same sentences, over HTTP.
    let body = format!(
        r#"{{"time": 1, "worker": {}, "sequence": {}, "version": 1}}"#,
        1u64 << 40,
        1 << 20
    );
    let (status, reply) = call(&app(state), "POST", "/v1/ids/make", &[], &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{reply}");
    assert_eq!(json(&reply)["message"], message, "{reply}");
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_batch_sizes_are_named_by_their_field() {
    let (segments, state) = state().await;
    let service = grpc(&state);
    let status = service
        .stream_ids(Request::new(StreamIdsRequest {
            batch_size: 0,
            max_ids: 10,
            ..Default::default()
        }))
        .await
        .err()
        .unwrap();
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert_eq!(
        status.message(),
        "batch_size 0 is out of range; ask for 1 to 1000 IDs"
    );
    let status = service
        .segment_ids(Request::new(SegmentIdsRequest {
            tag: "order".into(),
            count: 0,
        }))
        .await
        .unwrap_err();
    assert_eq!(
        status.message(),
        "count 0 is out of range; ask for 1 to 1000 IDs"
    );
    segments.shutdown();
}
