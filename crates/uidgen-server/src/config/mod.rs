//! Service configuration: a TOML file, then `UIDGEN_…` environment overrides, then
//! [`Config::settings`], which parses every section once into typed [`Settings`] holding the
//! libraries' own options (a [`Layout`], [`LeaseOptions`](uidgen_worker::LeaseOptions),
//! [`CachedOptions`], [`SegmentOptions`](uidgen_segment::SegmentOptions),
//! [`uidgen_zk::ZkOptions`] ...). A section is checked by building its options,
//! so each rule lives once, in the library; the config layer only names the key that broke
//! it. The service and the subcommands take [`Settings`] and never parse a key again.
//!
//! One file per section: [`layout`], [`generator`], [`worker`] (with [`ranges`]), [`ring`],
//! [`segment`], [`zookeeper`], [`etcd`], [`statefulset`], [`sharded`], [`mod@auth`], [`tls`], [`http`], [`mod@log`], [`mask`]; the top-level keys are here, and [`mod@env`]
//! maps keys to `UIDGEN_…` variables. **Adding a key** means editing its section's file
//! only: the field with its doc, its `Default`, its line in the section's `ENV` list, and its
//! check in the section's `settings` (or `build`/`options`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::layout::DEFAULT_RUNWAY_WARNING;
use uidgen_core::{CachedOptions, Layout, MAX_BATCH};
use uidgen_sharded::ShardedOptions;
use uidgen_worker::StateDir;
use uidgen_zk::ZkOptions;

pub mod auth;
pub mod clock_watch;
pub mod env;
mod env_key;
pub mod error;
pub mod etcd;
pub mod generator;
pub mod http;
pub mod layout;
pub mod log;
pub mod mask;
pub mod ordered;
pub mod ranges;
pub mod ring;
pub mod segment;
pub mod segment_groups;
pub mod sharded;
pub mod spaces;
pub mod statefulset;
pub mod tls;
pub mod vesta;
pub mod worker;
pub mod zookeeper;

use auth::{AuthConfig, AuthSettings};
use error::{ConfigError, invalid};
use etcd::{EtcdConfig, EtcdSettings};
use generator::GeneratorConfig;
use http::HttpConfig;
use layout::LayoutConfig;
use log::LogConfig;
use mask::MaskConfig;
use ring::{EmptyRing, RingConfig};
use segment::{SegmentConfig, SegmentSettings};
use sharded::{RedisConfig, ShardedConfig};
use spaces::{SpaceConfig, SpaceSettings};
use statefulset::{StatefulSetConfig, StatefulSetSettings};
use tls::{TlsConfig, TlsSettings};
use worker::{WorkerConfig, WorkerSettings};
use zookeeper::{ZkSettings, ZookeeperConfig};

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
    /// Warn in the log when a space's time field has fewer days left than this, at the
    /// current borrowed lead (default 730, two years; 0 never warns).
    pub runway_warning_days: u64,
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
    pub redis: RedisConfig,
    /// `[sharded]`: the sharded mode (off by default).
    pub sharded: ShardedConfig,
    /// `[zookeeper]`: the ZooKeeper worker-id assigner (`worker.assigner = "zookeeper"`).
    pub zookeeper: ZookeeperConfig,
    /// `[etcd]`: the etcd worker-id assigner (`worker.assigner = "etcd"`).
    pub etcd: EtcdConfig,
    /// `[statefulset]`: the Kubernetes StatefulSet worker-id assigner
    /// (`worker.assigner = "statefulset"`).
    pub statefulset: StatefulSetConfig,
    /// `[spaces.<name>]`: named ID spaces beside the default one (file only, no variables).
    pub spaces: BTreeMap<String, SpaceConfig>,
    /// `[auth]`: per-caller tokens on the ID routes (off by default).
    pub auth: AuthConfig,
    /// `[tls]`: HTTP and gRPC over TLS (off by default).
    pub tls: TlsConfig,
    /// `[log]`: the log's format and the access log.
    pub log: LogConfig,
    /// `[clock_watch]`: the clocks compared while serving.
    pub clock_watch: clock_watch::ClockWatchConfig,
    /// `[ordered]`: how ordered tags are led and forwarded.
    pub ordered: ordered::OrderedConfig,
    /// `[http]`: the HTTP port's read timeouts and connection cap.
    pub http: HttpConfig,
    /// `[mask]`: the keys of the masked form of IDs (none by default).
    pub mask: MaskConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            grpc_listen: "127.0.0.1:9090".into(),
            store: "sqlite://uidgen.db".into(),
            state_dir: None,
            admin_token: None,
            batch_cap: DEFAULT_BATCH_CAP,
            runway_warning_days: DEFAULT_RUNWAY_WARNING.as_secs() / 86_400,
            layout: LayoutConfig::default(),
            generator: GeneratorConfig::default(),
            worker: WorkerConfig::default(),
            ring: RingConfig::default(),
            segment: SegmentConfig::default(),
            redis: RedisConfig::default(),
            sharded: ShardedConfig::default(),
            zookeeper: ZookeeperConfig::default(),
            etcd: EtcdConfig::default(),
            statefulset: StatefulSetConfig::default(),
            spaces: BTreeMap::new(),
            auth: AuthConfig::default(),
            tls: TlsConfig::default(),
            log: LogConfig::default(),
            clock_watch: clock_watch::ClockWatchConfig::default(),
            ordered: ordered::OrderedConfig::default(),
            http: HttpConfig::default(),
            mask: MaskConfig::default(),
        }
    }
}

