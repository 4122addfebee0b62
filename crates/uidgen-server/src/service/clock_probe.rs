//! The clock watch's task (issue 33, item 4): reads the store's, etcd's and ZooKeeper's clocks
//! every
//! `clock_watch.interval_ms` and records them in the server's
//! [`ClockWatch`](super::clock_watch::ClockWatch), which decides
//! ([`super::clock_watch`] has the why).

use std::sync::Arc;

use uidgen_store::{ClockReading, Store};

use super::clock_watch::{ETCD, STORE, ZOOKEEPER, now_ms};
use super::ready::READY_TIMEOUT;
use super::state::AppState;

/// Compare the clocks every `clock_watch.interval_ms` until `stop` resolves (at once, then on
/// each tick; not at all when the watch is off): the store's, unless it is SQLite (recorded as
/// `local` once), etcd's when the worker id comes from etcd, and ZooKeeper's when it comes from
/// ZooKeeper.
///
/// Cancel safety: holds no lock across an await; dropping it ends the watch where it stands
/// (a fence in place stays, with no one to lift it: the server is stopping).
pub async fn watch(
    state: Arc<AppState>,
    store: Store,
    etcd: Option<uidgen_etcd::EtcdClock>,
    zookeeper: Option<uidgen_zk::ZkClock>,
    stop: impl std::future::Future<Output = ()>,
) {
    let Some(interval) = state.clock.settings.interval else {
        return;
    };
    let watching = async {
        let store_is_local = store.dialect() == uidgen_store::Dialect::Sqlite;
        if store_is_local {
            tracing::info!(
                "the store is SQLite, inside this process: its clock is this host's, so the \
                 clock watch does not compare it"
            );
            state.clock.record(STORE, Ok(None), now_ms());
            if etcd.is_none() && zookeeper.is_none() {
                return;
            }
        }
        let mut every = tokio::time::interval(interval);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let bound = READY_TIMEOUT.min(interval);
        loop {
            every.tick().await;
            if !store_is_local {
                let outcome = bounded(bound, store.server_clock()).await;
                observe(&state, STORE, outcome);
            }
            if let Some(etcd) = &etcd {
                let outcome = bounded(bound, etcd.read()).await.map(|reading| {
                    Some(ClockReading {
                        offset_ms: reading.offset_ms,
                        uncertainty_ms: reading.uncertainty_ms,
                    })
                });
                observe(&state, ETCD, outcome);
            }
            if let Some(zookeeper) = &zookeeper {
                let outcome = bounded(bound, zookeeper.read()).await.map(|reading| {
                    Some(ClockReading {
                        offset_ms: reading.offset_ms,
                        uncertainty_ms: reading.uncertainty_ms,
                    })
                });
                observe(&state, ZOOKEEPER, outcome);
            }
        }
    };
    tokio::select! {
        () = watching => {}
        () = stop => {}
    }
}

/// A reading's outcome within `bound`, its error in words.
async fn bounded<T, E: std::fmt::Display>(
    bound: std::time::Duration,
    reading: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, String> {
    match tokio::time::timeout(bound, reading).await {
        Ok(Ok(reading)) => Ok(reading),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {bound:?}")),
    }
}

/// Publish a reading of `source` and record the outcome.
fn observe(state: &AppState, source: &'static str, outcome: Result<Option<ClockReading>, String>) {
    if let Ok(Some(reading)) = &outcome {
        state
            .metrics
            .clock
            .publish(source, reading.offset_ms, reading.uncertainty_ms);
    }
    state.clock.record(source, outcome, now_ms());
}
