//! HTTP/2 over cleartext (h2c, prior knowledge) and HTTP/1.1 on the one port `uidgen serve`
//! listens on: clients that multiplex many requests over one connection need no TLS and no
//! second port.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use axum::body::Bytes;
use axum::http::{Request, StatusCode};
use common::{Server, assert_unique};

/// `UIDGEN_STORE` for a SQLite file of this test's own.
fn sqlite_store() -> String {
    let dir = std::env::temp_dir().join(format!(
        "uidgen-h2c-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    format!("sqlite://{}", dir.join("uidgen.db").display())
}

/// An HTTP/2 connection opened with prior knowledge: the client's first bytes are the HTTP/2
/// preface, with no HTTP/1.1 upgrade and no TLS.
async fn h2c_connect(server: &Server) -> h2::client::SendRequest<Bytes> {
    let addr = server.base.trim_start_matches("http://");
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// GET `url` on one HTTP/2 stream: the ID in the body.
async fn h2c_id(client: h2::client::SendRequest<Bytes>, url: String) -> u64 {
    let mut client = client.ready().await.unwrap();
    let request = Request::get(&url).body(()).unwrap();
    let (response, _) = client.send_request(request, true).unwrap();
    let response = response.await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "{url} over h2c");
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        text.extend_from_slice(&chunk);
    }
    std::str::from_utf8(&text).unwrap().trim().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_and_http1_share_the_port() {
    let store = sqlite_store();
    let server = Server::start(&[], &[("UIDGEN_STORE", store.as_str())]);
    let h2 = h2c_connect(&server).await;
    let h1 = reqwest::Client::new();
    let mut ids = Vec::new();
    for path in [
        "/genid",
        "/api/snowflake/get/x",
        "/api/segment/get/leaf-segment-test",
    ] {
        let id = h2c_id(h2.clone(), server.url(path)).await;
        let response = h1.get(server.url(path)).send().await.unwrap();
        assert_eq!(response.version(), reqwest::Version::HTTP_11, "{path}");
        let other: u64 = response.text().await.unwrap().trim().parse().unwrap();
        if path.contains("segment") {
            // Segment IDs are their own number space: only distinct from each other.
            assert_ne!(id, other);
        } else {
            ids.extend([id, other]);
        }
    }
    // Many streams at once on the one connection.
    let streams: Vec<_> = (0..64)
        .map(|_| tokio::spawn(h2c_id(h2.clone(), server.url("/genid"))))
        .collect();
    for stream in streams {
        ids.push(stream.await.unwrap());
    }
    assert_eq!(assert_unique(ids).len(), 4 + 64);
}
