//! `[generator]`: which generator serves IDs, and Snowflake's clock policy.

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

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

impl GeneratorKind {
    /// The kind's name, as the configuration spells it (`GET /v1/status` reports it).
    pub fn name(self) -> &'static str {
        match self {
            Self::Cached => "cached",
            Self::Default => "default",
            Self::Snowflake => "snowflake",
        }
    }
}

/// `[generator]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GeneratorConfig {
    /// cached, default or snowflake.
    pub kind: GeneratorKind,
    /// Snowflake only: start each millisecond at a random sequence below 100 (Leaf); unset,
    /// the layout's own default (on for `leaf`, as in Leaf; off elsewhere).
    pub random_sequence_start: Option<bool>,
    /// Snowflake only: a clock that moved back by at most this many milliseconds is waited
    /// out (Leaf's tolerance, 5 ms); 0 refuses every backward step. At most
    /// [`MAX_BACKWARD_MS`]: a request waits that long.
    pub max_backward_ms: u64,
}

/// The largest `generator.max_backward_ms`: the longest a request may wait out a clock step.
pub const MAX_BACKWARD_MS: u64 = 1_000;

impl Default for GeneratorConfig {
    fn default() -> Self {
        Self {
            kind: GeneratorKind::Cached,
            random_sequence_start: None,
            max_backward_ms: uidgen_core::DEFAULT_MAX_BACKWARD_MS,
        }
    }
}

/// The `[generator]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["generator", "kind"], Kind::Str),
    (&["generator", "random_sequence_start"], Kind::Bool),
    (&["generator", "max_backward_ms"], Kind::Int),
];

impl GeneratorConfig {
    /// The section checked: a clock-back tolerance of at most [`MAX_BACKWARD_MS`].
    pub(crate) fn checked(&self) -> Result<Self, ConfigError> {
        if self.max_backward_ms > MAX_BACKWARD_MS {
            return Err(invalid(
                "generator.max_backward_ms",
                format!(
                    "{} is above {MAX_BACKWARD_MS}: a request would wait that long for the \
                     clock; use 0 to {MAX_BACKWARD_MS} (Leaf: 5, 0 refuses every backward step)",
                    self.max_backward_ms
                ),
            ));
        }
        Ok(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn leafs_clock_back_tolerance_is_a_key_bounded_by_a_second() {
        let c = parse("", &[]).unwrap();
        assert_eq!(c.generator.max_backward_ms, 5, "Leaf's 5 ms");
        assert_eq!(c.generator.random_sequence_start, None, "the layout's own");
        let c = parse(
            "[generator]\nmax_backward_ms = 0",
            &[("UIDGEN_GENERATOR_RANDOM_SEQUENCE_START", "false")],
        )
        .unwrap();
        assert_eq!(c.generator.max_backward_ms, 0);
        assert_eq!(c.generator.random_sequence_start, Some(false));
        let c = parse("", &[("UIDGEN_GENERATOR_MAX_BACKWARD_MS", "1000")]).unwrap();
        assert_eq!(c.generator.max_backward_ms, 1000);
        assert_refused(&[
            (
                "[generator]\nmax_backward_ms = 1001",
                &[],
                "`generator.max_backward_ms`: 1001 is above 1000",
            ),
            (
                "",
                &[("UIDGEN_GENERATOR_MAX_BACKWARD_MS", "-5")],
                "`generator.max_backward_ms`: invalid value: integer `-5`",
            ),
        ]);
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[(
            "[generator]\nkind = \"fast\"",
            &[],
            "unknown variant `fast`",
        )];
        assert_refused(cases);
    }
}
