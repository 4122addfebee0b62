//! [`ReplyDropper`]: a TCP proxy in front of a ZooKeeper server that loses one `setData` reply.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

/// ZooKeeper's opcode for `setData` (`ZooDefs.OpCode.setData`).
const OP_SET_DATA: i32 = 5;

/// No request is marked for dropping.
const NONE: i64 = i64::MIN;

/// A TCP proxy in front of a ZooKeeper server. Told to, it forwards the next `setData` request,
/// swallows the server's reply to it and cuts the client's connection: what a network failure
/// right after the server applied the write looks like to the client (ConnectionLoss on a
/// write that went through). Or it cuts the connection before the request reaches the server
/// (ConnectionLoss on a write that did not). The client's reconnection comes through the
/// proxy again.
///
/// It reads ZooKeeper's framing: every packet is a 4-byte big-endian length and a body; after
/// the connect request and response, a request body starts with its `xid` and opcode, a reply
/// body with the `xid` it answers.
///
/// ```no_run
/// use uidgen_zk::ZkOptions;
/// use uidgen_zk::testing::ReplyDropper;
/// let proxy = ReplyDropper::start("127.0.0.1:2181");
/// // A holder connected through the proxy ...
/// let options = ZkOptions::new(format!("{}/t", proxy.address()), "t", "127.0.0.1", "8080");
/// // ... gets ConnectionLoss on its next report, which ZooKeeper has written all the same.
/// proxy.drop_next_set_data_reply();
/// # let _ = options;
/// assert_eq!(proxy.dropped(), 0); // until a report passes
/// ```
#[derive(Debug)]
pub struct ReplyDropper {
    port: u16,
    state: Arc<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Drop the reply to the next `setData`.
    armed: AtomicBool,
    /// Drop the next `setData` itself.
    armed_request: AtomicBool,
    dropped: AtomicU64,
    stop: AtomicBool,
    /// Every socket opened, to close them when the proxy is dropped.
    sockets: Mutex<Vec<TcpStream>>,
}

impl ReplyDropper {
    /// Listen on a free port of 127.0.0.1, forwarding to `upstream` (host:port).
    pub fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State::default());
        let shared = Arc::clone(&state);
        let upstream = upstream.to_owned();
        std::thread::spawn(move || {
            while !shared.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((client, _)) => relay(&shared, client, &upstream),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Self { port, state }
    }

    /// The proxy's address, for a connect string.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Lose the reply to the next `setData` that passes.
    pub fn drop_next_set_data_reply(&self) {
        self.state.armed.store(true, Ordering::SeqCst);
    }

    /// Lose the next `setData` request before it reaches the server.
    pub fn drop_next_set_data_request(&self) {
        self.state.armed_request.store(true, Ordering::SeqCst);
    }

    /// How many replies or requests were lost so far.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::SeqCst)
    }
}

impl Drop for ReplyDropper {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        for socket in self.state.sockets.lock().drain(..) {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Pump one client connection through to `upstream` in two threads.
fn relay(state: &Arc<State>, client: TcpStream, upstream: &str) {
    let Ok(server) = TcpStream::connect(upstream) else {
        return;
    };
    client.set_nonblocking(false).unwrap();
    {
        let mut sockets = state.sockets.lock();
        sockets.push(client.try_clone().unwrap());
        sockets.push(server.try_clone().unwrap());
    }
    // The xid of the request whose reply is to be lost on this connection.
    let marked = Arc::new(AtomicI64::new(NONE));
    let (from_client, to_server) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (requests_state, requests_marked) = (Arc::clone(state), Arc::clone(&marked));
    std::thread::spawn(move || {
        pump(from_client, to_server, |body| {
            let (Some(xid), Some(op)) = (be_i32(body, 0), be_i32(body, 4)) else {
                return true;
            };
            if op != OP_SET_DATA {
                return true;
            }
            if requests_state.armed_request.swap(false, Ordering::SeqCst) {
                requests_state.dropped.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            if requests_state.armed.swap(false, Ordering::SeqCst) {
                requests_marked.store(i64::from(xid), Ordering::SeqCst);
            }
            true
        });
    });
    let replies_state = Arc::clone(state);
    std::thread::spawn(move || {
        let cut = client.try_clone().unwrap();
        pump(server, client, |body| {
            let lost = be_i32(body, 0).map(i64::from) == Some(marked.load(Ordering::SeqCst));
            if lost {
                replies_state.dropped.fetch_add(1, Ordering::SeqCst);
                let _ = cut.shutdown(Shutdown::Both);
            }
            !lost
        });
    });
}

/// Copy packets from `from` to `to` until either side closes: the first (connect) packet as
/// is, each later one only if `forward(body)` says so (`false` also ends the pump).
fn pump(mut from: TcpStream, mut to: TcpStream, mut forward: impl FnMut(&[u8]) -> bool) {
    let mut first = true;
    loop {
        let mut length = [0u8; 4];
        if from.read_exact(&mut length).is_err() {
            break;
        }
        let Ok(size) = usize::try_from(u32::from_be_bytes(length)) else {
            break;
        };
        let mut body = vec![0u8; size];
        if from.read_exact(&mut body).is_err() {
            break;
        }
        if !first && !forward(&body) {
            break;
        }
        first = false;
        if to.write_all(&length).is_err() || to.write_all(&body).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn be_i32(body: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(body.get(at..at + 4)?.try_into().ok()?))
}
