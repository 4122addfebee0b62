//! Service configuration: a TOML file, then `UIDGEN_…` environment overrides, then validation
//! that names the offending key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::cached::MAX_BOOST_POWER;
use uidgen_core::clock::saturating_millis;
use uidgen_core::{CachedOptions, Layout, MAX_BATCH};
use uidgen_worker::{LeaseOptions, StateDir, WorkerIdRange};

/// A configuration problem, naming the key and the reason.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown keys or wrong types.
    #[error("invalid config: {0}")]
    Parse(String),
    /// A key from the file or environment is unknown or has the wrong type.
    #[error("invalid config key `{key}`: {reason}")]
    Key {
        /// The key, dotted as serde saw it (`generator.kind`).
        key: String,
        /// Why.
        reason: String,
    },
    /// A key has a value that is out of range or inconsistent.
    #[error("invalid config key `{key}`: {reason}")]
    Invalid {
        /// The key, dotted (`ring.padding_factor`).
        key: &'static str,
        /// Why.
        reason: String,
    },
    /// A `UIDGEN_…` variable that is no configuration key and none of the other variables
    /// uidgen reads ([`ENV_NOT_CONFIG`]): a typo would otherwise be ignored without a word.
    #[error("unknown environment variable {name}; {}", hint_for(suggestion.as_deref()))]
    UnknownEnv {
        /// The variable.
        name: String,
        /// The known variable closest to it, if one is close.
        suggestion: Option<String>,
    },
}

fn hint_for(suggestion: Option<&str>) -> String {
    match suggestion {
        Some(known) => format!("did you mean {known}?"),
        None => "no uidgen setting has this name (README.md, Configuration, lists them); unset it"
            .to_owned(),
    }
}

pub(crate) fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// `text` as a socket address for `key`: `127.0.0.1:8080` or `[::1]:8080` as it is, a host name
/// and port through the system's resolver (its first address, as `bind` would try first).
fn resolve(
    key: &'static str,
    text: &str,
    port: u16,
    note: &str,
) -> Result<SocketAddr, ConfigError> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    let why = match std::net::ToSocketAddrs::to_socket_addrs(text) {
        Ok(mut addrs) => match addrs.next() {
            Some(addr) => return Ok(addr),
            None => "the name resolves to no address".to_owned(),
        },
        Err(e) => e.to_string(),
    };
    Err(invalid(
        key,
        format!(
            "{text:?} is not an address like 127.0.0.1:{port} or localhost:{port} ({why}){note}"
        ),
    ))
}

/// Which generator serves `/v1/ids`, `/genid` and `/api/snowflake/get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GeneratorKind {
    /// Baidu's ring buffer: the fast default.
    Cached,
    /// Baidu's per-call generator.
    Default,
    /// Snowflake with Leaf's clock policy.
    Snowflake,
}

impl GeneratorKind {
    /// The kind's name, as the configuration spells it (`GET /v1/status` reports it).
    pub fn name(self) -> &'static str {
        match self {
            Self::Cached => "cached",
            Self::Default => "default",
            Self::Snowflake => "snowflake",
        }
    }
}

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
}

/// `[layout]`: the bit layout of IDs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LayoutConfig {
    /// A preset name: baidu, baidu_legacy, baidu_continued, snowflake, leaf, vesta_max_peak,
    /// vesta_min_granularity, sonyflake, keyworker, safe_js.
    pub preset: String,
    /// Epoch override for any preset but `baidu_legacy` (a Leaf `twepoch`, a Sonyflake start
    /// time): `"2026-01-01"`, `"2026-01-01+08:00"` or ms.
    pub epoch: Option<String>,
    /// Custom Baidu-style widths (all three or none): time bits (seconds).
    pub time_bits: Option<u32>,
    /// Custom worker bits.
    pub worker_bits: Option<u32>,
    /// Custom sequence bits.
    pub seq_bits: Option<u32>,
    /// Vesta's version bit, stamped on every ID of a layout with the field (default 0).
    pub version: Option<u64>,
    /// Vesta's type bit, stamped on every ID of a layout with the field (default: the
    /// preset's own, 0 max-peak, 1 min-granularity).
    #[serde(rename = "type")]
    pub kind: Option<u64>,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        Self {
            preset: "baidu".into(),
            epoch: None,
            time_bits: None,
            worker_bits: None,
            seq_bits: None,
            version: None,
            kind: None,
        }
    }
}

/// `[generator]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GeneratorConfig {
    /// cached, default or snowflake.
    pub kind: GeneratorKind,
    /// Snowflake only: start each millisecond at a random sequence below 100 (Leaf); unset,
    /// the layout's own default (on for `leaf`, as in Leaf; off elsewhere).
    pub random_sequence_start: Option<bool>,
    /// Snowflake only: a clock that moved back by at most this many milliseconds is waited
    /// out (Leaf's tolerance, 5 ms); 0 refuses every backward step. At most
    /// [`MAX_BACKWARD_MS`]: a request waits that long.
    pub max_backward_ms: u64,
}

/// The largest `generator.max_backward_ms`: the longest a request may wait out a clock step.
pub const MAX_BACKWARD_MS: u64 = 1_000;

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            kind: GeneratorKind::Cached,
            random_sequence_start: None,
            max_backward_ms: uidgen_core::DEFAULT_MAX_BACKWARD_MS,
        }
    }
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
    /// zookeeper on any 10-bit worker field). The key is `worker.range`; `worker.id_range` is
    /// read as the same key.
    #[serde(rename = "range", alias = "id_range")]
    pub id_range: Option<String>,
    /// Removed (it was one static id for the whole fleet while ZooKeeper is down): still read,
    /// so that a configuration setting it is refused with what to use instead
    /// ([`crate::zk::FALLBACK_STATIC_REMOVED`]).
    pub fallback_static: Option<u64>,
    /// `"LO-HI"`, `"LO-max"` or `"off"`: the embedded range, whose worker ids this server
    /// leases to clients' fallback generators (default: 0-923 on Vesta layouts, none
    /// otherwise; see [`crate::fallback`]).
    pub fallback_range: Option<String>,
    /// `[worker.machine]`: the machine assigner.
    pub machine: MachineConfig,
}

/// `[worker.machine]`: the `machine` assigner.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MachineConfig {
    /// Start inside a container even without a shared store (default false: refused, since
    /// containers from one image would take the same worker ids). Set it only when the
    /// containers' worker ids are kept apart some other way.
    pub allow_uncoordinated: bool,
}

