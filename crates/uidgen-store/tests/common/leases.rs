//! Leases on a manual clock: the options, cache files and crashes the lease tests share.

use std::time::Duration;

use uidgen_core::{ManualClock, UidGenerator};
use uidgen_store::{LeaseGuard, LeasedWorkerIdAssigner, Store, StoreOptions};
use uidgen_worker::{GeneratorBuilder, LeaseOptions};

/// Lease options for tests: a 30 s ttl, no heartbeat (renewals by hand, on the manual clock),
/// a 5 s takeover wait, no cache, the holder name `holder`.
pub fn options(holder: &str) -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_secs(30),
        heartbeat_interval: None,
        max_takeover_wait: Duration::from_secs(5),
        cache_path: None,
        cache_reserve: Duration::from_secs(60),
        holder: Some(holder.to_owned()),
        range: None,
    }
}

/// A cache file path of its own (not created).
pub fn temp_cache() -> std::path::PathBuf {
    std::env::temp_dir()
        .join("uidgen-store-tests")
        .join(format!(
            "worker-{}-{:08x}.cache",
            std::process::id(),
            fastrand::u32(..)
        ))
}

/// A store on the same database whose pool can be "cut off": with [`occupy_pool`] held, its
/// queries time out as if the database were down.
pub fn flaky_store(url: &str) -> Store {
    let options = StoreOptions {
        max_connections: 1,
        connect_timeout: Duration::from_millis(200),
        migrate: false,
        ..StoreOptions::default()
    };
    Store::connect_lazy(url, options).unwrap()
}

/// A store whose database is "down": closed, so every query is unreachable at once.
pub async fn down_store(url: &str) -> Store {
    let down = Store::connect(url).await.unwrap();
    down.close().await;
    down
}

/// [`options`] with a cache at `cache`.
pub fn cached_options(holder: &str, cache: &std::path::Path) -> LeaseOptions {
    LeaseOptions {
        cache_path: Some(cache.to_owned()),
        ..options(holder)
    }
}

/// Claim with a cache and stamp one ID, then "crash" (drop without release): the cache
/// records the holder, the row's expiry (ttl 30 s + reserve 60 s) and the mark.
pub async fn crash_holding(
    store: &Store,
    clock: &ManualClock,
    cache: &std::path::Path,
    layout: &uidgen_core::Layout,
) -> (u64, String) {
    let built = GeneratorBuilder::new(layout.clone())
        .assigner(LeasedWorkerIdAssigner::new(
            store.clone(),
            clock.clone(),
            cached_options("a", cache),
        ))
        .build_default(clock.clone())
        .await
        .unwrap();
    built.generator.next_id().unwrap();
    let lease = LeaseGuard::of(&built.assignment).unwrap();
    (lease.worker_id(), lease.holder().to_owned())
}
