//! `[worker]`: where the worker id comes from, parsed into the assigner's settings: the
//! library's [`LeaseOptions`] (whose `validate` is the check), the worker id range and the
//! files that keep ids apart.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::Layout;
use uidgen_worker::{LeaseOptions, StateDir, WorkerIdRange};
use uidgen_zk::ReleaseMode;

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use super::vesta::is_vesta;

/// How the worker id is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AssignerKind {
    /// A fresh `worker_node` row on every start (Baidu).
    Disposable,
    /// A leased id from a bounded range, for narrow worker fields.
    Leased,
    /// A configured number (`worker.id`).
    Static,
    /// Zero-config: a machine part hashed from the host's machine id, MAC addresses and
    /// hostname above a process part from the process id, leased in the store (distinct among
    /// every process sharing it) and distinct among the processes sharing `worker.state_dir`.
    /// Refused in a container without a shared store unless
    /// `worker.machine.allow_uncoordinated`.
    Machine,
    /// A forever node in ZooKeeper (`[zookeeper]`), Leaf's snowflake mode.
    Zookeeper,
    /// A claim key in etcd under a lease kept alive (`[etcd]`).
    Etcd,
    /// A Kubernetes StatefulSet pod's ordinal plus `statefulset.offset` (`[statefulset]`),
    /// leased exactly in the store, which must be configured (shared by every pod).
    Statefulset,
}

/// `[worker]`: where the worker id comes from.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkerConfig {
    /// disposable, leased or static.
    pub assigner: AssignerKind,
    /// The worker id for the static assigner.
    pub id: Option<u64>,
    /// Lease length for the leased assigner.
    pub lease_ttl_secs: u64,
    /// Local cache file for the leased assigner.
    pub cache_file: Option<PathBuf>,
    /// With `cache_file`: how long past its expiry a lease stays recorded, the window in
    /// which this host may restart on the cached id while the database is unreachable.
    pub cache_reserve_secs: u64,
    /// The static assigner's state file, holding its reserved-until mark (default
    /// `uidgen-worker-{id}.state` in the state directory; a relative path is taken in it). An
    /// absolute path set here is the operator's statement that the id is unique to that
    /// volume: it lets a static id start in a container without a shared store.
    pub state_file: Option<PathBuf>,
    /// The machine assigner's directory of lock and state files, one per worker id; every
    /// process on a host must share it (default `machine` in the state directory; a relative
    /// path is taken in it).
    pub state_dir: Option<PathBuf>,
    /// `"LO-HI"` (or `"LO..=HI"`): the worker ids this assigner hands out on the store,
    /// recorded there so that assigners sharing it keep to disjoint ranges (default: the whole
    /// layout, from 1 for disposable; Vesta's server range 924-1023 on Vesta layouts, and for
    /// zookeeper on any 10-bit worker field). The key is `worker.range`.
    #[serde(rename = "range")]
    pub id_range: Option<String>,
    /// `"LO-HI"`, `"LO-max"` or `"off"`: the embedded range, whose worker ids this server
    /// leases to clients' fallback generators (default: 0-923 on Vesta layouts, none
    /// otherwise; see [`crate::fallback`]).
    pub fallback_range: Option<String>,
    /// `[worker.machine]`: the machine assigner.
    pub machine: MachineConfig,
    /// The operator's statement that this is the only instance drawing worker ids from its
    /// zero-config store (the SQLite file in its own state directory): lets the `disposable`
    /// and `leased` assigners start in a container without a configured `store`. Without it
    /// such a start is refused, since every container of one image has a store of its own and
    /// takes the same worker ids from it (issue 36, point 7). Not needed with a configured
    /// store; ignored by the other assigners, which have their own rules.
    pub single_instance: bool,
    /// leased: how many servers share the store at most. Each holds one lease in every ID
    /// space, so start-up refuses a space (the default one included) with fewer worker ids
    /// ([`super::spaces`]). Unset: not checked.
    pub fleet_size: Option<u64>,
    /// The most worker ids one ID space's generator holds at once, the first included: under
    /// sustained demand above what the held ids sustain (8,192 IDs/s each on `baidu`), the
    /// server claims more through its assigner, up to this many, and gives them back when
    /// demand falls ([`crate::workers::WorkerPool`]; issue 30). 1 keeps the first only.
    /// Assigners that hold one id per process (static, machine, statefulset) and the
    /// default and snowflake generators keep one whatever this says.
    pub max_ids: u64,
    /// How long (seconds) demand must stay below half of what one worker id fewer sustains
    /// before the newest extra worker id is given back (then one every tenth of it). A
    /// disposable id given back is used up for good: keep it well above the gaps between
    /// your bursts.
    pub release_idle_secs: u64,
}

