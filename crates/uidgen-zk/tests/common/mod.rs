//! Helpers shared by the ZooKeeper test binaries.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// Each test binary uses its own subset.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use uidgen_core::{Clock, Layout, ManualClock, SnowflakeGenerator, SystemClock};
use uidgen_zk::{ZkAssignment, ZkError, ZkOptions, ZooKeeperWorkerIdAssigner};

/// Options for `127.0.0.1:{port}` in the namespace `orders`, its cache in `dir`, reporting
/// every 200 ms.
pub fn options(connect: &str, port: u16, dir: &Path) -> ZkOptions {
    let mut options = ZkOptions::new(connect, "orders", "127.0.0.1", port.to_string());
    options.cache_file = dir.join(format!("cache-{port}.state"));
    options.report_interval = Duration::from_millis(200);
    options.session_timeout = Duration::from_secs(4);
    options
}

/// Declare the namespace of `options` new unless it is recorded already (a test's namespace
/// is its own, so nothing was ever issued in it). ZooKeeper down: nothing to do.
pub async fn declare_new(options: &ZkOptions) {
    let _ = uidgen_zk::testing::init_namespace(&options.connect, &options.name).await;
}

/// Start on the system clock, Leaf's layout, in a namespace declared new.
pub async fn start(options: &ZkOptions) -> Result<ZkAssignment, ZkError> {
    declare_new(options).await;
    ZooKeeperWorkerIdAssigner::new(options.clone())
        .start(&Layout::leaf().unwrap())
        .await
}

/// Start on `clock`, Leaf's layout, in a namespace declared new.
pub async fn start_on(options: &ZkOptions, clock: &ManualClock) -> Result<ZkAssignment, ZkError> {
    declare_new(options).await;
    ZooKeeperWorkerIdAssigner::new(options.clone())
        .with_clock(clock.clone())
        .start(&Layout::leaf().unwrap())
        .await
}

/// Stop reporting (the session closes; the node and cache stay), letting a round under way
/// finish, as the service's release does: the tests run on current-thread runtimes, where the
/// blocking `shutdown` cannot wait for it.
pub async fn stop(assigned: &ZkAssignment) {
    assigned.holder.stop().await;
}

/// The system clock (ms).
pub fn now() -> u64 {
    SystemClock.now_millis()
}

/// A Snowflake generator on the assigned id, fenced by its holder.
pub fn generator<C: Clock + 'static>(assigned: &ZkAssignment, clock: C) -> SnowflakeGenerator<C> {
    let generator = SnowflakeGenerator::new(
        Layout::leaf().unwrap(),
        assigned.assignment.worker_id,
        clock,
    )
    .unwrap();
    generator.fenced(
        assigned
            .assignment
            .fence
            .clone()
            .expect("a ZooKeeper id is fenced"),
    )
}

/// How many IDs of `ids` repeat one already seen.
pub fn duplicates(ids: &[u64]) -> usize {
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    sorted.windows(2).filter(|w| w[0] == w[1]).count()
}
