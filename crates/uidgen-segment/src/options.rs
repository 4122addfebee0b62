//! [`SegmentOptions`]: the knobs of the segment service, with Leaf's values as defaults.

use std::time::Duration;

use uidgen_core::clock::saturating_millis;

use crate::error::{Result, SegmentError};

/// The longest [`SegmentOptions::wait_timeout`] and [`SegmentOptions::load_timeout`]: a caller
/// has long given up by then, and a load held longer only delays the retry.
pub const MAX_WAIT: Duration = Duration::from_secs(60);

/// The largest [`SegmentOptions::random_skip_max`]: a gap wider than this hides nothing more,
/// and only burns the tag's range faster.
pub const MAX_RANDOM_SKIP: u32 = 1_000_000;

/// How a [`SegmentService`](crate::SegmentService) behaves. Defaults follow Meituan Leaf.
///
/// ```
/// use std::time::Duration;
/// use uidgen_segment::SegmentOptions;
/// let options = SegmentOptions { max_step: 10_000_000, ..SegmentOptions::default() };
/// assert_eq!(options.prefetch_ratio, 0.1);
/// assert_eq!(options.segment_duration, Duration::from_secs(15 * 60));
/// assert_eq!(options.load_timeout, Duration::from_secs(5));
/// options.validate().unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SegmentOptions {
    /// Load the next segment once more than this share of the current one is used
    /// (default 0.1; Leaf: "prefetch after 10% is used"). 0 loads it at once, at switch.
    pub prefetch_ratio: f64,
    /// How long a caller waits for the segment in flight when both are used up, before
    /// [`BothSegmentsNotReady`](SegmentError::BothSegmentsNotReady) (default 1 s).
    pub wait_timeout: Duration,
    /// How often the tag list is re-read: new tags become usable, deleted ones are evicted
    /// (default 60 s, as Leaf).
    pub sync_interval: Duration,
    /// How often the tag list is retried while it has never loaded (default 1 s).
    pub init_retry_interval: Duration,
    /// After a failed load, wait this long (on the service's clock) before the next attempt
    /// (default 500 ms); meanwhile a caller that finds both segments used up gets the error at
    /// once, carrying the database's reason, rather than hammering a database that is down.
    pub retry_backoff: Duration,
    /// Dynamic step: a segment that lasted less than this doubles the next step; less than
    /// twice this keeps it; longer halves it (default 15 min, Leaf's `SEGMENT_DURATION`).
    pub segment_duration: Duration,
    /// Dynamic step never doubles above this (default 1,000,000, Leaf's `MAX_STEP`). A tag
    /// whose stored step is larger keeps its stored step.
    pub max_step: i64,
    /// Turn dynamic step off: every segment uses the stored step (default on).
    pub dynamic_step: bool,
    /// Largest `get_batch` (default 10,000).
    pub max_batch: usize,
    /// How long one database call (claiming a segment, listing or upserting tags) may take
    /// before it is abandoned (default 5 s). A database that stops answering without closing
    /// the connection (paused, or packets dropped) would otherwise hold a load, or the tag
    /// sync, forever. A timed-out claim counts as a failed load and is retried after
    /// `retry_backoff`; nothing it might have claimed is served.
    pub load_timeout: Duration,
    /// Largest [`lease`](crate::SegmentService::lease) (default 1,000,000): a range handed to a
    /// caller whole (Tinyid's client-side segment). A typo of a few zeros should not burn a
    /// tag's range.
    pub max_lease_size: i64,
    /// Non-continuous IDs (Leaf PR #118): before each ID, skip a uniformly random number of
    /// positions from 0 to this, so consecutive numbers do not reveal how many were issued
    /// between them (default 0: continuous, as Leaf). Each ID then uses up `1 + k / 2`
    /// positions on average: a segment lasts that much shorter, so dynamic step grows the
    /// step (and loads happen that much more often with a fixed one). IDs stay unique and
    /// increasing per caller; a gap never crosses the end of a segment, so it only shortens
    /// there. Batches are taken one ID at a time when this is on. At most
    /// [`MAX_RANDOM_SKIP`].
    pub random_skip_max: u32,
    /// Hand segment tails back (default on, issue 33 item 2): at
    /// [`shutdown_and_hand_back`](crate::SegmentService::shutdown_and_hand_back) the untouched
    /// rest of each buffered segment is written to `leaf_alloc_returned`, and every load looks
    /// there first, so a restart throws no numbers away. The price: a server that takes over a
    /// tail serves numbers below its previous segment, so a tag's IDs no longer increase per
    /// server across a switch (they stay unique). Off: Leaf's behaviour, a restart skips the
    /// rest of its segments and each server's IDs of a tag only go up.
    pub hand_back_tails: bool,
}

