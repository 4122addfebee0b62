//! The sharded mode of uidgen: IDs that carry an 8-bit app id and a 6-bit shard picked from a
//! user's gate pass, handed out from Redis lists that are filled with segments of the
//! `id_alloc` table.
//!
//! It is for services moving from the Leaf-like service this mode reproduces: each ID is
//! `index << 14 | shard << 8 | app_id` ([`ShardedId`]), where the shard is Java's
//! `Math.abs(gatePass.hashCode()) % 64` ([`shard_of`]), so the same user lands in the same
//! shard as before, and IDs never collide across apps. One Redis list per app and shard,
//! `id.gen.idList_{app}_{shard}`, holds the next indexes; a get pops one (`LPOP`), and a list
//! that holds 20% of a step or less gets the shard's next segment from the database, pushed in
//! one command. It is not for time-ordered IDs (`uidgen-core`), nor for dense per-tag counters
//! kept in memory (`uidgen-segment`), nor for HTTP (`uidgen-server`).
//!
//! The database is the only authority for numbers: a segment is pushed only after its claim is
//! committed and is pushed once, and a list Redis may have rolled back (a restart from an old
//! snapshot, a failover) is detected by the server's run id and replication id and deleted
//! before anything is popped from that server (`link.rs` argues it in full). A list restored
//! key by key into the same server is caught by its mark, the highest index ever popped from
//! it, checked in the same script as every pop (`pop.rs`). Redis losing data skips numbers; it
//! never repeats one.
//!
//! ```
//! use uidgen_sharded::{ShardedId, java_string_hash, shard_of};
//!
//! // The shard of a user, as the original Java service computes it.
//! assert_eq!(java_string_hash("alice@example.com"), 2145772861);
//! let shard = shard_of("alice@example.com");
//! assert_eq!(shard, 61);
//!
//! // An ID of app 7 in that shard, with index 1001, and back.
//! let id = ShardedId::new(7, shard, 1001)?.to_u64();
//! assert_eq!(id, 1001 << 14 | 61 << 8 | 7);
//! let parts = ShardedId::decode(id)?;
//! assert_eq!((parts.app_id, parts.shard, parts.index), (7, 61, 1001));
//! # Ok::<(), uidgen_sharded::ShardedError>(())
//! ```
//!
//! A running service ([`ShardedService`]) needs a store and a Redis:
//!
//! ```no_run
//! # async fn demo() -> uidgen_sharded::Result<()> {
//! use uidgen_sharded::{ShardedOptions, ShardedService};
//! let store = uidgen_store::Store::connect("sqlite://uidgen.db").await?;
//! let options = ShardedOptions {
//!     redis_url: "redis://127.0.0.1:6379".into(),
//!     ..Default::default()
//! };
//! let service = ShardedService::start(store, options).await?;
//! let app = service.upsert_app(&uidgen_store::AppSpec::new(7, "orders")).await?;
//! assert_eq!(app.shards, 64);
//! let ids = service.get_batch(7, "alice@example.com", 10).await?;
//! assert_eq!(ids.len(), 10);
//! # Ok(()) }
//! ```
//!
//! # Testing
//!
//! With the cargo feature `testing`, `testing` names the test Redis (`UIDGEN_TEST_REDIS_URL`,
//! default `redis://127.0.0.1:6379`), gives each test its own key prefix so tests share it in
//! parallel, and starts private `redis-server` processes for tests that flush, kill or restore
//! Redis.

mod apps;
mod error;
mod java_hash;
mod keys;
mod layout;
mod link;
mod lock;
mod options;
mod pop;
mod refill;
mod service;
mod state;
mod stats;
mod survey;
mod sync;
#[cfg(feature = "testing")]
pub mod testing;

pub use apps::{AppInfo, largest_id, shard_ceiling};
pub use error::{Result, ShardedError};
pub use java_hash::{java_string_hash, shard_of};
pub use layout::{APP_BITS, INDEX_BITS, MAX_INDEX, SHARD_BITS, SHARDS, ShardedId};
pub use lock::{ORIGINAL_LOCK_TTL, RedisLock};
pub use options::{
    DEFAULT_KEY_PREFIX, DEFAULT_REDIS_URL, MAX_KEY_PREFIX_LEN, MAX_LOCK_TTL, MIN_LOCK_TTL,
    ShardedOptions,
};
pub use refill::{RefillOutcome, RefillReport};
pub use state::ShardedService;
pub use stats::StatsSnapshot;
pub use survey::{ListSurvey, survey};