impl WorkerConfig {
    /// The static assigner's state file for worker id `id`: `state_file`, or
    /// `uidgen-worker-{id}.state`, in the state directory `dir` unless absolute.
    ///
    /// ```
    /// use std::path::Path;
    /// use uidgen_server::config::WorkerConfig;
    /// let dir = uidgen_worker::StateDir::at("/var/lib/uidgen")?;
    /// let worker = WorkerConfig::default();
    /// assert_eq!(worker.state_file_for(5, &dir), Path::new("/var/lib/uidgen/uidgen-worker-5.state"));
    /// # Ok::<(), uidgen_worker::StateDirError>(())
    /// ```
    pub fn state_file_for(&self, id: u64, dir: &StateDir) -> PathBuf {
        let file = self
            .state_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("uidgen-worker-{id}.state")));
        dir.resolve(&file)
    }

    /// The leased assigner's options (its range aside): the lease's timing derived from
    /// `lease_ttl_secs` by [`LeaseOptions::with_ttl`], so the takeover wait (half the ttl)
    /// covers what a holder may borrow.
    ///
    /// `cache_path` is `cache_file` as written: [`cache_file_in`](Self::cache_file_in) places
    /// a relative one.
    pub fn lease_options(&self) -> LeaseOptions {
        LeaseOptions {
            cache_path: self.cache_file.clone(),
            cache_reserve: Duration::from_secs(self.cache_reserve_secs),
            ..LeaseOptions::with_ttl(Duration::from_secs(self.lease_ttl_secs))
        }
    }

    /// The leased assigner's cache file, a relative `cache_file` taken in the state directory
    /// `dir`; `None` when unset.
    pub fn cache_file_in(&self, dir: &StateDir) -> Option<PathBuf> {
        self.cache_file.as_deref().map(|file| dir.resolve(file))
    }

    /// The machine assigner's directory: `state_dir`, or `machine`, in the state directory
    /// `dir` unless absolute.
    pub fn machine_state_dir(&self, dir: &StateDir) -> PathBuf {
        dir.resolve(self.state_dir.as_deref().unwrap_or(Path::new("machine")))
    }

    /// `id_range`, parsed; `None` when unset (the assigner's default range).
    pub fn id_range(&self) -> Result<Option<WorkerIdRange>, ConfigError> {
        let Some(text) = &self.id_range else {
            return Ok(None);
        };
        let range: uidgen_worker::Result<WorkerIdRange> = text.parse();
        range
            .map(Some)
            .map_err(|e| invalid("worker.range", e.to_string()))
    }
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
            fallback_static: None,
            fallback_range: None,
            machine: MachineConfig::default(),
        }
    }
}

/// `[ring]`: the cached generator's ring buffer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RingConfig {
    /// Ring size is `(max_sequence + 1) << boost_power`.
    pub boost_power: u32,
    /// Pad when fewer than this percentage of slots are left.
    pub padding_factor: u32,
    /// Also pad every this many seconds (0: only on demand).
    pub schedule_interval_secs: u64,
    /// Do not run more than this many seconds ahead of the clock: past it, callers wait for
    /// the clock (default [`DEFAULT_MAX_BORROW_SECONDS`]; 0: unbounded, as Baidu's).
    pub max_borrow_seconds: u64,
}

/// How far the cached generator may run ahead of the clock unless `ring.max_borrow_seconds`
/// says otherwise. Unbounded, a load test of `/v1/ids?count=1000` borrowed 17,127 seconds
/// (IDs stamped 4.75 hours ahead, eating into the 28-bit time field at 8 seconds a second);
/// a minute absorbs a burst of 60 × (max sequence + 1) IDs above the sustained rate (491,520
/// on Baidu's layout) while the IDs' time stays within a minute of the truth. The default ring
/// (8 units) fits well within it.
pub const DEFAULT_MAX_BORROW_SECONDS: u64 = 60;

impl Default for RingConfig {
    fn default() -> Self {
        let baidu = CachedOptions::default();
        Self {
            boost_power: baidu.boost_power,
            padding_factor: baidu.padding_factor,
            schedule_interval_secs: baidu.schedule_interval.map_or(0, |d| d.as_secs()),
            max_borrow_seconds: DEFAULT_MAX_BORROW_SECONDS,
        }
    }
}

mod segment_groups;
pub use segment_groups::SegmentGroupConfig;

/// `[segment]`: Leaf segment mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentConfig {
    /// Serve `/api/segment/get/{key}` and `/v1/segments`.
    pub enabled: bool,
    /// A tag created at start if missing (Leaf's README example), empty for none.
    pub sample_tag: String,
    /// The sample tag's step.
    pub sample_step: u64,
    /// Re-read the tag list this often.
    pub sync_interval_secs: u64,
    /// Load the next segment once this share of the current one is used (Leaf: 0.1).
    pub prefetch_ratio: f64,
    /// How long a request waits for a segment in flight when both are used up (ms).
    pub wait_timeout_ms: u64,
    /// How long one database step (claim, tag list, upsert) may take before it counts as
    /// failed (ms): a paused database must not hold a tag's load forever.
    pub load_timeout_ms: u64,
    /// Dynamic step never grows above this (Leaf's `MAX_STEP`).
    pub max_step: i64,
    /// Size each segment by how fast the last one went (Leaf); off: always the stored step.
    pub dynamic_step: bool,
    /// Dynamic step's target lifetime of a segment, in seconds (Leaf's `SEGMENT_DURATION`).
    pub segment_duration_secs: u64,
    /// The largest range one segment lease may take (`POST /v1/segments/{tag}/lease`, gRPC
    /// `LeaseSegment`).
    pub max_lease_size: i64,
    /// `[[segment.groups]]`: tags served from several databases (Tinyid's design); none by
    /// default.
    pub groups: Vec<SegmentGroupConfig>,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        let leaf = uidgen_segment::SegmentOptions::default();
        Self {
            enabled: true,
            sample_tag: "leaf-segment-test".into(),
            sample_step: 2000,
            sync_interval_secs: 60,
            prefetch_ratio: leaf.prefetch_ratio,
            wait_timeout_ms: saturating_millis(leaf.wait_timeout),
            load_timeout_ms: saturating_millis(leaf.load_timeout),
            max_step: leaf.max_step,
            dynamic_step: leaf.dynamic_step,
            segment_duration_secs: leaf.segment_duration.as_secs(),
            max_lease_size: leaf.max_lease_size,
            groups: Vec::new(),
        }
    }
}

/// The whole service configuration.
///
/// ```
/// use uidgen_server::config::Config;
/// let config = Config::from_toml_str("listen = \"127.0.0.1:9000\"", std::iter::empty()).unwrap();
/// assert_eq!(config.listen_addr().unwrap().port(), 9000);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// Address of the gRPC center server; empty turns it off.
    pub grpc_listen: String,
    /// Store URL: `sqlite://path` (a relative path is taken in the state directory),
    /// `mysql://…`, `postgres://…`.
    pub store: String,
    /// The per-host state directory: the default SQLite store, worker-id marks, locks and
    /// caches, and the base of every relative path in the configuration (default: see
    /// [`StateDir::find`]; `UIDGEN_STATE_DIR`).
    pub state_dir: Option<PathBuf>,
    /// Bearer token for the admin routes; unset disables them.
    pub admin_token: Option<String>,
    /// The most IDs one batch request may ask for.
    pub batch_cap: usize,
    /// `[layout]`.
    pub layout: LayoutConfig,
    /// `[generator]`.
    pub generator: GeneratorConfig,
    /// `[worker]`.
    pub worker: WorkerConfig,
    /// `[ring]`.
    pub ring: RingConfig,
    /// `[segment]`.
    pub segment: SegmentConfig,
    /// `[redis]`: the sharded mode's Redis.
    pub redis: crate::sharded::RedisConfig,
    /// `[sharded]`: the sharded mode (off by default).
    pub sharded: crate::sharded::ShardedConfig,
    /// `[zookeeper]`: the ZooKeeper worker-id assigner (`worker.assigner = "zookeeper"`).
    pub zookeeper: crate::zk::ZookeeperConfig,
    /// `[etcd]`: the etcd worker-id assigner (`worker.assigner = "etcd"`).
    pub etcd: crate::etcd::EtcdConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            grpc_listen: "127.0.0.1:9090".into(),
            store: "sqlite://uidgen.db".into(),
            state_dir: None,
            admin_token: None,
            batch_cap: crate::http::DEFAULT_BATCH_CAP,
            layout: LayoutConfig::default(),
            generator: GeneratorConfig::default(),
            worker: WorkerConfig::default(),
            ring: RingConfig::default(),
            segment: SegmentConfig::default(),
            redis: crate::sharded::RedisConfig::default(),
            sharded: crate::sharded::ShardedConfig::default(),
            zookeeper: crate::zk::ZookeeperConfig::default(),
            etcd: crate::etcd::EtcdConfig::default(),
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
}

