//! The one error of the configuration: a key and why its value is refused.

use std::path::PathBuf;

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
    /// uidgen reads ([`ENV_NOT_CONFIG`](super::env::ENV_NOT_CONFIG)): a typo would otherwise be ignored without a word.
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
