//! Storage for uidgen: worker ids and Leaf segments kept in SQLite, MySQL/MariaDB or
//! PostgreSQL through sqlx.
//!
//! It is for the worker ids that need a database (Baidu's disposable `worker_node` rows,
//! [leases](LeasedWorkerIdAssigner) on narrow layouts), which implement `uidgen-worker`'s
//! assigner and keeper traits, for the registries the static and machine assigners of
//! `uidgen-worker` record their ranges and exact-id leases in (`Store` implements
//! [`RangeRegistry`](uidgen_worker::RangeRegistry) and
//! [`ExactLeaseRegistry`](uidgen_worker::ExactLeaseRegistry)), for claiming Leaf segments from
//! `leaf_alloc` (and the unused tails of them that stopping servers hand back,
//! [`ReturnedRange`]) and the sharded mode's per-app, per-shard segments from `id_alloc`, for keeping
//! the per-caller bearer tokens of `caller_token` (hashed, never the secret), and for creating
//! those tables (checksummed migrations from the workspace's top-level `sql/`). It is not for
//! worker ids without storage or for wiring generators (`uidgen-worker`), nor for generating
//! IDs (`uidgen-core`), the per-tag segment buffers (`uidgen-segment`), HTTP
//! (`uidgen-server`) or the Redis lists of the sharded mode (`uidgen-sharded`).
//!
//! Servers also lease worker ids of an *embedded range* to their clients' fallback generators
//! ([`FallbackLeases`]); a client keeps such a lease as its generator's fence
//! (`uidgen_worker::RemoteLease`) without ever talking to the database.
//!
//! Assigners that share a store draw from one worker-id space, so each records the
//! `WorkerIdRange` it hands ids from in `worker_id_range` before taking one; overlapping or
//! inconsistent ranges are refused at start-up ([`Store::register_worker_range`]).
//!
//! One [`Store`] API over three databases, chosen by URL: `sqlite://PATH` (the embedded
//! default, WAL mode, shareable between processes), `mysql://` / `mariadb://`, `postgres://` /
//! `postgresql://`. SQL that differs by dialect sits beside each query (`RETURNING` on SQLite
//! and PostgreSQL, `LAST_INSERT_ID()` and read-back-in-transaction on MySQL); every value is a
//! bind parameter.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use uidgen_core::{CachedOptions, Layout, SystemClock, UidGenerator};
//! use uidgen_store::{DisposableWorkerIdAssigner, Store};
//! use uidgen_worker::GeneratorBuilder;
//!
//! # let dir = tempfile::tempdir()?;
//! # let url = format!("sqlite://{}", dir.path().join("uidgen.db").display());
//! let store = Store::connect(&url).await?; // e.g. "sqlite://data/uidgen.db"; migrated on connect
//! let built = GeneratorBuilder::new(Layout::baidu_default()?)
//!     .assigner(DisposableWorkerIdAssigner::new(store.clone()))
//!     .build_cached(SystemClock, CachedOptions::default())
//!     .await?;
//! let id = built.generator.next_id()?;
//! assert_eq!(built.generator.parse(id)?.parts.worker, built.worker_id()); // a fresh worker row
//!
//! store.upsert_tag("order", 1000, Some("order numbers")).await?;
//! let segment = store.claim_segment("order").await?; // owns [max_id - step, max_id)
//! assert_eq!(segment.range(), 1..1001); // Leaf's tags start at 1
//! # Ok(()) }
//! ```
//!
//! # Testing
//!
//! With the cargo feature `testing`, `testing::fresh_store` gives each test its own empty,
//! migrated database: a temporary SQLite file, or `CREATE DATABASE uidgen_t_...` on the servers
//! named by `UIDGEN_TEST_MYSQL_URL` (default `mysql://root@127.0.0.1:3306/test`) and
//! `UIDGEN_TEST_POSTGRES_URL` (default `postgres://postgres@127.0.0.1:5432/test`). An
//! unreachable server fails the test with a message naming the service and the variable.
//! Other crates enable it in `[dev-dependencies]`:
//! `uidgen-store = { workspace = true, features = ["testing"] }`.

mod caller_token;
mod db_clock;
mod disposable;
mod epoch;
mod error;
mod exact_lease;
mod fallback_lease;
mod id_alloc;
mod leaf_alloc;
mod lease;
mod lease_cache;
mod lease_claim;
mod lease_guard;
mod migrate;
mod order_mark;
mod ordered_fence;
mod ordered_tag;
mod peer_tables;
mod residue;
mod returned;
mod session;
mod store;
mod takeover;
#[cfg(feature = "testing")]
pub mod testing;
mod url;
mod worker_lease;
mod worker_node;
mod worker_range;

pub use caller_token::{
    ActiveCallerToken, CALLER_TOKEN_PREFIX, CallerToken, MAX_CALLER_NAME_LEN, MAX_SCOPE_ENTRIES,
    MAX_SCOPE_ENTRY_LEN, NewCallerToken, Revoked, TokenScopes, token_hash, validate_caller_name,
    validate_expiry,
};
pub use db_clock::ClockReading;
pub use disposable::DisposableWorkerIdAssigner;
pub use error::{Result, StoreError, StoreFuture};
pub use fallback_lease::FallbackLeases;
pub use id_alloc::claim::IdSegment;
pub use id_alloc::{
    AppShard, AppSpec, DEFAULT_ID_ALLOC_STEP, ID_ALLOC_INDEX_SHIFT, ID_ALLOC_SHARDS, IdAllocApp,
    MAX_APP_NAME_LEN, MAX_ID_ALLOC_STEP, index_ceiling,
};
pub use leaf_alloc::{
    LeafAlloc, MAX_DESCRIPTION_LEN, MAX_STEP, SegmentClaim, validate_description, validate_step,
    validate_tag,
};
pub use lease::LeasedWorkerIdAssigner;
pub use lease_guard::LeaseGuard;
pub use migrate::Applied;
pub use migrate::catalog::{Migration, migrations};
pub use ordered_tag::{Lead, MAX_HOLDER_LEN, OrderedTag};
pub use peer_tables::baidu::{
    BAIDU_TABLE, BaiduWorkerNodes, UIDGEN_ROWS_BEFORE_SHARING, WorkerNodeTable,
};
pub use peer_tables::tinyid::{AdoptedTag, TINYID_FENCE, TinyIdInfo, TinyIdToken};
pub use peer_tables::vesta::{VESTA_TABLE, VestaMachineRow};
pub use residue::{MAX_DELTA, Residue};
pub use returned::ReturnedRange;
pub use store::{Store, StoreOptions};
pub use takeover::{MAX_PEER_LEN, TakeoverRecord};
pub use url::{Dialect, redact_url};
pub use worker_lease::{DEFAULT_SPACE, MAX_SPACE_LEN, WorkerLeaseRow, check_space};
pub use worker_node::{NodeType, WorkerNode};
pub use worker_range::WorkerRangeRow;