/// Every key an environment variable sets, and how its text is read. The variable is
/// [`env_name`] of the path (`segment.max_step`: `UIDGEN_SEGMENT_MAX_STEP`) unless
/// [`ENV_SHORT_NAMES`] names it.
const ENV_KEYS: &[(&[&str], Kind)] = &[
    (&["listen"], Kind::Str),
    (&["grpc_listen"], Kind::Str),
    (&["store"], Kind::Str),
    (&["state_dir"], Kind::Str),
    (&["admin_token"], Kind::Str),
    (&["batch_cap"], Kind::Int),
    (&["layout", "preset"], Kind::Str),
    (&["layout", "epoch"], Kind::Str),
    (&["layout", "time_bits"], Kind::Int),
    (&["layout", "worker_bits"], Kind::Int),
    (&["layout", "seq_bits"], Kind::Int),
    (&["layout", "version"], Kind::Int),
    (&["layout", "type"], Kind::Int),
    (&["generator", "kind"], Kind::Str),
    (&["generator", "random_sequence_start"], Kind::Bool),
    (&["generator", "max_backward_ms"], Kind::Int),
    (&["worker", "assigner"], Kind::Str),
    (&["worker", "id"], Kind::Int),
    (&["worker", "lease_ttl_secs"], Kind::Int),
    (&["worker", "cache_file"], Kind::Str),
    (&["worker", "cache_reserve_secs"], Kind::Int),
    (&["worker", "state_file"], Kind::Str),
    (&["worker", "state_dir"], Kind::Str),
    (&["worker", "range"], Kind::Str),
    (&["worker", "fallback_static"], Kind::Int),
    (&["worker", "fallback_range"], Kind::Str),
    (&["worker", "machine", "allow_uncoordinated"], Kind::Bool),
    (&["zookeeper", "connect"], Kind::Str),
    (&["zookeeper", "name"], Kind::Str),
    (&["zookeeper", "session_timeout_ms"], Kind::Int),
    (&["zookeeper", "report_interval_ms"], Kind::Int),
    (&["zookeeper", "max_peer_skew_ms"], Kind::Int),
    (&["zookeeper", "reservation_secs"], Kind::Int),
    (&["zookeeper", "max_outage_secs"], Kind::Int),
    (&["zookeeper", "auto_reclaim_after_secs"], Kind::Int),
    (&["zookeeper", "cache_file"], Kind::Str),
    (&["etcd", "endpoints"], Kind::Str),
    (&["etcd", "prefix"], Kind::Str),
    (&["etcd", "lease_ttl_secs"], Kind::Int),
    (&["etcd", "reservation_secs"], Kind::Int),
    (&["ring", "boost_power"], Kind::Int),
    (&["ring", "padding_factor"], Kind::Int),
    (&["ring", "schedule_interval_secs"], Kind::Int),
    (&["ring", "max_borrow_seconds"], Kind::Int),
    (&["segment", "enabled"], Kind::Bool),
    (&["segment", "sample_tag"], Kind::Str),
    (&["segment", "sample_step"], Kind::Int),
    (&["segment", "sync_interval_secs"], Kind::Int),
    (&["segment", "prefetch_ratio"], Kind::Float),
    (&["segment", "wait_timeout_ms"], Kind::Int),
    (&["segment", "load_timeout_ms"], Kind::Int),
    (&["segment", "max_lease_size"], Kind::Int),
    (&["segment", "max_step"], Kind::Int),
    (&["segment", "dynamic_step"], Kind::Bool),
    (&["segment", "segment_duration_secs"], Kind::Int),
    (&["redis", "url"], Kind::Str),
    (&["sharded", "enabled"], Kind::Bool),
    (&["sharded", "key_prefix"], Kind::Str),
    (&["sharded", "refill_ratio"], Kind::Float),
    (&["sharded", "refill_interval_secs"], Kind::Int),
    (&["sharded", "lock_ttl_ms"], Kind::Int),
    (&["sharded", "sync_interval_secs"], Kind::Int),
];

/// Sections whose variables use a shorter word than the section's name.
const ENV_SECTION_WORDS: &[(&str, &str)] = &[("zookeeper", "ZK")];

/// Keys set so often that their variable drops the key's last word.
const ENV_SHORT_NAMES: &[(&str, &[&str])] = &[
    ("UIDGEN_LAYOUT", &["layout", "preset"]),
    ("UIDGEN_GENERATOR", &["generator", "kind"]),
];

/// Earlier names of keys, still read for deployments that set them.
const ENV_OLD_NAMES: &[(&str, &[&str])] = &[("UIDGEN_WORKER_ID_RANGE", &["worker", "range"])];

/// The variable that sets the key at `path`: `UIDGEN_` and the path upper-cased, joined by `_`
/// (`[zookeeper]` keys are `UIDGEN_ZK_…`).
///
/// ```
/// use uidgen_server::config::env_name;
/// assert_eq!(env_name(&["segment", "max_step"]), "UIDGEN_SEGMENT_MAX_STEP");
/// assert_eq!(env_name(&["zookeeper", "connect"]), "UIDGEN_ZK_CONNECT");
/// assert_eq!(env_name(&["layout", "preset"]), "UIDGEN_LAYOUT");
/// ```
pub fn env_name(path: &[&str]) -> String {
    if let Some((name, _)) = ENV_SHORT_NAMES.iter().find(|(_, p)| *p == path) {
        return (*name).to_owned();
    }
    let mut name = String::from("UIDGEN");
    for (i, word) in path.iter().enumerate() {
        let word = match ENV_SECTION_WORDS
            .iter()
            .find(|(section, _)| i == 0 && section == word)
        {
            Some((_, short)) => short,
            None => word,
        };
        name.push('_');
        name.push_str(&word.to_ascii_uppercase());
    }
    name
}

/// `UIDGEN_…` variables that are not configuration keys but are read elsewhere, so that start-up
/// does not refuse them as typos: the config file's path (`--config`), a container's host and
/// port for `worker_node` rows, and the variables of scripts, benches and tests.
pub const ENV_NOT_CONFIG: &[&str] = &[
    "UIDGEN_CONFIG",
    uidgen_worker::ENV_HOST,
    uidgen_worker::ENV_PORT,
    // benches/client.rs and scripts: the binary to run.
    "UIDGEN_BIN",
    // scripts/test.sh: run the tests without starting the local services.
    "UIDGEN_SKIP_SERVICES",
    // The console's browser test.
    "UIDGEN_CHROMEDRIVER",
    "UIDGEN_CHROMIUM",
    "UIDGEN_CONSOLE_SCREENSHOT",
];

