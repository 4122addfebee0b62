//! The etcd worker-id assigner in the service: `[etcd]`, its start-up and readiness.

use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Deserializer, Serialize};
use uidgen_core::Layout;
use uidgen_etcd::{EtcdError, EtcdHolder, EtcdOptions, EtcdWorkerIdAssigner};
use uidgen_store::Store;
use uidgen_worker::{WorkerAssignment, WorkerIdRange};

use crate::config::{AssignerKind, Config, ConfigError, invalid};
use crate::http::{NotReady, ReadinessCheck};

/// The name the etcd range is recorded under in the store's `worker_id_range`, so that a SQL
/// assigner on the same store (and the same ID space) keeps out of it.
pub const REGISTRY_NAME: &str = "etcd";

/// `[etcd]`: where the cluster is and how the worker id is kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EtcdConfig {
    /// The cluster's client URLs: a list, or one string with commas
    /// (`UIDGEN_ETCD_ENDPOINTS=http://e1:2379,http://e2:2379`).
    #[serde(deserialize_with = "one_or_many")]
    pub endpoints: Vec<String>,
    /// The key prefix: claims under `{prefix}/workers/{id}`, marks under `{prefix}/marks/{id}`.
    pub prefix: String,
    /// The lease's time to live (seconds); keep-alives go every third of it.
    pub lease_ttl_secs: u64,
    /// How far ahead of each accepted keep-alive the id is reserved (seconds): a holder cut
    /// off from etcd issues this long past its last accepted keep-alive, and the id is claimed
    /// again only after it.
    pub reservation_secs: u64,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        let defaults = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen", "");
        Self {
            endpoints: defaults.endpoints,
            prefix: defaults.prefix,
            lease_ttl_secs: defaults.lease_ttl.as_secs(),
            reservation_secs: defaults.reservation.as_secs(),
        }
    }
}

/// A list of strings, or one string of comma-separated items (what an environment variable
/// can carry).
fn one_or_many<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(text) => text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
        OneOrMany::Many(list) => list,
    })
}

/// The library's options for this service: its holder name is its host (`UIDGEN_HOST` or the
/// detected address) and listen port, and the range is `worker.range`, Vesta's server range on a
/// Vesta layout, or every id of the layout.
pub fn options(config: &Config, layout: &Layout) -> Result<EtcdOptions, ConfigError> {
    let e = &config.etcd;
    let node = uidgen_store::WorkerNode::detect();
    let port = config.listen_addr()?.port();
    let mut options = EtcdOptions::new(
        e.endpoints.iter().cloned(),
        &e.prefix,
        format!("{}:{port}", node.host_name),
    );
    options.lease_ttl = Duration::from_secs(e.lease_ttl_secs);
    options.reservation = Duration::from_secs(e.reservation_secs);
    options.range = Some(
        crate::fallback::server_range(config, layout)?
            .unwrap_or_else(|| WorkerIdRange::full(layout)),
    );
    Ok(options)
}

/// The `[etcd]` keys, checked by the library's own rules; this only names the key.
pub fn validate(config: &Config) -> Result<(), ConfigError> {
    if config.worker.assigner != AssignerKind::Etcd {
        return Ok(());
    }
    let layout = config.build_layout()?;
    let options = options(config, &layout)?;
    options
        .range_for(&layout)
        .map_err(|e| invalid("worker.range", e.to_string()))?;
    options.validate().map_err(|error| {
        let key = match &error {
            EtcdError::InvalidOptions {
                field: "reservation",
                ..
            } => "etcd.reservation_secs",
            EtcdError::InvalidOptions {
                field: "lease_ttl", ..
            } => "etcd.lease_ttl_secs",
            EtcdError::InvalidOptions {
                field: "prefix", ..
            } => "etcd.prefix",
            _ => "etcd.endpoints",
        };
        invalid(key, error.to_string())
    })
}

/// Claim a worker id in etcd, after recording its range in the store so SQL assigners sharing
/// it keep out.
pub async fn assign(
    config: &Config,
    layout: &Layout,
    store: &Store,
) -> anyhow::Result<(WorkerAssignment, EtcdHolder)> {
    let options = options(config, layout)?;
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

#[cfg(test)]
mod tests {
    use crate::config::test_support::parse;

    #[test]
    fn endpoints_are_a_list_or_one_string_with_commas() {
        let list = parse(
            "[worker]\nassigner = \"etcd\"\n[etcd]\nendpoints = [\"http://a:2379\", \"http://b:2379\"]\n",
            &[],
        )
        .unwrap();
        let env = parse(
            "[worker]\nassigner = \"etcd\"\n",
            &[("UIDGEN_ETCD_ENDPOINTS", "http://a:2379, http://b:2379")],
        )
        .unwrap();
        assert_eq!(list.etcd.endpoints, ["http://a:2379", "http://b:2379"]);
        assert_eq!(env.etcd.endpoints, list.etcd.endpoints);
    }

    #[test]
    fn a_reservation_shorter_than_the_lease_is_refused_under_its_key() {
        let refused = parse(
            "[worker]\nassigner = \"etcd\"\n[etcd]\nlease_ttl_secs = 30\nreservation_secs = 10\n",
            &[],
        )
        .unwrap_err();
        assert!(
            refused.to_string().contains("etcd.reservation_secs"),
            "{refused}"
        );
    }
}