/// The default `worker.max_ids`: 512 worker ids on `baidu` sustain 4.2 M IDs/s, twice the
/// 2 M IDs/s a server's batch routes are held to (issue 30), with room for the pool's 25%
/// headroom.
pub const DEFAULT_MAX_IDS: u64 = 512;

/// How long demand must stay below half of what one worker id fewer sustains before one is
/// given back, by default (`worker.release_idle_secs`): long enough that a dip between bursts
/// keeps the ids (a disposable id given back is used up for good), short enough that an idle
/// server holds few.
pub const DEFAULT_RELEASE_IDLE: Duration = Duration::from_secs(60);

/// `[worker.machine]`: the `machine` assigner.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineConfig {
    /// Start inside a container even without a shared store (default false: refused, since
    /// containers from one image would take the same worker ids). Set it only when the
    /// containers' worker ids are kept apart some other way.
    pub allow_uncoordinated: bool,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        Self {
            assigner: AssignerKind::Disposable,
            id: None,
            lease_ttl_secs: 30,
            cache_file: None,
            cache_reserve_secs: LeaseOptions::default().cache_reserve.as_secs(),
            state_file: None,
            state_dir: None,
            id_range: None,
            fallback_range: None,
            machine: MachineConfig::default(),
            single_instance: false,
            fleet_size: None,
            max_ids: DEFAULT_MAX_IDS,
            release_idle_secs: DEFAULT_RELEASE_IDLE.as_secs(),
        }
    }
}

/// The `[worker]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["worker", "assigner"], Kind::Str),
    (&["worker", "id"], Kind::Int),
    (&["worker", "lease_ttl_secs"], Kind::Int),
    (&["worker", "cache_file"], Kind::Str),
    (&["worker", "cache_reserve_secs"], Kind::Int),
    (&["worker", "state_file"], Kind::Str),
    (&["worker", "state_dir"], Kind::Str),
    (&["worker", "range"], Kind::Str),
    (&["worker", "fallback_range"], Kind::Str),
    (&["worker", "machine", "allow_uncoordinated"], Kind::Bool),
    (&["worker", "single_instance"], Kind::Bool),
    (&["worker", "fleet_size"], Kind::Int),
    (&["worker", "max_ids"], Kind::Int),
    (&["worker", "release_idle_secs"], Kind::Int),
];