/// Variables starting with this are the tests' (`UIDGEN_TEST_MYSQL_URL`, `UIDGEN_TEST_ZK`, ...),
/// never configuration.
pub const ENV_TEST_PREFIX: &str = "UIDGEN_TEST_";

/// The first (by name) `UIDGEN_…` variable among `names` that uidgen does not know, with the
/// closest known name when one is close (a third of the name's length in edits, at least two).
/// The configuration keys' variables come from [`ENV_KEYS`], so a new key is known at once.
fn unknown_env<'a>(
    names: impl Iterator<Item = &'a str>,
    env_keys: &[(String, &[&str], Kind)],
) -> Option<ConfigError> {
    let known: Vec<&str> = env_keys
        .iter()
        .map(|(name, _, _)| name.as_str())
        .chain(ENV_NOT_CONFIG.iter().copied())
        .collect();
    let name = names
        .filter(|name| name.starts_with("UIDGEN_") && !name.starts_with(ENV_TEST_PREFIX))
        .filter(|name| !known.contains(name))
        .min()?;
    let limit = (name.len() - "UIDGEN_".len()).div_ceil(3).max(2);
    let suggestion = known
        .iter()
        .map(|&k| (strsim::levenshtein(name, k), k))
        .min()
        .filter(|&(distance, _)| distance <= limit)
        .map(|(_, k)| k.to_owned());
    Some(ConfigError::UnknownEnv {
        name: name.to_owned(),
        suggestion,
    })
}

/// Every variable that overrides a key, with the key's path and type.
fn env_keys() -> Vec<(String, &'static [&'static str], Kind)> {
    let kind_of = |path: &[&str]| ENV_KEYS.iter().find(|(p, _)| *p == path).map(|(_, k)| *k);
    ENV_KEYS
        .iter()
        .map(|&(path, kind)| (env_name(path), path, kind))
        .chain(
            ENV_OLD_NAMES
                .iter()
                .filter_map(|&(name, path)| Some((name.to_owned(), path, kind_of(path)?))),
        )
        .collect()
}

/// The environment variables that override configuration keys, for `--help` and docs.
pub fn env_overrides() -> impl Iterator<Item = (String, String)> {
    env_keys()
        .into_iter()
        .map(|(env, path, _)| (env, path.join(".")))
}