/// The shortest `admin_token`: shorter ones are guessable.
pub const MIN_ADMIN_TOKEN_LEN: usize = 16;

/// The admin token compose.yaml once set when none was given: published, so refused.
pub const PLACEHOLDER_ADMIN_TOKEN: &str = "change-me-to-a-long-random-token";

/// The most IDs one batch request may ask for unless `batch_cap` says otherwise.
pub const DEFAULT_BATCH_CAP: usize = 100_000;

/// The configuration parsed once: what the service and the subcommands run with. Every
/// field is checked; the libraries' options in it are the ones they validated.
///
/// ```
/// use uidgen_server::config::Config;
/// let settings = Config::from_toml_str("listen = \"127.0.0.1:9000\"", std::iter::empty())?
///     .settings()?;
/// assert_eq!(settings.listen.port(), 9000);
/// assert_eq!(settings.layout.name(), "baidu");
/// # Ok::<(), uidgen_server::config::error::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The HTTP address (a host name resolved).
    pub listen: SocketAddr,
    /// The gRPC address; `None` turns gRPC off.
    pub grpc_listen: Option<SocketAddr>,
    /// The store URL as configured (its scheme checked); [`store_url`](Self::store_url) places
    /// a relative SQLite file.
    pub store: String,
    /// Whether `store` was configured rather than left at the zero-config SQLite file
    /// ([`Config::store_is_shared`]).
    pub store_shared: bool,
    /// `state_dir` as configured (checked to be absolute); [`state_dir`](Self::state_dir)
    /// finds the directory.
    pub state_dir: Option<PathBuf>,
    /// Bearer token for the admin routes; `None` disables them.
    pub admin_token: Option<String>,
    /// The most IDs one batch request may ask for.
    pub batch_cap: usize,
    /// Below this much time left in a space's time field the log warns (`runway_warning_days`;
    /// zero never warns).
    pub runway_warning: Duration,
    /// `[layout]`.
    pub layout: Layout,
    /// `[generator]`, checked.
    pub generator: GeneratorConfig,
    /// `[worker]`.
    pub worker: WorkerSettings,
    /// `[ring]`: the cached generator's options (without a fence: the assignment adds it).
    pub ring: CachedOptions,
    /// `[ring]`'s take policy as HTTP and gRPC requests apply it.
    pub empty_ring: EmptyRing,
    /// `[segment]`.
    pub segment: SegmentSettings,
    /// `[redis]` and `[sharded]`: the options when the mode is on.
    pub sharded: Option<ShardedOptions>,
    /// `[zookeeper]`, when the assigner is `zookeeper`.
    pub zookeeper: Option<ZkSettings>,
    /// `[etcd]`, when the assigner is `etcd`.
    pub etcd: Option<EtcdSettings>,
    /// `[statefulset]`, when the assigner is `statefulset`.
    pub statefulset: Option<StatefulSetSettings>,
    /// `[spaces.<name>]`, in name order; empty when none is configured.
    pub spaces: Vec<SpaceSettings>,
    /// `[auth]`.
    pub auth: AuthSettings,
    /// `[tls]`, when on.
    pub tls: Option<TlsSettings>,
    /// `[log]`.
    pub log: LogConfig,
    /// `[clock_watch]`.
    pub clock_watch: clock_watch::ClockWatchSettings,
    /// `[ordered]`.
    pub ordered: ordered::OrderedSettings,
    /// `[http]`: the HTTP port's read timeouts and connection cap.
    pub http: crate::connections::ConnectionLimits,
    /// `[mask]`: the keys of the masked form; `None` when no key is configured.
    pub mask: Option<uidgen_core::Masker>,
}

impl Settings {
    /// The per-host state directory (`state_dir`, `UIDGEN_STATE_DIR`, `$XDG_STATE_HOME/uidgen`,
    /// `/var/lib/uidgen` for root, `$HOME/.local/state/uidgen`), found but not created.
    pub fn state_dir(&self) -> Result<StateDir, ConfigError> {
        find_state_dir(self.state_dir.as_deref())
    }

