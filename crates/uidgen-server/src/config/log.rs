//! `[log]`: how `uidgen serve` writes its log on stderr: plain text for a person or one JSON
//! object a line for a log collector (`log.format`, or `--log-format`), and whether each
//! request gets an access-log line (`log.access`, off by default: a busy server answers
//! millions of requests a second). Which events are written is `RUST_LOG`'s to say
//! ([`crate::logging`]).

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One line of text per event, `key=value` fields after the message.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `message` and the event's
    /// fields at the top level.
    Json,
}

impl LogFormat {
    /// The format's name, as the configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Json => "json",
        }
    }
}

/// `[log]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` (default) or `json`.
    pub format: LogFormat,
    /// One line per request (target `uidgen::access`): method, route, status, duration, IDs
    /// issued and the peer's address.
    pub access: bool,
}

/// The `[log]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["log", "format"], Kind::Str),
    (&["log", "access"], Kind::Bool),
];

#[cfg(test)]
mod tests {
    use super::LogFormat;
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn log_format_is_text_by_default_json_on_request_and_nothing_else() {
        let default = parse("", &[]).unwrap();
        assert_eq!(default.log.format, LogFormat::Text);
        assert!(!default.log.access);
        let json = parse("[log]\nformat = \"json\"\naccess = true", &[]).unwrap();
        assert_eq!(json.log.format, LogFormat::Json);
        assert!(json.log.access);
        let env = parse(
            "",
            &[("UIDGEN_LOG_FORMAT", "json"), ("UIDGEN_LOG_ACCESS", "true")],
        )
        .unwrap();
        assert_eq!(env.settings().unwrap().log.format, LogFormat::Json);
        assert!(env.settings().unwrap().log.access);
        let cases: &[Refusal] = &[
            (
                "[log]\nformat = \"xml\"",
                &[],
                "invalid config key `log.format`",
            ),
            ("", &[("UIDGEN_LOG_FORMAT", "JSON")], "`log.format`"),
            ("[log]\nlevel = \"info\"", &[], "level"),
        ];
        assert_refused(cases);
    }
}
