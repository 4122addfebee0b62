//! Test support (cargo feature `testing`): a key prefix per test on the shared etcd, and a
//! private etcd server a test may kill.
//!
//! Tests never skip a missing etcd: they fail with a message naming [`ENV_TEST_ETCD`].

#![allow(clippy::unwrap_used)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use uidgen_worker::testing::ask;

/// The variable naming the test etcd's client URL (default `http://127.0.0.1:2379`).
pub const ENV_TEST_ETCD: &str = "UIDGEN_TEST_ETCD";

/// The test etcd's client URL: `UIDGEN_TEST_ETCD` or `http://127.0.0.1:2379`.
pub fn test_etcd() -> String {
    std::env::var(ENV_TEST_ETCD).unwrap_or_else(|_| "http://127.0.0.1:2379".to_owned())
}

/// Whether etcd's gateway answers `/version` at `url` (a blocking request with std's TCP).
pub fn answers(url: &str) -> bool {
    let Some(host) = url.strip_prefix("http://").map(|h| h.trim_end_matches('/')) else {
        return false;
    };
    let request = format!("GET /version HTTP/1.0\r\nHost: {host}\r\n\r\n");
    ask(host, request.as_bytes()).is_some_and(|reply| reply.contains("etcdserver"))
}

/// The test etcd's URL after checking that it answers; panics naming [`ENV_TEST_ETCD`] when
/// it does not.
pub fn test_endpoint() -> String {
    let url = test_etcd();
    assert!(
        answers(&url),
        "etcd does not answer at {url}: start it (scripts/test.sh does) or point {ENV_TEST_ETCD} \
         at one"
    );
    url
}

/// A key prefix unique to this test: `/uidgen-tests/{unique}`. Nothing is written under it:
/// a claim there finds an unknown past and waits out the reservation (see
/// [`test_namespace`] for one declared new).
pub fn test_prefix() -> String {
    format!("/uidgen-tests/{}", unique("t"))
}

/// A key prefix unique to this test on the etcd at `endpoint`, declared new as `uidgen etcd
/// init` does (an [`Origin::Init`](uidgen_worker::Origin) namespace record), so claims there
/// start at once.
pub fn test_namespace(endpoint: &str) -> String {
    let prefix = test_prefix();
    init_namespace(endpoint, &prefix);
    prefix
}

/// Write an init namespace record under `prefix` on the etcd at `endpoint` (a blocking
/// request with std's TCP, usable from any test, async or not); panics when etcd does not
/// take it.
pub fn init_namespace(endpoint: &str, prefix: &str) {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as B64;
    let record = uidgen_worker::NamespaceRecord::open(
        uidgen_worker::Origin::Init,
        uidgen_core::Clock::now_millis(&uidgen_core::SystemClock),
        "test",
    );
    let body = serde_json::json!({
        "key": B64.encode(format!("{prefix}/namespace")),
        "value": B64.encode(record.to_json()),
    })
    .to_string();
    let reply = post(endpoint, "/v3/kv/put", &body)
        .unwrap_or_else(|e| panic!("cannot write the namespace record to etcd at {endpoint}: {e}"));
    assert!(
        reply.contains("\"header\""),
        "etcd at {endpoint} did not take the namespace record: {reply}"
    );
}

/// POST `body` to `path` on `url` (http://host:port) with HTTP/1.0; the whole answer.
fn post(url: &str, path: &str, body: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let host = url
        .strip_prefix("http://")
        .map(|h| h.trim_end_matches('/'))
        .ok_or_else(|| std::io::Error::other(format!("{url} is not http://host:port")))?;
    let addr = host
        .parse()
        .map_err(|e| std::io::Error::other(format!("{host}: {e}")))?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let request = format!(
        "POST {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes())?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

use uidgen_worker::testing::{PrivateServer, free_port};
pub use uidgen_worker::testing::{copy_dir, unique};

/// An etcd server of this test alone, on its own ports and data directory, so a test can kill
/// it, restart it, and empty or roll back its data. Killed when dropped.
#[derive(Debug)]
pub struct PrivateEtcd {
    server: PrivateServer,
    peer: u16,
}

impl PrivateEtcd {
    /// Start one (the `etcd` binary on the PATH, or `UIDGEN_TEST_ETCD_BIN`) and wait until it
    /// answers; panics with what is missing otherwise.
    pub fn start() -> Self {
        let mut server = Self {
            server: PrivateServer::new("etcd", "etcd.log", "127.0.0.1", |address| {
                answers(&format!("http://{address}"))
            }),
            peer: free_port(),
        };
        server.restart();
        server
    }

    /// Start the server again (after [`kill`](Self::kill)) on the same ports and data
    /// directory, and wait until it answers.
    pub fn restart(&mut self) {
        let binary = std::env::var("UIDGEN_TEST_ETCD_BIN").unwrap_or_else(|_| "etcd".to_owned());
        let client = self.endpoint();
        let peer_url = format!("http://127.0.0.1:{}", self.peer);
        let mut command = Command::new(&binary);
        command
            .arg("--name")
            .arg("private")
            .arg("--data-dir")
            .arg(self.server.data_dir())
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(format!("private={peer_url}"));
        self.server.run(
            command,
            "install etcd-server (scripts/test.sh does) or set UIDGEN_TEST_ETCD_BIN",
        );
    }

    /// Kill the server, empty its data directory (a disk lost, a container without a
    /// volume), and start it again on the same ports.
    pub fn restart_empty(&mut self) {
        self.server.empty_data();
        self.restart();
    }

    /// Kill the server and copy its data directory aside: a snapshot that
    /// [`restore`](Self::restore) rolls the server back to. Start it again with
    /// [`restart`](Self::restart).
    pub fn snapshot(&mut self) -> PathBuf {
        self.server.snapshot()
    }

    /// Kill the server, replace its data with `snapshot`'s, and start it again: a restore from
    /// an older snapshot.
    pub fn restore(&mut self, snapshot: &Path) {
        self.server.replace_data(snapshot);
        self.restart();
    }

    /// Its client URL.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.server.address())
    }

    /// Kill the server process (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        self.server.kill();
    }

    /// Its directory (data and log).
    pub fn dir(&self) -> &Path {
        self.server.dir()
    }
}
