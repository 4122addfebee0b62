//! Monitoring snapshots: the facts Leaf's `/cache` page shows, as structs a service serialises.

use serde::Serialize;

/// One biz tag's buffer, as [`SegmentService::monitor`](crate::SegmentService::monitor) reports it.
///
/// ```
/// use uidgen_segment::{SegmentState, TagState};
/// let empty = SegmentState { value: 0, max: 0, step: 0, idle: 0 };
/// let state = TagState {
///     tag: "order".into(), init: false, next_ready: false, loading: false, pos: 0,
///     step: 0, min_step: 1, segments: [empty.clone(), empty], last_error: None,
///     loads: 0, load_failures: 0, reused_ranges: 0, reused_ids: 0,
/// };
/// let json = serde_json::to_string(&state).unwrap();
/// assert!(json.starts_with(r#"{"tag":"order","init":false,"next_ready":false"#));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TagState {
    /// The biz tag (Leaf's `key`).
    pub tag: String,
    /// The first segment has been loaded (Leaf's `initOk`).
    pub init: bool,
    /// The other segment holds a fresh segment (Leaf's `nextReady`).
    pub next_ready: bool,
    /// A load is in flight (Leaf's `threadRunning`).
    pub loading: bool,
    /// Index of the current segment, 0 or 1 (Leaf's `pos`).
    pub pos: usize,
    /// The step of the latest segment, after dynamic sizing.
    pub step: i64,
    /// The step stored in the table, the floor of the dynamic step (Leaf's `minStep`); 0 while
    /// unknown: a tag listed by a sync and not loaded yet (one created through this service's
    /// [`upsert_tag`](crate::SegmentService::upsert_tag) has it at once).
    pub min_step: i64,
    /// Both segments, indexed as `pos` (Leaf's `segments`).
    pub segments: [SegmentState; 2],
    /// Why the last load failed, until a load succeeds.
    pub last_error: Option<String>,
    /// Segments loaded from the database since the tag's buffer was created.
    pub loads: u64,
    /// Segment loads that failed (database error or timeout, unknown or exhausted tag, a
    /// `max_id` moved backwards) since the tag's buffer was created.
    pub load_failures: u64,
    /// Loads served from ranges a stopping server handed back (`leaf_alloc_returned`) instead
    /// of a new segment, since the tag's buffer was created.
    pub reused_ranges: u64,
    /// The IDs in those ranges.
    pub reused_ids: u64,
}

/// One segment of a [`TagState`]; all zero before the slot is first loaded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentState {
    /// The next ID this segment would hand out (`max` once used up).
    pub value: i64,
    /// Exclusive end of the segment.
    pub max: i64,
    /// The segment's length.
    pub step: i64,
    /// IDs left: `max - value` for a single-database tag; for a tag served from N databases
    /// (Tinyid's `delta`), this database's numbers left, about `(max - value) / N`.
    pub idle: i64,
}
