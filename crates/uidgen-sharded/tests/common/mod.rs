//! Helpers shared by the sharded tests: the test Redis with a key prefix per test (cleaned up
//! afterwards, even when the test fails), stores, services, raw Redis access.

#![allow(clippy::unwrap_used, dead_code, unused_imports)]

use std::sync::Arc;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use uidgen_sharded::testing::{check_redis, delete_prefix, redis_url, unique_prefix};
use uidgen_sharded::{RedisLock, ShardedId, ShardedOptions, ShardedService};
use uidgen_store::testing::fresh_store;
pub use uidgen_store::testing::{TestDb, all_dbs};
use uidgen_store::{AppSpec, Store};

/// [`uidgen_store::per_db`]: a test whose body runs once per database.
#[macro_export]
macro_rules! per_db {
    ($($test:tt)*) => { uidgen_store::per_db! { $($test)* } };
}

/// A key prefix on a Redis for one test; its keys are deleted when it is dropped.
pub struct Keyspace {
    pub url: String,
    pub prefix: String,
}

impl Keyspace {
    /// A fresh prefix on the shared test Redis, failing (naming the service and variable) if it
    /// does not answer.
    pub async fn shared(name: &str) -> Self {
        let url = redis_url();
        check_redis(&url).await.unwrap_or_else(|e| panic!("{e}"));
        Self::on(&url, name)
    }

    /// A fresh prefix on the Redis at `url`.
    pub fn on(url: &str, name: &str) -> Self {
        Self {
            url: url.to_owned(),
            prefix: unique_prefix(name),
        }
    }

    /// Options for a service on this keyspace: background work slowed down so tests drive it.
    pub fn options(&self) -> ShardedOptions {
        ShardedOptions {
            redis_url: self.url.clone(),
            key_prefix: self.prefix.clone(),
            refill_interval: Duration::from_secs(3600),
            sync_interval: Duration::from_secs(3600),
            ..ShardedOptions::default()
        }
    }

    /// A raw connection to the same Redis, to look behind the service's back.
    pub async fn raw(&self) -> MultiplexedConnection {
        redis::Client::open(self.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// The list of one shard.
    pub fn list(&self, app_id: u8, shard: u8) -> String {
        format!("{}idList_{app_id}_{shard}", self.prefix)
    }
}

impl Drop for Keyspace {
    fn drop(&mut self) {
        let (url, prefix) = (self.url.clone(), self.prefix.clone());
        // Drop cannot await: clean up on a thread of its own, waited for.
        let _ = std::thread::spawn(move || {
            if let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                runtime.block_on(delete_prefix(&url, &prefix));
            }
        })
        .join();
    }
}

/// A new, migrated database of `kind`.
pub async fn store(kind: TestDb) -> Store {
    fresh_store(kind)
        .await
        .unwrap_or_else(|e| panic!("{kind:?} test database: {e}"))
        .0
}

/// A started service.
pub async fn service(store: Store, options: ShardedOptions) -> Arc<ShardedService> {
    ShardedService::start(store, options).await.unwrap()
}

/// A started service on a new SQLite database and the Redis keyspace `name`, and its keys.
pub async fn sqlite_service(name: &str) -> (Keyspace, Arc<ShardedService>) {
    let (keys, _, service) = sqlite_service_and_store(name).await;
    (keys, service)
}

/// [`sqlite_service`] and a handle on its database, for tests that change it underneath.
pub async fn sqlite_service_and_store(name: &str) -> (Keyspace, Store, Arc<ShardedService>) {
    let keys = Keyspace::shared(name).await;
    let db = store(TestDb::Sqlite).await;
    let service = service(db.clone(), keys.options()).await;
    (keys, db, service)
}

/// Take the lock at `key` as another server would, failing the test if it is held already.
pub async fn held_lock(conn: &mut MultiplexedConnection, key: &str, ttl: Duration) -> RedisLock {
    RedisLock::acquire(conn, key, ttl).await.unwrap().unwrap()
}

/// [`sqlite_service`] with app `app_id` created, step 100.
pub async fn sqlite_service_with_app(name: &str, app_id: u8) -> (Keyspace, Arc<ShardedService>) {
    let (keys, service) = sqlite_service(name).await;
    app(&service, app_id, 100).await;
    (keys, service)
}

/// Create app `app_id` with `step` (no limit).
pub async fn app(service: &ShardedService, app_id: u8, step: i64) {
    service
        .upsert_app(&AppSpec {
            step,
            ..AppSpec::new(app_id, format!("app{app_id}"))
        })
        .await
        .unwrap();
}

/// The whole list of a shard, as numbers.
pub async fn list_contents(conn: &mut MultiplexedConnection, key: &str) -> Vec<u64> {
    redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query_async(conn)
        .await
        .unwrap()
}

/// Assert that `ids` holds no duplicate (sorts it), naming the first.
pub fn assert_unique(ids: &mut [u64], context: &str) {
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        let parts = ShardedId::decode(pair[0]).unwrap();
        panic!("{context}: duplicate ID {} ({parts:?})", pair[0]);
    }
}

/// The index of an ID.
pub fn index_of(id: u64) -> u64 {
    ShardedId::decode(id).unwrap().index
}
