//! The servers' half of the clients' embedded fallback: the leasing service behind the
//! fallback lease routes, over the *embedded range* of worker ids (`worker.fallback_range`,
//! or Vesta's 0-923 on Vesta layouts; parsed and kept clear of the servers' own range in
//! [`crate::config::ranges`]), and what to say when a start is refused over a range.

use std::sync::Arc;

use uidgen_core::Layout;
use uidgen_store::{FallbackLeases, Store, StoreError};

use crate::config::worker::WorkerSettings;

/// The key of the embedded range.
pub const RANGE_KEY: &str = "worker.fallback_range";

use crate::config::vesta::is_vesta;

/// The leasing service for the fallback lease routes, when this server leases fallback ids
/// (`worker.fallback_range`, checked with the configuration).
pub fn start(worker: &WorkerSettings, store: &Store) -> Option<Arc<FallbackLeases>> {
    let range = worker.fallback_range?;
    tracing::info!(%range, "leasing fallback worker ids to clients (`worker.fallback_range`)");
    Some(Arc::new(FallbackLeases::new(store.clone(), range)))
}

/// A refused start, with what to do when the refusal comes from the default range of Vesta
/// layouts meeting a store that recorded another range for this assigner (a deployment from
/// before the split).
pub fn explain_refusal(
    worker: &WorkerSettings,
    layout: &Layout,
    error: StoreError,
) -> anyhow::Error {
    let hint = match &error {
        StoreError::WorkerRangeChanged {
            recorded,
            requested,
            ..
        } if worker.range.is_none() && is_vesta(layout) => Some(format!(
            "`worker.range` is unset, so this server asks for {requested}, Vesta's server range \
             (the default on Vesta layouts, leaving 0-923 to the clients' leased fallback); the \
             store recorded {recorded} before. To keep {recorded}, set `worker.range = \
             \"{recorded}\"` and `worker.fallback_range` to ids outside it (or \"off\"); to move \
             to the split, follow the steps below"
        )),
        _ => None,
    };
    match hint {
        Some(hint) => anyhow::Error::new(error).context(hint),
        None => error.into(),
    }
}
