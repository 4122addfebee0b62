//! `[zookeeper]`: the ZooKeeper worker-id assigner's section, parsed into the library's
//! [`ZkOptions`] (whose `validate` is the check).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::Layout;
use uidgen_core::clock::saturating_millis;
use uidgen_worker::{StateDir, WorkerIdRange};
use uidgen_zk::{ReleaseMode, ZkOptions};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use super::worker::{AssignerKind, WorkerConfig};

/// `[zookeeper]`: where the ensemble is and how the worker id is kept.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZookeeperConfig {
    /// The ensemble with an optional chroot: `zk1:2181,zk2:2181/uidgen`.
    pub connect: String,
    /// Leaf's `leaf.name`: the namespace `/snowflake/{name}`.
    pub name: String,
    /// The session timeout asked of ZooKeeper (ms).
    pub session_timeout_ms: u64,
    /// How often the holder reports its time into its forever node (ms; Leaf: 3000).
    pub report_interval_ms: u64,
    /// The most this clock may differ from the other live holders' average report at start.
    pub max_peer_skew_ms: u64,
    /// How far ahead of each report the id is reserved (seconds): a holder cut off from
    /// ZooKeeper issues this long past its last accepted report, and a restart without the
    /// cache or a reclaim takes the id this long after its holder went silent.
    pub reservation_secs: u64,
    /// The most `reservation_secs` may be (seconds).
    pub max_outage_secs: u64,
    /// Free dead holders' ids automatically after this many seconds of silence (opt-in; at
    /// least `reservation_secs`).
    pub auto_reclaim_after_secs: Option<u64>,
    /// The local cache: worker id, last accepted report, reserved-until mark (default
    /// `uidgen-zk-{name}-{port}.state` in the state directory; a relative path is taken in
    /// it).
    pub cache_file: Option<PathBuf>,
}

impl Default for ZookeeperConfig {
    fn default() -> Self {
        let defaults = ZkOptions::new("127.0.0.1:2181", "uidgen", "127.0.0.1", "8080");
        Self {
            connect: defaults.connect,
            name: defaults.name,
            session_timeout_ms: saturating_millis(defaults.session_timeout),
            report_interval_ms: saturating_millis(defaults.report_interval),
            max_peer_skew_ms: saturating_millis(defaults.max_peer_skew),
            reservation_secs: defaults.reservation.as_secs(),
            max_outage_secs: defaults.max_outage.as_secs(),
            auto_reclaim_after_secs: None,
            cache_file: None,
        }
    }
}

/// The `[zookeeper]` keys' variables (`UIDGEN_ZK_…`).
pub(crate) const ENV: &[EnvKey] = &[
    (&["zookeeper", "connect"], Kind::Str),
    (&["zookeeper", "name"], Kind::Str),
    (&["zookeeper", "session_timeout_ms"], Kind::Int),
    (&["zookeeper", "report_interval_ms"], Kind::Int),
    (&["zookeeper", "max_peer_skew_ms"], Kind::Int),
    (&["zookeeper", "reservation_secs"], Kind::Int),
    (&["zookeeper", "max_outage_secs"], Kind::Int),
    (&["zookeeper", "auto_reclaim_after_secs"], Kind::Int),
    (&["zookeeper", "cache_file"], Kind::Str),
];

/// `[zookeeper]` parsed: the library's options, and what a port bound at start changes in
/// them (the forever node and the default cache file are named after the port).
#[derive(Debug, Clone)]
pub struct ZkSettings {
    /// The options, named after the configured listen port until
    /// [`listening_on`](Self::listening_on) names the bound one.
    pub options: ZkOptions,
    /// `UIDGEN_PORT` names the port: the bound one does not replace it.
    port_from_env: bool,
    /// `zookeeper.cache_file` is set: its name does not follow the port.
    cache_file_set: bool,
    /// Where a default cache file lives.
    state_dir: StateDir,
}

