//! `[etcd]`: the etcd worker-id assigner's section, parsed into the library's
//! [`EtcdOptions`] (whose `validate` is the check).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};
use uidgen_core::Layout;
use uidgen_etcd::{EtcdError, EtcdOptions};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use super::worker::{AssignerKind, WorkerSettings};

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

/// The `[etcd]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["etcd", "endpoints"], Kind::Str),
    (&["etcd", "prefix"], Kind::Str),
    (&["etcd", "lease_ttl_secs"], Kind::Int),
    (&["etcd", "reservation_secs"], Kind::Int),
];

/// `[etcd]` parsed: the library's options, and the host a port bound at start is added to
/// (the holder is named `host:port`).
#[derive(Debug, Clone)]
pub struct EtcdSettings {
    /// The options, their holder named after the configured listen port until
    /// [`listening_on`](Self::listening_on) names the bound one.
    pub options: EtcdOptions,
    /// This host (`UIDGEN_HOST` or the detected address).
    host: String,
}

impl EtcdSettings {
    /// Name the holder after the port bound at start (`listen` may say port 0); see
    /// [`Settings::listening_on`](super::Settings::listening_on).
    pub fn listening_on(&mut self, port: u16) {
        self.options.holder = holder_name(&self.host, port);
    }
}

/// The holder's name: its host and listen port.
fn holder_name(host: &str, port: u16) -> String {
    format!("{host}:{port}")
}

impl EtcdConfig {
    /// The section parsed when the assigner is `etcd` (`None` otherwise), checked by the
    /// library's own rules; this only names the key. The holder is this host and its listen
    /// port; the range is the server's (`worker.range`, Vesta's server range on a Vesta
    /// layout), or every id of the layout.
    pub(crate) fn settings(
        &self,
        worker: &WorkerSettings,
        layout: &Layout,
        listen_port: u16,
    ) -> Result<Option<EtcdSettings>, ConfigError> {
        if worker.assigner != AssignerKind::Etcd {
            return Ok(None);
        }
        self.parsed(worker, layout, listen_port).map(Some)
    }

    /// The section parsed whatever the assigner (`uidgen etcd …` acts on the configured
    /// namespace from any host).
    pub(crate) fn parsed(
        &self,
        worker: &WorkerSettings,
        layout: &Layout,
        listen_port: u16,
    ) -> Result<EtcdSettings, ConfigError> {
        let host = uidgen_store::WorkerNode::detect().host_name;
        let mut options = EtcdOptions::new(
            self.endpoints.iter().cloned(),
            &self.prefix,
            holder_name(&host, listen_port),
        );
        options.lease_ttl = Duration::from_secs(self.lease_ttl_secs);
        options.reservation = Duration::from_secs(self.reservation_secs);
        options.range = Some(
            worker
                .server_range
                .unwrap_or_else(|| EtcdOptions::default_range(layout)),
        );
        options
            .range_for(layout)
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
        })?;
        Ok(EtcdSettings { options, host })
    }
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
