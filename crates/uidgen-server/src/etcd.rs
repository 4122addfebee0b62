//! The etcd worker-id assigner in the service: its start-up (its section, `[etcd]`, is
//! [`crate::config::etcd`]). Readiness, status and shutdown read its holder as the
//! assignment's keeper, as every kind's.

use std::sync::Arc;

use anyhow::Context;
use uidgen_core::Layout;
use uidgen_etcd::EtcdWorkerIdAssigner;
use uidgen_store::Store;
use uidgen_worker::WorkerIdAssigner;

use crate::config::EtcdSettings;

/// The name the etcd range is recorded under in the store's `worker_id_range`, so that a SQL
/// assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "etcd";

/// The etcd assigner of `settings`, after recording its range in the store so SQL assigners
/// sharing it keep out.
pub async fn assigner(
    settings: &EtcdSettings,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<Arc<dyn WorkerIdAssigner>> {
    let options = settings.options.clone();
    let range = options.range_for(layout)?;
    store
        .register_worker_range(REGISTRY_NAME, range)
        .await
        .context("cannot record the etcd range in the store")?;
    Ok(Arc::new(EtcdWorkerIdAssigner::new(options)))
}
