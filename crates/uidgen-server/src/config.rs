//! Service configuration: a TOML file, then `UIDGEN_…` environment overrides, then validation
//! that names the offending key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::{Layout, MAX_BATCH};
use uidgen_store::LeaseOptions;

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
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
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
}

/// `[layout]`: the bit layout of IDs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LayoutConfig {
    /// A preset name: baidu, baidu_legacy, snowflake, leaf, vesta_max_peak, vesta_min_granularity,
    /// sonyflake.
    pub preset: String,
    /// Epoch override for the `baidu` preset: `"2026-01-01"`, `"2026-01-01+08:00"` or ms.
    pub epoch: Option<String>,
    /// Custom Baidu-style widths (all three or none): time bits (seconds).
    pub time_bits: Option<u32>,
    /// Custom worker bits.
    pub worker_bits: Option<u32>,
    /// Custom sequence bits.
    pub seq_bits: Option<u32>,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        Self {
            preset: "baidu".into(),
            epoch: None,
            time_bits: None,
            worker_bits: None,
            seq_bits: None,
        }
    }
}

/// `[generator]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GeneratorConfig {
    /// cached, default or snowflake.
    pub kind: GeneratorKind,
    /// Snowflake only: start each millisecond at a random sequence below 100 (Leaf).
    pub random_sequence_start: bool,
}

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            kind: GeneratorKind::Cached,
            random_sequence_start: false,
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
    /// `uidgen-worker-{id}.state` in the working directory).
    pub state_file: Option<PathBuf>,
}

impl WorkerConfig {
    /// The static assigner's state file for worker id `id`.
    pub fn state_file_for(&self, id: u64) -> PathBuf {
        self.state_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("uidgen-worker-{id}.state")))
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
    /// Do not run more than this many seconds ahead of the clock (unset: unbounded, Baidu).
    pub max_borrow_seconds: Option<u64>,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self {
            boost_power: 3,
            padding_factor: 50,
            schedule_interval_secs: 0,
            max_borrow_seconds: None,
        }
    }
}

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
            wait_timeout_ms: u64::try_from(leaf.wait_timeout.as_millis()).unwrap_or(1000),
            load_timeout_ms: u64::try_from(leaf.load_timeout.as_millis()).unwrap_or(5000),
            max_step: leaf.max_step,
            dynamic_step: leaf.dynamic_step,
            segment_duration_secs: leaf.segment_duration.as_secs(),
        }
    }
}

/// The longest a request may wait for a segment: past this, a client has long given up.
pub const MAX_SEGMENT_WAIT_MS: u64 = 60_000;

/// The whole service configuration.
///
/// ```
/// let config = uidgen_server::config::Config::from_toml_str("listen = \"127.0.0.1:9000\"", std::iter::empty()).unwrap();
/// assert_eq!(config.listen_addr().unwrap().port(), 9000);
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address to listen on.
    pub listen: String,
    /// Store URL: `sqlite://path`, `mysql://…`, `postgres://…`.
    pub store: String,
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            store: "sqlite://uidgen.db".into(),
            admin_token: None,
            batch_cap: crate::http::DEFAULT_BATCH_CAP,
            layout: LayoutConfig::default(),
            generator: GeneratorConfig::default(),
            worker: WorkerConfig::default(),
            ring: RingConfig::default(),
            segment: SegmentConfig::default(),
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

