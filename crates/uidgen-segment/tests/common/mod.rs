//! Helpers shared by the database tests: fresh databases of every kind, a service over them, a
//! cuttable TCP proxy to simulate an outage of a networked database.

#![allow(clippy::unwrap_used, dead_code, unused_imports)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use uidgen_core::Clock;
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_store::Store;
pub use uidgen_store::testing::{TestDb, all_dbs};

/// A new, migrated database of `kind` and its URL. An unreachable server fails the test with a
/// message naming the service and its environment variable.
pub async fn fresh(kind: TestDb) -> (Store, String) {
    uidgen_store::testing::fresh_store(kind)
        .await
        .unwrap_or_else(|e| panic!("{kind:?} test database: {e}"))
}

/// A new, migrated database of `kind` holding one biz tag with `step`.
pub async fn fresh_with_tag(kind: TestDb, tag: &str, step: i64) -> Store {
    let (store, _) = fresh(kind).await;
    store.upsert_tag(tag, step, None).await.unwrap();
    store
}

/// A service over `store` with `options`.
pub async fn service(
    store: Store,
    options: SegmentOptions,
    clock: impl Clock + 'static,
) -> Arc<SegmentService> {
    SegmentService::start(store, options, clock).await.unwrap()
}

/// The stored `max_id` of `tag`.
pub async fn max_id(store: &Store, tag: &str) -> i64 {
    store.get_tag(tag).await.unwrap().unwrap().max_id
}

/// Poll until `done` holds, failing with `what` after `secs`.
pub async fn eventually(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Assert that `ids` holds no duplicate (sorts it).
pub fn assert_unique(ids: &mut [i64], context: &str) {
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        panic!("{context}: duplicate ID {}", pair[0]);
    }
}

/// `host:port` of a `scheme://user@host:port/db` URL.
pub fn server_addr(url: &str) -> SocketAddr {
    let rest = &url[url.find("://").unwrap() + 3..];
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap();
    let host_port = host_port.replace("localhost", "127.0.0.1");
    host_port.parse().unwrap()
}

/// The same URL pointed at `addr`.
pub fn with_addr(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_at(url.find("://").unwrap() + 3);
    let (user, tail) = match rest.rsplit_once('@') {
        Some((user, tail)) => (format!("{user}@"), tail),
        None => (String::new(), rest),
    };
    let path_at = tail.find(['/', '?']).unwrap_or(tail.len());
    format!("{scheme}{user}{addr}{}", &tail[path_at..])
}

/// Run `f` on a plain thread and fail (rather than hang the suite) if it does not finish in
/// `secs`: the bugs this guards against are callers that spin or wait forever.
pub fn on_thread_or_fail<T: Send + 'static>(
    what: &str,
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()));
    result
        .recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: still running after {secs} s"))
}

/// A TCP proxy in front of a database server that a test can break in two ways, while the server
/// itself keeps running for the other tests:
/// - [`cut`](Self::cut) closes every connection and refuses new ones, as a crashed server or a
///   firewall that rejects would;
/// - [`black_hole`](Self::black_hole) keeps every connection open but forwards nothing, as a
///   paused server or a network that silently drops packets would: the client sees no error,
///   only silence. [`resume`](Self::resume) delivers what was held back.
pub struct Proxy {
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    paused: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(AtomicBool::new(false));
        let (generation, _) = watch::channel(0_u64);
        let (paused, _) = watch::channel(false);
        let task = {
            let cut = cut.clone();
            let generation = generation.clone();
            let paused = paused.clone();
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else {
                        return;
                    };
                    if cut.load(Ordering::SeqCst) {
                        drop(client); // refused: closed at once
                        continue;
                    }
                    let mut cancelled = generation.subscribe();
                    let paused = paused.subscribe();
                    tokio::spawn(async move {
                        let Ok(server) = TcpStream::connect(target).await else {
                            return;
                        };
                        let (client_read, client_write) = client.into_split();
                        let (server_read, server_write) = server.into_split();
                        tokio::select! {
                            _ = pump(client_read, server_write, paused.clone()) => {}
                            _ = pump(server_read, client_write, paused) => {}
                            _ = cancelled.changed() => {}
                        }
                    });
                }
            })
        };
        Self {
            addr,
            cut,
            generation,
            paused,
            task,
        }
    }

    /// Close every connection through the proxy and refuse new ones.
    pub fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        self.generation.send_modify(|g| *g += 1);
    }

    /// Let connections through again.
    pub fn restore(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }

    /// Stop forwarding in both directions without closing anything; new connections are
    /// accepted and then hear nothing.
    pub fn black_hole(&self) {
        self.paused.send_replace(true);
    }

    /// Forward again, starting with whatever was held back.
    pub fn resume(&self) {
        self.paused.send_replace(false);
    }
}

/// Copy `from` to `to` while not paused; a read made before a pause is held until it ends.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut paused: watch::Receiver<bool>) {
    let mut buf = vec![0_u8; 16 * 1024];
    loop {
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if paused.wait_for(|p| !*p).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.generation.send_modify(|g| *g += 1);
        self.task.abort();
    }
}
