//! A TCP proxy between a service and the database (or any TCP server) it talks to, that a test
//! can cut or silence while the server itself keeps running for the other tests: outages are
//! tested against the real driver and server, never a mock.
//!
//! ```no_run
//! # async fn demo() {
//! use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
//! let url = "postgres://postgres@127.0.0.1:5432/test";
//! let proxy = Proxy::start(server_addr(url)).await;
//! let through = with_addr(url, proxy.addr); // hand this URL to the service under test
//! proxy.cut(); // connections close and new ones are refused
//! proxy.restore();
//! # drop(through);
//! # }
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// `host:port` of a `scheme://user@host:port/db` URL (`localhost` read as 127.0.0.1).
///
/// # Panics
///
/// If the URL names no `host:port`: a test's own URL, so a bug in the test.
///
/// ```
/// use uidgen_store::testing::proxy::server_addr;
/// let addr = server_addr("postgres://postgres@localhost:5432/test");
/// assert_eq!(addr.to_string(), "127.0.0.1:5432");
/// ```
pub fn server_addr(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split(['/', '?']).next().unwrap_or(rest);
    let host_port = host_port.replace("localhost", "127.0.0.1");
    host_port
        .parse()
        .unwrap_or_else(|e| panic!("no host:port in {url:?}: {e}"))
}

/// The same URL pointed at `addr`.
///
/// ```
/// use uidgen_store::testing::proxy::with_addr;
/// let url = with_addr("mysql://root@db:3306/test", "127.0.0.1:4000".parse().unwrap());
/// assert_eq!(url, "mysql://root@127.0.0.1:4000/test");
/// ```
pub fn with_addr(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let (user, tail) = match rest.rsplit_once('@') {
        Some((user, tail)) => (format!("{user}@"), tail),
        None => (String::new(), rest),
    };
    let path_at = tail.find(['/', '?']).unwrap_or(tail.len());
    format!("{scheme}{user}{addr}{}", &tail[path_at..])
}

/// A TCP proxy in front of a database server that a test can break in two ways, while the server
/// itself keeps running for the other tests:
/// - [`cut`](Self::cut) closes every connection and refuses new ones, as a crashed server or a
///   firewall that rejects would;
/// - [`black_hole`](Self::black_hole) keeps every connection open but forwards nothing, as a
///   paused server or a network that silently drops packets would: the client sees no error,
///   only silence. [`resume`](Self::resume) delivers what was held back.
pub struct Proxy {
    /// Where clients connect instead of the server.
    pub addr: SocketAddr,
    cut: Arc<AtomicBool>,
    generation: watch::Sender<u64>,
    paused: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free local port in front of `target`.
    ///
    /// # Panics
    ///
    /// If no local port can be bound: a test cannot go on without one.
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("cannot bind a local port for the proxy: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the proxy's port has no address: {e}"));
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