/// `[worker]` parsed and checked against the layout.
///
/// ```
/// use uidgen_server::config::Config;
/// let toml = "[worker]\nrange = \"5..=9\"";
/// let worker = Config::from_toml_str(toml, std::iter::empty())?.settings()?.worker;
/// assert_eq!(worker.range.map(|r| r.to_string()).as_deref(), Some("5-9"));
/// # Ok::<(), uidgen_server::config::error::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct WorkerSettings {
    /// How the worker id is obtained.
    pub assigner: AssignerKind,
    /// The static assigner's worker id (`None` for every other assigner).
    pub id: Option<u64>,
    /// `worker.range` as configured.
    pub range: Option<WorkerIdRange>,
    /// The range this server's assigner registers: `worker.range`, else Vesta's server range
    /// on a Vesta layout (but for `machine`), else `None` (the assigner's own default).
    pub server_range: Option<WorkerIdRange>,
    /// The embedded range this server leases to clients' fallbacks (`worker.fallback_range`
    /// or Vesta's 0-923), checked against the server's own.
    pub fallback_range: Option<WorkerIdRange>,
    /// The lease's options (its range aside), validated by the library; `cache_path` is
    /// `worker.cache_file` as written ([`cache_file_in`](Self::cache_file_in) places it).
    pub lease: LeaseOptions,
    /// `worker.state_file` as written.
    pub state_file: Option<PathBuf>,
    /// `worker.state_dir` as written.
    pub state_dir: Option<PathBuf>,
    /// `worker.machine.allow_uncoordinated`.
    pub allow_uncoordinated: bool,
    /// `worker.single_instance`.
    pub single_instance: bool,
    /// The ID space this worker id serves: `default` for the top-level generator, the name of
    /// a `[spaces.<name>]` for its own. A leased worker id is leased in its space only.
    pub space: String,
    /// `worker.fleet_size`: how many servers share the store at most, each holding one leased
    /// worker id per space.
    pub fleet_size: Option<u64>,
    /// `worker.max_ids`: the most worker ids one space's generator holds at once.
    pub max_ids: u64,
    /// `worker.release_idle_secs`: how long demand stays low before an extra id goes back.
    pub release_idle: Duration,
}

impl WorkerConfig {
    /// `worker.range`, parsed; `None` when unset (the assigner's default range).
    pub fn id_range(&self) -> Result<Option<WorkerIdRange>, ConfigError> {
        let Some(text) = &self.id_range else {
            return Ok(None);
        };
        let range: uidgen_worker::Result<WorkerIdRange> = text.parse();
        range
            .map(Some)
            .map_err(|e| invalid("worker.range", e.to_string()))
    }

    /// The lease's timing derived from `lease_ttl_secs` by [`LeaseOptions::with_ttl`], so the
    /// takeover wait (half the ttl) covers what a holder may borrow.
    fn lease_options(&self) -> LeaseOptions {
        LeaseOptions {
            cache_path: self.cache_file.clone(),
            cache_reserve: Duration::from_secs(self.cache_reserve_secs),
            ..LeaseOptions::with_ttl(Duration::from_secs(self.lease_ttl_secs))
        }
    }

    /// The section parsed and checked against `layout`; the embedded range is filled in by
    /// [`super::ranges`] once the other sections are checked.
    pub(crate) fn settings(&self, layout: &Layout) -> Result<WorkerSettings, ConfigError> {
        match (self.assigner, self.id) {
            (AssignerKind::Static, None) => {
                return Err(invalid(
                    "worker.id",
                    "the static assigner needs a worker id",
                ));
            }
            (AssignerKind::Static, Some(id)) => {
                layout
                    .check_worker_id(id)
                    .map_err(|e| invalid("worker.id", e.to_string()))?;
            }
            (_, Some(_)) => {
                return Err(invalid(
                    "worker.id",
                    "only the static assigner takes a fixed worker id",
                ));
            }
            _ => {}
        }
        let range = self.id_range()?;
        if let Some(range) = range {
            range
                .check_layout(layout)
                .map_err(|e| invalid("worker.range", e.to_string()))?;
        }
        if self.assigner == AssignerKind::Machine {
            check_machine(range, layout)?;
        }
        let lease = self.checked_lease(layout)?;
        if self.fleet_size == Some(0) {
            return Err(invalid(
                "worker.fleet_size",
                "must be at least 1 (or unset)",
            ));
        }
        if self.max_ids == 0 {
            return Err(invalid(
                "worker.max_ids",
                "must be at least 1 (1 keeps the first worker id only)",
            ));
        }
        if self.release_idle_secs == 0 || self.release_idle_secs > 86_400 {
            return Err(invalid(
                "worker.release_idle_secs",
                "must be 1 to 86400 seconds",
            ));
        }
        Ok(WorkerSettings {
            assigner: self.assigner,
            id: self.id,
            range,
            server_range: server_range(self.assigner, range, layout),
            fallback_range: None,
            lease,
            state_file: self.state_file.clone(),
            state_dir: self.state_dir.clone(),
            allow_uncoordinated: self.machine.allow_uncoordinated,
            single_instance: self.single_instance,
            space: uidgen_store::DEFAULT_SPACE.to_owned(),
            fleet_size: self.fleet_size,
            max_ids: self.max_ids,
            release_idle: Duration::from_secs(self.release_idle_secs),
        })
    }