    /// The store URL, a relative SQLite file taken in the state directory `dir` (the default
    /// `sqlite://uidgen.db` is `{dir}/uidgen.db`).
    pub fn store_url(&self, dir: &StateDir) -> String {
        dir.resolve_store_url(&self.store)
    }

    /// The HTTP port bound at start (`listen` may say port 0): a ZooKeeper forever node (and
    /// its default cache file) and an etcd holder are named after it.
    ///
    /// ```
    /// use uidgen_server::config::Config;
    /// let toml = "listen = \"127.0.0.1:0\"\nstate_dir = \"/var/lib/uidgen\"\n\
    ///             [worker]\nassigner = \"zookeeper\"";
    /// let mut settings = Config::from_toml_str(toml, std::iter::empty())?.settings()?;
    /// settings.listening_on("127.0.0.1:8081".parse()?);
    /// let zk = &settings.zookeeper.as_ref().ok_or("no [zookeeper] settings")?.options;
    /// assert_eq!(zk.port, "8081");
    /// assert!(zk.cache_file.ends_with("uidgen-zk-uidgen-8081.state"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn listening_on(&mut self, addr: SocketAddr) {
        self.listen = addr;
        if let Some(zk) = &mut self.zookeeper {
            zk.listening_on(addr.port());
        }
        if let Some(etcd) = &mut self.etcd {
            etcd.listening_on(addr.port());
        }
    }

    /// These settings as the space `space` runs with: its layout, generator, ring and worker
    /// settings in place of the top-level ones, so that the one path from settings to a
    /// worker id and a generator (`generators::assign_and_build`) builds the space's too.
    pub fn for_space(&self, space: &SpaceSettings) -> Self {
        Self {
            layout: space.layout.clone(),
            generator: space.generator.clone(),
            ring: space.ring.clone(),
            worker: space.worker.clone(),
            spaces: Vec::new(),
            ..self.clone()
        }
    }
}

fn find_state_dir(configured: Option<&Path>) -> Result<StateDir, ConfigError> {
    StateDir::find(configured).map_err(|e| invalid("state_dir", e.to_string()))
}

impl Config {
    /// Read a TOML file (or start from defaults when `path` is `None`), apply `UIDGEN_…`
    /// variables from the process environment, and check the result.
    pub fn load(path: Option<&Path>) -> Result<Self, ConfigError> {
        let config = Self::read(path)?;
        config.validate()?;
        Ok(config)
    }

