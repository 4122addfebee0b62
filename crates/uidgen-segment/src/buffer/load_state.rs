//! What a tag's control block keeps of its loads: what was served of each residue, which slot
//! a load fills, why the last one failed. Apart from the load task itself, which both the slow
//! path and the task read them from.

use uidgen_store::Residue;

use crate::error::SegmentError;

/// The highest `max_id` served of each residue a tag's segments had (one entry for a
/// single-database tag; one per database of a group).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ServedMax(Vec<(Residue, i64)>);

impl ServedMax {
    /// The highest `max_id` served of every residue that shares a number with `residue`
    /// (`i64::MIN` when none): a claim of `residue` starting below it could repeat a number.
    pub(super) fn floor(&self, residue: Residue) -> i64 {
        self.0
            .iter()
            .filter(|(served, _)| served.overlaps(&residue))
            .map(|&(_, max)| max)
            .max()
            .unwrap_or(i64::MIN)
    }

    pub(super) fn record(&mut self, residue: Residue, max_id: i64) {
        match self.0.iter_mut().find(|(served, _)| *served == residue) {
            Some(entry) => entry.1 = entry.1.max(max_id),
            None => self.0.push((residue, max_id)),
        }
    }
}

/// Which slot a load fills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LoadKind {
    /// The first segment, into the current slot.
    Init,
    /// The next segment, into the other slot.
    Next,
}

/// Why the last load failed, kept until a load succeeds; callers who find both segments used up
/// get it back as a typed error.
#[derive(Debug, Clone)]
pub(super) struct LoadFailure {
    pub(super) kind: FailureKind,
    /// The error's message, for monitoring (`TagState::last_error`).
    pub(super) message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailureKind {
    /// The tag has no row (Leaf's -2).
    UnknownTag,
    /// The tag's next segment would pass `i64::MAX`.
    Exhausted { max_id: i64 },
    /// Anything else (database down or slow, `max_id` moved backwards): Leaf's -3.
    Other,
}

impl LoadFailure {
    pub(super) fn new(error: &SegmentError) -> Self {
        let kind = match error {
            SegmentError::UnknownTag(_) => FailureKind::UnknownTag,
            SegmentError::TagExhausted { max_id, .. } => FailureKind::Exhausted { max_id: *max_id },
            _ => FailureKind::Other,
        };
        Self {
            kind,
            message: error.to_string(),
        }
    }

    pub(super) fn to_error(&self, tag: &str) -> SegmentError {
        match self.kind {
            FailureKind::UnknownTag => SegmentError::UnknownTag(tag.to_owned()),
            FailureKind::Exhausted { max_id } => SegmentError::TagExhausted {
                tag: tag.to_owned(),
                max_id,
            },
            FailureKind::Other => SegmentError::BothSegmentsNotReady {
                tag: tag.to_owned(),
                reason: format!("loading a segment failed: {}", self.message),
            },
        }
    }
}