    /// The lease options, checked by the library (bounds included, and for a leased worker id
    /// that the takeover wait, half the ttl, covers the layout); this only names the key.
    fn checked_lease(&self, layout: &Layout) -> Result<LeaseOptions, ConfigError> {
        if self.lease_ttl_secs < 3 {
            return Err(invalid(
                "worker.lease_ttl_secs",
                "must be at least 3 seconds",
            ));
        }
        let lease = self.lease_options();
        lease.validate().map_err(|error| {
            let key = if lease.cache_reserve > uidgen_worker::MAX_LEASE_TTL {
                "worker.cache_reserve_secs"
            } else {
                "worker.lease_ttl_secs"
            };
            invalid(key, error.to_string())
        })?;
        if self.assigner == AssignerKind::Leased {
            lease.validate_for(layout).map_err(|error| {
                // The wait is half the ttl: name the ttl that gives the wait asked for.
                let wait_ms = lease.min_takeover_wait(layout).as_millis();
                invalid(
                    "worker.lease_ttl_secs",
                    format!(
                        "{error}; the takeover wait is half the ttl, so set it to at least {}",
                        (2 * wait_ms).div_ceil(1000)
                    ),
                )
            })?;
        }
        Ok(lease)
    }
}

/// The machine assigner's ids are `machine << 5 | process`: the layout must hold them, and
/// they cannot be moved into a configured range.
fn check_machine(range: Option<WorkerIdRange>, layout: &Layout) -> Result<(), ConfigError> {
    if range.is_some() {
        return Err(invalid(
            "worker.range",
            "the machine assigner's worker ids are machine << 5 | process, always 0-1023 \
             (recorded as such in the store); unset it, and give other assigners on the store \
             ranges above 1023",
        ));
    }
    uidgen_worker::MachineWorkerIdAssigner::check_layout(layout)
        .map_err(|e| invalid("worker.assigner", e.to_string()))
}

impl WorkerSettings {
    /// The static assigner's state file for worker id `id`: `state_file`, or
    /// `uidgen-worker-{id}.state`, in the state directory `dir` unless absolute.
    ///
    /// ```
    /// use std::path::Path;
    /// use uidgen_server::config::Config;
    /// let dir = uidgen_worker::StateDir::at("/var/lib/uidgen")?;
    /// let worker = Config::default().settings()?.worker;
    /// assert_eq!(worker.state_file_for(5, &dir), Path::new("/var/lib/uidgen/uidgen-worker-5.state"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn state_file_for(&self, id: u64, dir: &StateDir) -> PathBuf {
        let file = self
            .state_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("uidgen-worker-{id}.state")));
        dir.resolve(&file)
    }

    /// Whether `worker.state_file` is an absolute path: the operator's statement that the
    /// static id is unique to that volume.
    pub fn state_file_declared(&self) -> bool {
        self.state_file.as_ref().is_some_and(|p| p.is_absolute())
    }

    /// The leased assigner's cache file, a relative `cache_file` taken in the state directory
    /// `dir`; `None` when unset.
    pub fn cache_file_in(&self, dir: &StateDir) -> Option<PathBuf> {
        self.lease
            .cache_path
            .as_deref()
            .map(|file| dir.resolve(file))
    }

    /// The machine assigner's directory: `state_dir`, or `machine`, in the state directory
    /// `dir` unless absolute.
    pub fn machine_state_dir(&self, dir: &StateDir) -> PathBuf {
        dir.resolve(self.state_dir.as_deref().unwrap_or(Path::new("machine")))
    }
}