    /// [`load`](Self::load) without the check, for a command line to override keys before
    /// [`settings`](Self::settings) checks them once.
    pub fn read(path: Option<&Path>) -> Result<Self, ConfigError> {
        let text = match path {
            Some(p) => std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                path: p.to_owned(),
                source,
            })?,
            None => String::new(),
        };
        Self::parse(&text, std::env::vars())
    }

    /// Parse TOML text, apply overrides from `env` (name, value) pairs, and check the result.
    pub fn from_toml_str(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let config = Self::parse(text, env)?;
        config.validate()?;
        Ok(config)
    }

    /// TOML text with `env` applied, keys and types checked but not values.
    fn parse(
        text: &str,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, ConfigError> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse(e.to_string()))?;
        env::apply(&mut table, env)?;
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

    /// `runway_warning_days` as a duration; a count of days too large for one is refused.
    fn runway_warning(&self) -> Result<Duration, ConfigError> {
        self.runway_warning_days
            .checked_mul(86_400)
            .map(Duration::from_secs)
            .ok_or_else(|| invalid("runway_warning_days", "must be a number of days below 2^47"))
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
        find_state_dir(self.state_dir.as_deref())
    }

    /// The ZooKeeper library's options for this configuration (its listen port, state
    /// directory and worker range), as `uidgen serve` would start with them.
    pub fn zookeeper_options(&self, layout: &Layout) -> Result<ZkOptions, ConfigError> {
        let settings = ZkSettings::new(
            &self.zookeeper,
            self.worker.id_range()?,
            layout,
            self.state_dir()?,
            self.listen_addr()?.port(),
        );
        Ok(settings.options)
    }

    /// The layout `[layout]` describes ([`LayoutConfig::build`]).
    pub fn build_layout(&self) -> Result<Layout, ConfigError> {
        self.layout.build()
    }

    /// Check every key (done by [`load`](Self::load)); [`settings`](Self::settings) is the
    /// same check, keeping what it built.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.settings().map(drop)
    }

    /// Every section parsed and checked once, into what the service runs with. The checks run
    /// in the order the keys are listed, so the first broken key is the one reported.
    pub fn settings(&self) -> Result<Settings, ConfigError> {
        // Only a configured directory is checked here: `decode` and `make` need none, so a
        // host without HOME still runs them; the commands that keep files find theirs.
        if let Some(dir) = &self.state_dir {
            StateDir::at(dir).map_err(|e| invalid("state_dir", e.to_string()))?;
        }
        let listen = self.listen_addr()?;
        let grpc_listen = self.grpc_listen_addr()?;
        let layout = self.layout.build()?;
        let generator = self.generator.checked()?;
        // The store's own rule for which URLs it opens.
        uidgen_store::Dialect::from_url(&self.store)
            .map_err(|_| invalid("store", "expected a sqlite://, mysql:// or postgres:// URL"))?;
        if self.batch_cap == 0 || self.batch_cap > MAX_BATCH {
            return Err(invalid(
                "batch_cap",
                format!("must be between 1 and {MAX_BATCH}"),
            ));
        }
        if let Some(token) = &self.admin_token {
            if token.len() < MIN_ADMIN_TOKEN_LEN {
                return Err(invalid(
                    "admin_token",
                    format!(
                        "must be at least {MIN_ADMIN_TOKEN_LEN} characters (or unset to \
                         disable admin routes)"
                    ),
                ));
            }
            if token == PLACEHOLDER_ADMIN_TOKEN {
                return Err(invalid(
                    "admin_token",
                    format!(
                        "is the published placeholder `{PLACEHOLDER_ADMIN_TOKEN}`, which \
                         anyone can read; set a long random one (`openssl rand -hex 32`)"
                    ),
                ));
            }
        }
        let ring = self.ring.options(&layout)?;
        let mut worker = self.worker.settings(&layout)?;
        let segment = self.segment.settings(self.batch_cap)?;
        let sharded = self.sharded.settings(&self.redis, self.batch_cap)?;
        worker.fallback_range = ranges::checked_fallback_range(&self.worker, &worker, &layout)?;
        let zookeeper = self.zookeeper.settings(
            &self.worker,
            worker.range,
            &layout,
            || self.state_dir(),
            listen.port(),
        )?;
        let etcd = self.etcd.settings(&worker, &layout, listen.port())?;
        let statefulset = self.statefulset.settings(&worker, &layout)?;
        spaces::check_worker_field("worker.fleet_size", &worker, &layout, &layout)?;
        let spaces = spaces::settings(
            &self.spaces,
            &generator,
            &self.worker,
            &worker,
            &layout,
            &self.ring,
        )?;
        let auth = self.auth.settings()?;
        let tls = self.tls.settings()?;
        let ordered = self.ordered.settings(tls.is_some())?;
        let http = self.http.settings()?;
        let mask = self.mask.settings()?;
        Ok(Settings {
            listen,
            grpc_listen,
            store: self.store.clone(),
            store_shared: self.store_is_shared(),
            state_dir: self.state_dir.clone(),
            admin_token: self.admin_token.clone(),
            batch_cap: self.batch_cap,
            runway_warning: self.runway_warning()?,
            layout,
            generator,
            worker,
            ring,
            empty_ring: self.ring.empty_ring(),
            segment,
            sharded,
            zookeeper,
            etcd,
            statefulset,
            spaces,
            auth,
            tls,
            log: self.log,
            clock_watch: self.clock_watch.settings()?,
            ordered,
            http,
            mask,
        })
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
    use super::generator::GeneratorKind;
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
        assert_eq!(
            c.settings().unwrap().store_url(&dir),
            "sqlite:///srv/uidgen/data/u.db"
        );
        assert_eq!(
            c.settings().unwrap().worker.state_file_for(5, &dir),
            Path::new("/srv/uidgen/w/5.state")
        );
        assert_eq!(
            c.settings().unwrap().worker.cache_file_in(&dir).as_deref(),
            Some(Path::new("/srv/uidgen/lease.cache"))
        );
        let layout = c.build_layout().unwrap();
        assert_eq!(
            c.zookeeper_options(&layout).unwrap().cache_file,
            Path::new("/srv/uidgen/zk.state")
        );
        // The defaults live there too.
        let d = parse("", &[("UIDGEN_STATE_DIR", "/srv/uidgen")]).unwrap();
        assert_eq!(
            d.settings().unwrap().store_url(&dir),
            "sqlite:///srv/uidgen/uidgen.db"
        );
        assert_eq!(
            d.zookeeper_options(&layout).unwrap().cache_file,
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
        assert_eq!(
            capped.settings().unwrap().segment.options.max_lease_size,
            5000
        );
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
                "",
                &[("UIDGEN_ADMIN_TOKEN", "change-me-to-a-long-random-token")],
                "invalid config key `admin_token`: is the published placeholder \
                 `change-me-to-a-long-random-token`, which anyone can read",
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
                "grpc_listen = \"nowhere\"",
                &[],
                "invalid config key `grpc_listen`: \"nowhere\" is not an address like \
                 127.0.0.1:9090 or localhost:9090 (invalid socket address); empty turns gRPC off",
            ),
        ];
        assert_refused(cases);
    }
}
