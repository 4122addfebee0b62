//! `[spaces.<name>]`: named ID spaces served next to the default one, each with its own layout
//! (and optionally its own generator kind) and its own worker-id claim.
//!
//! A space's `layout` table takes exactly what the top-level `[layout]` takes and is parsed by
//! the same [`LayoutConfig::build`]; its `generator` table, when present, replaces the
//! top-level `[generator]` for that space. Spaces come from the file only: the `UIDGEN_…`
//! variables name fixed keys, and a space's name is the operator's.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use uidgen_core::{CachedOptions, Layout};

use super::worker::{AssignerKind, WorkerConfig, WorkerSettings};
use super::{ConfigError, GeneratorConfig, LayoutConfig, RingConfig};

/// The name the top-level generator is served under (`/v1/spaces/default/ids`); no
/// `[spaces.<name>]` may take it.
pub const DEFAULT_SPACE: &str = "default";

/// The longest space name.
pub const MAX_SPACE_NAME_LEN: usize = 32;

/// The pattern a space name matches (`GET /v1/spaces/{space}/...` documents it), `default`
/// aside.
pub const SPACE_NAME_PATTERN: &str = "^[a-z][a-z0-9_-]{0,31}$";

/// `[spaces.<name>]`: one named ID space.
///
/// ```
/// use uidgen_server::config::Config;
/// let toml = "store = \"postgres://db/ids\"\n[worker]\nassigner = \"leased\"\n\
///             [spaces.order.layout]\npreset = \"snowflake\"\nepoch = \"2020-01-01\"";
/// let settings = Config::from_toml_str(toml, std::iter::empty())?.settings()?;
/// assert_eq!(settings.spaces[0].name, "order");
/// assert_eq!(settings.spaces[0].layout.name(), "snowflake");
/// # Ok::<(), uidgen_server::config::ConfigError>(())
/// ```
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SpaceConfig {
    /// The space's layout: the keys of the top-level `[layout]` (preset, epoch, bits, ...).
    pub layout: LayoutConfig,
    /// The space's generator; the top-level `[generator]` when absent.
    pub generator: Option<GeneratorConfig>,
}

/// One space checked: what the server builds its generator from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SpaceSettings {
    /// The space's name (`[spaces.<name>]`).
    pub name: String,
    /// Its layout.
    pub layout: Layout,
    /// Its generator (its own `generator` table, or the top-level one).
    pub generator: GeneratorConfig,
    /// `[ring]`'s options for its layout.
    pub ring: CachedOptions,
    /// `[worker]` for its layout: the same assigner and registered range as the default
    /// space, its own cache file.
    pub worker: WorkerSettings,
}

