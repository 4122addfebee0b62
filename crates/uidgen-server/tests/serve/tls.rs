//! `[tls]` against the real binary, with a self-signed certificate made here: HTTPS and gRPC
//! over TLS answer a client that trusts it, plain HTTP to the TLS port gets no answer, and a
//! missing or broken PEM file stops the start naming the key.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;

use common::{Server, run, temp_dir};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tonic::transport::{Certificate, Channel, ClientTlsConfig};
use uidgen_client::{ClientBuilder, Peer};
use uidgen_proto::v1::NextIdsRequest;
use uidgen_proto::v1::id_service_client::IdServiceClient;

/// A certificate for `localhost` and its key, written as PEM files: (cert PEM, cert path, key
/// path).
fn self_signed(name: &str) -> (String, String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let dir = temp_dir(name);
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (
        made.cert.pem(),
        cert.display().to_string(),
        key.display().to_string(),
    )
}

/// `GET path` over TLS to `addr`, trusting only `cert_pem`: the whole response as text.
async fn https_get(addr: &str, cert_pem: &str, path: &str) -> String {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(cert_pem.as_bytes()).unwrap())
        .unwrap();
    let config = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("the TLS handshake with the server's certificate as root");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tls.read_to_string(&mut response).await.unwrap();
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_and_grpc_over_tls_answer_and_plain_http_does_not() {
    let (cert_pem, cert, key) = self_signed("tls-serve");
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &common::sqlite_url("tls-serve")),
            ("UIDGEN_TLS_CERT", &cert),
            ("UIDGEN_TLS_KEY", &key),
        ],
    );
    let addr = server.base.trim_start_matches("http://").to_owned();

    let health = https_get(&addr, &cert_pem, "/healthz").await;
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let id = https_get(&addr, &cert_pem, "/genid").await;
    assert!(id.starts_with("HTTP/1.1 200"), "{id}");
    let body = id.rsplit("\r\n\r\n").next().unwrap().trim();
    assert!(body.parse::<u64>().is_ok(), "{id}");

    // Plain HTTP to the TLS port: the handshake fails and the connection closes unanswered.
    let plain = reqwest::get(server.url("/healthz")).await;
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");

    // gRPC over TLS, trusting the same certificate.
    let grpc_addr = server
        .grpc
        .clone()
        .unwrap()
        .replace("http://127.0.0.1", "https://localhost");
    let channel = Channel::from_shared(grpc_addr.clone())
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(&cert_pem))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .expect("a gRPC connection over TLS");
    let batch = IdServiceClient::new(channel)
        .next_ids(NextIdsRequest {
            count: 3,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(batch.ids.len(), 3);

    // uidgen-client over gRPC with TLS: with the CA it takes IDs, without it it refuses to start.
    let peer = || Peer::grpc(grpc_addr.clone());
    let client = ClientBuilder::new([peer()])
        .tls_root(cert_pem.clone())
        .connect()
        .await
        .unwrap();
    assert_ne!(
        client.next_id().await.unwrap(),
        client.next_id().await.unwrap()
    );
    drop(client);
    let refused = ClientBuilder::new([peer()]).connect().await.unwrap_err();
    assert!(refused.to_string().contains("tls_root"), "{refused}");
    // Stopped off the runtime, which must keep running to close the client's connection: a
    // graceful stop waits for it.
    let (status, log) = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(!log.contains("did not finish in time"), "{log}");
}

#[test]
fn a_missing_half_or_a_bad_pem_stops_the_start_naming_the_key() {
    let (_, cert, key) = self_signed("tls-bad");
    let garbage = temp_dir("tls-garbage").join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let garbage = garbage.display().to_string();
    let cases: [(&[(&str, &str)], &str); 4] = [
        (
            &[("UIDGEN_TLS_CERT", &cert)],
            "invalid config key `tls.key`",
        ),
        (
            &[
                ("UIDGEN_TLS_CERT", "/nonexistent/cert.pem"),
                ("UIDGEN_TLS_KEY", &key),
            ],
            "invalid config key `tls.cert`: cannot read /nonexistent/cert.pem",
        ),
        (
            &[("UIDGEN_TLS_CERT", &garbage), ("UIDGEN_TLS_KEY", &key)],
            "invalid config key `tls.cert`",
        ),
        (
            &[("UIDGEN_TLS_CERT", &cert), ("UIDGEN_TLS_KEY", &garbage)],
            "invalid config key `tls.key`",
        ),
    ];
    for (envs, expected) in cases {
        let mut all = vec![("UIDGEN_GRPC_LISTEN", "127.0.0.1:0")];
        all.extend_from_slice(envs);
        let (status, _, stderr) = run(&["serve", "--listen", "127.0.0.1:0"], &all);
        assert!(!status.success(), "{envs:?} started");
        assert!(stderr.contains(expected), "{envs:?}: {stderr}");
    }
}

/// `uidgen health` asks a server with `[tls]` over TLS, trusting the configured certificate for
/// `--tls-name` (`localhost` by default): 0 while it is ready, 1 naming the certificate's fault
/// for another name.
#[test]
fn health_asks_a_tls_server_over_tls_trusting_its_configured_certificate() {
    let (_, cert, key) = self_signed("tls-health");
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &common::sqlite_url("tls-health")),
            ("UIDGEN_TLS_CERT", &cert),
            ("UIDGEN_TLS_KEY", &key),
        ],
    );
    let addr = server.base.trim_start_matches("http://").to_owned();
    let envs = [
        ("UIDGEN_TLS_CERT", cert.as_str()),
        ("UIDGEN_TLS_KEY", key.as_str()),
        ("UIDGEN_LISTEN", addr.as_str()),
    ];
    let (status, out, err) = common::run(&["health"], &envs);
    assert!(status.success(), "{out}{err}");
    assert_eq!(out.trim(), format!("https://{addr}/readyz: ready"), "{out}");
    let (status, _, err) = common::run(&["health", "--tls-name", "elsewhere.example"], &envs);
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("did not answer") && err.contains("certificate"),
        "{err}"
    );
    let (status, _) = server.terminate();
    assert!(status.success());
}
