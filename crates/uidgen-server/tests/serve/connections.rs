//! The HTTP port against slow and silent clients (issue 32, `[http]`): a client that sends part
//! of its request head or body is cut after its timeout, a connection past the cap waits to be
//! accepted, and other clients are served meanwhile. Raw sockets against the real binary.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::time::{Duration, Instant};

use common::{Server, fetch};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Slack on top of a timeout for a cut to be seen: generous, a busy 2-core test machine.
const SLACK: Duration = Duration::from_secs(5);

/// A raw connection to `server`'s HTTP port.
async fn connect(server: &Server) -> TcpStream {
    TcpStream::connect(server.base.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Read until the server closes `stream`, failing if it is still open after `within`: what it
/// sent before closing.
async fn cut_within(stream: &mut TcpStream, within: Duration) -> String {
    let mut answer = Vec::new();
    match tokio::time::timeout(within, stream.read_to_end(&mut answer)).await {
        // A reset is a cut as well as an orderly close.
        Ok(_) => String::from_utf8_lossy(&answer).into_owned(),
        Err(_) => panic!(
            "the connection is still open after {within:?}; it sent {:?}",
            String::from_utf8_lossy(&answer)
        ),
    }
}

/// Requests from a well-behaved client while `slow` holds its connection: every one is served.
async fn others_are_served(server: &Server, requests: usize) {
    let client = reqwest::Client::new();
    for _ in 0..requests {
        let (status, body) = fetch(&client, &server.url("/v1/ids?count=3")).await;
        assert_eq!(status, 200, "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_half_its_headers_is_cut_after_the_header_timeout_while_others_are_served()
{
    let timeout = Duration::from_secs(2);
    let server = Server::start(&[], &[("UIDGEN_HTTP_HEADER_READ_TIMEOUT_MS", "2000")]);
    let mut slow = connect(&server).await;
    slow.write_all(b"GET /v1/ids HTTP/1.1\r\nHost: uidgen\r\nX-Half: ")
        .await
        .unwrap();
    others_are_served(&server, 5).await;
    let answer = cut_within(&mut slow, timeout + SLACK).await;
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    others_are_served(&server, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_sends_nothing_or_part_of_the_http2_preface_is_cut_after_the_header_timeout()
{
    let timeout = Duration::from_secs(2);
    let server = Server::start(&[], &[("UIDGEN_HTTP_HEADER_READ_TIMEOUT_MS", "2000")]);
    let mut silent = connect(&server).await;
    let mut preface = connect(&server).await;
    // Not yet told from an HTTP/1 request: hyper's own timeout has not started for it.
    preface.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    others_are_served(&server, 3).await;
    cut_within(&mut silent, timeout + SLACK).await;
    cut_within(&mut preface, timeout + SLACK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_keep_alive_connection_is_closed_after_the_header_timeout() {
    let timeout = Duration::from_secs(2);
    let server = Server::start(&[], &[("UIDGEN_HTTP_HEADER_READ_TIMEOUT_MS", "2000")]);
    let mut idle = connect(&server).await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: uidgen\r\n\r\n")
        .await
        .unwrap();
    let mut first = [0u8; 12];
    idle.read_exact(&mut first).await.unwrap();
    assert_eq!(&first, b"HTTP/1.1 200");
    cut_within(&mut idle, timeout + SLACK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_sending_half_its_body_is_answered_408_and_cut_after_the_body_timeout() {
    let timeout = Duration::from_secs(2);
    let server = Server::start(&[], &[("UIDGEN_HTTP_BODY_READ_TIMEOUT_MS", "2000")]);
    let mut slow = connect(&server).await;
    slow.write_all(
        b"POST /v1/ids/make HTTP/1.1\r\nHost: uidgen\r\nContent-Type: application/json\r\n\
          Content-Length: 200\r\n\r\n{\"time\": ",
    )
    .await
    .unwrap();
    others_are_served(&server, 5).await;
    let answer = cut_within(&mut slow, timeout + SLACK).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(answer.contains("http.body_read_timeout_ms"), "{answer}");
    others_are_served(&server, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_a_slot_frees_and_are_then_served() {
    let timeout = Duration::from_secs(3);
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_HTTP_MAX_CONNECTIONS", "2"),
            ("UIDGEN_HTTP_HEADER_READ_TIMEOUT_MS", "3000"),
        ],
    );
    // The two slots, held by clients that send nothing.
    let mut holders = [connect(&server).await, connect(&server).await];
    // Let the server accept both before the third arrives.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let started = Instant::now();
    let client = reqwest::Client::new();
    let (status, body) = fetch(&client, &server.url("/healthz")).await;
    assert_eq!(status, 200, "{body}");
    assert!(
        started.elapsed() < timeout + SLACK,
        "{:?}",
        started.elapsed()
    );
    // Answered only once the holders were cut: had the third been served at once, they would
    // still be open for most of the timeout.
    for holder in &mut holders {
        cut_within(holder, Duration::from_secs(1)).await;
    }
    // And the port serves at full speed again.
    others_are_served(&server, 3).await;
}