/// Environment variables that override keys, with the key's path and type.
const ENV_KEYS: &[(&str, &[&str], Kind)] = &[
    ("UIDGEN_LISTEN", &["listen"], Kind::Str),
    ("UIDGEN_STORE", &["store"], Kind::Str),
    ("UIDGEN_ADMIN_TOKEN", &["admin_token"], Kind::Str),
    ("UIDGEN_BATCH_CAP", &["batch_cap"], Kind::Int),
    ("UIDGEN_LAYOUT", &["layout", "preset"], Kind::Str),
    ("UIDGEN_LAYOUT_EPOCH", &["layout", "epoch"], Kind::Str),
    (
        "UIDGEN_LAYOUT_TIME_BITS",
        &["layout", "time_bits"],
        Kind::Int,
    ),
    (
        "UIDGEN_LAYOUT_WORKER_BITS",
        &["layout", "worker_bits"],
        Kind::Int,
    ),
    ("UIDGEN_LAYOUT_SEQ_BITS", &["layout", "seq_bits"], Kind::Int),
    ("UIDGEN_GENERATOR", &["generator", "kind"], Kind::Str),
    (
        "UIDGEN_GENERATOR_RANDOM_SEQUENCE_START",
        &["generator", "random_sequence_start"],
        Kind::Bool,
    ),
    ("UIDGEN_WORKER_ASSIGNER", &["worker", "assigner"], Kind::Str),
    ("UIDGEN_WORKER_ID", &["worker", "id"], Kind::Int),
    (
        "UIDGEN_WORKER_LEASE_TTL_SECS",
        &["worker", "lease_ttl_secs"],
        Kind::Int,
    ),
    (
        "UIDGEN_WORKER_CACHE_FILE",
        &["worker", "cache_file"],
        Kind::Str,
    ),
    (
        "UIDGEN_WORKER_CACHE_RESERVE_SECS",
        &["worker", "cache_reserve_secs"],
        Kind::Int,
    ),
    (
        "UIDGEN_WORKER_STATE_FILE",
        &["worker", "state_file"],
        Kind::Str,
    ),
    (
        "UIDGEN_RING_BOOST_POWER",
        &["ring", "boost_power"],
        Kind::Int,
    ),
    (
        "UIDGEN_RING_PADDING_FACTOR",
        &["ring", "padding_factor"],
        Kind::Int,
    ),
    (
        "UIDGEN_RING_SCHEDULE_INTERVAL_SECS",
        &["ring", "schedule_interval_secs"],
        Kind::Int,
    ),
    (
        "UIDGEN_RING_MAX_BORROW_SECONDS",
        &["ring", "max_borrow_seconds"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_ENABLED",
        &["segment", "enabled"],
        Kind::Bool,
    ),
    (
        "UIDGEN_SEGMENT_SAMPLE_TAG",
        &["segment", "sample_tag"],
        Kind::Str,
    ),
    (
        "UIDGEN_SEGMENT_SAMPLE_STEP",
        &["segment", "sample_step"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_SYNC_INTERVAL_SECS",
        &["segment", "sync_interval_secs"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_PREFETCH_RATIO",
        &["segment", "prefetch_ratio"],
        Kind::Float,
    ),
    (
        "UIDGEN_SEGMENT_WAIT_TIMEOUT_MS",
        &["segment", "wait_timeout_ms"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_LOAD_TIMEOUT_MS",
        &["segment", "load_timeout_ms"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_MAX_STEP",
        &["segment", "max_step"],
        Kind::Int,
    ),
    (
        "UIDGEN_SEGMENT_DYNAMIC_STEP",
        &["segment", "dynamic_step"],
        Kind::Bool,
    ),
    (
        "UIDGEN_SEGMENT_SEGMENT_DURATION_SECS",
        &["segment", "segment_duration_secs"],
        Kind::Int,
    ),
];

/// The environment variables that override configuration keys, for `--help` and docs.
pub fn env_overrides() -> impl Iterator<Item = (&'static str, String)> {
    ENV_KEYS.iter().map(|(env, path, _)| (*env, path.join(".")))
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
        for (name, value) in env {
            let Some((env_name, path, kind)) = ENV_KEYS.iter().find(|(n, _, _)| *n == name) else {
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

    /// The listen address, parsed.
    pub fn listen_addr(&self) -> Result<SocketAddr, ConfigError> {
        self.listen.parse().map_err(|_| {
            invalid(
                "listen",
                format!("{:?} is not an address like 127.0.0.1:8080", self.listen),
            )
        })
    }

    /// The layout the configuration describes.
    pub fn build_layout(&self) -> Result<Layout, ConfigError> {
        let l = &self.layout;
        let result = match (l.time_bits, l.worker_bits, l.seq_bits) {
            (None, None, None) => match (l.preset.as_str(), &l.epoch) {
                ("baidu", Some(epoch)) => Layout::baidu(epoch),
                (_, Some(_)) => {
                    return Err(invalid(
                        "layout.epoch",
                        "only the baidu preset takes an epoch; the others have their scheme's own",
                    ));
                }
                (name, None) => Layout::preset(name),
            },
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
        result.map_err(|e| {
            let key = if matches!(e, uidgen_core::UidError::InvalidEpoch { .. })
                || matches!(e, uidgen_core::UidError::EpochInFuture { .. })
            {
                "layout.epoch"
            } else if l.time_bits.is_some() {
                "layout.time_bits"
            } else {
                "layout.preset"
            };
            invalid(key, e.to_string())
        })
    }

    fn validate(&self) -> Result<(), ConfigError> {
        self.listen_addr()?;
        self.build_layout()?;
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
        if self.ring.boost_power > 10 {
            return Err(invalid("ring.boost_power", "must be between 0 and 10"));
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
        if self.worker.lease_ttl_secs < 3 {
            return Err(invalid(
                "worker.lease_ttl_secs",
                "must be at least 3 seconds",
            ));
        }
        // The library checks the rest of the lease options (bounds included); this only names
        // the key.
        let lease = LeaseOptions {
            ttl: Duration::from_secs(self.worker.lease_ttl_secs),
            heartbeat_interval: None,
            max_takeover_wait: Duration::ZERO,
            cache_reserve: Duration::from_secs(self.worker.cache_reserve_secs),
            ..LeaseOptions::default()
        };
        if let Err(error) = lease.validate() {
            let key = if lease.cache_reserve > uidgen_store::MAX_LEASE_TTL {
                "worker.cache_reserve_secs"
            } else {
                "worker.lease_ttl_secs"
            };
            return Err(invalid(key, error.to_string()));
        }
        if self.segment.enabled && self.segment.sample_step == 0 {
            return Err(invalid("segment.sample_step", "must be greater than 0"));
        }
        self.validate_segment()
    }

    fn validate_segment(&self) -> Result<(), ConfigError> {
        let s = &self.segment;
        if s.sync_interval_secs == 0 {
            return Err(invalid(
                "segment.sync_interval_secs",
                "must be greater than 0",
            ));
        }
        // Written so NaN fails too.
        if !(s.prefetch_ratio >= 0.0 && s.prefetch_ratio < 1.0) {
            return Err(invalid(
                "segment.prefetch_ratio",
                format!(
                    "must be at least 0 and below 1 (the share of a segment used before the next is loaded), got {}",
                    s.prefetch_ratio
                ),
            ));
        }
        if s.wait_timeout_ms > MAX_SEGMENT_WAIT_MS {
            return Err(invalid(
                "segment.wait_timeout_ms",
                format!("must be at most {MAX_SEGMENT_WAIT_MS} (a minute)"),
            ));
        }
        if !(1..=MAX_SEGMENT_WAIT_MS).contains(&s.load_timeout_ms) {
            return Err(invalid(
                "segment.load_timeout_ms",
                format!("must be between 1 and {MAX_SEGMENT_WAIT_MS} (a minute)"),
            ));
        }
        if !(1..=uidgen_store::MAX_STEP).contains(&s.max_step) {
            return Err(invalid(
                "segment.max_step",
                format!("must be between 1 and {}", uidgen_store::MAX_STEP),
            ));
        }
        if s.segment_duration_secs == 0 {
            return Err(invalid(
                "segment.segment_duration_secs",
                "must be greater than 0",
            ));
        }
        Ok(())
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::from_toml_str(
            text,
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
    }

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
    fn each_invalid_key_is_named_with_its_reason() {
        type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
        let cases: &[Case] = &[
            (
                "listen = \"nowhere\"",
                &[],
                "invalid config key `listen`: \"nowhere\" is not an address like 127.0.0.1:8080",
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
                "invalid config key `admin_token`: must be at least 16 characters (or unset to disable admin routes)",
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
                "invalid config key `worker.id`: worker id 5000000 exceeds the layout's maximum 4194303; widen the worker bits or use a smaller id",
            ),
            (
                "[layout]\npreset = \"snowflake\"\nepoch = \"2020-01-01\"",
                &[],
                "invalid config key `layout.epoch`: only the baidu preset takes an epoch; the others have their scheme's own",
            ),
            (
                "[layout]\nepoch = \"2999-01-01\"",
                &[],
                "invalid config key `layout.epoch`",
            ),
            (
                "[layout]\ntime_bits = 30\nworker_bits = 20\nseq_bits = 10",
                &[],
                "invalid config key `layout.time_bits`: layout bits must sum to 64, but the fields sum to 61",
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
        for (text, env, expected) in cases {
            let err = parse(text, env).unwrap_err().to_string();
            assert!(
                err.contains(expected),
                "{text:?}: got {err:?}, want {expected:?}"
            );
        }
    }
}
