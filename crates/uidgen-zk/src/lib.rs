//! Worker ids from ZooKeeper for uidgen: Leaf's snowflake mode, with Leaf's known holes fixed,
//! and Vesta's machine-id ranges.
//!
//! It is for obtaining a worker id that a running process holds in a ZooKeeper ensemble, the
//! way Meituan Leaf does (`/snowflake/{name}/forever/{ip}:{port}-{id}`, a time report every
//! 3 s, a local cache), plus what Leaf lacks: a live node per running holder, a reclaim of
//! dead holders' ids, a local cache that records the time as well as the id, a peer clock
//! check, and a fence that keeps a reused id's holders in disjoint time units. It implements
//! uidgen-worker's [`WorkerIdAssigner`](uidgen_worker::WorkerIdAssigner) and its holder the
//! [`WorkerKeeper`](uidgen_worker::WorkerKeeper), so
//! [`GeneratorBuilder`](uidgen_worker::GeneratorBuilder) and the `uidgen` service use it like
//! the SQL assigners. It is not for generating IDs (`uidgen-core`) or for storing anything in
//! SQL (`uidgen-store`).
//!
//! ```
//! use uidgen_core::Layout;
//! use uidgen_zk::{ReleaseMode, ZkOptions};
//! // Vesta's release modes split a 10-bit machine id: the server takes 924-1023.
//! let mut options = ZkOptions::new("zk1:2181,zk2:2181/uidgen", "order", "10.0.0.7", "8080");
//! options.range = Some(ReleaseMode::Server.default_range(&Layout::leaf()?));
//! assert_eq!(options.range_for(&Layout::leaf()?)?.to_string(), "924-1023");
//! assert_eq!(options.root(), "/snowflake/order");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The tree, the reports, the floors and the reclaim rule are documented where they are kept:
//! `tree.rs`; `assigner.rs` ("why IDs never repeat", the `zookeeper` row of
//! docs/OPERATIONS.md), whose parts each file keeps: `holder.rs` (the fence),
//! `holder/report.rs` (the reports), `assigner/claim.rs` (a start while ZooKeeper answers),
//! `assigner/offline.rs` (a start from the local cache), `peers.rs` (a new holder's clock) and
//! `reclaim.rs` (a reclaimed id). `clock.rs` reads ZooKeeper's clock for a server that compares
//! its own with it while it serves. [`ZkOrderMarks`] keeps ID spaces' order marks in the same
//! namespace (`order_mark.rs`), for servers that share ZooKeeper but not a store.
//!
//! # Testing
//!
//! With the cargo feature `testing`, `testing` gives each test its own chroot on the
//! ZooKeeper named by `UIDGEN_TEST_ZK` (default `127.0.0.1:2181`), failing with a message that
//! names the variable when it cannot be reached, and can run a private ZooKeeper server that a
//! test stops and starts.

mod assigner;
mod clock;
mod error;
mod holder;
mod namespace;
mod options;
mod order_mark;
mod peers;
mod reclaim;
mod session;
#[cfg(feature = "testing")]
pub mod testing;
mod tree;

pub use assigner::{ZkAssignment, ZkSource, ZooKeeperWorkerIdAssigner};
pub use clock::{ZkClock, ZkClockReading};
pub use error::{Result, ZkError};
pub use holder::{STOP_WAIT, ZkHolder};
pub use options::{
    DEFAULT_MAX_OUTAGE, DEFAULT_MAX_PEER_SKEW, DEFAULT_MAX_START_WAIT, DEFAULT_REPORT_INTERVAL,
    DEFAULT_RESERVATION, DEFAULT_SESSION_TIMEOUT, MAX_OUTAGE_LIMIT, ReleaseMode,
    VESTA_SERVER_RANGE, ZkOptions,
};
pub use order_mark::ZkOrderMarks;
pub use reclaim::ReclaimCandidate;
pub use tree::NodeData;
