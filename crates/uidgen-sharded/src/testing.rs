//! Test support shared by the crates that test the sharded mode against a real Redis (feature
//! `testing`).
//!
//! - [`redis_url`]: the shared test Redis, `UIDGEN_TEST_REDIS_URL` (default
//!   `redis://127.0.0.1:6379`); [`check_redis`] fails with a message naming the service and the
//!   variable when it does not answer, so a missing Redis fails a test instead of skipping it.
//! - [`unique_prefix`]: a key prefix per test, so tests share that Redis in parallel;
//!   [`delete_prefix`] removes a test's keys afterwards.
//! - [`PrivateRedis`]: a `redis-server` process of the test's own, on a free port, for tests
//!   that flush, kill, restart or restore Redis without disturbing the others.
//!
//! ```no_run
//! use uidgen_sharded::testing::{PrivateRedis, unique_prefix};
//! let mut redis = PrivateRedis::start();
//! let prefix = unique_prefix("restart");
//! redis.command(&["SAVE"]);
//! redis.restart(); // a new run_id, the data of the last SAVE
//! # drop(prefix);
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use uidgen_worker::testing::free_port;

/// The variable naming the test Redis.
pub const REDIS_URL_VAR: &str = "UIDGEN_TEST_REDIS_URL";
/// Its default.
pub const DEFAULT_TEST_REDIS_URL: &str = "redis://127.0.0.1:6379";

/// The shared test Redis.
pub fn redis_url() -> String {
    std::env::var(REDIS_URL_VAR).unwrap_or_else(|_| DEFAULT_TEST_REDIS_URL.to_owned())
}

/// Fail with a message naming the service and [`REDIS_URL_VAR`] unless the Redis at `url`
/// answers a `PING`.
pub async fn check_redis(url: &str) -> Result<(), String> {
    let unreachable = |e: &dyn std::fmt::Display| {
        format!(
            "Redis not reachable at {}; start it (scripts/test.sh does) or set {REDIS_URL_VAR}: \
             {e}",
            uidgen_store::redact_url(url)
        )
    };
    let client = redis::Client::open(url).map_err(|e| unreachable(&e))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(2)))
        .set_response_timeout(Some(Duration::from_secs(2)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| unreachable(&e))?;
    redis::cmd("PING")
        .query_async::<String>(&mut conn)
        .await
        .map(|_| ())
        .map_err(|e| unreachable(&e))
}

/// A key prefix no other test uses: `t.{name}.{pid}.{n}.{random}.`.
pub fn unique_prefix(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    // Relaxed: only distinct values are needed.
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "t.{name}.{}.{n}.{:08x}.",
        std::process::id(),
        fastrand::u32(..)
    )
}

/// Delete every key that starts with `prefix` (best effort: a test's cleanup).
pub async fn delete_prefix(url: &str, prefix: &str) {
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    let mut pattern = String::new();
    for c in prefix.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('*');
    let mut cursor = 0_u64;
    loop {
        let Ok((next, keys)) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async::<(u64, Vec<String>)>(&mut conn)
            .await
        else {
            return;
        };
        if !keys.is_empty() {
            let _ = redis::cmd("UNLINK")
                .arg(&keys)
                .query_async::<u64>(&mut conn)
                .await;
        }
        if next == 0 {
            return;
        }
        cursor = next;
    }
}

/// A `redis-server` of one test's own: `--save "" --appendonly no`, on a free port, with its
/// own directory for `SAVE` to write and a restart to load. Killed (and its directory removed)
/// when dropped.
#[derive(Debug)]
pub struct PrivateRedis {
    port: u16,
    dir: PathBuf,
    child: Option<Child>,
}

impl PrivateRedis {
    /// Start one, failing the test (with what to install) if `redis-server` is missing.
    pub fn start() -> Self {
        static N: AtomicU64 = AtomicU64::new(0);
        // Relaxed: only distinct values are needed.
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!(
            "uidgen-private-redis-{}-{n}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        ));
        std::fs::create_dir_all(&dir)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        for _ in 0..5 {
            let port = free_port();
            let mut redis = Self {
                port,
                dir: dir.clone(),
                child: None,
            };
            if redis.spawn() {
                return redis;
            }
            // Someone took the port between our probe and the server's bind: try another.
            redis.dir = PathBuf::new();
        }
        panic!("a private redis-server did not come up on any of 5 free ports");
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kill the server (`SIGKILL`: nothing is saved), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kill the server and start it again on the same port and directory: a new process (a
    /// new `run_id`) with the data of the last `SAVE`, if any.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(
                Instant::now() < deadline,
                "the private redis-server on port {} did not restart",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Send one command and return its reply's first line (`+OK`, `:3`, `$5` ...).
    pub fn command(&self, args: &[&str]) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .unwrap_or_else(|e| panic!("private redis on port {}: {e}", self.port));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut request = format!("*{}\r\n", args.len());
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream
            .write_all(request.as_bytes())
            .unwrap_or_else(|e| panic!("private redis on port {}: {e}", self.port));
        let mut line = String::new();
        let _ = BufReader::new(stream).read_line(&mut line);
        line.trim_end().to_owned()
    }

    /// Start `redis-server` and wait until it answers; `false` if it exited (port taken).
    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(["--dbfilename", "dump.rdb", "--protected-mode", "no"])
            .args(["--loglevel", "warning"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => panic!(
                "cannot run redis-server ({e}): install it (apt-get install redis-server; \
                 scripts/test.sh does)"
            ),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return false;
            }
            if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                let mut line = String::new();
                if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_ok()
                    && BufReader::new(stream).read_line(&mut line).is_ok()
                    && line.starts_with("+PONG")
                {
                    self.child = Some(child);
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        false
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        if !self.dir.as_os_str().is_empty() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
