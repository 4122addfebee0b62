//! The ZooKeeper worker-id assigner in the service: its start-up (its section, `[zookeeper]`,
//! is [`crate::config::zookeeper`]; `uidgen zk reclaim` is [`crate::cli::zk`]). Readiness,
//! status, metrics and shutdown read its holder as the assignment's keeper, as every kind's.

use std::sync::Arc;

use anyhow::Context;
use uidgen_core::Layout;
use uidgen_store::Store;
use uidgen_worker::{WorkerError, WorkerIdAssigner};
use uidgen_zk::{ZkError, ZooKeeperWorkerIdAssigner};

pub use crate::config::zookeeper::{FALLBACK_STATIC_REMOVED, options};
use crate::config::{Settings, ZkSettings};

/// The name the ZooKeeper range is recorded under in the store's `worker_id_range`, so that a
/// SQL assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "zookeeper";

/// The ZooKeeper assigner of `settings`, after recording its range in the store so SQL
/// assigners sharing it keep out.
pub async fn assigner(
    settings: &ZkSettings,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<Arc<dyn WorkerIdAssigner>> {
    let options = settings.options.clone();
    let range = options.range_for(layout)?;
    store
        .register_worker_range(REGISTRY_NAME, range)
        .await
        .context("cannot record the ZooKeeper range in the store")?;
    Ok(Arc::new(ZooKeeperWorkerIdAssigner::new(options)))
}

/// A refused ZooKeeper start, with what to do.
pub fn explain(settings: &Settings, error: WorkerError) -> anyhow::Error {
    let reservation = settings
        .zookeeper
        .as_ref()
        .map_or(0, |zk| zk.options.reservation.as_secs());
    // Issue 36, point 6: a churn of short-lived holders (each start on a new ip:port takes a
    // new forever node) uses the range up with nodes seconds old, which no threshold frees
    // before their reservation: say what does, with this service's numbers.
    if matches!(
        error.downcast_backend::<ZkError>(),
        Some(ZkError::RangeUsedUp { .. })
    ) {
        return anyhow::Error::new(error).context(format!(
            "cannot obtain a worker id from ZooKeeper. The ids of stopped holders are reserved \
             for {reservation} s after their last report (`zookeeper.reservation_secs`): once \
             that has passed, `uidgen zk reclaim --older-than {reservation}s` frees them, or \
             `zookeeper.auto_reclaim_after_secs = {reservation}` frees them in the background. A \
             restart on the same address and port keeps its own node; starts on new ones (new \
             pod IPs, `listen` port 0) each take another id"
        ));
    }
    anyhow::Error::new(error).context("cannot obtain a worker id from ZooKeeper")
}
