//! What a [`ShardedService`] holds: its parts, shared by the calls (`service`), the refills
//! (`refill`) and the app sync (`sync`), each of which adds its methods; here so that those
//! files import it from below instead of from one another.

use std::sync::Arc;
use std::sync::Weak;
use std::sync::atomic::AtomicBool;

use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use uidgen_store::Store;

use crate::apps::AppTable;
use crate::keys::Keys;
use crate::layout::SHARDS;
use crate::link::RedisLink;
use crate::options::ShardedOptions;
use crate::stats::Stats;

/// Sharded IDs from Redis lists backed by `id_alloc` (see the crate doc).
///
/// ```no_run
/// # async fn demo() -> uidgen_sharded::Result<()> {
/// use uidgen_sharded::{ShardedId, ShardedOptions, ShardedService};
/// use uidgen_store::AppSpec;
/// let store = uidgen_store::Store::connect("sqlite://uidgen.db").await?;
/// let service = ShardedService::start(store, ShardedOptions::default()).await?;
/// service.upsert_app(&AppSpec::new(7, "orders")).await?;
/// let id = service.get(7, "alice@example.com").await?;
/// let parts = ShardedId::decode(id)?;
/// assert_eq!((parts.app_id, parts.shard), (7, uidgen_sharded::shard_of("alice@example.com")));
/// service.shutdown();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ShardedService {
    pub(crate) store: Store,
    pub(crate) options: ShardedOptions,
    pub(crate) keys: Keys,
    pub(crate) link: RedisLink,
    /// The app table; `None` until it loaded once.
    pub(crate) apps: RwLock<Option<Arc<AppTable>>>,
    /// Why the app table could not be loaded, while it has not.
    pub(crate) init_error: Mutex<String>,
    /// One flag per (app, shard): a background refill of it is running in this process.
    pub(crate) refilling: Box<[AtomicBool]>,
    /// One flag per (app, shard): its last claim was refused as exhausted.
    pub(crate) exhausted: Box<[AtomicBool]>,
    /// Notified whenever a refill of this process ends, for callers waiting on one.
    pub(crate) refilled: tokio::sync::Notify,
    /// Serialises app syncs with `upsert_app`.
    pub(crate) sync_lock: tokio::sync::Mutex<()>,
    pub(crate) stats: Arc<Stats>,
    /// This service, for the background refills it starts from `&self` calls.
    pub(crate) me: Weak<Self>,
    /// Set by `shutdown`: the background tasks are stopped.
    pub(crate) shut_down: AtomicBool,
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// The index of one shard's flag in `refilling` and `exhausted`.
pub(crate) fn flag_index(app_id: u8, shard: u8) -> usize {
    usize::from(app_id) * usize::from(SHARDS) + usize::from(shard)
}
