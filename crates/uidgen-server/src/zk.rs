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
    let reservation = options.reservation.as_secs();
    let assigned = match ZooKeeperWorkerIdAssigner::new(options).start(layout).await {
        Ok(assigned) => assigned,
        // Issue 36, point 6: a churn of short-lived holders (each start on a new ip:port takes
        // a new forever node) uses the range up with nodes seconds old, which no threshold
        // frees before their reservation: say what does, with this service's numbers.
        Err(error @ uidgen_zk::ZkError::RangeUsedUp { .. }) => {
            return Err(anyhow::Error::new(error).context(format!(
                "cannot obtain a worker id from ZooKeeper. The ids of stopped holders are \
                 reserved for {reservation} s after their last report (`zookeeper.\
                 reservation_secs`): once that has passed, `uidgen zk reclaim --older-than \
                 {reservation}s` frees them, or `zookeeper.auto_reclaim_after_secs = \
                 {reservation}` frees them in the background. A restart on the same address and \
                 port keeps its own node; starts on new ones (new pod IPs, `listen` port 0) each \
                 take another id"
            )));
        }
        Err(error) => return Err(error).context("cannot obtain a worker id from ZooKeeper"),
    };
    if assigned.source != ZkSource::ZooKeeper {
        tracing::warn!(source = ?assigned.source, worker_id = assigned.assignment.worker_id,
            "not a ZooKeeper-held worker id: see the log above for why");
    }
    Ok(assigned.assignment)
}
