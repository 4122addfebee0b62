//! Test support (cargo feature `testing`): a key prefix per test on the shared etcd, and a
//! private etcd server a test may kill.
//!
//! Tests never skip a missing etcd: they fail with a message naming [`ENV_TEST_ETCD`].

#![allow(clippy::unwrap_used)]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let Ok(addr) = host.parse() else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(2)) else {
        return false;
    };
    use std::io::{Read, Write};
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET /version HTTP/1.0\r\nHost: {host}\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    reply.contains("etcdserver")
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

/// A key prefix unique to this test: `/uidgen-tests/{unique}`.
pub fn test_prefix() -> String {
    format!("/uidgen-tests/{}", unique("t"))
}

pub use uidgen_worker::testing::{free_port, unique};

/// An etcd server of this test alone, on its own ports and data directory, so a test can kill
/// it. Killed when dropped.
#[derive(Debug)]
pub struct PrivateEtcd {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl PrivateEtcd {
    /// Start one (the `etcd` binary on the PATH, or `UIDGEN_TEST_ETCD_BIN`) and wait until it
    /// answers; panics with what is missing otherwise.
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(unique("uidgen-etcd-server"));
        std::fs::create_dir_all(&dir).unwrap();
        let (port, peer) = (free_port(), free_port());
        let binary = std::env::var("UIDGEN_TEST_ETCD_BIN").unwrap_or_else(|_| "etcd".to_owned());
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let client = format!("http://127.0.0.1:{port}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new(&binary)
            .arg("--name")
            .arg("private")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(format!("private={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{binary}` for a private etcd ({e}); install etcd-server \
                     (scripts/test.sh does) or set UIDGEN_TEST_ETCD_BIN"
                )
            });
        let server = Self {
            port,
            dir,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !answers(&server.endpoint()) {
            assert!(
                Instant::now() < deadline,
                "the private etcd on port {port} did not answer within 60 s; see {}",
                server.dir.join("etcd.log").display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        server
    }

    /// Its client URL.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Kill the server process (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Its directory (data and log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
