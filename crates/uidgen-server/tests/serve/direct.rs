//! The single-ID text routes answer a plain `GET` without the router when they can (the HTTP
//! service's direct answers, `http/observe.rs`). On the wire a direct answer must be the
//! router's answer: same status line, same headers, same body or the same kind of ID from the
//! same space. A path parameter holding a `%` always takes the router (axum decodes it), so
//! `/api/snowflake/get/x` and `/api/snowflake/get/%78` ask the same thing of the two paths.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::io::{Read, Write};

use common::{Server, assert_unique, fetch, json};
use uidgen_core::Layout;

/// One HTTP/1.1 exchange as the client sees it on the socket.
#[derive(Debug, PartialEq)]
struct Exchange {
    status_line: String,
    /// Every header but `date` (the second it was sent) and `content-length` (checked against
    /// the body), lower-cased, in the order sent.
    headers: Vec<(String, String)>,
    body: String,
}

/// `GET path` on a connection of its own, read to its end.
fn exchange(server: &Server, path: &str) -> Exchange {
    let addr = server.base.trim_start_matches("http://");
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap().to_owned();
    let mut headers = Vec::new();
    let mut length = None;
    for line in lines {
        let (name, value) = line.split_once(':').unwrap();
        let (name, value) = (name.to_ascii_lowercase(), value.trim().to_owned());
        match name.as_str() {
            "date" => {}
            "content-length" => length = Some(value.parse::<usize>().unwrap()),
            _ => headers.push((name, value)),
        }
    }
    assert_eq!(length, Some(body.len()), "GET {path}: {raw}");
    Exchange {
        status_line,
        headers,
        body: body.to_owned(),
    }
}

/// `GET direct` and `GET routed` (the same request with a `%` in its parameter): the same
/// exchange, but for the ID in the body; the two IDs (if any) in that order.
fn same_answer(server: &Server, direct: &str, routed: &str) -> Option<(u64, u64)> {
    let (a, b) = (exchange(server, direct), exchange(server, routed));
    assert_eq!(a.status_line, b.status_line, "{direct} / {routed}");
    assert_eq!(a.headers, b.headers, "{direct} / {routed}");
    if a.status_line.contains(" 200 ") {
        Some((a.body.parse().unwrap(), b.body.parse().unwrap()))
    } else {
        assert_eq!(a.body, b.body, "{direct} / {routed}");
        None
    }
}

/// The value of the metric series `series` (a full name with labels).
async fn metric(server: &Server, series: &str) -> u64 {
    let (_, text) = fetch(&reqwest::Client::new(), &server.url("/metrics")).await;
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("{series} missing from:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_answers_are_the_routers_answers() {
    let dir = common::temp_dir("direct");
    let config = dir.join("uidgen.toml");
    std::fs::write(
        &config,
        format!(
            // Leased: the disposable assigner refuses a space narrower than the default's.
            "store = \"{}\"\n[worker]\nassigner = \"leased\"\n\
             [spaces.user.layout]\npreset = \"leaf\"\n",
            common::sqlite_url("direct")
        ),
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()], &[]);
    let (_, spaces) = fetch(&reqwest::Client::new(), &server.url("/v1/spaces")).await;
    let spaces = json(&spaces);
    let worker_of = |name: &str| {
        let space = spaces.as_array().unwrap().iter();
        let mut space = space.filter(|s| s["name"] == name);
        space.next().unwrap()["worker_id"].as_u64().unwrap()
    };
    let default = (Layout::baidu_default().unwrap(), worker_of("default"));
    let user = (Layout::preset("leaf").unwrap(), worker_of("user"));

    let server = std::sync::Arc::new(server);
    let long = "x".repeat(200);
    let cases = [
        // Leaf's snowflake route: the default space, and a key that names a space.
        (
            "/api/snowflake/get/x",
            "/api/snowflake/get/%78",
            Some(&default),
        ),
        (
            "/api/snowflake/get/user",
            "/api/snowflake/get/%75ser",
            Some(&user),
        ),
        // Vesta's route has no parameter: the router's answer of the same source is Leaf's.
        ("/genid", "/api/snowflake/get/%78", Some(&default)),
        // Leaf's segment route, and its errors (bare text): an unknown tag, a malformed one.
        (
            "/api/segment/get/leaf-segment-test",
            "/api/segment/get/%6Ceaf-segment-test",
            None,
        ),
        (
            "/api/segment/get/no-such-tag",
            "/api/segment/get/%6Eo-such-tag",
            None,
        ),
        (
            &*format!("/api/segment/get/{long}"),
            &*format!("/api/segment/get/%78{}", &long[1..]),
            None,
        ),
    ]
    .map(|(direct, routed, space)| (direct.to_owned(), routed.to_owned(), space.cloned()));
    let mut snowflake_ids = 0;
    let mut segment_ids = Vec::new();
    for (direct, routed, space) in cases {
        let answer = {
            let server = std::sync::Arc::clone(&server);
            let (direct, routed) = (direct.clone(), routed.clone());
            tokio::task::spawn_blocking(move || same_answer(&server, &direct, &routed))
                .await
                .unwrap()
        };
        match (answer, space) {
            (Some((a, b)), Some((layout, worker))) => {
                for id in [a, b] {
                    let parts = layout.decode(id).unwrap().parts;
                    assert_eq!(parts.worker, worker, "{direct}: {id} from the wrong space");
                }
                assert_ne!(a, b, "{direct}");
                snowflake_ids += u64::from(direct.starts_with("/api/snowflake"));
                snowflake_ids += 1; // the routed request is always Leaf's snowflake route
            }
            (Some((a, b)), None) => segment_ids.extend([a, b]),
            (None, _) => {}
        }
    }
    // The segment's IDs come in order whichever path took them.
    assert_eq!(segment_ids.len(), 2);
    assert!(segment_ids[0] < segment_ids[1], "{segment_ids:?}");

    // Both paths are measured under the route's pattern, errors under their kind.
    let issued = r#"uidgen_ids_issued_total{route="/api/snowflake/get/{key}"}"#;
    assert_eq!(metric(&server, issued).await, snowflake_ids);
    assert_eq!(
        metric(&server, r#"uidgen_ids_issued_total{route="/genid"}"#).await,
        1
    );
    assert_eq!(
        metric(&server, r#"uidgen_errors_total{kind="unknown_tag"}"#).await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_and_routed_takers_together_never_share_an_id() {
    // A small ring, so that takers empty it and the direct path hands over to the router's
    // wait for the padding again and again.
    let store = common::sqlite_url("direct-load");
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", store.as_str()),
            ("UIDGEN_RING_BOOST_POWER", "0"),
        ],
    );
    let client = reqwest::Client::new();
    let mut tasks = Vec::new();
    for task in 0..8 {
        let (client, base) = (client.clone(), server.base.clone());
        tasks.push(tokio::spawn(async move {
            let paths = ["/genid", "/api/snowflake/get/x", "/api/snowflake/get/%78"];
            let mut ids = Vec::new();
            for i in 0..1_500 {
                let url = format!("{base}{}", paths[(task + i) % paths.len()]);
                let (status, body) = fetch(&client, &url).await;
                assert_eq!(status, 200, "{url}: {body}");
                ids.push(body.parse::<u64>().unwrap());
            }
            ids
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    assert_eq!(assert_unique(all).len(), 12_000);
}