impl super::Settings {
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

/// Whether `name` may name a space: [`SPACE_NAME_PATTERN`], and not [`DEFAULT_SPACE`].
///
/// ```
/// use uidgen_server::config::spaces::valid_space_name;
/// assert!(valid_space_name("order"));
/// assert!(valid_space_name("user_2-b"));
/// assert!(!valid_space_name("default"));
/// assert!(!valid_space_name("Order"));
/// assert!(!valid_space_name("2fa"));
/// ```
pub fn valid_space_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name != DEFAULT_SPACE
        && name.len() <= MAX_SPACE_NAME_LEN
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

/// Why `assigner` cannot hold one worker id per space in one process; `None` when it can.
fn refusal(assigner: AssignerKind) -> Option<(&'static str, &'static str)> {
    Some(match assigner {
        AssignerKind::Disposable | AssignerKind::Leased => return None,
        AssignerKind::Static => ("static", "the static assigner holds the one `worker.id`"),
        AssignerKind::Machine => (
            "machine",
            "the machine assigner holds one (machine, process) value per process",
        ),
        AssignerKind::Zookeeper => ("zookeeper", "ZooKeeper holds one node per ip:port"),
        AssignerKind::Etcd => ("etcd", "etcd holds one key per ip:port"),
        AssignerKind::Statefulset => ("statefulset", "a StatefulSet pod has one ordinal"),
    })
}

/// The error `error` (a top-level key's) as the space `name`'s: `layout.epoch` becomes
/// `spaces.order.layout.epoch`.
fn in_space(name: &str, error: ConfigError) -> ConfigError {
    match error {
        ConfigError::Invalid { key, reason } => ConfigError::Key {
            key: format!("spaces.{name}.{key}"),
            reason,
        },
        other => other,
    }
}

/// The cache file of space `name`: the configured one with `.<name>` appended, so that no two
/// spaces restart on each other's cached worker id.
fn cache_path_for(name: &str, path: Option<PathBuf>) -> Option<PathBuf> {
    path.map(|p| {
        let mut file = p.into_os_string();
        file.push(format!(".{name}"));
        PathBuf::from(file)
    })
}

/// Every space checked, in name order. `default` is the default space's worker settings: each
/// space registers the same range under the same assigner (a store records one range per
/// assigner), fitted to its own layout.
pub(super) fn settings(
    spaces: &BTreeMap<String, SpaceConfig>,
    top_generator: &GeneratorConfig,
    worker: &WorkerConfig,
    default: &WorkerSettings,
    ring: &RingConfig,
) -> Result<Vec<SpaceSettings>, ConfigError> {
    let mut out = Vec::with_capacity(spaces.len());
    for (name, space) in spaces {
        if !valid_space_name(name) {
            return Err(ConfigError::Key {
                key: format!("spaces.{name}"),
                reason: format!(
                    "a space name matches {SPACE_NAME_PATTERN} and is not `{DEFAULT_SPACE}` (the \
                     top-level generator's)"
                ),
            });
        }
        if let Some((kind, why)) = refusal(default.assigner) {
            return Err(ConfigError::Key {
                key: format!("spaces.{name}"),
                reason: format!(
                    "each space claims a worker id of its own, and {why}: `worker.assigner = \
                     \"{kind}\"` cannot serve spaces; use \"leased\" or \"disposable\""
                ),
            });
        }
        let layout = space.layout.build().map_err(|e| in_space(name, e))?;
        let generator = match &space.generator {
            Some(generator) => generator.checked().map_err(|e| in_space(name, e))?,
            None => top_generator.clone(),
        };
        let ring = ring.options(&layout).map_err(|e| in_space(name, e))?;
        let mut own = worker.settings(&layout).map_err(|e| in_space(name, e))?;
        if let Some(range) = default.server_range {
            range.check_layout(&layout).map_err(|e| ConfigError::Key {
                key: format!("spaces.{name}.layout"),
                reason: format!(
                    "the default space's worker id range {range} must fit every space's layout: \
                     {e}"
                ),
            })?;
        }
        own.server_range = default.server_range;
        own.fallback_range = None;
        own.lease.cache_path = cache_path_for(name, own.lease.cache_path.take());
        out.push(SpaceSettings {
            name: name.clone(),
            layout,
            generator,
            ring,
            worker: own,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    const LEASED: &str = "store = \"postgres://db/ids\"\n[worker]\nassigner = \"leased\"\n";

    #[test]
    fn each_space_has_its_own_layout_and_the_default_generator_unless_it_names_one() {
        let text = format!(
            "{LEASED}cache_file = \"lease.cache\"\n\
             [spaces.user.layout]\npreset = \"leaf\"\n\
             [spaces.order.layout]\npreset = \"snowflake\"\nepoch = \"2020-01-01\"\n\
             [spaces.order.generator]\nkind = \"snowflake\"\n"
        );
        let settings = parse(&text, &[]).unwrap().settings().unwrap();
        let names: Vec<_> = settings.spaces.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["order", "user"]);
        let order = &settings.spaces[0];
        assert_eq!(order.layout.name(), "snowflake");
        assert_eq!(order.layout.epoch_ms(), 1_577_836_800_000);
        assert_eq!(order.generator.kind.name(), "snowflake");
        assert_eq!(settings.spaces[1].generator.kind.name(), "cached");
        assert_eq!(
            settings.layout.name(),
            "baidu",
            "the default space is untouched"
        );
        let cache = |i: usize| settings.spaces[i].worker.lease.cache_path.clone();
        assert_eq!(
            cache(0).as_deref(),
            Some(std::path::Path::new("lease.cache.order"))
        );
        assert_ne!(cache(0), cache(1));
        assert_eq!(parse("", &[]).unwrap().settings().unwrap().spaces.len(), 0);
    }

    #[test]
    fn bad_names_unknown_keys_and_assigners_that_hold_one_id_per_process_are_refused() {
        let zk = "[worker]\nassigner = \"zookeeper\"\n[spaces.order.layout]\npreset = \"leaf\"";
        let bad_name = format!("{LEASED}[spaces.Order.layout]\npreset = \"leaf\"");
        let default = format!("{LEASED}[spaces.default.layout]\npreset = \"leaf\"");
        let unknown = format!("{LEASED}[spaces.order]\ncolour = \"blue\"");
        let epoch = format!("{LEASED}[spaces.order.layout]\npreset = \"leaf\"\nepoch = \"x\"");
        let cases: &[Refusal] = &[
            (
                zk,
                &[],
                "invalid config key `spaces.order`: each space claims a worker id of its own, and \
                 ZooKeeper holds one node per ip:port",
            ),
            (
                "[worker]\nassigner = \"static\"\nid = 3\n[spaces.order]",
                &[],
                "invalid config key `spaces.order`: each space claims a worker id of its own, and \
                 the static assigner holds the one `worker.id`",
            ),
            (&bad_name, &[], "invalid config key `spaces.Order`"),
            (&default, &[], "invalid config key `spaces.default`"),
            (
                &unknown,
                &[],
                "invalid config key `spaces.order.colour`: unknown field `colour`",
            ),
            (
                &epoch,
                &[],
                "invalid config key `spaces.order.layout.epoch`",
            ),
        ];
        assert_refused(cases);
    }
}