impl Config {
    /// Read a TOML file (or start from defaults when `path` is `None`) and apply `UIDGEN_…`
    /// variables from the process environment.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.to_owned(),
                source,
            })?,
            None => String::new(),
        };
        Self::from_toml_str(&text, std::env::vars())
    }

    /// Parse TOML text and apply overrides from `env` (name, value) pairs.
    pub fn from_toml_str(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        rename_old_keys(&mut table)?;
        let env_keys = env_keys();
        let env: Vec<(String, String)> = env.into_iter().collect();
        if let Some(unknown) = unknown_env(env.iter().map(|(n, _)| n.as_str()), &env_keys) {
            return Err(unknown);
        }
        for (name, value) in env {
            let Some((env_name, path, kind)) = env_keys.iter().find(|(n, _, _)| *n == name) else {
                continue;
            };
            let value = match kind {
                Kind::Str => toml::Value::String(value),
                Kind::Int => toml::Value::Integer(value.trim().parse().map_err(|_| {
                    ConfigError::Parse(format!("{env_name}={value:?} is not an integer"))
                })?),
                Kind::Float => toml::Value::Float(value.trim().parse().map_err(|_| {
                    ConfigError::Parse(format!("{env_name}={value:?} is not a number"))
                })?),
                Kind::Bool => toml::Value::Boolean(value.trim().parse().map_err(|_| {
                    ConfigError::Parse(format!("{env_name}={value:?} is not true or false"))
                })?),
            };
            set_path(&mut table, path, value)?;
        }
        // serde_path_to_error names the key a type error is in ("generator.kind"), which toml's
        // own error does not for a table built in memory.
        let config: Config =
            serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
                let key = e.path().to_string();
                let inner = e.into_inner();
                if key == "." {
                    ConfigError::Parse(inner.to_string())
                } else {
                    ConfigError::Key {
                        key,
                        reason: inner.to_string(),
                    }
                }
            })?;
        config.validate()?;
        Ok(config)
    }

    /// Whether `store` was configured rather than left at the zero-config SQLite file. Only a
    /// configured store counts as shared by the hosts and containers that could take the same
    /// worker ids (the default file is private to one working directory of one host), so only
    /// a configured store lets the `machine` and `static` assigners start in a container
    /// without further statement.
    ///
    /// ```
    /// use uidgen_server::config::Config;
    /// assert!(!Config::default().store_is_shared());
    /// let shared = Config { store: "postgres://db/ids".into(), ..Config::default() };
    /// assert!(shared.store_is_shared());
    /// ```
    pub fn store_is_shared(&self) -> bool {
        self.store != Self::default().store
    }

    /// The listen address: an IP address and port as it is, a host name and port
    /// (`localhost:8080`) through the system's resolver (its first address).
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        resolve("listen", &self.listen, 8080, "")
    }

    /// The gRPC address (resolved as [`listen_addr`](Self::listen_addr) is); `None` when
    /// `grpc_listen` is empty (gRPC off).
    pub fn grpc_listen_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        let text = self.grpc_listen.trim();
        if text.is_empty() {
            return Ok(None);
        }
        resolve("grpc_listen", text, 9090, "; empty turns gRPC off").map(Some)
    }

    /// The per-host state directory (`state_dir`, `UIDGEN_STATE_DIR`, `$XDG_STATE_HOME/uidgen`,
    /// `/var/lib/uidgen` for root, `$HOME/.local/state/uidgen`), found but not created.
    pub fn state_dir(&self) -> Result<StateDir, ConfigError> {
        StateDir::find(self.state_dir.as_deref()).map_err(|e| invalid("state_dir", e.to_string()))
    }

    /// The store URL, a relative SQLite file taken in the state directory `dir` (the default
    /// `sqlite://uidgen.db` is `{dir}/uidgen.db`).
    pub fn store_url(&self, dir: &StateDir) -> String {
        dir.resolve_store_url(&self.store)
    }

    /// The layout the configuration describes.
    pub fn build_layout(&self) -> Result<Layout, ConfigError> {
        let l = &self.layout;
        let result = match (l.time_bits, l.worker_bits, l.seq_bits) {
            // Every preset takes an epoch (but baidu_legacy, whose epoch is its point), so a
            // deployment that set its own (Leaf's twepoch) continues its ID space.
            (None, None, None) => Layout::preset_with_epoch(&l.preset, l.epoch.as_ref()),
            (Some(t), Some(w), Some(s)) => {
                if l.preset != "baidu" {
                    return Err(invalid(
                        "layout.preset",
                        "custom bits are Baidu-style; set preset = \"baidu\"",
                    ));
                }
                let epoch = l
                    .epoch
                    .as_deref()
                    .unwrap_or(uidgen_core::layout::DEFAULT_EPOCH);
                Layout::baidu_bits(t, w, s, epoch)
            }
            _ => {
                return Err(invalid(
                    "layout.time_bits",
                    "set all three of time_bits, worker_bits and seq_bits, or none",
                ));
            }
        };
        let result = result.and_then(|layout| {
            if l.version.is_none() && l.kind.is_none() {
                return Ok(layout);
            }
            let preset = layout.parts(0, 0, 0);
            layout
                .with_defaults(
                    l.version.unwrap_or(preset.version),
                    l.kind.unwrap_or(preset.kind),
                    preset.method,
                )
                .map_err(|e| uidgen_core::UidError::InvalidOption {
                    name: "version/type",
                    reason: format!("{e}; only the Vesta presets have these fields"),
                })
        });
        result.map_err(|e| {
            let key = if matches!(
                e,
                uidgen_core::UidError::InvalidEpoch { .. }
                    | uidgen_core::UidError::EpochInFuture { .. }
                    | uidgen_core::UidError::InvalidOption { name: "epoch", .. }
            ) {
                "layout.epoch"
            } else if matches!(
                e,
                uidgen_core::UidError::InvalidOption {
                    name: "version/type",
                    ..
                }
            ) {
                if l.version.is_some() {
                    "layout.version"
                } else {
                    "layout.type"
                }
            } else if l.time_bits.is_some() {
                "layout.time_bits"
            } else {
                "layout.preset"
            };
            invalid(key, e.to_string())
        })
    }

    /// Check every key (done by [`load`](Self::load); again after a command line overrides
    /// keys, such as `serve --layout`).
    pub fn validate(&self) -> Result<(), ConfigError> {
        // Only a configured directory is checked here: `decode` and `make` need none, so a
        // host without HOME still runs them; the commands that keep files find theirs.
        if let Some(dir) = &self.state_dir {
            StateDir::at(dir).map_err(|e| invalid("state_dir", e.to_string()))?;
        }
        self.listen_addr()?;
        self.grpc_listen_addr()?;
        self.build_layout()?;
        if self.generator.max_backward_ms > MAX_BACKWARD_MS {
            return Err(invalid(
                "generator.max_backward_ms",
                format!(
                    "{} is above {MAX_BACKWARD_MS}: a request would wait that long for the \
                     clock; use 0 to {MAX_BACKWARD_MS} (Leaf: 5, 0 refuses every backward step)",
                    self.generator.max_backward_ms
                ),
            ));
        }
        if !(self.store.starts_with("sqlite:")
            || self.store.starts_with("mysql://")
            || self.store.starts_with("mariadb://")
            || self.store.starts_with("postgres://")
            || self.store.starts_with("postgresql://"))
        {
            return Err(invalid(
                "store",
                "expected a sqlite://, mysql:// or postgres:// URL",
            ));
        }
        if self.batch_cap == 0 || self.batch_cap > MAX_BATCH {
            return Err(invalid(
                "batch_cap",
                format!("must be between 1 and {MAX_BATCH}"),
            ));
        }
        if self.admin_token.as_ref().is_some_and(|t| t.len() < 16) {
            return Err(invalid(
                "admin_token",
                "must be at least 16 characters (or unset to disable admin routes)",
            ));
        }
        if !(1..=99).contains(&self.ring.padding_factor) {
            return Err(invalid("ring.padding_factor", "must be between 1 and 99"));
        }
        if self.ring.boost_power > MAX_BOOST_POWER {
            return Err(invalid(
                "ring.boost_power",
                format!("must be between 0 and {MAX_BOOST_POWER}"),
            ));
        }
        match (self.worker.assigner, self.worker.id) {
            (AssignerKind::Static, None) => {
                return Err(invalid(
                    "worker.id",
                    "the static assigner needs a worker id",
                ));
            }
            (AssignerKind::Static, Some(id)) => {
                let layout = self.build_layout()?;
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
        if let Some(range) = self.worker.id_range()? {
            range
                .check_layout(&self.build_layout()?)
                .map_err(|e| invalid("worker.range", e.to_string()))?;
        }
        if self.worker.assigner == AssignerKind::Machine {
            self.validate_machine()?;
        }
        if self.worker.lease_ttl_secs < 3 {
            return Err(invalid(
                "worker.lease_ttl_secs",
                "must be at least 3 seconds",
            ));
        }
        // The library checks the lease options (bounds included, and for a leased worker id
        // that the takeover wait, half the ttl, covers the layout); this only names the key.
        let lease = self.worker.lease_options();
        lease.validate().map_err(|error| {
            let key = if lease.cache_reserve > uidgen_worker::MAX_LEASE_TTL {
                "worker.cache_reserve_secs"
            } else {
                "worker.lease_ttl_secs"
            };
            invalid(key, error.to_string())
        })?;
        if self.worker.assigner == AssignerKind::Leased {
            let layout = self.build_layout()?;
            lease.validate_for(&layout).map_err(|error| {
                // The wait is half the ttl: name the ttl that gives the wait asked for.
                let wait_ms = lease.min_takeover_wait(&layout).as_millis();
                invalid(
                    "worker.lease_ttl_secs",
                    format!(
                        "{error}; the takeover wait is half the ttl, so set it to at least {}",
                        (2 * wait_ms).div_ceil(1000)
                    ),
                )
            })?;
        }
        if self.segment.enabled && self.segment.sample_step == 0 {
            return Err(invalid("segment.sample_step", "must be greater than 0"));
        }
        self.validate_segment()?;
        crate::sharded::validate(self)?;
        crate::fallback::validate(self)?;
        crate::zk::validate(self)?;
        crate::etcd::validate(self)
    }

    /// The machine assigner's ids are `machine << 5 | process`: the layout must hold them, and
    /// they cannot be moved into a configured range.
    fn validate_machine(&self) -> Result<(), ConfigError> {
        if self.worker.id_range.is_some() {
            return Err(invalid(
                "worker.range",
                "the machine assigner's worker ids are machine << 5 | process, always 0-1023 \
                 (recorded as such in the store); unset it, and give other assigners on the store \
                 ranges above 1023",
            ));
        }
        uidgen_worker::MachineWorkerIdAssigner::check_layout(&self.build_layout()?)
            .map_err(|e| invalid("worker.assigner", e.to_string()))
    }

    /// The library's rules ([`SegmentOptions::validate`](uidgen_segment::SegmentOptions)),
    /// reported under the key that set the option.
    fn validate_segment(&self) -> Result<(), ConfigError> {
        match crate::serve::segment_options(self).validate() {
            Ok(()) => Ok(()),
            Err(uidgen_segment::SegmentError::InvalidOption { option, reason }) => {
                let key = match option {
                    "prefetch_ratio" => "segment.prefetch_ratio",
                    "sync_interval" => "segment.sync_interval_secs",
                    "segment_duration" => "segment.segment_duration_secs",
                    "max_step" => "segment.max_step",
                    "wait_timeout" => "segment.wait_timeout_ms",
                    "load_timeout" => "segment.load_timeout_ms",
                    "max_batch" => "batch_cap",
                    "max_lease_size" => "segment.max_lease_size",
                    _ => "segment",
                };
                Err(invalid(key, reason))
            }
            Err(other) => Err(invalid("segment", other.to_string())),
        }
    }
}

/// Read a key's earlier name as the key (`worker.id_range` is now `worker.range`), before the
/// environment overrides it, so that a variable beats the file whichever name the file uses.
fn rename_old_keys(table: &mut toml::Table) -> Result<(), ConfigError> {
    let Some(toml::Value::Table(worker)) = table.get_mut("worker") else {
        return Ok(());
    };
    if let Some(old) = worker.remove("id_range") {
        if worker.contains_key("range") {
            return Err(ConfigError::Parse(
                "`worker.range` and `worker.id_range` are one key: set only `worker.range`"
                    .to_owned(),
            ));
        }
        worker.insert("range".to_owned(), old);
    }
    Ok(())
}

fn set_path(table: &mut toml::Table, path: &[&str], value: toml::Value) -> Result<(), ConfigError> {
    match path {
        [key] => {
            table.insert((*key).to_owned(), value);
            Ok(())
        }
        [section, rest @ ..] => {
            let entry = table
                .entry((*section).to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            match entry {
                toml::Value::Table(t) => set_path(t, rest, value),
                _ => Err(ConfigError::Parse(format!("`{section}` must be a table"))),
            }
        }
        [] => Ok(()),
    }
}

/// What the configuration tests of every section share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{Config, ConfigError};

    /// A configuration from TOML text and environment variables.
    pub(crate) fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_toml_str(
            text,
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

    /// TOML text, environment, and a part of the error it must give.
    pub(crate) type Refusal<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);

    /// Every case is refused with an error containing its expected text.
    pub(crate) fn assert_refused(cases: &[Refusal]) {
        for (text, env, expected) in cases {
            let err = parse(text, env).unwrap_err().to_string();
            assert!(
                err.contains(expected),
                "{text:?}: got {err:?}, want {expected:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::{Refusal, assert_refused, parse};
    use super::*;

    #[test]
    fn defaults_are_the_zero_config_service() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.listen, "127.0.0.1:8080");
        assert_eq!(c.store, "sqlite://uidgen.db");
        assert_eq!(c.generator.kind, GeneratorKind::Cached);
        assert_eq!(c.build_layout().unwrap().name(), "baidu");
    }

    #[test]
    fn environment_overrides_the_file() {
        let c = parse(
            "listen = \"127.0.0.1:1\"\n[ring]\nboost_power = 2",
            &[
                ("UIDGEN_LISTEN", "0.0.0.0:9999"),
                ("UIDGEN_RING_BOOST_POWER", "4"),
                ("UIDGEN_GENERATOR", "snowflake"),
                ("UIDGEN_LAYOUT", "snowflake"),
                ("UIDGEN_HOST", "ignored: the assigner's, not a config key"),
            ],
        )
        .unwrap();
        assert_eq!(c.listen, "0.0.0.0:9999");
        assert_eq!(c.ring.boost_power, 4);
        assert_eq!(c.generator.kind, GeneratorKind::Snowflake);
    }

    /// Every key path of `value`, a section's keys under its name.
    fn key_paths(value: &serde_json::Value, prefix: &mut Vec<String>, out: &mut Vec<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, inner) in map {
                    prefix.push(key.clone());
                    key_paths(inner, prefix, out);
                    prefix.pop();
                }
            }
            // Lists of tables (`[[segment.groups]]`) are set in the file only; a list of
            // values (`etcd.endpoints`) is one key, with a variable of its own.
            serde_json::Value::Array(items) if items.iter().any(serde_json::Value::is_object) => {}
            serde_json::Value::Array(items) if items.is_empty() => {}
            _ => out.push(prefix.join(".")),
        }
    }

    #[test]
    fn leafs_clock_back_tolerance_is_a_key_bounded_by_a_second() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.generator.max_backward_ms, 5, "Leaf's 5 ms");
        assert_eq!(c.generator.random_sequence_start, None, "the layout's own");
        let c = parse(
            "[generator]\nmax_backward_ms = 0",
            &[("UIDGEN_GENERATOR_RANDOM_SEQUENCE_START", "false")],
        )
        .unwrap();
        assert_eq!(c.generator.max_backward_ms, 0);
        assert_eq!(c.generator.random_sequence_start, Some(false));
        let c = parse("", &[("UIDGEN_GENERATOR_MAX_BACKWARD_MS", "1000")]).unwrap();
        assert_eq!(c.generator.max_backward_ms, 1000);
        assert_refused(&[
            (
                "[generator]\nmax_backward_ms = 1001",
                &[],
                "`generator.max_backward_ms`: 1001 is above 1000",
            ),
            (
                "",
                &[("UIDGEN_GENERATOR_MAX_BACKWARD_MS", "-5")],
                "`generator.max_backward_ms`: invalid value: integer `-5`",
            ),
        ]);
    }

    #[test]
    fn every_config_key_has_an_environment_variable() {
        // JSON keeps unset options as null, so keys without a default are listed too.
        let defaults = serde_json::to_value(Config::default()).unwrap();
        let mut keys = Vec::new();
        key_paths(&defaults, &mut Vec::new(), &mut keys);
        let mut overridden: Vec<String> = ENV_KEYS.iter().map(|(p, _)| p.join(".")).collect();
        keys.sort();
        overridden.sort();
        assert_eq!(keys, overridden, "add the new key to ENV_KEYS");
        let names: Vec<String> = env_overrides().map(|(name, _)| name).collect();
        for name in [
            "UIDGEN_LISTEN",
            "UIDGEN_LAYOUT",
            "UIDGEN_GENERATOR",
            "UIDGEN_WORKER_RANGE",
            "UIDGEN_WORKER_ID_RANGE",
            "UIDGEN_ZK_CONNECT",
            "UIDGEN_SEGMENT_SEGMENT_DURATION_SECS",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} is missing");
        }
        // One variable, one key.
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }

    #[test]
    fn a_mistyped_variable_is_refused_naming_the_closest_known_one() {
        let cases: &[Refusal] = &[
            (
                "",
                &[("UIDGEN_LAYOUTT", "snowflake")],
                "unknown environment variable UIDGEN_LAYOUTT; did you mean UIDGEN_LAYOUT?",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_MAXSTEP", "5")],
                "unknown environment variable UIDGEN_SEGMENT_MAXSTEP; did you mean \
                 UIDGEN_SEGMENT_MAX_STEP?",
            ),
            (
                "",
                &[("UIDGEN_RING_MAX_BORROW_SECS", "5")],
                "did you mean UIDGEN_RING_MAX_BORROW_SECONDS?",
            ),
            (
                "",
                &[("UIDGEN_COLOUR", "blue")],
                "unknown environment variable UIDGEN_COLOUR; no uidgen setting has this name",
            ),
        ];
        assert_refused(cases);
        // Variables read elsewhere are not typos: the config file's path, a container's host
        // and port, the tests', scripts' and benches' own.
        let mut env: Vec<(&str, &str)> = ENV_NOT_CONFIG.iter().map(|&n| (n, "x")).collect();
        env.push(("UIDGEN_TEST_POSTGRES_URL", "postgres://elsewhere/test"));
        env.push(("UIDGEN_TEST_SOMETHING_NEW", "1"));
        env.push(("NOT_UIDGEN_AT_ALL", "1"));
        parse("", &env).unwrap();
        // Every key's variable is known, whatever section it is in, old names included (an
        // empty value may be refused, but not as an unknown name).
        for (name, _, _) in env_keys() {
            let error = parse("", &[(name.as_str(), "")]).err();
            assert!(
                !matches!(error, Some(ConfigError::UnknownEnv { .. })),
                "{name}: {error:?}"
            );
        }
    }

    #[test]
    fn every_variable_the_container_sets_is_known() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for file in ["Dockerfile", "compose.yaml"] {
            let text = std::fs::read_to_string(root.join(file)).unwrap();
            let names: Vec<&str> = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .filter(|word| word.starts_with("UIDGEN_"))
                .collect();
            assert!(!names.is_empty(), "{file} sets no UIDGEN_ variable");
            let unknown = unknown_env(names.into_iter(), &env_keys());
            assert!(unknown.is_none(), "{file}: {unknown:?}");
        }
    }

    #[test]
    fn worker_id_range_is_parsed_from_the_file_or_the_environment() {
        assert_eq!(parse("", &[]).unwrap().worker.id_range().unwrap(), None);
        let c = parse("[worker]\nid_range = \" 100 - 199 \"", &[]).unwrap();
        let range = c.worker.id_range().unwrap().unwrap();
        assert_eq!((range.low(), range.high()), (100, 199));
        let c = parse(
            "[worker]\nid_range = \"1-2\"",
            &[("UIDGEN_WORKER_ID_RANGE", "7")],
        )
        .unwrap();
        assert_eq!(
            c.worker.id_range().unwrap().map(|r| r.to_string()),
            Some("7-7".to_owned())
        );
    }

    #[test]
    fn every_preset_but_baidu_legacy_takes_an_epoch_from_the_file_or_the_environment() {
        // A Leaf deployment whose twepoch was 2017-07-14T02:40:00Z continues its ID space.
        let twepoch = 1_500_000_000_000u64;
        for preset in uidgen_core::layout::PRESET_NAMES {
            if preset == "baidu_legacy" {
                continue;
            }
            let text = format!("[layout]\npreset = \"{preset}\"\nepoch = \"{twepoch}\"");
            let layout = parse(&text, &[]).unwrap().build_layout().unwrap();
            assert_eq!((layout.name(), layout.epoch_ms()), (preset, twepoch));
            let from_env = parse(
                "",
                &[
                    ("UIDGEN_LAYOUT", preset),
                    ("UIDGEN_LAYOUT_EPOCH", "2017-07-14T02:40:00Z"),
                ],
            )
            .unwrap()
            .build_layout()
            .unwrap();
            assert_eq!(from_env, layout, "{preset}");
        }
        let leaf = parse("[layout]\npreset = \"leaf\"", &[]).unwrap();
        assert_eq!(
            leaf.build_layout().unwrap().epoch_ms(),
            uidgen_core::layout::TWITTER_EPOCH_MS,
            "without an epoch, the scheme's own"
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
            c.worker.machine_state_dir(&dir),
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
            c.worker.machine_state_dir(&dir),
            PathBuf::from("/var/lib/uidgen/machine")
        );
    }

    #[test]
    fn relative_paths_are_taken_in_the_state_directory_not_the_working_directory() {
        let c = parse(
            "store = \"sqlite://data/u.db\"\n[worker]\nstate_file = \"w/5.state\"\n\
             cache_file = \"lease.cache\"\n[zookeeper]\ncache_file = \"zk.state\"",
            &[("UIDGEN_STATE_DIR", "/srv/uidgen")],
        )
        .unwrap();
        let dir = c.state_dir().unwrap();
        assert_eq!(dir.path(), Path::new("/srv/uidgen"));
        assert_eq!(c.store_url(&dir), "sqlite:///srv/uidgen/data/u.db");
        assert_eq!(
            c.worker.state_file_for(5, &dir),
            Path::new("/srv/uidgen/w/5.state")
        );
        assert_eq!(
            c.worker.cache_file_in(&dir).as_deref(),
            Some(Path::new("/srv/uidgen/lease.cache"))
        );
        let layout = c.build_layout().unwrap();
        assert_eq!(
            crate::zk::options(&c, &layout).unwrap().cache_file,
            Path::new("/srv/uidgen/zk.state")
        );
        // The defaults live there too.
        let d = parse("", &[("UIDGEN_STATE_DIR", "/srv/uidgen")]).unwrap();
        assert_eq!(d.store_url(&dir), "sqlite:///srv/uidgen/uidgen.db");
        assert_eq!(
            crate::zk::options(&d, &layout).unwrap().cache_file,
            Path::new("/srv/uidgen/uidgen-zk-uidgen-8080.state")
        );
    }

    #[test]
    fn a_relative_state_dir_is_refused_naming_the_key() {
        let error = parse("", &[("UIDGEN_STATE_DIR", "state")]).unwrap_err();
        assert!(error.to_string().contains("`state_dir`"), "{error}");
        assert!(error.to_string().contains("absolute"), "{error}");
    }

    #[test]
    fn segment_options_default_to_leaf_and_take_overrides() {
        let leaf = uidgen_segment::SegmentOptions::default();
        let d = parse("", &[]).unwrap();
        let options = crate::serve::segment_options(&d);
        assert_eq!(
            (
                options.prefetch_ratio,
                options.wait_timeout,
                options.max_step
            ),
            (leaf.prefetch_ratio, leaf.wait_timeout, leaf.max_step)
        );
        assert_eq!(
            (options.dynamic_step, options.segment_duration),
            (leaf.dynamic_step, leaf.segment_duration)
        );
        assert_eq!(options.load_timeout, leaf.load_timeout);
        let c = parse(
            "[segment]\nprefetch_ratio = 0.25\nmax_step = 5000",
            &[
                ("UIDGEN_SEGMENT_WAIT_TIMEOUT_MS", "250"),
                ("UIDGEN_SEGMENT_LOAD_TIMEOUT_MS", "1500"),
                ("UIDGEN_SEGMENT_DYNAMIC_STEP", "false"),
                ("UIDGEN_SEGMENT_SEGMENT_DURATION_SECS", "60"),
            ],
        )
        .unwrap();
        let options = crate::serve::segment_options(&c);
        assert_eq!(options.prefetch_ratio, 0.25);
        assert_eq!(options.max_step, 5000);
        assert_eq!(options.wait_timeout, std::time::Duration::from_millis(250));
        assert_eq!(options.load_timeout, std::time::Duration::from_millis(1500));
        assert!(!options.dynamic_step);
        assert_eq!(options.segment_duration, std::time::Duration::from_secs(60));
        options.validate().unwrap();
    }

    #[test]
    fn listen_addresses_may_name_a_host() {
        let c = parse(
            "listen = \"localhost:8080\"\ngrpc_listen = \"localhost:0\"",
            &[],
        )
        .unwrap();
        assert!(c.listen_addr().unwrap().ip().is_loopback());
        assert_eq!(c.listen_addr().unwrap().port(), 8080);
        assert!(c.grpc_listen_addr().unwrap().unwrap().ip().is_loopback());
        let refused = parse("listen = \"no-such-host.invalid:8080\"", &[])
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with(
                "invalid config key `listen`: \"no-such-host.invalid:8080\" is not an address like \
                 127.0.0.1:8080 or localhost:8080 ("
            ),
            "{refused}"
        );
    }

    #[test]
    fn the_ring_borrows_at_most_a_minute_by_default_and_zero_lifts_the_bound() {
        let units = |text: &str, env: &[(&str, &str)]| {
            let c = parse(text, env).unwrap();
            crate::serve::cached_options(&c.ring, &c.build_layout().unwrap()).max_borrow_units
        };
        assert_eq!(units("", &[]), Some(60), "baidu: seconds");
        assert_eq!(units("", &[("UIDGEN_LAYOUT", "snowflake")]), Some(60_000));
        assert_eq!(units("[ring]\nmax_borrow_seconds = 5", &[]), Some(5));
        assert_eq!(units("", &[("UIDGEN_RING_MAX_BORROW_SECONDS", "0")]), None);
    }

    #[test]
    fn grpc_listens_on_9090_by_default_and_an_empty_address_turns_it_off() {
        let default = parse("", &[]).unwrap();
        assert_eq!(
            default.grpc_listen_addr().unwrap().map(|a| a.port()),
            Some(9090)
        );
        let off = parse("grpc_listen = \"\"", &[]).unwrap();
        assert_eq!(off.grpc_listen_addr().unwrap(), None);
        let env = parse("", &[("UIDGEN_GRPC_LISTEN", "0.0.0.0:7000")]).unwrap();
        assert_eq!(env.grpc_listen, "0.0.0.0:7000");
        assert_eq!(default.segment.max_lease_size, 1_000_000);
        let capped = parse("", &[("UIDGEN_SEGMENT_MAX_LEASE_SIZE", "5000")]).unwrap();
        assert_eq!(crate::serve::segment_options(&capped).max_lease_size, 5000);
    }

    #[test]
    fn vesta_version_and_type_come_from_config() {
        let config = parse(
            "[layout]\npreset = \"vesta_min_granularity\"\nversion = 1",
            &[],
        )
        .unwrap();
        let layout = config.build_layout().unwrap();
        // The preset's own type (1) stays unless `type` says otherwise.
        let parts = layout.parts(0, 0, 0);
        assert_eq!((parts.version, parts.kind, parts.method), (1, 1, 0));
        let config = parse(
            "",
            &[
                ("UIDGEN_LAYOUT", "vesta_max_peak"),
                ("UIDGEN_LAYOUT_TYPE", "1"),
            ],
        )
        .unwrap();
        assert_eq!(config.build_layout().unwrap().parts(0, 0, 0).kind, 1);
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[
            (
                "listen = \"nowhere\"",
                &[],
                "invalid config key `listen`: \"nowhere\" is not an address like 127.0.0.1:8080 \
                 or localhost:8080 (invalid socket address)",
            ),
            (
                "store = \"oracle://x\"",
                &[],
                "invalid config key `store`: expected a sqlite://, mysql:// or postgres:// URL",
            ),
            (
                "batch_cap = 0",
                &[],
                "invalid config key `batch_cap`: must be between 1 and 10000000",
            ),
            (
                "admin_token = \"short\"",
                &[],
                "invalid config key `admin_token`: must be at least 16 characters (or unset to \
                 disable admin routes)",
            ),
            (
                "[ring]\npadding_factor = 100",
                &[],
                "invalid config key `ring.padding_factor`: must be between 1 and 99",
            ),
            (
                "[ring]\nboost_power = 11",
                &[],
                "invalid config key `ring.boost_power`: must be between 0 and 10",
            ),
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
                "[worker]\nid_range = \"200-100\"",
                &[],
                "invalid config key `worker.range`: invalid worker id range `200-100`: the low end \
                 is above the high end",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "snowflake"),
                    ("UIDGEN_WORKER_ID_RANGE", "512-1024"),
                ],
                "invalid config key `worker.range`: worker id range 512-1024 does not fit the \
                 layout, whose worker ids go up to 1023",
            ),
            (
                "[layout]\npreset = \"baidu_legacy\"\nepoch = \"2020-01-01\"",
                &[],
                "invalid config key `layout.epoch`: invalid option `epoch`: baidu_legacy is \
                 Baidu's layout with its 2016 epoch",
            ),
            (
                "[layout]\npreset = \"leaf\"\nepoch = \"2999-01-01\"",
                &[],
                "invalid config key `layout.epoch`: epoch 32472144000000 ms lies in the future",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "sonyflake"),
                    ("UIDGEN_LAYOUT_EPOCH", "last tuesday"),
                ],
                "invalid config key `layout.epoch`: cannot parse epoch \"last tuesday\"",
            ),
            (
                "[layout]\npreset = \"snowflake\"\nepoch = \"2017-02-30\"",
                &[],
                "invalid config key `layout.epoch`: cannot parse epoch \"2017-02-30\": no such \
                 calendar date",
            ),
            (
                "[worker]\nassigner = \"machine\"\nid_range = \"0-1023\"",
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
            (
                "[layout]\nepoch = \"2999-01-01\"",
                &[],
                "invalid config key `layout.epoch`",
            ),
            (
                "[layout]\ntime_bits = 30\nworker_bits = 20\nseq_bits = 10",
                &[],
                "invalid config key `layout.time_bits`: layout bits must sum to 64, but the fields \
                 sum to 61",
            ),
            (
                "[layout]\npreset = \"nope\"",
                &[],
                "invalid config key `layout.preset`: invalid option `layout`: unknown preset",
            ),
            (
                "colour = \"blue\"",
                &[],
                "invalid config key `colour`: unknown field `colour`",
            ),
            (
                "",
                &[("UIDGEN_BATCH_CAP", "many")],
                "invalid config: UIDGEN_BATCH_CAP=\"many\" is not an integer",
            ),
            (
                "[generator]\nkind = \"fast\"",
                &[],
                "unknown variant `fast`",
            ),
            (
                "[segment]\nprefetch_ratio = 1.0",
                &[],
                "invalid config key `segment.prefetch_ratio`: must be at least 0 and below 1",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_PREFETCH_RATIO", "NaN")],
                "invalid config key `segment.prefetch_ratio`",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_PREFETCH_RATIO", "a tenth")],
                "invalid config: UIDGEN_SEGMENT_PREFETCH_RATIO=\"a tenth\" is not a number",
            ),
            (
                "[segment]\nwait_timeout_ms = 600000",
                &[],
                "invalid config key `segment.wait_timeout_ms`: must be at most 60000",
            ),
            (
                "[segment]\nload_timeout_ms = 0",
                &[],
                "invalid config key `segment.load_timeout_ms`: must be between 1 and 60000",
            ),
            (
                "[segment]\nmax_step = 0",
                &[],
                "invalid config key `segment.max_step`: must be between 1 and",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_MAX_STEP", "-5")],
                "invalid config key `segment.max_step`",
            ),
            (
                "[segment]\nmax_lease_size = 0",
                &[],
                "invalid config key `segment.max_lease_size`: must be 1 to",
            ),
            (
                "grpc_listen = \"nowhere\"",
                &[],
                "invalid config key `grpc_listen`: \"nowhere\" is not an address like \
                 127.0.0.1:9090 or localhost:9090 (invalid socket address); empty turns gRPC off",
            ),
            (
                "[layout]\nversion = 1",
                &[],
                "invalid config key `layout.version`: invalid option `version/type`: version value \
                 1 does not fit in 0 bits",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "vesta_max_peak"),
                    ("UIDGEN_LAYOUT_TYPE", "2"),
                ],
                "invalid config key `layout.type`",
            ),
            (
                "[segment]\nsegment_duration_secs = 0",
                &[],
                "invalid config key `segment.segment_duration_secs`: must be greater than 0",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_DYNAMIC_STEP", "sometimes")],
                "UIDGEN_SEGMENT_DYNAMIC_STEP=\"sometimes\" is not true or false",
            ),
            (
                "[segment]\ndynamic_step = \"no\"",
                &[],
                "invalid config key `segment.dynamic_step`",
            ),
        ];
        assert_refused(cases);
    }
}
