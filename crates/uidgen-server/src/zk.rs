//! The ZooKeeper worker-id assigner in the service: its start-up (its section, `[zookeeper]`,
//! is [`crate::config::zookeeper`]; `uidgen zk reclaim` is [`crate::cli::zk`]). Readiness,
//! status, metrics and shutdown read its holder as the assignment's keeper, as every kind's.

use anyhow::Context;
use uidgen_core::Layout;
use uidgen_store::Store;
use uidgen_worker::WorkerAssignment;
use uidgen_zk::{ZkSource, ZooKeeperWorkerIdAssigner};

use crate::config::ZkSettings;
pub use crate::config::zookeeper::{FALLBACK_STATIC_REMOVED, options};

/// The name the ZooKeeper range is recorded under in the store's `worker_id_range`, so that a
/// SQL assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "zookeeper";

/// Take a worker id from ZooKeeper (or its local cache), after recording its range in the
/// store so SQL assigners sharing it keep out.
pub async fn assign(
    settings: &ZkSettings,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<WorkerAssignment> {
    let options = settings.options.clone();
    let range = options.range_for(layout)?;
    store
        .register_worker_range(REGISTRY_NAME, range)
        .await
        .context("cannot record the ZooKeeper range in the store")?;
    let assigned = ZooKeeperWorkerIdAssigner::new(options)
        .start(layout)
        .await
        .context("cannot obtain a worker id from ZooKeeper")?;
    if assigned.source != ZkSource::ZooKeeper {
        tracing::warn!(source = ?assigned.source, worker_id = assigned.assignment.worker_id,
            "not a ZooKeeper-held worker id: see the log above for why");
    }
    Ok(assigned.assignment)
}
