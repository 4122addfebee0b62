//! `[http]`: how long a client of the HTTP port may take to send a request, and how many
//! connections the port serves at once (issue 32). The defaults and the ranges are
//! [`ConnectionLimits`]' own; this section only names the keys.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use crate::connections::{ConnectionLimits, LimitError};

/// `[http]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// How long a request's head may take to arrive, in milliseconds (default 10,000); on
    /// HTTP/1 also how long a connection may stay idle between requests.
    pub header_read_timeout_ms: u64,
    /// How long a request's body may take to arrive after its head, in milliseconds
    /// (default 10,000).
    pub body_read_timeout_ms: u64,
    /// How many connections the HTTP port serves at once (default 900); more wait to be
    /// accepted.
    pub max_connections: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        let limits = ConnectionLimits::default();
        Self {
            header_read_timeout_ms: millis(limits.header_read_timeout),
            body_read_timeout_ms: millis(limits.body_read_timeout),
            max_connections: limits.max_connections,
        }
    }
}

/// `duration` in whole milliseconds (the defaults are far below `u64::MAX` of them).
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// The `[http]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["http", "header_read_timeout_ms"], Kind::Int),
    (&["http", "body_read_timeout_ms"], Kind::Int),
    (&["http", "max_connections"], Kind::Int),
];

impl HttpConfig {
    /// The limits, each checked by [`ConnectionLimits::validate`].
    pub(crate) fn settings(&self) -> Result<ConnectionLimits, ConfigError> {
        let limits = ConnectionLimits {
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            body_read_timeout: Duration::from_millis(self.body_read_timeout_ms),
            max_connections: self.max_connections,
        };
        limits.validate().map_err(|error| {
            let key = match error {
                LimitError::HeaderReadTimeout => "http.header_read_timeout_ms",
                LimitError::BodyReadTimeout => "http.body_read_timeout_ms",
                LimitError::MaxConnections => "http.max_connections",
            };
            invalid(key, error.to_string())
        })?;
        Ok(limits)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn http_limits_have_defaults_and_are_read_from_their_section_and_variables() {
        let settings = parse("", &[]).unwrap().settings().unwrap();
        assert_eq!(
            settings.http,
            crate::connections::ConnectionLimits::default()
        );
        let set = parse(
            "[http]\nheader_read_timeout_ms = 2000\nmax_connections = 5",
            &[("UIDGEN_HTTP_BODY_READ_TIMEOUT_MS", "3000")],
        )
        .unwrap()
        .settings()
        .unwrap();
        assert_eq!(set.http.header_read_timeout, Duration::from_secs(2));
        assert_eq!(set.http.body_read_timeout, Duration::from_secs(3));
        assert_eq!(set.http.max_connections, 5);
    }

    #[test]
    fn http_limits_out_of_range_are_refused_naming_the_key() {
        let cases: &[Refusal] = &[
            (
                "[http]\nheader_read_timeout_ms = 0",
                &[],
                "invalid config key `http.header_read_timeout_ms`: must be between 100 and 3600000 ms",
            ),
            (
                "",
                &[("UIDGEN_HTTP_BODY_READ_TIMEOUT_MS", "99")],
                "invalid config key `http.body_read_timeout_ms`",
            ),
            (
                "[http]\nmax_connections = 0",
                &[],
                "invalid config key `http.max_connections`: must be between 1 and 1000000",
            ),
        ];
        assert_refused(cases);
    }
}
