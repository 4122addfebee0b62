//! Per-caller tokens end to end (issue 22), against the real binary: made through the admin API,
//! used on HTTP and gRPC, refused outside their scopes (403), refused once revoked (401) on the
//! server that revoked at once and on another server within its refresh, counted by name.
//! SQLite (the default store) and PostgreSQL.

#![allow(clippy::unwrap_used)]

use crate::common;

use common::{Server, assert_unique, ids_in, json, sqlite_url};
use tonic::Code;
use tonic::metadata::MetadataValue;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{NextIdsRequest, SegmentIdsRequest};
use uidgen_store::testing::{TestDb, fresh_url};

const ADMIN: &str = "admin-token-for-auth-tests";
const TAG: &str = "leaf-segment-test";

fn envs(store: &str) -> Vec<(&'static str, String)> {
    vec![
        ("UIDGEN_STORE", store.to_owned()),
        ("UIDGEN_ADMIN_TOKEN", ADMIN.to_owned()),
        ("UIDGEN_AUTH_REQUIRED", "true".to_owned()),
        ("UIDGEN_AUTH_REFRESH_SECS", "1".to_owned()),
    ]
}

fn start(store: &str) -> Server {
    let envs = envs(store);
    let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Server::start(&[], &envs)
}

/// `method url` with `token` as the bearer token: (status, body).
async fn send(
    method: reqwest::Method,
    url: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> (u16, String) {
    let client = reqwest::Client::new();
    let mut request = client.request(method, url);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

async fn get(server: &Server, path: &str, token: Option<&str>) -> (u16, String) {
    send(reqwest::Method::GET, &server.url(path), token, None).await
}

/// Make a token through the admin API: (id, token).
async fn create(server: &Server, body: &str) -> (i64, String) {
    let (status, text) = send(
        reqwest::Method::POST,
        &server.url("/v1/admin/tokens"),
        Some(ADMIN),
        Some(body),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let created = json(&text);
    (
        created["id"].as_i64().unwrap(),
        created["token"].as_str().unwrap().to_owned(),
    )
}

async fn revoke(server: &Server, id: i64) {
    let url = server.url(&format!("/v1/admin/tokens/{id}"));
    let (status, text) = send(reqwest::Method::DELETE, &url, Some(ADMIN), None).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(json(&text)["revoked_now"], true, "{text}");
}

/// Stop `server` off the runtime, which must keep running to close this test's connections (a
/// graceful stop waits for them), and check it stopped without running out of grace.
async fn stop(server: Server) {
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(!log.contains("did not finish in time"), "{log}");
}

async fn grpc(server: &Server) -> IdServiceClient<tonic::transport::Channel> {
    IdServiceClient::connect(server.grpc.clone().unwrap())
        .await
        .expect("connect to the gRPC port")
}

fn authorised<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

/// Everything one server does with tokens: made, used, scoped, listed, counted, revoked.
async fn tokens_gate_the_id_routes(store: &str) {
    let server = start(store);
    // With no token at all, the ID routes refuse and the operations routes answer.
    let (status, text) = get(&server, "/v1/ids?count=3", None).await;
    assert_eq!(status, 401, "{text}");
    assert_eq!(json(&text)["code"], "unauthorized");
    assert_eq!(get(&server, "/healthz", None).await.0, 200);
    assert_eq!(
        get(&server, "/v1/ids?count=3", Some("uidgen_nope")).await.0,
        401
    );

    let (ids_id, ids_token) = create(&server, r#"{"name": "ids-only", "routes": ["ids"]}"#).await;
    let (_, tag_token) = create(
        &server,
        &format!(r#"{{"name": "tag-only", "routes": ["segments"], "tags": ["{TAG}"]}}"#),
    )
    .await;

    // The ids token takes IDs, and nothing of other families.
    let (status, text) = get(&server, "/v1/ids?count=5", Some(&ids_token)).await;
    assert_eq!(status, 200, "{text}");
    let mut all = ids_in(&json(&text));
    let (status, text) = get(
        &server,
        &format!("/v1/segments/{TAG}?count=2"),
        Some(&ids_token),
    )
    .await;
    assert_eq!(status, 403, "{text}");
    assert_eq!(json(&text)["code"], "forbidden");
    assert!(text.contains("segments"), "{text}");

    // The tag token takes its tag's IDs, not another tag's, not plain IDs.
    let (status, text) = get(
        &server,
        &format!("/v1/segments/{TAG}?count=2"),
        Some(&tag_token),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let (status, text) = get(&server, "/v1/segments/other-tag?count=2", Some(&tag_token)).await;
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("other-tag"), "{text}");
    assert_eq!(get(&server, "/v1/ids", Some(&tag_token)).await.0, 403);
    // Leaf's own route is the same family and checks the tag the same way.
    let (status, text) = get(&server, "/api/segment/get/other-tag", Some(&tag_token)).await;
    assert_eq!(status, 403, "{text}");

    // gRPC: no token, a token of the wrong family, a tag outside the scope; then success.
    let mut client = grpc(&server).await;
    let refused = client
        .next_ids(NextIdsRequest {
            count: 3,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");
    let refused = client
        .next_ids(authorised(
            NextIdsRequest {
                count: 3,
                ..Default::default()
            },
            &tag_token,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = client
        .segment_ids(authorised(
            SegmentIdsRequest {
                tag: "other-tag".into(),
                count: 2,
            },
            &tag_token,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let batch = client
        .next_ids(authorised(
            NextIdsRequest {
                count: 4,
                ..Default::default()
            },
            &ids_token,
        ))
        .await
        .unwrap()
        .into_inner();
    all.extend(batch.ids);
    assert_eq!(assert_unique(all).len(), 9);

    // Listing shows names and scopes, never a secret.
    let (status, text) = get(&server, "/v1/admin/tokens", Some(ADMIN)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        !text.contains(&ids_token) && !text.contains("uidgen_"),
        "{text}"
    );
    let listed = json(&text);
    assert_eq!(listed["tokens"][0]["name"], "ids-only");
    assert_eq!(listed["tokens"][1]["tags"][0], TAG);
    // The caller tokens do not open the admin API.
    assert_eq!(
        get(&server, "/v1/admin/tokens", Some(&ids_token)).await.0,
        403
    );

    // Counted by name: 5 IDs over HTTP, 4 over gRPC. A request counts once its token passes
    // the family check: the gRPC call naming another tag did (its tag is in the message, checked
    // by the call itself), the HTTP ones outside the scope did not.
    let (_, metrics) = get(&server, "/metrics", None).await;
    for line in [
        r#"uidgen_caller_ids_total{caller="ids-only"} 9"#,
        r#"uidgen_caller_requests_total{caller="ids-only"} 2"#,
        r#"uidgen_caller_requests_total{caller="tag-only"} 2"#,
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    assert!(!metrics.contains(&ids_token));

    // Revoked on this server: refused at once, on both protocols.
    revoke(&server, ids_id).await;
    let (status, text) = get(&server, "/v1/ids", Some(&ids_token)).await;
    assert_eq!(status, 401, "{text}");
    let refused = client
        .next_ids(authorised(
            NextIdsRequest {
                count: 1,
                ..Default::default()
            },
            &ids_token,
        ))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    // A name is never reused.
    let (status, text) = send(
        reqwest::Method::POST,
        &server.url("/v1/admin/tokens"),
        Some(ADMIN),
        Some(r#"{"name": "ids-only", "routes": ["ids"]}"#),
    )
    .await;
    assert_eq!(status, 409, "{text}");
    drop(client);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_gate_the_id_routes_on_sqlite() {
    tokens_gate_the_id_routes(&sqlite_url("auth-tokens")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_gate_the_id_routes_on_postgres() {
    tokens_gate_the_id_routes(&fresh_url(TestDb::Postgres).await.unwrap()).await;
}

/// A token revoked on one server stops working on another within that server's refresh
/// (`auth.refresh_secs = 1` here), and one made there starts working on it the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoke_reaches_another_server_within_its_refresh() {
    let store = fresh_url(TestDb::Postgres).await.unwrap();
    let first = start(&store);
    let second = start(&store);
    let (id, token) = create(&first, r#"{"name": "shared", "routes": ["*"]}"#).await;
    uidgen_testkit::eventually_some("the second server accepting the new token", 10, || async {
        (get(&second, "/v1/ids", Some(&token)).await.0 == 200).then_some(())
    })
    .await;
    revoke(&first, id).await;
    uidgen_testkit::eventually_some(
        "the second server refusing the revoked token",
        10,
        || async { (get(&second, "/v1/ids", Some(&token)).await.0 == 401).then_some(()) },
    )
    .await;
    stop(first).await;
    stop(second).await;
}

/// `auth.required` with an empty token table starts, refuses ID requests, and says how to make
/// a token; the default (off) serves without any token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_without_tokens_starts_and_says_how_to_make_one() {
    let server = start(&sqlite_url("auth-empty"));
    assert!(
        server.log().contains("POST /v1/admin/tokens"),
        "{}",
        server.log()
    );
    assert_eq!(get(&server, "/genid", None).await.0, 401);
    stop(server).await;
    let open = Server::start(&[], &[("UIDGEN_STORE", &sqlite_url("auth-off"))]);
    assert_eq!(get(&open, "/genid", None).await.0, 200);
    assert_eq!(get(&open, "/genid", Some("anything")).await.0, 200);
    stop(open).await;
}

/// `uidgen-client` with a caller token takes IDs over HTTP and gRPC from a server that asks for
/// one; without it, it is refused rather than served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_sends_its_token_over_http_and_grpc() {
    use uidgen_client::{ClientBuilder, Peer};
    let server = start(&sqlite_url("auth-client"));
    let (_, token) = create(&server, r#"{"name": "client", "routes": ["ids"]}"#).await;
    let peers = || {
        [
            Peer::http(server.base.clone()),
            Peer::grpc(server.grpc.clone().unwrap()),
        ]
    };
    let wait = std::time::Duration::from_millis(500);
    for peer in peers() {
        let client = ClientBuilder::new([peer.clone()])
            .token(token.clone())
            .wait(wait)
            .connect()
            .await
            .unwrap();
        let ids: Vec<u64> = [
            client.next_id().await.unwrap(),
            client.next_id().await.unwrap(),
        ]
        .into();
        assert_unique(ids);
        let anonymous = ClientBuilder::new([peer.clone()])
            .wait(wait)
            .connect()
            .await
            .unwrap();
        let refused = anonymous.next_id().await;
        assert!(
            refused.is_err(),
            "{peer}: served without a token: {refused:?}"
        );
    }
    let (_, metrics) = get(&server, "/metrics", None).await;
    assert!(
        metrics.contains(r#"uidgen_caller_ids_total{caller="client"}"#),
        "{metrics}"
    );
    stop(server).await;
}

/// A token allowed one named space gets its IDs by every channel that names a space (the
/// spaces routes, Leaf's `{key}`, gRPC's `space` field), and a 403 for another named space.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_space_scope_holds_on_every_channel_that_names_a_space() {
    let dir = common::temp_dir("auth-spaces");
    let config = dir.join("uidgen.toml");
    std::fs::write(
        &config,
        // Leased: the disposable assigner refuses a space narrower than the default's (one
        // `worker_node` counter for every space).
        "[worker]\nassigner = \"leased\"\n\
         [auth]\nrequired = true\nrefresh_secs = 1\n\
         [spaces.order.layout]\npreset = \"snowflake\"\n\
         [spaces.user.layout]\npreset = \"leaf\"\n",
    )
    .unwrap();
    let store = sqlite_url("auth-spaces");
    let server = Server::start(
        &["--config", config.to_str().unwrap()],
        &[
            ("UIDGEN_STORE", store.as_str()),
            ("UIDGEN_ADMIN_TOKEN", ADMIN),
        ],
    );
    let (_, token) = create(
        &server,
        r#"{"name": "orders", "routes": ["ids", "spaces"], "spaces": ["order"]}"#,
    )
    .await;
    let secret = token.as_str();
    let token = Some(secret);
    // HTTP: the spaces routes.
    let (status, body) = get(&server, "/v1/spaces/order/ids?count=3", token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids_in(&json(&body)).len(), 3);
    let (status, body) = get(&server, "/v1/spaces/user/ids", token).await;
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("may not use space `user`"), "{body}");
    // Leaf's route: a key naming a space is that space; another key is the default space.
    let (status, body) = get(&server, "/api/snowflake/get/order", token).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&server, "/api/snowflake/get/user", token).await;
    assert_eq!(status, 403, "{body}");
    let (status, body) = get(&server, "/api/snowflake/get/anything", token).await;
    assert_eq!(status, 200, "{body}");
    // gRPC: the `space` field.
    let mut grpc = grpc(&server).await;
    let request = |space: &str| {
        authorised(
            NextIdsRequest {
                count: 2,
                space: space.to_owned(),
                ..Default::default()
            },
            secret,
        )
    };
    let ids = grpc.next_ids(request("order")).await.unwrap().into_inner();
    assert_eq!(ids.ids.len(), 2);
    let refused = grpc.next_ids(request("user")).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let ids = grpc.next_ids(request("")).await.unwrap().into_inner();
    assert_eq!(ids.ids.len(), 2, "the default space needs no space scope");
    drop(grpc);
    stop(server).await;
}

fn now_ms() -> i64 {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(since.as_millis()).unwrap()
}

/// What `POST /v1/admin/tokens` answers `body`: (status, body).
async fn make(server: &Server, body: &str) -> (u16, String) {
    let url = server.url("/v1/admin/tokens");
    send(reqwest::Method::POST, &url, Some(ADMIN), Some(body)).await
}

/// A token's scopes name real route families and app ids, and its expiry lies in the future,
/// or it is not made (400 naming what is wrong); an expiry is stored, listed, and once past,
/// the token is refused with 401 saying it expired, on HTTP and gRPC.
async fn tokens_are_checked_when_made_and_expire(store: &str) {
    let server = start(store);
    let (status, text) = make(&server, r#"{"name": "typo", "routes": ["idz"]}"#).await;
    assert_eq!(status, 400, "{text}");
    let message = json(&text)["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains(r#""idz""#)
            && message.contains("ids, segments, sharded, fallback, spaces or `*`"),
        "{message}"
    );
    let (status, text) = make(
        &server,
        r#"{"name": "apps", "routes": ["sharded"], "apps": ["orders"]}"#,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains(r#"\"orders\""#) && text.contains("0 to 255"),
        "{text}"
    );
    let past = now_ms() - 1000;
    let (status, text) = make(
        &server,
        &format!(r#"{{"name": "late", "routes": ["ids"], "expires_ms": {past}}}"#),
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("not in the future"), "{text}");
    let (status, text) = make(
        &server,
        r#"{"name": "both", "routes": ["ids"], "expires_ms": 99999999999999, "ttl_secs": 60}"#,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("not both"), "{text}");
    let (status, text) = make(
        &server,
        r#"{"name": "zero", "routes": ["ids"], "ttl_secs": 0}"#,
    )
    .await;
    assert_eq!(status, 400, "{text}");
    // Nothing refused was made.
    let (_, listed) = get(&server, "/v1/admin/tokens", Some(ADMIN)).await;
    assert_eq!(
        json(&listed)["tokens"].as_array().unwrap().len(),
        0,
        "{listed}"
    );

    // A day's token: its expiry is a day from when it was made, shown and listed.
    let before = now_ms();
    let (status, text) = make(
        &server,
        r#"{"name": "daily", "routes": ["ids"], "ttl_secs": 86400}"#,
    )
    .await;
    let after = now_ms();
    assert_eq!(status, 200, "{text}");
    let daily = json(&text);
    let expires = daily["expires_ms"].as_i64().unwrap();
    assert!(
        (before + 86_400_000..=after + 86_400_000).contains(&expires),
        "{text}"
    );
    let daily_token = daily["token"].as_str().unwrap().to_owned();
    let (status, text) = get(&server, "/v1/ids?count=2", Some(&daily_token)).await;
    assert_eq!(status, 200, "{text}");
    // A token that expires shortly; the one made without an expiry has none listed.
    let soon = now_ms() + 1500;
    let (status, text) = make(
        &server,
        &format!(r#"{{"name": "brief", "routes": ["*"], "expires_ms": {soon}}}"#),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let brief = json(&text)["token"].as_str().unwrap().to_owned();
    let (_, forever) = create(&server, r#"{"name": "forever", "routes": ["ids"]}"#).await;
    let (_, listed) = get(&server, "/v1/admin/tokens", Some(ADMIN)).await;
    let listed = json(&listed);
    assert_eq!(listed["tokens"][0]["expires_ms"], expires);
    assert_eq!(listed["tokens"][1]["expires_ms"], soon);
    assert!(listed["tokens"][2].get("expires_ms").is_none(), "{listed}");

    // Once past its expiry: 401 saying so, over HTTP and gRPC.
    let refused = uidgen_testkit::eventually_some("the brief token expiring", 30, || async {
        let (status, text) = get(&server, "/v1/ids", Some(&brief)).await;
        (status == 401).then_some(text)
    })
    .await;
    assert_eq!(json(&refused)["code"], "unauthorized");
    assert!(
        refused.contains("the caller token `brief` expired at "),
        "{refused}"
    );
    let mut client = grpc(&server).await;
    let status = client
        .next_ids(authorised(
            NextIdsRequest {
                count: 1,
                ..Default::default()
            },
            &brief,
        ))
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    assert!(status.message().contains("expired at"), "{status:?}");
    assert_eq!(get(&server, "/v1/ids", Some(&forever)).await.0, 200);
    // An expired name stays taken, as a revoked one does.
    let (status, text) = make(&server, r#"{"name": "brief", "routes": ["ids"]}"#).await;
    assert_eq!(status, 409, "{text}");

    // Leaf's routes answer their own errors as bare text, but the token layer's 401 is JSON.
    let (status, text) = get(&server, "/api/segment/get/nope", None).await;
    assert_eq!(status, 401, "{text}");
    assert_eq!(json(&text)["code"], "unauthorized");
    drop(client);
    stop(server).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_when_made_and_expire_on_sqlite() {
    tokens_are_checked_when_made_and_expire(&sqlite_url("auth-expiry")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_when_made_and_expire_on_postgres() {
    tokens_are_checked_when_made_and_expire(&fresh_url(TestDb::Postgres).await.unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_are_checked_when_made_and_expire_on_mariadb() {
    tokens_are_checked_when_made_and_expire(&fresh_url(TestDb::MySql).await.unwrap()).await;
}

/// `auth.required` with no admin token and no valid caller token could serve no one: refused at
/// start, naming both keys. With a token in the store (made earlier, or imported from Tinyid)
/// it starts, and warns that none can be made or revoked through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn required_without_an_admin_token_starts_only_with_a_token_in_the_store() {
    let store = sqlite_url("auth-no-admin");
    let no_admin = [
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_AUTH_REQUIRED", "true"),
    ];
    let log = match Server::try_start(&[], &no_admin) {
        Ok(server) => panic!("started without a way to make tokens: {}", server.log()),
        Err(log) => log,
    };
    assert!(
        log.contains(
            "auth.required = true, but admin_token is unset and the store holds no \
                      valid caller token"
        ),
        "{log}"
    );
    let server = start(&store);
    let (_, token) = create(&server, r#"{"name": "kept", "routes": ["ids"]}"#).await;
    stop(server).await;
    let server = Server::start(&[], &no_admin);
    assert!(
        server
            .log()
            .contains("none can be made or revoked through this server"),
        "{}",
        server.log()
    );
    assert_eq!(get(&server, "/v1/ids", Some(&token)).await.0, 200);
    stop(server).await;
}
