//! `[segment]`: Leaf segment mode, parsed into the library's
//! [`uidgen_segment::SegmentOptions`] (whose `validate` is the check) and the
//! sample tag.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uidgen_core::clock::saturating_millis;
use uidgen_segment::{SegmentError, SegmentOptions};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use super::segment_groups::SegmentGroupConfig;

/// `[segment]`: Leaf segment mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SegmentConfig {
    /// Serve `/api/segment/get/{key}` and `/v1/segments`.
    pub enabled: bool,
    /// A tag created at start if missing (Leaf's README example), empty for none.
    pub sample_tag: String,
    /// The sample tag's step.
    pub sample_step: u64,
    /// Re-read the tag list this often.
    pub sync_interval_secs: u64,
    /// Load the next segment once this share of the current one is used (Leaf: 0.1).
    pub prefetch_ratio: f64,
    /// How long a request waits for a segment in flight when both are used up (ms).
    pub wait_timeout_ms: u64,
    /// How long one database step (claim, tag list, upsert) may take before it counts as
    /// failed (ms): a paused database must not hold a tag's load forever.
    pub load_timeout_ms: u64,
    /// Dynamic step never grows above this (Leaf's `MAX_STEP`).
    pub max_step: i64,
    /// Size each segment by how fast the last one went (Leaf); off: always the stored step.
    pub dynamic_step: bool,
    /// Dynamic step's target lifetime of a segment, in seconds (Leaf's `SEGMENT_DURATION`).
    pub segment_duration_secs: u64,
    /// The largest range one segment lease may take (`POST /v1/segments/{tag}/lease`, gRPC
    /// `LeaseSegment`).
    pub max_lease_size: i64,
    /// Non-continuous IDs: skip a random 0 to this many numbers before each segment ID, so
    /// consecutive order numbers do not reveal volume (0: off, Leaf's continuous IDs).
    pub random_skip_max: u64,
    /// Hand the untouched rest of each buffered segment back at a clean stop (SIGTERM), and
    /// serve ranges handed back before new segments (`leaf_alloc_returned`): a restart throws
    /// no numbers away. Off: Leaf's behaviour, a restart skips them and each server's IDs of a
    /// tag only go up.
    pub hand_back_tails: bool,
    /// Tags whose numbers restart every day, served as `ORD20261125-000123` by
    /// `GET /v1/segments/{tag}/dated` from a tag per day (`orders:20261125`) created on demand.
    /// Set in the file only (a tag may hold a comma); none by default.
    pub dated_tags: Vec<String>,
    /// `[[segment.groups]]`: tags served from several databases (Tinyid's design); none by
    /// default.
    pub groups: Vec<SegmentGroupConfig>,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        let leaf = uidgen_segment::SegmentOptions::default();
        Self {
            enabled: true,
            sample_tag: "leaf-segment-test".into(),
            sample_step: 2000,
            sync_interval_secs: 60,
            prefetch_ratio: leaf.prefetch_ratio,
            wait_timeout_ms: saturating_millis(leaf.wait_timeout),
            load_timeout_ms: saturating_millis(leaf.load_timeout),
            max_step: leaf.max_step,
            dynamic_step: leaf.dynamic_step,
            segment_duration_secs: leaf.segment_duration.as_secs(),
            max_lease_size: leaf.max_lease_size,
            random_skip_max: leaf.random_skip_max.into(),
            hand_back_tails: leaf.hand_back_tails,
            dated_tags: Vec::new(),
            groups: Vec::new(),
        }
    }
}

/// The `[segment]` keys' variables (`[[segment.groups]]` is set in the file only).
pub(crate) const ENV: &[EnvKey] = &[
    (&["segment", "enabled"], Kind::Bool),
    (&["segment", "sample_tag"], Kind::Str),
    (&["segment", "sample_step"], Kind::Int),
    (&["segment", "sync_interval_secs"], Kind::Int),
    (&["segment", "prefetch_ratio"], Kind::Float),
    (&["segment", "wait_timeout_ms"], Kind::Int),
    (&["segment", "load_timeout_ms"], Kind::Int),
    (&["segment", "max_lease_size"], Kind::Int),
    (&["segment", "max_step"], Kind::Int),
    (&["segment", "dynamic_step"], Kind::Bool),
    (&["segment", "segment_duration_secs"], Kind::Int),
    (&["segment", "random_skip_max"], Kind::Int),
    (&["segment", "hand_back_tails"], Kind::Bool),
];

