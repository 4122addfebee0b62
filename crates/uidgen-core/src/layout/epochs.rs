//! The presets' epochs and names, and JavaScript's largest exact integer: constants a caller
//! names without building a layout, kept apart from the preset constructors (which need
//! [`Layout`](super::Layout), while the layout module re-exports these).

/// The epoch of the default service layout: recent, so 28 bits of seconds last until 2034.
pub const DEFAULT_EPOCH: &str = "2026-01-01";
/// Twitter's Snowflake epoch, also Leaf's `twepoch`.
pub const TWITTER_EPOCH_MS: u64 = 1_288_834_974_657;
/// Baidu uid-generator's default epoch, 2016-05-20 in UTC+8. Its 28 bits of seconds ran out on
/// 2024-11-20 (Baidu issue [#100](https://github.com/baidu/uid-generator/issues/100)); kept only to
/// decode old IDs.
pub const BAIDU_LEGACY_EPOCH_MS: u64 = 1_463_673_600_000;
/// Vesta's epoch, 2015-01-01 00:00 in UTC+8.
pub const VESTA_EPOCH_MS: u64 = 1_420_041_600_000;
/// Sonyflake's default start time, 2014-09-01 00:00 UTC.
pub const SONYFLAKE_EPOCH_MS: u64 = 1_409_529_600_000;

/// Leaf: new milliseconds start at a random sequence below this bound.
pub const LEAF_RANDOM_START_BOUND: u64 = 100;

/// JavaScript's `Number.MAX_SAFE_INTEGER`, `2^53 - 1`: the largest integer a `Number` (an IEEE
/// double) holds exactly, and so the largest ID a browser reads back unchanged.
pub const JS_MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// Every preset name [`Layout::preset`](crate::Layout::preset) knows, in the order the docs
/// list them.
pub const PRESET_NAMES: [&str; 10] = [
    "baidu",
    "baidu_legacy",
    "baidu_continued",
    "snowflake",
    "leaf",
    "vesta_max_peak",
    "vesta_min_granularity",
    "sonyflake",
    "keyworker",
    "safe_js",
];
