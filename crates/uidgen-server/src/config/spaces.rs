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

use super::error::ConfigError;
use super::generator::GeneratorConfig;
use super::layout::LayoutConfig;
use super::ring::RingConfig;
use super::worker::{AssignerKind, WorkerConfig, WorkerSettings};

/// The name the top-level generator is served under (`/v1/spaces/default/ids`) and its worker
/// ids are leased under (the store's); no `[spaces.<name>]` may take it.
pub const DEFAULT_SPACE: &str = uidgen_store::DEFAULT_SPACE;

/// The longest space name: what the store's lease key holds.
pub const MAX_SPACE_NAME_LEN: usize = uidgen_store::MAX_SPACE_LEN;

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
/// # Ok::<(), uidgen_server::config::error::ConfigError>(())
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

/// Whether a space's worker field can serve what it must: `key` names what to change, `layout`
/// and `worker` are the space's (the default space's too), `default_layout` the top-level one.
///
/// - `leased`, with `worker.fleet_size`: each server holds one lease in every space, and a
///   worker id need only be unique within its space (leases are per space), so each space
///   needs as many worker ids as there are servers, whatever the other spaces have.
/// - `disposable`: every start of every space takes a fresh row from the one `worker_node`
///   counter, so a space with fewer worker ids than the default space runs out first (a
///   2-bit space once the counter passes 3, however few of those starts were its own).
pub(super) fn check_worker_field(
    key: &str,
    worker: &WorkerSettings,
    layout: &Layout,
    default_layout: &Layout,
) -> Result<(), ConfigError> {
    let refused = |reason: String| ConfigError::Key {
        key: key.to_owned(),
        reason,
    };
    let ids = || super::ranges::effective_server_range(worker, layout).map(|(ids, _)| ids);
    match (worker.assigner, worker.fleet_size) {
        (AssignerKind::Leased, Some(fleet)) => {
            let ids = ids()?;
            if ids.count() < fleet {
                return Err(refused(format!(
                    "its {} worker ids ({ids}) cannot serve `worker.fleet_size = {fleet}` \
                     servers, each of which leases one worker id in every space: widen the \
                     layout's worker field (or `worker.range`) to at least {fleet} ids, or lower \
                     `worker.fleet_size`",
                    ids.count()
                )));
            }
            Ok(())
        }
        (AssignerKind::Disposable, _) => {
            let ids = ids()?;
            let (default, _) = super::ranges::effective_server_range(worker, default_layout)?;
            if ids.count() < default.count() {
                return Err(refused(format!(
                    "its {} worker ids ({ids}) are fewer than the default space's {} \
                     ({default}): the disposable assigner takes a fresh worker id from one \
                     `worker_node` counter for every start of every space, so this space would \
                     run out first; give it as many worker bits as the default layout, or use \
                     `worker.assigner = \"leased\"`, which leases worker ids per space",
                    ids.count(),
                    default.count()
                )));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Every space checked, in name order. `default` is the default space's worker settings: each
/// space registers the same range under the same assigner (a store records one range per
/// assigner), fitted to its own layout, and leases in its own name.
pub(super) fn settings(
    spaces: &BTreeMap<String, SpaceConfig>,
    top_generator: &GeneratorConfig,
    worker: &WorkerConfig,
    default: &WorkerSettings,
    default_layout: &Layout,
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
        own.space.clone_from(name);
        check_worker_field(
            &format!("spaces.{name}.layout"),
            &own,
            &layout,
            default_layout,
        )?;
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

    /// A 2-bit space as in issue 36: Baidu's custom widths with 2 worker bits.
    const SMALL: &str = "[spaces.small.layout]\ntime_bits = 41\nworker_bits = 2\nseq_bits = 20\n";

    #[test]
    fn each_space_leases_in_its_own_name_and_a_fleet_that_fits_is_accepted() {
        let text =
            format!("{LEASED}fleet_size = 4\n{SMALL}[spaces.order.layout]\npreset = \"leaf\"\n");
        let settings = parse(&text, &[]).unwrap().settings().unwrap();
        assert_eq!(settings.worker.space, super::DEFAULT_SPACE);
        assert_eq!(settings.worker.fleet_size, Some(4));
        let names: Vec<_> = settings
            .spaces
            .iter()
            .map(|s| s.worker.space.as_str())
            .collect();
        assert_eq!(names, ["order", "small"]);
        let env = parse(LEASED, &[("UIDGEN_WORKER_FLEET_SIZE", "3")]).unwrap();
        assert_eq!(env.settings().unwrap().worker.fleet_size, Some(3));
        // Disposable spaces as wide as the default one start.
        let wide = "[worker]\nassigner = \"disposable\"\n[spaces.user.layout]\npreset = \"baidu\"\n\
                    epoch = \"2020-01-01\"\n";
        assert_eq!(
            parse(wide, &[]).unwrap().settings().unwrap().spaces.len(),
            1
        );
    }

    #[test]
    fn a_worker_field_too_narrow_for_the_fleet_or_the_shared_counter_is_refused() {
        let too_many = format!("{LEASED}fleet_size = 5\n{SMALL}");
        let default_too_narrow =
            format!("{LEASED}fleet_size = 2000\n[layout]\npreset = \"snowflake\"\n");
        let zero = format!("{LEASED}fleet_size = 0\n");
        let disposable = format!("[worker]\nassigner = \"disposable\"\n{SMALL}");
        let disposable_leaf = "[worker]\nassigner = \"disposable\"\n[spaces.user.layout]\n\
                               preset = \"leaf\"\n";
        let cases: &[Refusal] = &[
            (
                &too_many,
                &[],
                "invalid config key `spaces.small.layout`: its 4 worker ids (0-3) cannot serve \
                 `worker.fleet_size = 5` servers, each of which leases one worker id in every \
                 space",
            ),
            (
                &default_too_narrow,
                &[],
                "invalid config key `worker.fleet_size`: its 1024 worker ids (0-1023) cannot \
                 serve `worker.fleet_size = 2000` servers",
            ),
            (
                &zero,
                &[],
                "invalid config key `worker.fleet_size`: must be at least 1",
            ),
            (
                &disposable,
                &[],
                "invalid config key `spaces.small.layout`: its 3 worker ids (1-3) are fewer than \
                 the default space's 4194303 (1-4194303): the disposable assigner takes a fresh \
                 worker id from one `worker_node` counter for every start of every space",
            ),
            (
                disposable_leaf,
                &[],
                "invalid config key `spaces.user.layout`: its 1023 worker ids (1-1023) are fewer",
            ),
        ];
        assert_refused(cases);
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