impl ZkSettings {
    /// The library's options for this service: its ip (`UIDGEN_HOST` or the detected
    /// address) and port (`UIDGEN_PORT` or `listen_port`) name its forever node, and the range
    /// is `worker.range` or Vesta's server range on a 10-bit worker field.
    pub(crate) fn new(
        z: &ZookeeperConfig,
        range: Option<WorkerIdRange>,
        layout: &Layout,
        state_dir: StateDir,
        listen_port: u16,
    ) -> Self {
        let node = uidgen_store::WorkerNode::detect();
        let env_port = std::env::var(uidgen_worker::ENV_PORT)
            .ok()
            .filter(|p| !p.trim().is_empty());
        let port_from_env = env_port.is_some();
        let port = env_port.unwrap_or_else(|| listen_port.to_string());
        let mut options = ZkOptions::new(&z.connect, &z.name, node.host_name, port);
        options.session_timeout = Duration::from_millis(z.session_timeout_ms);
        options.report_interval = Duration::from_millis(z.report_interval_ms);
        options.max_peer_skew = Duration::from_millis(z.max_peer_skew_ms);
        options.reservation = Duration::from_secs(z.reservation_secs);
        options.max_outage = Duration::from_secs(z.max_outage_secs);
        options.auto_reclaim_after = z.auto_reclaim_after_secs.map(Duration::from_secs);
        // The library's default is a bare file name: both it and a relative `cache_file` are
        // taken in the state directory, so that a restart from elsewhere finds its cache.
        let cache = z.cache_file.as_ref().unwrap_or(&options.cache_file);
        options.cache_file = state_dir.resolve(cache);
        options.range = Some(range.unwrap_or_else(|| ReleaseMode::Server.default_range(layout)));
        Self {
            options,
            port_from_env,
            cache_file_set: z.cache_file.is_some(),
            state_dir,
        }
    }

    /// Name the forever node (and a default cache file) after the port bound at start
    /// (`listen` may say port 0), unless `UIDGEN_PORT` names it; see
    /// [`Settings::listening_on`](super::Settings::listening_on).
    pub fn listening_on(&mut self, port: u16) {
        if self.port_from_env {
            return;
        }
        let o = &self.options;
        // The library's own default name for this port.
        let named = ZkOptions::new(&o.connect, &o.name, &o.ip, port.to_string());
        if !self.cache_file_set {
            self.options.cache_file = self.state_dir.resolve(&named.cache_file);
        }
        self.options.port = named.port;
    }
}

impl ZookeeperConfig {
    /// The section parsed when the assigner is `zookeeper` (`None` otherwise), checked by the
    /// library's own rules; this only names the key.
    pub(crate) fn settings(
        &self,
        worker: &WorkerConfig,
        range: Option<WorkerIdRange>,
        layout: &Layout,
        state_dir: impl FnOnce() -> Result<StateDir, ConfigError>,
        listen_port: u16,
    ) -> Result<Option<ZkSettings>, ConfigError> {
        if worker.assigner != AssignerKind::Zookeeper {
            return Ok(None);
        }
        let settings = ZkSettings::new(self, range, layout, state_dir()?, listen_port);
        let options = &settings.options;
        options
            .range_for(layout)
            .map_err(|e| invalid("worker.range", e.to_string()))?;
        options.validate().map_err(|error| {
            let text = error.to_string();
            let key = if matches!(error, uidgen_zk::ZkError::ReclaimThreshold { .. }) {
                "zookeeper.auto_reclaim_after_secs"
            } else if text.contains("reservation") {
                "zookeeper.reservation_secs"
            } else if text.contains("max_outage") {
                "zookeeper.max_outage_secs"
            } else if text.contains("report interval") {
                "zookeeper.report_interval_ms"
            } else if text.contains("session timeout") {
                "zookeeper.session_timeout_ms"
            } else if text.contains("max_peer_skew") {
                "zookeeper.max_peer_skew_ms"
            } else if text.contains("connect") {
                "zookeeper.connect"
            } else {
                "zookeeper.name"
            };
            invalid(key, text)
        })?;
        Ok(Some(settings))
    }
}
