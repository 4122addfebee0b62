//! The gRPC center server against real `uidgen serve` processes: status codes and messages,
//! genMethod per channel, segment leases on SQLite and PostgreSQL across restarts, health and
//! reflection, and the streaming call's ends. PostgreSQL comes from `UIDGEN_TEST_POSTGRES_URL`
//! (default `postgres://postgres@127.0.0.1:5432/test`).

#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{Server, assert_unique, ids_in, json, run};
use tokio_stream::StreamExt;
use tonic::Code;
use tonic::transport::Channel;
use uidgen_core::Layout;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{
    ExplainIdRequest, GetInfoRequest, LeaseSegmentRequest, NextIdRequest, NextIdsRequest,
    SegmentIdsRequest, StreamIdsRequest,
};
use uidgen_store::testing::{TestDb, fresh_url};

/// The tag `uidgen serve` creates at start (Leaf's README example).
const TAG: &str = "leaf-segment-test";

/// A channel to the server's gRPC port.
async fn channel(server: &Server) -> Channel {
    Channel::from_shared(server.grpc.clone().expect("the server serves gRPC"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// The services reflection v1 lists on `channel`.
async fn listed_services(channel: Channel) -> BTreeSet<String> {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    list.service.into_iter().map(|s| s.name).collect()
}

/// A StreamIds call in batches of `batch_size`, up to `max_ids` (0: no limit).
async fn open_stream(
    client: &mut IdServiceClient<Channel>,
    batch_size: u32,
    max_ids: u64,
) -> tonic::Streaming<uidgen_proto::v1::IdBatch> {
    client
        .stream_ids(StreamIdsRequest {
            batch_size,
            max_ids,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
}

async fn grpc(server: &Server) -> IdServiceClient<Channel> {
    let address = server.grpc.clone().expect("the server serves gRPC");
    IdServiceClient::connect(address)
        .await
        .expect("connect to the gRPC port")
}

/// An HTTP call: (status, body).
async fn http(method: reqwest::Method, url: &str) -> (u16, String) {
    let response = reqwest::Client::new()
        .request(method, url)
        .send()
        .await
        .expect("HTTP request");
    let status = response.status().as_u16();
    (status, response.text().await.expect("HTTP body"))
}

async fn http_get(server: &Server, path: &str) -> (u16, String) {
    http(reqwest::Method::GET, &server.url(path)).await
}

/// The `message` of an HTTP error body, after checking its status.
async fn http_error(server: &Server, method: reqwest::Method, path: &str, status: u16) -> String {
    let (got, body) = http(method, &server.url(path)).await;
    assert_eq!(got, status, "{path}: {body}");
    json(&body)["message"].as_str().expect("message").to_owned()
}

fn sqlite_file(name: &str) -> String {
    let dir = std::env::temp_dir().join("uidgen-grpc-tests").join(format!(
        "{}-{name}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    std::fs::create_dir_all(&dir).expect("create a test directory");
    format!("sqlite://{}", dir.join("uidgen.db").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_carry_the_http_status_as_a_grpc_code_and_the_same_message() {
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &sqlite_file("errors")),
            ("UIDGEN_BATCH_CAP", "1000"),
            ("UIDGEN_SEGMENT_MAX_LEASE_SIZE", "5000"),
        ],
    );
    let mut client = grpc(&server).await;
    let (get, post) = (reqwest::Method::GET, reqwest::Method::POST);
    // (gRPC answer, expected code, the HTTP request that fails the same way, its status)
    let cases = [
        (
            client
                .next_ids(NextIdsRequest {
                    count: 0,
                    ..Default::default()
                })
                .await
                .map(drop),
            Code::InvalidArgument,
            (get.clone(), "/v1/ids?count=0".to_owned(), 400),
        ),
        (
            client
                .next_ids(NextIdsRequest {
                    count: 1001,
                    ..Default::default()
                })
                .await
                .map(drop),
            Code::InvalidArgument,
            (get.clone(), "/v1/ids?count=1001".to_owned(), 400),
        ),
        // StreamIds{batch_size: 0} names its own field (tests/router/messages.rs); HTTP has no
        // equivalent.
        (
            client
                .segment_ids(SegmentIdsRequest {
                    tag: "no-such-tag".into(),
                    count: 1,
                })
                .await
                .map(drop),
            Code::NotFound,
            (
                get.clone(),
                "/v1/segments/no-such-tag?count=1".to_owned(),
                404,
            ),
        ),
        (
            client
                .explain_id(ExplainIdRequest {
                    id: "12x".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            Code::InvalidArgument,
            (get.clone(), "/v1/ids/12x".to_owned(), 400),
        ),
        (
            client
                .lease_segment(LeaseSegmentRequest {
                    tag: TAG.into(),
                    size: 0,
                })
                .await
                .map(drop),
            Code::InvalidArgument,
            (
                post.clone(),
                format!("/v1/segments/{TAG}/lease?size=0"),
                400,
            ),
        ),
        (
            client
                .lease_segment(LeaseSegmentRequest {
                    tag: TAG.into(),
                    size: 5001,
                })
                .await
                .map(drop),
            Code::InvalidArgument,
            (
                post.clone(),
                format!("/v1/segments/{TAG}/lease?size=5001"),
                400,
            ),
        ),
        (
            client
                .lease_segment(LeaseSegmentRequest {
                    tag: "no-such-tag".into(),
                    size: 10,
                })
                .await
                .map(drop),
            Code::NotFound,
            (
                post,
                "/v1/segments/no-such-tag/lease?size=10".to_owned(),
                404,
            ),
        ),
    ];
    for (answer, code, (method, path, http_status)) in cases {
        let status = answer.expect_err(&path);
        assert_eq!(status.code(), code, "{path}: {status:?}");
        let http = http_error(&server, method, &path, http_status).await;
        assert_eq!(status.message(), http, "{path}");
    }

    // Counted by method and code.
    let (_, metrics) = http_get(&server, "/metrics").await;
    assert!(
        metrics.contains(r#"uidgen_grpc_calls_total{route="/uidgen.v1.IdService/NextIds",code="invalid_argument"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"uidgen_grpc_calls_total{route="/uidgen.v1.IdService/LeaseSegment",code="not_found"} 1"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gen_method_says_which_channel_issued_a_vesta_id_and_baidu_ids_have_no_such_field() {
    let store = sqlite_file("method");
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &store),
            ("UIDGEN_LAYOUT", "vesta_max_peak"),
            ("UIDGEN_LAYOUT_VERSION", "1"),
        ],
    );
    let layout = Layout::vesta_max_peak().unwrap();
    let mut client = grpc(&server).await;
    let mut by_grpc = vec![
        client
            .next_id(NextIdRequest::default())
            .await
            .unwrap()
            .into_inner()
            .id,
    ];
    by_grpc.extend(
        client
            .next_ids(NextIdsRequest {
                count: 50,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .ids,
    );
    let mut stream = open_stream(&mut client, 20, 40).await;
    while let Some(batch) = stream.next().await {
        by_grpc.extend(batch.unwrap().ids);
    }
    let (_, one) = http_get(&server, "/genid").await;
    let (_, batch) = http_get(&server, "/v1/ids?count=50").await;
    let mut by_http: Vec<u64> = vec![one.trim().parse().unwrap()];
    by_http.extend(ids_in(&json(&batch)));
    for (ids, method) in [(&by_grpc, 1), (&by_http, 2)] {
        for &id in ids.iter() {
            let parts = layout.decompose(id).unwrap();
            assert_eq!((parts.method, parts.version), (method, 1), "{id}");
        }
    }
    let mut all = by_grpc.clone();
    all.extend(&by_http);
    assert_unique(all);
    // The decoders show Vesta's fields, under Vesta's names on /expid.
    let (_, expid) = http_get(&server, &format!("/expid?id={}", by_grpc[0])).await;
    let expid = json(&expid);
    assert_eq!(
        (expid["genMethod"].as_u64(), expid["version"].as_u64()),
        (Some(1), Some(1))
    );
    drop(server);

    // The CLI is the embedded mode: 0.
    let (status, out, err) = run(
        &["gen", "-n", "3", "--layout", "vesta_max_peak"],
        &[("UIDGEN_STORE", &store)],
    );
    assert!(status.success(), "{err}");
    for line in out.lines() {
        assert_eq!(layout.decompose(line.parse().unwrap()).unwrap().method, 0);
    }
    let (status, out, err) = run(
        &[
            "decode",
            "--layout",
            "vesta_max_peak",
            &by_http[0].to_string(),
        ],
        &[],
    );
    assert!(status.success(), "{err}");
    assert!(out.contains(" version=1 type=0 method=2 "), "{out}");

    // Baidu: no method field, so nothing is stamped and the decoders do not invent one.
    let server = Server::start(&[], &[("UIDGEN_STORE", &sqlite_file("baidu"))]);
    let baidu = Layout::baidu_default().unwrap();
    let mut client = grpc(&server).await;
    let id = client
        .next_id(NextIdRequest::default())
        .await
        .unwrap()
        .into_inner()
        .id;
    let info = client
        .get_info(GetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(baidu.decompose(id).unwrap().worker, info.worker_id);
    let (_, expid) = http_get(&server, &format!("/expid?id={id}")).await;
    let expid = json(&expid);
    for absent in ["genMethod", "type", "version"] {
        assert!(expid.get(absent).is_none(), "{expid}");
    }
    let (_, decoded) = http_get(&server, &format!("/v1/ids/{id}")).await;
    assert!(json(&decoded).get("method").is_none(), "{decoded}");
    let explained = client
        .explain_id(ExplainIdRequest {
            id: id.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let names: Vec<&str> = explained.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["sign", "time", "worker", "sequence"]);
    let (status, out, err) = run(&["decode", &id.to_string()], &[]);
    assert!(status.success(), "{err}");
    assert!(!out.contains("method="), "{out}");
}

/// Ranges `[start, end)` handed out, checked pairwise for overlap as they are added.
#[derive(Default)]
struct Claimed(Vec<(i64, i64, String)>);

impl Claimed {
    fn add(&mut self, start: i64, end: i64, what: String) {
        assert!(start < end, "{what}: empty range [{start}, {end})");
        for (s, e, other) in &self.0 {
            assert!(
                end <= *s || start >= *e,
                "{what} [{start}, {end}) overlaps {other} [{s}, {e})"
            );
        }
        self.0.push((start, end, what));
    }
}

async fn lease_over_both_channels_and_take_segment_ids(
    server: &Server,
    claimed: &mut Claimed,
    round: &str,
) {
    let mut client = grpc(server).await;
    for i in 0..3 {
        let lease = client
            .lease_segment(LeaseSegmentRequest {
                tag: TAG.into(),
                size: 1000,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!((lease.tag.as_str(), lease.end - lease.start), (TAG, 1000));
        claimed.add(lease.start, lease.end, format!("{round} grpc lease {i}"));
        let (status, body) = http(
            reqwest::Method::POST,
            &server.url(&format!("/v1/segments/{TAG}/lease?size=777")),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let lease = json(&body);
        let (start, end) = (
            lease["start"].as_i64().unwrap(),
            lease["end"].as_i64().unwrap(),
        );
        assert_eq!((lease["tag"].as_str(), end - start), (Some(TAG), 777));
        claimed.add(start, end, format!("{round} http lease {i}"));
        // The server's own segments, in between: every ID is a one-number range.
        let ids = client
            .segment_ids(SegmentIdsRequest {
                tag: TAG.into(),
                count: 300,
            })
            .await
            .unwrap()
            .into_inner()
            .ids;
        let (_, body) = http_get(server, &format!("/v1/segments/{TAG}?count=300")).await;
        let more = json(&body)["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect::<Vec<_>>();
        for id in ids.into_iter().chain(more) {
            claimed.add(id, id + 1, format!("{round} segment id"));
        }
    }
}

async fn leases_never_overlap_each_other_or_segment_ids_across_a_restart(store: &str) {
    let mut claimed = Claimed::default();
    let server = Server::start(&[], &[("UIDGEN_STORE", store)]);
    lease_over_both_channels_and_take_segment_ids(&server, &mut claimed, "first").await;
    let (status, log) = server.terminate();
    assert!(status.success(), "{log}");
    let server = Server::start(&[], &[("UIDGEN_STORE", store)]);
    lease_over_both_channels_and_take_segment_ids(&server, &mut claimed, "restarted").await;
    let (_, metrics) = http_get(&server, "/metrics").await;
    assert!(
        metrics.contains(r#"uidgen_segment_leases_total{channel="grpc"} 3"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"uidgen_segment_leased_ids_total{channel="http"} 2331"#),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_never_overlap_each_other_or_segment_ids_across_a_restart_on_sqlite() {
    leases_never_overlap_each_other_or_segment_ids_across_a_restart(&sqlite_file("lease")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_never_overlap_each_other_or_segment_ids_across_a_restart_on_postgres() {
    let store = fresh_url(TestDb::Postgres)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (set UIDGEN_TEST_POSTGRES_URL): {e}"));
    leases_never_overlap_each_other_or_segment_ids_across_a_restart(&store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_reflection_answer() {
    use tonic_health::pb::HealthCheckRequest;
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;

    let server = Server::start(&[], &[("UIDGEN_STORE", &sqlite_file("health"))]);
    let channel = channel(&server).await;
    let health = HealthClient::new(channel.clone());
    for service in ["", "uidgen.v1.IdService"] {
        // The health service follows readiness in a task of its own (re-read every few
        // seconds), so right after "uidgen serving" it may not have reported the open state
        // yet: wait for SERVING rather than read the first answer.
        uidgen_testkit::eventually_some(&format!("gRPC health {service:?} SERVING"), 30, || {
            let mut health = health.clone();
            async move {
                let answer = health
                    .check(HealthCheckRequest {
                        service: service.into(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                (answer.status() == ServingStatus::Serving).then_some(())
            }
        })
        .await;
    }
    let names = listed_services(channel).await;
    assert!(names.contains("uidgen.v1.IdService"), "{names:?}");
    assert!(names.contains("grpc.health.v1.Health"), "{names:?}");
}

/// `uidgen_ids_issued_total` of the streaming call, from `/metrics`.
async fn streamed(server: &Server) -> u64 {
    let (_, metrics) = http_get(server, "/metrics").await;
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"uidgen_ids_issued_total{route="/uidgen.v1.IdService/StreamIds"} "#)
        })
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_stops_at_max_ids_when_the_client_drops_it_and_at_sigterm() {
    let server = Server::start(&[], &[("UIDGEN_STORE", &sqlite_file("stream"))]);
    let mut client = grpc(&server).await;

    // max_ids: 7-ID batches, the last one short, then the end of the stream.
    let mut stream = open_stream(&mut client, 7, 50).await;
    let mut sizes = Vec::new();
    let mut ids = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch.unwrap().ids;
        sizes.push(batch.len());
        ids.extend(batch);
    }
    assert_eq!(sizes, [7, 7, 7, 7, 7, 7, 7, 1]);
    assert_unique(ids);
    assert_eq!(streamed(&server).await, 50);

    // No limit: the client reads a little, then drops the call; the server stops issuing.
    let mut stream = open_stream(&mut client, 100, 0).await;
    for _ in 0..3 {
        assert_eq!(stream.next().await.unwrap().unwrap().ids.len(), 100);
    }
    drop(stream);
    let mut last = streamed(&server).await;
    let mut settled = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = streamed(&server).await;
        if now == last {
            settled = true;
            break;
        }
        last = now;
    }
    assert!(
        settled,
        "the stream kept issuing after its client left: {last} IDs"
    );
    // It may have issued more than was read (what HTTP/2 flow control let it queue for the
    // reader, skipped, never reissued), but it stopped.
    assert!(last > 50 + 300, "{last}");

    // SIGTERM with a stream open: it ends with UNAVAILABLE and the process stops cleanly.
    let mut stream = open_stream(&mut client, 100, 0).await;
    stream.next().await.unwrap().unwrap();
    let reader = tokio::spawn(async move {
        loop {
            match stream.next().await {
                Some(Ok(_)) => {}
                Some(Err(status)) => return Some(status.code()),
                None => return None,
            }
        }
    });
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(log.contains("stopped"), "{log}");
    let end = reader.await.unwrap();
    assert!(matches!(end, Some(Code::Unavailable) | None), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_next_ids_answer_past_the_clients_4_mib_limit_is_refused_before_any_id_is_taken() {
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_BATCH_CAP", "10000000"),
            ("UIDGEN_LAYOUT", "snowflake"),
            ("UIDGEN_GENERATOR", "snowflake"),
        ],
    );
    // A client with tonic's default limit on what it receives (4 MiB).
    let mut client = grpc(&server).await;
    let issued = || async {
        let (_, status) = http_get(&server, "/v1/status").await;
        json(&status)["ids_issued"].as_u64().unwrap()
    };
    let cap = uidgen_server::grpc::message_cap(Layout::snowflake().unwrap().max_id());
    let before = issued().await;
    for runs in [false, true] {
        let status = client
            .next_ids(NextIdsRequest {
                count: 1_000_000,
                runs,
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        let message = status.message();
        assert!(message.contains(&format!("at most {cap} IDs")), "{message}");
        assert!(message.contains("StreamIds"), "{message}");
    }
    let status = client
        .stream_ids(StreamIdsRequest {
            batch_size: 1_000_000,
            max_ids: 5,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(issued().await, before, "a refused call took IDs");
    // The largest batch allowed reaches a client with the default limit.
    let batch = client
        .next_ids(NextIdsRequest {
            count: u32::try_from(cap).unwrap(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.ids.len(), cap);
    assert_eq!(issued().await, before + cap as u64);
}

/// docs/API.md's `grpcurl list` output is what the server's reflection lists: grpcurl asks
/// reflection v1 first (its `list` prints the names sorted), so the documented lines must be
/// exactly v1's service list, reflection's own service included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_grpcurl_list_is_what_reflection_lists() {
    let api =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/API.md")).unwrap();
    let documented: Vec<&str> = api
        .lines()
        .skip_while(|line| *line != "$ grpcurl -plaintext localhost:9090 list")
        .skip(1)
        .take_while(|line| !line.starts_with('$') && !line.starts_with("```"))
        .collect();
    assert!(
        !documented.is_empty(),
        "no `grpcurl ... list` block in docs/API.md"
    );

    let server = Server::start(&[], &[("UIDGEN_STORE", &sqlite_file("reflection-list"))]);
    let listed = listed_services(channel(&server).await).await;
    let listed: Vec<&str> = listed.iter().map(String::as_str).collect();
    assert_eq!(documented, listed, "docs/API.md's `grpcurl list` output");
}

/// Waiting callers, the build, the process and gRPC latency on `/metrics` after traffic on
/// both channels, every per-route series labelled `route` alike (issue 32).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_waiting_callers_build_process_and_grpc_latency_labelled_by_route() {
    // A ring of one second's IDs (8,192 on `baidu`) on one worker id (the pool would claim
    // more under load, each padding into the ring), borrowing at most one second ahead: a
    // batch of 20,000 is more than the ring can hold up to a second ahead of the clock, so
    // its caller waits for the clock, every time, however fast the padding refills (with the
    // default bound a busy machine's padding could keep ahead of the second batch).
    let envs = [
        ("UIDGEN_RING_BOOST_POWER", "0"),
        ("UIDGEN_WORKER_MAX_IDS", "1"),
        ("UIDGEN_RING_MAX_BORROW_SECONDS", "1"),
    ];
    let server = tokio::task::spawn_blocking(move || Server::start(&[], &envs))
        .await
        .unwrap();
    let wanted = 20_000;
    let (status, body) = http_get(&server, &format!("/v1/ids?count={wanted}")).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(ids_in(&json(&body)).len(), wanted);
    let mut client = grpc(&server).await;
    let batch = client
        .next_ids(NextIdsRequest {
            count: u32::try_from(wanted).unwrap(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.ids.len(), wanted);
    client.next_id(NextIdRequest::default()).await.unwrap();

    let (_, text) = http_get(&server, "/metrics").await;
    let version = env!("CARGO_PKG_VERSION");
    for series in [
        // Each batch waited once, and no one waits any more.
        r#"uidgen_request_wait_seconds_count{route="/v1/ids"} 1"#.to_owned(),
        r#"uidgen_requests_waiting{route="/v1/ids"} 0"#.to_owned(),
        r#"uidgen_request_wait_seconds_count{route="/uidgen.v1.IdService/NextIds"} 1"#.to_owned(),
        r#"uidgen_requests_waiting{route="/uidgen.v1.IdService/NextIds"} 0"#.to_owned(),
        r#"uidgen_grpc_request_duration_seconds_count{route="/uidgen.v1.IdService/NextIds"} 1"#
            .to_owned(),
        r#"uidgen_grpc_request_duration_seconds_count{route="/uidgen.v1.IdService/NextId"} 1"#
            .to_owned(),
        r#"uidgen_grpc_calls_total{route="/uidgen.v1.IdService/NextId",code="ok"} 1"#.to_owned(),
        format!(r#"uidgen_ids_issued_total{{route="/uidgen.v1.IdService/NextIds"}} {wanted}"#),
        format!(r#"uidgen_ids_issued_total{{route="/v1/ids"}} {wanted}"#),
        format!(
            r#"uidgen_build_info{{version="{version}",os="{}",arch="{}"}} 1"#,
            std::env::consts::OS,
            std::env::consts::ARCH
        ),
        "# TYPE process_cpu_seconds counter".to_owned(),
        "process_cpu_seconds_total ".to_owned(),
        "process_resident_memory_bytes ".to_owned(),
        "process_open_fds ".to_owned(),
        "process_max_fds ".to_owned(),
        "process_start_time_seconds ".to_owned(),
    ] {
        assert!(text.contains(&series), "{series} missing from:\n{text}");
    }
    // A single ID the ring held at once is no wait: that route has no wait series.
    assert!(
        !text.contains(r#"uidgen_requests_waiting{route="/uidgen.v1.IdService/NextId"}"#),
        "{text}"
    );
    // One label scheme: no per-method label beside `route`.
    assert!(!text.contains("method="), "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
}
