//! The ZooKeeper worker-id assigner in the service: its start-up, readiness and metrics (its
//! section, `[zookeeper]`, is [`crate::config::zookeeper`]; `uidgen zk reclaim` is
//! [`crate::cli::zk`]).

use anyhow::Context;
use uidgen_core::{Clock, Layout, SystemClock};
use uidgen_store::Store;
use uidgen_worker::WorkerAssignment;
use uidgen_zk::{ZkHolder, ZkSource, ZkStatus, ZooKeeperWorkerIdAssigner};

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
) -> anyhow::Result<(WorkerAssignment, Option<ZkHolder>)> {
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
    Ok((assigned.assignment, Some(assigned.holder)))
}

/// What `/readyz` says of a ZooKeeper holder: `Err` (503) once it cannot issue (the id was lost
/// or the reservation of its last accepted report ran out); `Ok(Some(..))` (200, degraded) while ZooKeeper is away but
/// the held id still issues; `Ok(None)` when all is well.
pub fn readiness(holder: &ZkHolder) -> Result<Option<String>, String> {
    holder.check().map_err(|e| e.to_string())?;
    let status = holder.status();
    if status.connected {
        return Ok(None);
    }
    let now = SystemClock.now_millis();
    let away = status
        .outage_since_ms
        .map_or(0, |since| now.saturating_sub(since) / 1000);
    Ok(Some(format!(
        "ZooKeeper unreachable for {away} s; IDs are still issued on worker id {} for up to {} s \
         more",
        status.worker_id,
        status.reserved_until_ms.saturating_sub(now) / 1000
    )))
}

/// The holder's figures for `/metrics`.
pub fn status(holder: &ZkHolder) -> ZkStatus {
    holder.status()
}
