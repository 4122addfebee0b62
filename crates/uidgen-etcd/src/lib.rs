//! Worker ids from etcd for uidgen: a claim under a lease, keep-alives that record a
//! reservation, and a fence that keeps a reused id's holders in disjoint time units.
//!
//! It is for obtaining a worker id that a running process holds in an etcd cluster: the
//! lowest usable id of a range is claimed with a transaction (`{prefix}/workers/{id}` absent,
//! put under a lease), the lease is kept alive, and every keep-alive round records how far
//! ahead the holder may stamp (`{prefix}/marks/{id}`), which is where the id's next holder
//! starts. It follows the rules of the ZooKeeper assigner (`uidgen-zk`): a holder cut off from
//! etcd serves until the reservation of its last accepted round and then refuses; an id is
//! reused only after that reservation. It implements uidgen-store's
//! [`WorkerIdAssigner`](uidgen_worker::WorkerIdAssigner) and its holder the
//! [`WorkerKeeper`](uidgen_worker::WorkerKeeper), so
//! [`GeneratorBuilder`](uidgen_worker::GeneratorBuilder) and the `uidgen` service use it like
//! the other assigners. It is not for generating IDs (`uidgen-core`) nor a general etcd
//! client: it speaks etcd's v3 JSON gateway over HTTP, which needs no `protoc` to build.
//!
//! ```
//! use uidgen_core::Layout;
//! use uidgen_etcd::EtcdOptions;
//! let mut options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen/order/", "10.0.0.7:8080");
//! options.range = Some("924-1023".parse()?);
//! assert_eq!(options.prefix, "/uidgen/order");
//! assert_eq!(options.range_for(&Layout::leaf()?)?.to_string(), "924-1023");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The keys, the fence and why IDs never repeat are documented in `assigner.rs` and
//! `holder.rs`. [`EtcdOrderMarks`] keeps ID spaces' order marks beside them
//! (`{prefix}/order/{space}`, `order_mark.rs`), for servers that share etcd but not a store.
//!
//! # Testing
//!
//! With the cargo feature `testing`, `testing` gives each test a key prefix of its own on
//! the etcd named by `UIDGEN_TEST_ETCD` (default `http://127.0.0.1:2379`), failing with a
//! message that names the variable when it cannot be reached, and can run a private etcd
//! server that a test kills.

mod assigner;
mod clock;
mod error;
mod gateway;
mod holder;
mod namespace;
mod options;
mod order_mark;
mod record;
#[cfg(feature = "testing")]
pub mod testing;

pub use assigner::{EtcdAssignment, EtcdWorkerIdAssigner};
pub use clock::{EtcdClock, EtcdClockReading};
pub use error::{EtcdError, Result};
pub use holder::EtcdHolder;
pub use options::{
    DEFAULT_LEASE_TTL, DEFAULT_MAX_START_WAIT, DEFAULT_REQUEST_TIMEOUT, DEFAULT_RESERVATION,
    EtcdOptions,
};
pub use order_mark::EtcdOrderMarks;
pub use record::Record;