/// `[segment]` parsed: whether segment mode runs, the library's options, the sample tag and
/// the groups.
///
/// ```
/// use uidgen_server::config::Config;
/// let toml = "[segment]\nmax_step = 5000";
/// let segment = Config::from_toml_str(toml, std::iter::empty())?.settings()?.segment;
/// assert_eq!(segment.options.max_step, 5000);
/// # Ok::<(), uidgen_server::config::error::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SegmentSettings {
    /// Serve `/api/segment/get/{key}` and `/v1/segments`.
    pub enabled: bool,
    /// The library's options (`batch_cap` included), validated by the library.
    pub options: SegmentOptions,
    /// A tag created at start if missing, empty for none.
    pub sample_tag: String,
    /// The sample tag's step, checked by the store's rule for steps.
    pub sample_step: i64,
    /// `[[segment.groups]]`, checked by the library when the groups open their stores.
    pub groups: Vec<SegmentGroupConfig>,
    /// `segment.dated_tags`: each a tag whose day tags are valid tags.
    pub dated_tags: Vec<String>,
}

impl SegmentConfig {
    /// The section parsed; `batch_cap` bounds a batch as it does everywhere.
    pub(crate) fn settings(&self, batch_cap: usize) -> Result<SegmentSettings, ConfigError> {
        // The store's rule for a step; checked only when the tag will be created.
        let sample_step = i64::try_from(self.sample_step).unwrap_or(i64::MAX);
        if self.enabled {
            uidgen_store::validate_step(sample_step)
                .map_err(|e| invalid("segment.sample_step", e.to_string()))?;
        }
        let options = SegmentOptions {
            prefetch_ratio: self.prefetch_ratio,
            wait_timeout: Duration::from_millis(self.wait_timeout_ms),
            load_timeout: Duration::from_millis(self.load_timeout_ms),
            sync_interval: Duration::from_secs(self.sync_interval_secs),
            segment_duration: Duration::from_secs(self.segment_duration_secs),
            max_step: self.max_step,
            dynamic_step: self.dynamic_step,
            max_batch: batch_cap,
            max_lease_size: self.max_lease_size,
            // Past u32, past the library's bound too: it refuses it.
            random_skip_max: u32::try_from(self.random_skip_max).unwrap_or(u32::MAX),
            hand_back_tails: self.hand_back_tails,
            ..SegmentOptions::default()
        };
        options.validate().map_err(|error| match error {
            SegmentError::InvalidOption { option, reason } => invalid(key_of(option), reason),
            other => invalid("segment", other.to_string()),
        })?;
        // The library's rule for tags, on the longest day tag each will name.
        let last_day = uidgen_core::calendar::CivilDate::new(9999, 12, 31)
            .map_err(|e| invalid("segment.dated_tags", e.to_string()))?;
        for tag in &self.dated_tags {
            let day = uidgen_segment::day_tag(tag, last_day);
            uidgen_segment::validate_tag(tag)
                .and_then(|()| uidgen_segment::validate_tag(&day))
                .map_err(|e| {
                    invalid(
                        "segment.dated_tags",
                        format!("{e} (a dated tag's day tags add `:YYYYMMDD`)"),
                    )
                })?;
        }
        Ok(SegmentSettings {
            enabled: self.enabled,
            options,
            sample_tag: self.sample_tag.clone(),
            sample_step,
            groups: self.groups.clone(),
            dated_tags: self.dated_tags.clone(),
        })
    }
}