/// The range the server's assigner registers: `configured`, else Vesta's server range
/// (924-1023) on a Vesta layout, else `None` (the assigner's own default). The `machine`
/// assigner's range is fixed, so it gets `worker.range` only (which it refuses).
fn server_range(
    assigner: AssignerKind,
    configured: Option<WorkerIdRange>,
    layout: &Layout,
) -> Option<WorkerIdRange> {
    if configured.is_some() || assigner == AssignerKind::Machine || !is_vesta(layout) {
        return configured;
    }
    Some(ReleaseMode::Server.default_range(layout))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn worker_id_range_is_parsed_from_the_file_or_the_environment() {
        assert_eq!(parse("", &[]).unwrap().worker.id_range().unwrap(), None);
        let c = parse("[worker]\nrange = \" 100 - 199 \"", &[]).unwrap();
        let range = c.worker.id_range().unwrap().unwrap();
        assert_eq!((range.low(), range.high()), (100, 199));
        let c = parse("[worker]\nrange = \"1-2\"", &[("UIDGEN_WORKER_RANGE", "7")]).unwrap();
        assert_eq!(
            c.worker.id_range().unwrap().map(|r| r.to_string()),
            Some("7-7".to_owned())
        );
    }

    #[test]
    fn the_machine_assigner_shares_a_state_dir_by_default() {
        let c = parse(
            "state_dir = \"/srv/uidgen\"\n[worker]\nassigner = \"machine\"",
            &[("UIDGEN_LAYOUT", "keyworker")],
        )
        .unwrap();
        assert_eq!(c.worker.assigner, AssignerKind::Machine);
        let dir = c.state_dir().unwrap();
        assert_eq!(
            c.settings().unwrap().worker.machine_state_dir(&dir),
            PathBuf::from("/srv/uidgen/machine")
        );
        let c = parse(
            "",
            &[
                ("UIDGEN_WORKER_ASSIGNER", "machine"),
                ("UIDGEN_WORKER_STATE_DIR", "/var/lib/uidgen/machine"),
            ],
        )
        .unwrap();
        assert_eq!(
            c.settings().unwrap().worker.machine_state_dir(&dir),
            PathBuf::from("/var/lib/uidgen/machine")
        );
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[
            (
                "[worker]\nassigner = \"static\"",
                &[],
                "invalid config key `worker.id`: the static assigner needs a worker id",
            ),
            (
                "[worker]\nassigner = \"static\"\nid = 5000000",
                &[],
                "invalid config key `worker.id`: worker id 5000000 exceeds the layout's maximum \
                 4194303; widen the worker bits or use a smaller id",
            ),
            (
                "[worker]\nrange = \"200-100\"",
                &[],
                "invalid config key `worker.range`: invalid worker id range `200-100`: the low end \
                 is above the high end",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "snowflake"),
                    ("UIDGEN_WORKER_RANGE", "512-1024"),
                ],
                "invalid config key `worker.range`: worker id range 512-1024 does not fit the \
                 layout, whose worker ids go up to 1023",
            ),
            (
                "[worker]\nassigner = \"machine\"\nrange = \"0-1023\"",
                &[("UIDGEN_LAYOUT", "keyworker")],
                "invalid config key `worker.range`: the machine assigner's worker ids are machine \
                 << 5 | process",
            ),
            (
                "[worker]\nassigner = \"machine\"\n[layout]\ntime_bits = 31\nworker_bits = \
                 9\nseq_bits = 23",
                &[],
                "invalid config key `worker.assigner`: the machine assigner cannot serve layout \
                 `baidu`: its worker field has 9 bits",
            ),
            (
                "[worker]\nassigner = \"machine\"\nid = 3",
                &[],
                "invalid config key `worker.id`: only the static assigner takes a fixed worker id",
            ),
        ];
        assert_refused(cases);
    }
}
