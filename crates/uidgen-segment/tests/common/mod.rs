//! Helpers shared by the database tests: fresh databases of every kind, a service over them, and
//! (from `uidgen_store::testing`) a cuttable TCP proxy to simulate an outage of a networked
//! database.

#![allow(clippy::unwrap_used, dead_code, unused_imports)]

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::Clock;
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_store::Store;
pub use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
pub use uidgen_store::testing::{TestDb, all_dbs};

/// A new, migrated database of `kind` and its URL. An unreachable server fails the test with a
/// message naming the service and its environment variable.
pub async fn fresh(kind: TestDb) -> (Store, String) {
    uidgen_store::testing::fresh_store(kind)
        .await
        .unwrap_or_else(|e| panic!("{kind:?} test database: {e}"))
}

/// A new, migrated database of `kind` holding one biz tag with `step`.
pub async fn fresh_with_tag(kind: TestDb, tag: &str, step: i64) -> Store {
    let (store, _) = fresh(kind).await;
    store.upsert_tag(tag, step, None).await.unwrap();
    store
}

/// A store through `proxy` (two connections, no migrations) that gives up on connecting after
/// `connect_timeout`.
pub async fn proxied_store(url: &str, proxy: &Proxy, connect_timeout: Duration) -> Store {
    let store_options = uidgen_store::StoreOptions {
        connect_timeout,
        max_connections: 2,
        migrate: false,
        ..uidgen_store::StoreOptions::default()
    };
    Store::connect_with(&with_addr(url, proxy.addr), store_options)
        .await
        .unwrap()
}

/// A service over `store` with `options`.
pub async fn service(
    store: Store,
    options: SegmentOptions,
    clock: impl Clock + 'static,
) -> Arc<SegmentService> {
    SegmentService::start(store, options, clock).await.unwrap()
}

/// The stored `max_id` of `tag`.
pub async fn max_id(store: &Store, tag: &str) -> i64 {
    store.get_tag(tag).await.unwrap().unwrap().max_id
}

/// Poll until `done` holds, failing with `what` after `secs`.
pub use uidgen_testkit::eventually_within as eventually;

/// Assert that `ids` holds no duplicate (sorts it).
pub fn assert_unique(ids: &mut [i64], context: &str) {
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|w| w[0] == w[1]) {
        panic!("{context}: duplicate ID {}", pair[0]);
    }
}

/// Run `f` on a plain thread and fail (rather than hang the suite) if it does not finish in
/// `secs`: the bugs this guards against are callers that spin or wait forever.
pub fn on_thread_or_fail<T: Send + 'static>(
    what: &str,
    secs: u64,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(f()));
    result
        .recv_timeout(Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("{what}: still running after {secs} s"))
}
