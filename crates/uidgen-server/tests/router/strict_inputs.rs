//! Requests are read one way (issue 32): `HEAD` takes no ID, a query parameter a route does
//! not take is a 400 naming it, an ID in a path has one spelling, and a tag has one alphabet.
//! The router answered without a socket, as in tests/router/routes.rs.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use axum::http::StatusCode;
use common::{TOKEN, call, get, ids_in, json, put_tag, segment_router};

/// `HEAD uri`: (status, content type, body).
async fn head(
    router: &uidgen_server::http::observe::App,
    uri: &str,
) -> (StatusCode, String, String) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let request = axum::http::Request::head(uri)
        .body(axum::body::Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        content_type,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

/// How many IDs the server handed out so far (`/v1/status`).
async fn issued(router: &uidgen_server::http::observe::App) -> u64 {
    let (_, status) = get(router, "/v1/status").await;
    json(&status)["ids_issued"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_on_an_id_route_answers_without_taking_ids() {
    let (segments, r) = segment_router().await;
    let auth = format!("Bearer {TOKEN}");
    let (status, reply) = put_tag(&r, "orders", Some(&auth), r#"{"step": 100}"#).await;
    assert_eq!(status, StatusCode::OK, "{reply}");
    let (_, first) = get(&r, "/v1/segments/orders?count=1").await;
    let first = ids_in(&json(&first))[0];
    for (uri, content_type) in [
        ("/v1/segments/orders?count=50", "application/json"),
        ("/api/segment/get/orders", "text/plain"),
        ("/v1/ids?count=1000", "application/json"),
        ("/genid", "text/plain"),
        ("/api/snowflake/get/any", "text/plain"),
    ] {
        for _ in 0..2 {
            let (status, got, body) = head(&r, uri).await;
            assert_eq!(status, StatusCode::OK, "{uri}");
            assert!(got.starts_with(content_type), "{uri}: {got}");
            assert!(body.is_empty(), "{uri}: {body}");
        }
    }
    // The tag's next number is the one after the GET's: the HEADs took none.
    let (_, next) = get(&r, "/v1/segments/orders?count=1").await;
    assert_eq!(ids_in(&json(&next)), [first + 1]);
    // And nothing else was taken: the two GETs' IDs are all the server handed out.
    assert_eq!(issued(&r).await, 2);
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_on_every_get_route_of_the_document_takes_no_id() {
    let (segments, r) = segment_router().await;
    let auth = format!("Bearer {TOKEN}");
    put_tag(&r, "orders", Some(&auth), r#"{"step": 100}"#).await;
    let (_, document) = get(&r, "/openapi.json").await;
    let document = json(&document);
    let mut sent = 0;
    for (path, item) in document["paths"].as_object().unwrap() {
        if item.get("get").is_none() {
            continue;
        }
        let uri = path
            .replace("{key}", "orders")
            .replace("{tag}", "orders")
            .replace("{space}", "default")
            .replace("{app_id}", "1")
            .replace("{worker_id}", "1")
            .replace("{id}", "5")
            .replace("{text}", "20261125-1");
        let (status, _, body) = head(&r, &uri).await;
        assert!(body.is_empty(), "{uri}: {status} {body}");
        sent += 1;
    }
    assert!(sent > 20, "{sent} GET routes");
    assert_eq!(issued(&r).await, 0);
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_query_parameter_is_a_400_naming_it() {
    let (segments, r) = segment_router().await;
    for (uri, says) in [
        (
            "/v1/ids?cuont=5",
            "unknown query parameter `cuont`; did you mean `count`?",
        ),
        (
            "/v1/ids?count=2&verbose=1",
            "unknown query parameter `verbose`; this route takes `count`",
        ),
        (
            "/v1/status?x=1",
            "unknown query parameter `x`; this route takes no query parameters",
        ),
        ("/healthz?probe=1", "unknown query parameter `probe`"),
        ("/v1/ids/5?layuot=baidu", "did you mean `layout`?"),
    ] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        let error = json(&body);
        assert_eq!(error["code"], "invalid_parameter", "{uri}: {body}");
        assert!(
            error["message"].as_str().unwrap().contains(says),
            "{uri}: {body}"
        );
    }
    // Known names, percent-encoded or not, are read as before.
    let (status, body) = get(&r, "/v1/ids?c%6Funt=3").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(ids_in(&json(&body)).len(), 3);
    // The routes of the systems uidgen stands in for keep their originals' leniency, and their
    // own parameters.
    for uri in [
        "/api/snowflake/get/any?_=1764288000000",
        "/genid?_=1",
        "/expid?id=5&_=1",
    ] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    }
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_in_a_path_has_one_spelling() {
    let (segments, r) = segment_router().await;
    for uri in ["/v1/ids/5", "/v1/ids/0", "/v1/spaces/default/ids/5"] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::OK, "{uri}: {body}");
    }
    for uri in [
        "/v1/ids/%205",
        "/v1/ids/5%20",
        "/v1/ids/05",
        "/v1/ids/+5",
        "/v1/ids/%2B5",
        "/v1/ids/-5",
        "/v1/ids/%205?layout=sharded",
        "/v1/ids/05?layout=sharded",
        "/v1/spaces/default/ids/%205",
        "/v1/spaces/default/ids/007",
        "/v1/ids/%20abc?form=base36",
    ] {
        let (status, body) = get(&r, uri).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{uri}: {body}");
        assert_eq!(json(&body)["code"], "malformed_id", "{uri}: {body}");
    }
    segments.shutdown();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_has_one_alphabet_on_every_route() {
    let (segments, r) = segment_router().await;
    let auth = format!("Bearer {TOKEN}");
    for tag in ["orders", "leaf-segment-test", "test_odd", "a.b:c@d"] {
        let (status, reply) = put_tag(&r, tag, Some(&auth), r#"{"step": 10}"#).await;
        assert_eq!(status, StatusCode::OK, "{tag}: {reply}");
    }
    // A space, an emoji, a zero-width space and a no-break space, percent-encoded in the path.
    for tag in [
        "a%20b",
        "%F0%9F%A6%80",
        "or%E2%80%8Bder",
        "or%C2%A0der",
        "or%22der",
    ] {
        let (status, reply) = put_tag(&r, tag, Some(&auth), r#"{"step": 10}"#).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{tag}: {reply}");
        let message = json(&reply)["message"].as_str().unwrap().to_owned();
        assert!(
            message.contains("ASCII letters, digits and _ - . : @"),
            "{message}"
        );
        for uri in [
            format!("/v1/segments/{tag}"),
            format!("/v1/segments/{tag}/dated"),
            format!("/api/segment/get/{tag}"),
        ] {
            let (status, reply) = get(&r, &uri).await;
            assert!(status.is_client_error(), "{uri}: {status} {reply}");
        }
        let (status, reply) = call(
            &r,
            "POST",
            &format!("/v1/segments/{tag}/lease?size=5"),
            &[],
            "",
        )
        .await;
        assert!(status.is_client_error(), "{tag}: {status} {reply}");
    }
    // The document states the rule.
    let (_, document) = get(&r, "/openapi.json").await;
    let document = json(&document);
    let tag = document["paths"]["/v1/segments/{tag}"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tag")
        .unwrap();
    assert_eq!(tag["schema"]["pattern"], uidgen_core::TAG_PATTERN);
    segments.shutdown();
}
