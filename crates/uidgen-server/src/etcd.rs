//! The etcd worker-id assigner in the service: its start-up and readiness (its section,
//! `[etcd]`, is [`crate::config::etcd`]).

use anyhow::Context;
use uidgen_core::Layout;
use uidgen_etcd::{EtcdHolder, EtcdWorkerIdAssigner};
use uidgen_store::Store;
use uidgen_worker::WorkerAssignment;

use crate::config::EtcdSettings;
use crate::service::{NotReady, ReadinessCheck};

/// The name the etcd range is recorded under in the store's `worker_id_range`, so that a SQL
/// assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "etcd";

/// Claim a worker id in etcd, after recording its range in the store so SQL assigners sharing
/// it keep out.
pub async fn assign(
    settings: &EtcdSettings,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<(WorkerAssignment, EtcdHolder)> {
    let options = settings.options.clone();
    let range = options.range_for(layout)?;
    store
        .register_worker_range(REGISTRY_NAME, range)
        .await
        .context("cannot record the etcd range in the store")?;
    let assigned = EtcdWorkerIdAssigner::new(options)
        .start(layout)
        .await
        .context("cannot obtain a worker id from etcd")?;
    Ok((assigned.assignment, assigned.holder))
}

/// What `/readyz` says of an etcd holder: not ready (503) once it cannot issue (the claim was
/// lost, or the reservation of its last accepted keep-alive ran out); ready while etcd is
/// away but the reservation still runs.
pub fn readiness(holder: EtcdHolder) -> ReadinessCheck {
    std::sync::Arc::new(move || {
        let checked = holder.check().map_err(|e| NotReady {
            code: "not_ready",
            public: "the etcd worker id can no longer issue IDs",
            detail: e.to_string(),
        });
        Box::pin(async move { checked })
    })
}
