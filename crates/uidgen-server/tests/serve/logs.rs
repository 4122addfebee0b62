//! What `uidgen serve` tells its operator on stderr (issue 32): start-up lines in words, JSON
//! lines on request, the access log, admin changes, and a `RUST_LOG` it cannot use refused.
//! Real processes on SQLite.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use common::{Server, fetch, run};

/// An admin token long enough for the configuration's check.
const ADMIN: &str = "logs-test-admin-token";

#[test]
fn a_misspelt_or_unreadable_rust_log_stops_the_start_naming_the_variable() {
    for (value, says) in [
        ("infoo", "did you mean `info`?"),
        ("uidgen_server=verbose", "is not a log filter"),
    ] {
        let (status, _, err) = run(
            &["serve", "--listen", "127.0.0.1:0"],
            &[("RUST_LOG", value)],
        );
        assert_eq!(status.code(), Some(1), "RUST_LOG={value} started: {err}");
        assert!(
            err.starts_with(&format!("error: RUST_LOG={value:?} is not a log filter")),
            "{err}"
        );
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn the_start_up_line_says_in_words_what_serves_and_whether_admin_routes_are_on() {
    let off = Server::start(&[], &[]);
    let log = off.log();
    let line = log.lines().find(|l| l.contains("uidgen serving")).unwrap();
    assert!(
        line.contains("uidgen serving: HTTP on 127.0.0.1:"),
        "{line}"
    );
    assert!(line.contains("the cached generator on worker id"), "{line}");
    assert!(line.contains("admin routes off"), "{line}");
    assert!(line.contains(r#"admin_routes="off""#), "{line}");
    // No Rust debug text anywhere in the start-up: no `Kind("…")`, no `Cached`.
    for debug in ["AssignmentKind(", "Kind(\"", "generator=Cached"] {
        assert!(!log.contains(debug), "`{debug}` in:\n{log}");
    }
    let on = Server::start(&[], &[("UIDGEN_ADMIN_TOKEN", ADMIN)]);
    assert!(on.log().contains("admin routes on"), "{}", on.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_lines_access_lines_and_admin_changes_reach_the_log() {
    let server = tokio::task::spawn_blocking(|| {
        Server::start(
            &["--log-format", "json"],
            &[("UIDGEN_LOG_ACCESS", "true"), ("UIDGEN_ADMIN_TOKEN", ADMIN)],
        )
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let (status, _) = fetch(&client, &server.url("/v1/ids?count=3")).await;
    assert_eq!(status, 200);
    let tagged = client
        .put(server.url("/v1/admin/segments/logs-test"))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"step": 500}))
        .send()
        .await
        .unwrap();
    assert_eq!(tagged.status(), 200);
    let made = client
        .post(server.url("/v1/admin/tokens"))
        .bearer_auth(ADMIN)
        .json(&serde_json::json!({"name": "logs-test", "routes": ["ids"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 200);
    let secret = common::json(&made.text().await.unwrap())["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let address = server.grpc.clone().unwrap();
    let mut grpc = uidgen_proto::v1::id_service_client::IdServiceClient::connect(address)
        .await
        .unwrap();
    grpc.next_id(uidgen_proto::v1::NextIdRequest::default())
        .await
        .unwrap();
    let within = std::time::Duration::from_secs(10);
    assert!(server.wait_for_log("caller token created", within));
    assert!(server.wait_for_log("gRPC /uidgen.v1.IdService/NextId ok", within));
    let log = server.log();
    // Every line is one JSON object with the fields at the top level.
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let find = |pred: &dyn Fn(&serde_json::Value) -> bool| lines.iter().find(|l| pred(l)).cloned();
    let serving = find(&|l| l["message"].as_str().unwrap().starts_with("uidgen serving"));
    let serving = serving.expect("a serving line");
    assert_eq!(serving["level"], "INFO");
    assert_eq!(serving["admin_routes"], "on");
    assert_eq!(serving["access_log"], "on");
    let access = find(&|l| l["target"] == "uidgen::access" && l["route"] == "/v1/ids");
    let access = access.unwrap_or_else(|| panic!("no access line for /v1/ids:\n{log}"));
    assert_eq!(access["method"], "GET");
    assert_eq!(access["status"], 200);
    assert_eq!(access["ids"], 3);
    assert!(access["duration_us"].is_u64(), "{access}");
    let peer = access["peer"]
        .as_str()
        .unwrap_or_else(|| panic!("no peer: {access}"));
    assert!(peer.starts_with("127.0.0.1:"), "{access}");
    let call =
        find(&|l| l["target"] == "uidgen::access" && l["route"] == "/uidgen.v1.IdService/NextId");
    let call = call.unwrap_or_else(|| panic!("no access line for NextId:\n{log}"));
    assert_eq!(call["status"], "ok");
    assert_eq!(call["ids"], 1);
    let tag = find(&|l| l["tag"] == "logs-test");
    let tag = tag.unwrap_or_else(|| panic!("the tag change was not logged:\n{log}"));
    assert_eq!(tag["level"], "INFO");
    assert_eq!(tag["step"], 500);
    assert_eq!(tag["by"], "admin token");
    let token = find(&|l| l["message"] == "caller token created").unwrap();
    assert_eq!(token["name"], "logs-test");
    assert_eq!(token["by"], "admin token");
    assert!(!log.contains(&secret), "the token's secret reached the log");
    assert!(!log.contains(ADMIN), "the admin token reached the log");
}
