//! `UIDGEN_…` environment variables: which variable sets which key (each section lists its
//! own keys in its `ENV`), how its text is read, and the refusal of an unknown `UIDGEN_…`
//! variable, a likely typo.

use super::env_key::{EnvKey, Kind};
use super::error::ConfigError;

/// The top-level keys' variables (`Config`'s own fields). Listed here rather than beside
/// `Config`, which reads the environment through this file: the list would import it back.
const TOP_LEVEL: &[EnvKey] = &[
    (&["listen"], Kind::Str),
    (&["grpc_listen"], Kind::Str),
    (&["store"], Kind::Str),
    (&["state_dir"], Kind::Str),
    (&["admin_token"], Kind::Str),
    (&["batch_cap"], Kind::Int),
    (&["runway_warning_days"], Kind::Int),
];

/// Every section's keys, in the order `--help` and the docs list them. A section's own file
/// lists its keys (`ENV`), next to their struct, default and check.
const SECTIONS: &[&[EnvKey]] = &[
    TOP_LEVEL,
    super::layout::ENV,
    super::generator::ENV,
    super::worker::ENV,
    super::zookeeper::ENV,
    super::etcd::ENV,
    super::statefulset::ENV,
    super::ring::ENV,
    super::segment::ENV,
    super::sharded::ENV,
    super::auth::ENV,
    super::http::ENV,
    super::tls::ENV,
    super::log::ENV,
    super::clock_watch::ENV,
    super::ordered::ENV,
    super::mask::ENV,
];

/// Every key an environment variable sets, and how its text is read. The variable is
/// [`env_name`] of the path (`segment.max_step`: `UIDGEN_SEGMENT_MAX_STEP`) unless
/// [`ENV_SHORT_NAMES`] names it.
pub(crate) fn env_key_paths() -> impl Iterator<Item = EnvKey> {
    SECTIONS.iter().flat_map(|section| section.iter().copied())
}

/// Sections whose variables use a shorter word than the section's name.
const ENV_SECTION_WORDS: &[(&str, &str)] = &[("zookeeper", "ZK")];

/// Keys set so often that their variable drops the key's last word.
const ENV_SHORT_NAMES: &[(&str, &[&str])] = &[
    ("UIDGEN_LAYOUT", &["layout", "preset"]),
    ("UIDGEN_GENERATOR", &["generator", "kind"]),
];

/// The variable that sets the key at `path`: `UIDGEN_` and the path upper-cased, joined by `_`
/// (`[zookeeper]` keys are `UIDGEN_ZK_…`).
///
/// ```
/// use uidgen_server::config::env::env_name;
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

/// The variable `uidgen health --url` is read from when absent.
pub const ENV_URL: &str = "UIDGEN_HEALTH_URL";

/// `UIDGEN_…` variables that are not configuration keys but are read elsewhere, so that start-up
/// does not refuse them as typos: the config file's path (`--config`), a container's host and
/// port for `worker_node` rows, and the variables of scripts, benches and tests.
pub const ENV_NOT_CONFIG: &[&str] = &[
    "UIDGEN_CONFIG",
    // `uidgen health --url`: which server to ask.
    ENV_URL,
    uidgen_worker::ENV_HOST,
    uidgen_worker::ENV_PORT,
    // The statefulset assigner: the pod's ordinal, when not read from its hostname.
    uidgen_k8s::ENV_POD_ORDINAL,
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
/// The configuration keys' variables come from each section's `ENV`, so a new key is known at once.
pub(crate) fn unknown_env<'a>(
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
pub(crate) fn env_keys() -> Vec<(String, &'static [&'static str], Kind)> {
    env_key_paths()
        .map(|(path, kind)| (env_name(path), path, kind))
        .collect()
}

/// The environment variables that override configuration keys, for `--help` and docs.
pub fn env_overrides() -> impl Iterator<Item = (String, String)> {
    env_keys()
        .into_iter()
        .map(|(env, path, _)| (env, path.join(".")))
}

/// Set every key that a variable of `env` names in `table`, read as the key's kind; refuse an
/// unknown `UIDGEN_…` variable.
pub(crate) fn apply(
    table: &mut toml::Table,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<(), ConfigError> {
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
        set_path(table, path, value)?;
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::Config;
    use crate::config::test_support::{Refusal, assert_refused, parse};

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
    fn every_config_key_has_an_environment_variable() {
        // JSON keeps unset options as null, so keys without a default are listed too.
        let defaults = serde_json::to_value(Config::default()).unwrap();
        let mut keys = Vec::new();
        key_paths(&defaults, &mut Vec::new(), &mut keys);
        let mut overridden: Vec<String> = env_key_paths().map(|(p, _)| p.join(".")).collect();
        keys.sort();
        overridden.sort();
        assert_eq!(keys, overridden, "add the new key to ENV_KEYS");
        let names: Vec<String> = env_overrides().map(|(name, _)| name).collect();
        for name in [
            "UIDGEN_LISTEN",
            "UIDGEN_LAYOUT",
            "UIDGEN_GENERATOR",
            "UIDGEN_WORKER_RANGE",
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
    fn the_old_names_of_worker_range_are_refused_naming_the_key() {
        // No second name before 1.0: `worker.id_range` and `UIDGEN_WORKER_ID_RANGE` are refused
        // as unknown (not ignored), each pointing at `worker.range`.
        let cases: &[Refusal] = &[
            (
                "",
                &[("UIDGEN_WORKER_ID_RANGE", "5-9")],
                "unknown environment variable UIDGEN_WORKER_ID_RANGE; did you mean \
                 UIDGEN_WORKER_RANGE?",
            ),
            (
                "[worker]\nid_range = \"5-9\"",
                &[],
                "invalid config key `worker.id_range`: unknown field `id_range`, expected one of",
            ),
            ("[worker]\nid_range = \"5-9\"", &[], "`range`"),
        ];
        assert_refused(cases);
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
}
