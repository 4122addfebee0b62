//! The log: which events (`RUST_LOG`, checked before anything starts) and how they are written
//! (`log.format`, [`LogFormat`]), on stderr so that stdout stays the commands' output.
//!
//! A `RUST_LOG` the filter cannot read, or a bare word that is almost a level (`infoo`,
//! `wran`), is refused: tracing-subscriber reads `infoo` as "every level of the target
//! `infoo`", which silences every other line without a word.

use tracing_subscriber::EnvFilter;

use crate::config::log::LogFormat;

/// The variable the filter is read from.
pub const FILTER_VAR: &str = "RUST_LOG";

/// The filter when `RUST_LOG` is unset or empty.
pub const DEFAULT_FILTER: &str = "info";

/// The target of the access log's lines (`log.access`): `RUST_LOG=info,uidgen::access=off`
/// keeps the rest.
pub const ACCESS_TARGET: &str = "uidgen::access";

const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];

/// Why the log could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// `RUST_LOG` is not a filter the log can use.
    #[error(
        "{FILTER_VAR}={value:?} is not a log filter: {reason}; write levels and targets as in \
         {FILTER_VAR}=info or {FILTER_VAR}=warn,uidgen_server=debug, or unset it (default: \
         {DEFAULT_FILTER})"
    )]
    Filter {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Another logger was installed first (a second call in one process).
    #[error("the log was already set up in this process")]
    AlreadySet,
}

/// The filter `value` (`RUST_LOG`'s text) describes; `None` or blank is [`DEFAULT_FILTER`].
///
/// ```
/// use uidgen_server::logging::filter;
/// assert!(filter(Some("warn,uidgen_server=debug")).is_ok());
/// let refused = filter(Some("infoo")).unwrap_err().to_string();
/// assert!(refused.starts_with(r#"RUST_LOG="infoo" is not a log filter: `infoo` is no level"#));
/// assert!(refused.contains("did you mean `info`?"));
/// ```
pub fn filter(value: Option<&str>) -> Result<EnvFilter, LogError> {
    let text = value.map(str::trim).filter(|v| !v.is_empty());
    let Some(text) = text else {
        return Ok(EnvFilter::new(DEFAULT_FILTER));
    };
    let refuse = |reason: String| LogError::Filter {
        value: text.to_owned(),
        reason,
    };
    for directive in text.split(',').map(str::trim) {
        if let Some(near) = almost_a_level(directive) {
            return Err(refuse(format!(
                "`{directive}` is no level (trace, debug, info, warn, error, off) but reads as \
                 a target, which would silence every other line (did you mean `{near}`?)"
            )));
        }
    }
    EnvFilter::builder()
        .with_regex(false)
        .parse(text)
        .map_err(|e| refuse(e.to_string()))
}

/// The level a bare directive (no `=`, no span filter, no path) is a typo of, if any.
fn almost_a_level(directive: &str) -> Option<&'static str> {
    if directive.is_empty() || directive.contains(['=', '[', ':', '_', '-']) {
        return None;
    }
    let lower = directive.to_ascii_lowercase();
    if LEVELS.contains(&lower.as_str()) || lower.parse::<u8>().is_ok() {
        return None;
    }
    LEVELS
        .into_iter()
        .find(|level| strsim::damerau_levenshtein(&lower, level) <= 2 && lower.len() <= 7)
}

/// Install the process's logger: `RUST_LOG`'s filter, `format`, on stderr (coloured only for a
/// person at a terminal).
pub fn init(format: LogFormat) -> Result<(), LogError> {
    let value = std::env::var(FILTER_VAR).ok();
    let filter = filter(value.as_deref())?;
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.with_ansi(ansi).try_init(),
        // Fields at the top level, as log collectors index them; no colour codes in JSON.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .try_init(),
    };
    installed.map_err(|_| LogError::AlreadySet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_targets_and_directives_are_taken() {
        for ok in [
            "info",
            "WARN",
            "debug,hyper=off",
            "uidgen_server=debug",
            "sqlx",
            "tower",
            "h2",
            "3",
            "",
            "  ",
            "uidgen::access=off,info",
        ] {
            assert!(filter(Some(ok)).is_ok(), "{ok}");
        }
    }

    #[test]
    fn a_level_mistyped_or_a_broken_directive_is_refused() {
        for (bad, near) in [
            ("infoo", Some("info")),
            ("wran", Some("warn")),
            ("debgu", Some("debug")),
            ("warn,eror", Some("error")),
            ("uidgen=verbose", None),
        ] {
            let error = filter(Some(bad)).unwrap_err().to_string();
            assert!(error.contains("RUST_LOG="), "{error}");
            if let Some(near) = near {
                assert!(
                    error.contains(&format!("did you mean `{near}`?")),
                    "{error}"
                );
            }
        }
    }
}
