//! `uidgen serve` processes on one fresh database, at fixed addresses, for the client tests
//! (`tests/coordinated/`, which includes this file with `#[path]`).
#![allow(dead_code)]

use std::collections::HashSet;
use std::time::Duration;

use uidgen_client::{ClientBuilder, Peer};
use uidgen_core::Layout;
use uidgen_store::testing::{TestDb, fresh_url};

use super::common::{Server, fixed_port};

/// The segment tag every server creates at start (the sample tag).
pub const TAG: &str = "client-test";

/// One server's fixed addresses (so a restart comes back where the clients look) and its
/// process while it runs.
pub struct Node {
    pub http: u16,
    pub grpc: u16,
    pub server: Option<Server>,
}

/// `uidgen serve` processes sharing one fresh database.
pub struct Cluster {
    pub store: String,
    layout: &'static str,
    extra: Vec<(String, String)>,
    pub nodes: Vec<Node>,
}

impl Cluster {
    /// `count` servers of `layout` on a fresh PostgreSQL database, with `extra` environment.
    pub async fn start(count: usize, layout: &'static str, extra: &[(&str, &str)]) -> Cluster {
        Self::start_on(TestDb::Postgres, count, layout, extra).await
    }

    /// [`start`](Self::start) on a fresh database of kind `db`.
    pub async fn start_on(
        db: TestDb,
        count: usize,
        layout: &'static str,
        extra: &[(&str, &str)],
    ) -> Cluster {
        let store = fresh_url(db).await.unwrap_or_else(|e| {
            panic!("{db:?} is needed (set UIDGEN_TEST_POSTGRES_URL or UIDGEN_TEST_MYSQL_URL): {e}")
        });
        let mut cluster = Cluster {
            store,
            layout,
            extra: extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            nodes: (0..count).map(|_| Node::new()).collect(),
        };
        for index in 0..count {
            cluster.restart(index).await;
        }
        cluster
    }

    /// One more node on the same store, not started.
    pub fn add_node(&mut self) -> usize {
        self.nodes.push(Node::new());
        self.nodes.len() - 1
    }

    /// Start node `index` (again) on its addresses.
    pub async fn restart(&mut self, index: usize) {
        let node = &self.nodes[index];
        let grpc = format!("127.0.0.1:{}", node.grpc);
        let listen = format!("127.0.0.1:{}", node.http);
        let mut envs: Vec<(String, String)> = vec![
            ("UIDGEN_STORE".into(), self.store.clone()),
            ("UIDGEN_LAYOUT".into(), self.layout.into()),
            ("UIDGEN_GENERATOR".into(), "default".into()),
            ("UIDGEN_GRPC_LISTEN".into(), grpc),
            ("UIDGEN_SEGMENT_SAMPLE_TAG".into(), TAG.into()),
        ];
        envs.extend(self.extra.iter().cloned());
        let server = tokio::task::spawn_blocking(move || {
            let envs: Vec<(&str, &str)> =
                envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            Server::start_listening(&listen, &[], &envs)
        })
        .await
        .unwrap();
        self.nodes[index].server = Some(server);
    }

    /// `kill -9` node `index`.
    pub async fn kill(&mut self, index: usize) {
        let server = self.nodes[index].server.take().unwrap();
        server.kill_from_async().await;
    }

    /// `kill -9` every running node.
    pub async fn kill_all(&mut self) {
        for index in 0..self.nodes.len() {
            if self.nodes[index].server.is_some() {
                self.kill(index).await;
            }
        }
    }

    /// SIGTERM node `index` and wait for it to exit.
    pub async fn terminate(&mut self, index: usize) {
        let server = self.nodes[index].server.take().unwrap();
        server.terminate_cleanly().await;
    }

    /// The worker id node `index` logged at its last start.
    pub fn worker_id(&self, index: usize) -> u64 {
        self.nodes[index].server.as_ref().unwrap().worker_id()
    }

    pub fn grpc_peer(&self, index: usize) -> Peer {
        Peer::grpc(format!("http://127.0.0.1:{}", self.nodes[index].grpc))
    }

    pub fn http_peer(&self, index: usize) -> Peer {
        Peer::http(self.http_base(index))
    }

    pub fn http_base(&self, index: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[index].http)
    }

    /// Every node over gRPC and over HTTP: both transports share the rotation.
    pub fn peers(&self) -> Vec<Peer> {
        (0..self.nodes.len())
            .flat_map(|i| [self.grpc_peer(i), self.http_peer(i)])
            .collect()
    }
}

impl Node {
    fn new() -> Node {
        Node {
            http: fixed_port(),
            grpc: fixed_port(),
            server: None,
        }
    }
}

/// A client that notices outages quickly (the tests kill servers on purpose).
pub fn builder(peers: Vec<Peer>) -> ClientBuilder {
    ClientBuilder::new(peers)
        .timeout(Duration::from_millis(700))
        .eject_for(Duration::from_millis(300))
        .probe_interval(Duration::from_millis(100))
        .buffer_size(1024)
        .batch_size(512)
        .segments(300, 512)
}

pub fn vesta() -> Layout {
    Layout::vesta_max_peak().unwrap()
}

/// Check that `id` was issued by a server: one of `servers`' worker ids, and genMethod 1
/// (gRPC) or 2 (HTTP) on the Vesta layout.
pub fn assert_from_server(id: u64, servers: &HashSet<u64>) {
    let parts = vesta().decompose(id).unwrap();
    assert!(
        servers.contains(&parts.worker),
        "ID {id} has worker {}",
        parts.worker
    );
    assert!(
        matches!(parts.method, 1 | 2),
        "ID {id} has genMethod {}",
        parts.method
    );
}