impl Default for SegmentOptions {
    fn default() -> Self {
        Self {
            prefetch_ratio: 0.1,
            wait_timeout: Duration::from_secs(1),
            sync_interval: Duration::from_secs(60),
            init_retry_interval: Duration::from_secs(1),
            retry_backoff: Duration::from_millis(500),
            segment_duration: Duration::from_secs(15 * 60),
            max_step: 1_000_000,
            dynamic_step: true,
            max_batch: 10_000,
            load_timeout: Duration::from_secs(5),
            max_lease_size: 1_000_000,
            random_skip_max: 0,
            hand_back_tails: true,
        }
    }
}

impl SegmentOptions {
    /// Check that the options can work.
    ///
    /// ```
    /// use uidgen_segment::SegmentOptions;
    /// let bad = SegmentOptions { prefetch_ratio: 1.5, ..SegmentOptions::default() };
    /// assert!(bad.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        let bad = |option: &'static str, reason: String| {
            Err(SegmentError::InvalidOption { option, reason })
        };
        let above_zero = || "must be greater than 0".to_owned();
        // Written so that NaN fails too.
        if !(self.prefetch_ratio >= 0.0 && self.prefetch_ratio < 1.0) {
            return bad(
                "prefetch_ratio",
                format!(
                    "must be at least 0 and below 1 (the share of a segment used before the next \
                     is loaded), got {}",
                    self.prefetch_ratio
                ),
            );
        }
        if self.sync_interval.is_zero() {
            return bad("sync_interval", above_zero());
        }
        if self.init_retry_interval.is_zero() {
            return bad("init_retry_interval", above_zero());
        }
        if self.segment_duration.is_zero() {
            return bad("segment_duration", above_zero());
        }
        if !(1..=uidgen_store::MAX_STEP).contains(&self.max_step) {
            return bad(
                "max_step",
                format!("must be between 1 and {}", uidgen_store::MAX_STEP),
            );
        }
        let max_ms = saturating_millis(MAX_WAIT);
        if self.wait_timeout > MAX_WAIT {
            return bad(
                "wait_timeout",
                format!("must be at most {max_ms} ms (a minute)"),
            );
        }
        if self.load_timeout.is_zero() || self.load_timeout > MAX_WAIT {
            return bad(
                "load_timeout",
                format!("must be between 1 and {max_ms} ms (a minute)"),
            );
        }
        if !(1..=uidgen_store::MAX_STEP).contains(&self.max_lease_size) {
            return bad(
                "max_lease_size",
                format!("must be 1 to {}", uidgen_store::MAX_STEP),
            );
        }
        if self.random_skip_max > MAX_RANDOM_SKIP {
            return bad(
                "random_skip_max",
                format!("must be 0 (off) to {MAX_RANDOM_SKIP}"),
            );
        }
        if self.max_batch == 0 {
            return bad("max_batch", "must be at least 1".to_owned());
        }
        Ok(())
    }

    /// `segment_duration` in milliseconds, saturating.
    pub(crate) fn segment_duration_ms(&self) -> u64 {
        saturating_millis(self.segment_duration)
    }

    /// `load_timeout` in milliseconds, saturating.
    pub(crate) fn load_timeout_ms(&self) -> u64 {
        saturating_millis(self.load_timeout)
    }

    /// `retry_backoff` in milliseconds, saturating.
    pub(crate) fn retry_backoff_ms(&self) -> u64 {
        saturating_millis(self.retry_backoff)
    }
}