/// The key that sets a [`SegmentOptions`] field.
fn key_of(option: &str) -> &'static str {
    match option {
        "prefetch_ratio" => "segment.prefetch_ratio",
        "sync_interval" => "segment.sync_interval_secs",
        "segment_duration" => "segment.segment_duration_secs",
        "max_step" => "segment.max_step",
        "wait_timeout" => "segment.wait_timeout_ms",
        "load_timeout" => "segment.load_timeout_ms",
        "max_batch" => "batch_cap",
        "max_lease_size" => "segment.max_lease_size",
        "random_skip_max" => "segment.random_skip_max",
        _ => "segment",
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn segment_options_default_to_leaf_and_take_overrides() {
        let leaf = uidgen_segment::SegmentOptions::default();
        let d = parse("", &[]).unwrap();
        let options = d.settings().unwrap().segment.options;
        assert_eq!(
            (
                options.prefetch_ratio,
                options.wait_timeout,
                options.max_step
            ),
            (leaf.prefetch_ratio, leaf.wait_timeout, leaf.max_step)
        );
        assert_eq!(
            (options.dynamic_step, options.segment_duration),
            (leaf.dynamic_step, leaf.segment_duration)
        );
        assert_eq!(options.load_timeout, leaf.load_timeout);
        let c = parse(
            "[segment]\nprefetch_ratio = 0.25\nmax_step = 5000",
            &[
                ("UIDGEN_SEGMENT_WAIT_TIMEOUT_MS", "250"),
                ("UIDGEN_SEGMENT_LOAD_TIMEOUT_MS", "1500"),
                ("UIDGEN_SEGMENT_DYNAMIC_STEP", "false"),
                ("UIDGEN_SEGMENT_SEGMENT_DURATION_SECS", "60"),
                ("UIDGEN_SEGMENT_RANDOM_SKIP_MAX", "9"),
                ("UIDGEN_SEGMENT_HAND_BACK_TAILS", "false"),
            ],
        )
        .unwrap();
        let options = c.settings().unwrap().segment.options;
        assert_eq!(options.prefetch_ratio, 0.25);
        assert_eq!(options.max_step, 5000);
        assert_eq!(options.wait_timeout, std::time::Duration::from_millis(250));
        assert_eq!(options.load_timeout, std::time::Duration::from_millis(1500));
        assert!(!options.dynamic_step);
        assert_eq!(options.segment_duration, std::time::Duration::from_secs(60));
        assert_eq!(options.random_skip_max, 9);
        assert_eq!(leaf.random_skip_max, 0, "continuous unless asked");
        assert!(!options.hand_back_tails && leaf.hand_back_tails);
        options.validate().unwrap();
        let dated = parse("[segment]\ndated_tags = [\"orders\", \"invoices\"]", &[]).unwrap();
        assert_eq!(
            dated.settings().unwrap().segment.dated_tags,
            ["orders", "invoices"]
        );
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[
            (
                "[segment]\nprefetch_ratio = 1.0",
                &[],
                "invalid config key `segment.prefetch_ratio`: must be at least 0 and below 1",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_PREFETCH_RATIO", "NaN")],
                "invalid config key `segment.prefetch_ratio`",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_PREFETCH_RATIO", "a tenth")],
                "invalid config: UIDGEN_SEGMENT_PREFETCH_RATIO=\"a tenth\" is not a number",
            ),
            (
                "[segment]\nwait_timeout_ms = 600000",
                &[],
                "invalid config key `segment.wait_timeout_ms`: must be at most 60000",
            ),
            (
                "[segment]\nload_timeout_ms = 0",
                &[],
                "invalid config key `segment.load_timeout_ms`: must be between 1 and 60000",
            ),
            (
                "[segment]\nmax_step = 0",
                &[],
                "invalid config key `segment.max_step`: must be between 1 and",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_MAX_STEP", "-5")],
                "invalid config key `segment.max_step`",
            ),
            (
                "[segment]\nmax_lease_size = 0",
                &[],
                "invalid config key `segment.max_lease_size`: must be 1 to",
            ),
            (
                "[segment]\nsegment_duration_secs = 0",
                &[],
                "invalid config key `segment.segment_duration_secs`: must be greater than 0",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_DYNAMIC_STEP", "sometimes")],
                "UIDGEN_SEGMENT_DYNAMIC_STEP=\"sometimes\" is not true or false",
            ),
            (
                &format!("[segment]\ndated_tags = [\"{}\"]", "t".repeat(125)),
                &[],
                "invalid config key `segment.dated_tags`: ",
            ),
            (
                "[segment]\ndated_tags = [\" orders\"]",
                &[],
                "invalid config key `segment.dated_tags`: ",
            ),
            (
                "[segment]\nrandom_skip_max = 1000001",
                &[],
                "invalid config key `segment.random_skip_max`: must be 0 (off) to 1000000",
            ),
            (
                "",
                &[("UIDGEN_SEGMENT_RANDOM_SKIP_MAX", "99999999999")],
                "invalid config key `segment.random_skip_max`",
            ),
            (
                "[segment]\ndynamic_step = \"no\"",
                &[],
                "invalid config key `segment.dynamic_step`",
            ),
        ];
        assert_refused(cases);
    }
}
