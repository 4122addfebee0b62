//! `[auth]`: per-caller tokens on the ID routes (issue 22). Off by default, so the zero-config
//! start stays open; tokens live in the store's `caller_token` table and are made through the
//! admin API (`POST /v1/admin/tokens`).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// How often a server re-reads the valid tokens unless `auth.refresh_secs` says otherwise: a
/// revoke takes effect on every server within this long (on the server that revoked, at once).
pub const DEFAULT_AUTH_REFRESH_SECS: u64 = 5;

/// The longest `auth.refresh_secs`: longer would leave a revoked token usable for too long.
pub const MAX_AUTH_REFRESH_SECS: u64 = 3600;

/// `[auth]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// Every ID route (HTTP and gRPC) asks for `Authorization: Bearer <caller token>` (default
    /// false: open).
    pub required: bool,
    /// How often the valid tokens are re-read from the store, in seconds (default 5): the
    /// bound on how long a revoked token keeps working on another server.
    pub refresh_secs: u64,
}

impl Default for AuthConfig {
    fn default() -> Self {
        Self {
            required: false,
            refresh_secs: DEFAULT_AUTH_REFRESH_SECS,
        }
    }
}

/// The `[auth]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["auth", "required"], Kind::Bool),
    (&["auth", "refresh_secs"], Kind::Int),
];

/// `[auth]` checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AuthSettings {
    /// Whether the ID routes ask for a caller token.
    pub required: bool,
    /// How often the valid tokens are re-read.
    pub refresh: Duration,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            required: false,
            refresh: Duration::from_secs(DEFAULT_AUTH_REFRESH_SECS),
        }
    }
}

impl AuthConfig {
    pub(crate) fn settings(&self) -> Result<AuthSettings, ConfigError> {
        if self.refresh_secs == 0 || self.refresh_secs > MAX_AUTH_REFRESH_SECS {
            return Err(invalid(
                "auth.refresh_secs",
                format!("must be between 1 and {MAX_AUTH_REFRESH_SECS} seconds"),
            ));
        }
        Ok(AuthSettings {
            required: self.required,
            refresh: Duration::from_secs(self.refresh_secs),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn auth_is_off_by_default_and_read_from_its_section_and_variables() {
        let settings = parse("", &[]).unwrap().settings().unwrap();
        assert!(!settings.auth.required);
        assert_eq!(settings.auth.refresh.as_secs(), 5);
        let on = parse("[auth]\nrequired = true\nrefresh_secs = 2", &[])
            .unwrap()
            .settings()
            .unwrap();
        assert!(on.auth.required);
        assert_eq!(on.auth.refresh.as_secs(), 2);
        let env = parse(
            "",
            &[
                ("UIDGEN_AUTH_REQUIRED", "true"),
                ("UIDGEN_AUTH_REFRESH_SECS", "9"),
            ],
        )
        .unwrap()
        .settings()
        .unwrap();
        assert!(env.auth.required);
        assert_eq!(env.auth.refresh.as_secs(), 9);
    }

    #[test]
    fn a_refresh_of_zero_or_hours_is_refused() {
        let cases: &[Refusal] = &[
            (
                "[auth]\nrefresh_secs = 0",
                &[],
                "invalid config key `auth.refresh_secs`: must be between 1 and 3600 seconds",
            ),
            (
                "[auth]\nrefresh_secs = 7200",
                &[],
                "invalid config key `auth.refresh_secs`",
            ),
        ];
        assert_refused(cases);
    }
}
