//! The one error type of `uidgen-segment`, with Leaf's numeric codes.

use uidgen_store::StoreError;

/// `Result` with [`SegmentError`] as the default error.
pub type Result<T, E = SegmentError> = std::result::Result<T, E>;

/// Everything that can go wrong when taking IDs from segments.
///
/// The first three variants mirror the codes Meituan Leaf returns in place of an ID
/// ([`code`](Self::code)): -1 not initialised, -2 unknown tag, -3 both segments not ready.
///
/// ```
/// use uidgen_segment::SegmentError;
/// let error = SegmentError::UnknownTag("order".into());
/// assert_eq!(error.code(), -2);
/// assert_eq!(
///     error.to_string(),
///     "unknown biz tag `order`: no leaf_alloc row; create it with upsert_tag (or wait for the \
///      next tag sync)"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    /// The service has not loaded its tag list from the database yet (Leaf's -1): the database
    /// was unreachable at start and the background sync has not succeeded since.
    #[error(
        "segment service not initialised: the tag list could not be loaded from the database yet \
         ({reason}); it is retried in the background"
    )]
    NotInitialised {
        /// Why the last attempt failed.
        reason: String,
    },

    /// No `leaf_alloc` row for this tag (Leaf's -2).
    #[error(
        "unknown biz tag `{0}`: no leaf_alloc row; create it with upsert_tag (or wait for the next \
         tag sync)"
    )]
    UnknownTag(String),

    /// The current segment is used up and the next one did not arrive in time (Leaf's -3).
    #[error("both segments of biz tag `{tag}` are not ready: {reason}")]
    BothSegmentsNotReady {
        /// The tag.
        tag: String,
        /// What is holding the next segment up, e.g. the last database error.
        reason: String,
    },

    /// The tag is empty, too long, or holds a character outside the tag alphabet
    /// ([`uidgen_core::TAG_PATTERN`]).
    #[error("invalid biz tag {tag:?}: {reason}")]
    InvalidTag {
        /// The tag as given (possibly truncated for display).
        tag: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A batch size of zero or above the configured maximum.
    #[error("invalid count {count}: ask for 1 to {max} IDs")]
    InvalidCount {
        /// The requested count.
        count: usize,
        /// The configured maximum batch.
        max: usize,
    },

    /// A lease size of zero or above the configured maximum.
    #[error("invalid lease size {size}: lease 1 to {max} IDs")]
    InvalidLeaseSize {
        /// The requested size.
        size: u64,
        /// The configured maximum ([`max_lease_size`](crate::SegmentOptions::max_lease_size)).
        max: i64,
    },

    /// A step outside the range the store accepts.
    #[error("invalid step {step}: use 1 to {max}")]
    InvalidStep {
        /// The requested step.
        step: i64,
        /// The largest step.
        max: i64,
    },

    /// The store refused an argument before reaching the database, e.g. a description longer
    /// than [`MAX_DESCRIPTION_LEN`](uidgen_store::MAX_DESCRIPTION_LEN). The reason names the
    /// field and its limit ("description is 300 characters long; at most 256 fit").
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// An option that cannot work (e.g. a prefetch ratio outside 0..1), named as the
    /// [`SegmentOptions`](crate::SegmentOptions) field.
    #[error("invalid segment option `{option}`: {reason}")]
    InvalidOption {
        /// The field, e.g. `prefetch_ratio`.
        option: &'static str,
        /// What is wrong and what would work.
        reason: String,
    },

    /// The database handed out a segment below one this service already served: `max_id` was
    /// moved backwards by hand. The segment is refused, because serving it would repeat IDs.
    #[error(
        "biz tag `{tag}`: the database returned segment [{start}, {end}) below the already served \
         max {served_max}; max_id was moved backwards, refusing to repeat IDs"
    )]
    MaxIdWentBackwards {
        /// The tag.
        tag: String,
        /// Start of the refused segment.
        start: i64,
        /// End of the refused segment.
        end: i64,
        /// The highest end served so far.
        served_max: i64,
    },

    /// The tag's next segment would pass the largest 64-bit ID: it can hand out no more.
    #[error(
        "biz tag `{tag}` is exhausted: its next segment would pass the largest 64-bit ID (max_id \
         {max_id}); use a new tag"
    )]
    TagExhausted {
        /// The tag.
        tag: String,
        /// The tag's stored `max_id`.
        max_id: i64,
    },

    /// The database did not answer within
    /// [`load_timeout`](crate::SegmentOptions::load_timeout). Nothing from the abandoned call
    /// is used.
    #[error(
        "the database did not answer within {waited_ms} ms while {action}; is it paused or \
         unreachable? (load_timeout)"
    )]
    TimedOut {
        /// What the service was doing, e.g. "claiming a segment".
        action: &'static str,
        /// How long it waited.
        waited_ms: u64,
    },

    /// A claimed segment holds no number of its database's residue: the step is below the
    /// group's delta (set by hand; the admin calls refuse it).
    #[error(
        "biz tag `{tag}`: segment [{start}, {end}) holds no number congruent to {remainder} mod \
         {delta}; raise the tag's step to at least {delta}"
    )]
    EmptySegment {
        /// The tag.
        tag: String,
        /// Start of the segment.
        start: i64,
        /// End of the segment.
        end: i64,
        /// The row's delta.
        delta: i64,
        /// The row's remainder.
        remainder: i64,
    },

    /// The databases of a segment group disagree about a tag (found at start-up, or when an
    /// admin call creates the tag): serving it could repeat numbers, so the group is refused.
    #[error("segment group `{group}`, biz tag `{tag}`: {problem}")]
    GroupInconsistent {
        /// The group's name.
        group: String,
        /// The tag.
        tag: String,
        /// What disagrees, and what to fix.
        problem: GroupProblem,
    },

    /// A group's configuration cannot work (no store, a tag in two groups, ...).
    #[error("invalid segment group `{group}`: {reason}")]
    InvalidGroup {
        /// The group's name.
        group: String,
        /// What is wrong and what would work.
        reason: String,
    },

    /// Every database of the tag's group failed or timed out.
    #[error(
        "segment group `{group}`: no database answered for biz tag `{tag}` ({tried} tried); \
         last error: {last}"
    )]
    GroupUnavailable {
        /// The group's name.
        group: String,
        /// The tag.
        tag: String,
        /// How many databases were tried.
        tried: usize,
        /// The last database's error.
        last: String,
    },

    /// A lease of a tag served from several databases (Tinyid's `delta` above 1): a contiguous
    /// range would hold the other databases' numbers. A claim already made is skipped, never
    /// served.
    #[error(
        "biz tag `{tag}` is served from several databases; its numbers are not contiguous, so it \
         cannot be leased as a range: take IDs instead"
    )]
    LeaseOfGroupTag {
        /// The tag.
        tag: String,
    },

    /// The service was shut down.
    #[error("segment service is shut down")]
    Shutdown,

    /// The store failed (unreachable database, SQL error, ...).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SegmentError {
    /// Leaf's numeric code for the error: -1 not initialised, -2 unknown tag, -3 both segments
    /// not ready; other errors (which Leaf has no code for) are -4.
    ///
    /// ```
    /// use uidgen_segment::SegmentError;
    /// let error = SegmentError::BothSegmentsNotReady { tag: "t".into(), reason: "r".into() };
    /// assert_eq!(error.code(), -3);
    /// ```
    pub fn code(&self) -> i64 {
        match self {
            Self::NotInitialised { .. } => -1,
            Self::UnknownTag(_) => -2,
            Self::BothSegmentsNotReady { .. } => -3,
            _ => -4,
        }
    }
}

/// How the databases of a group disagree about one tag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupProblem {
    /// A database's row has another delta than the group's size.
    #[error(
        "{database} holds delta {delta} but the group has {expected} databases; every row must \
         hold delta = {expected}"
    )]
    WrongDelta {
        /// The database (password redacted).
        database: String,
        /// Its delta.
        delta: i64,
        /// The group's size.
        expected: i64,
    },
    /// Two databases hold the same remainder: they would hand out the same numbers.
    #[error(
        "{first} and {second} both hold remainder {remainder}; each database needs its own \
         remainder, 0 to delta - 1"
    )]
    DuplicateRemainder {
        /// One database.
        first: String,
        /// The other.
        second: String,
        /// The shared remainder.
        remainder: i64,
    },
    /// A reachable database has no row while others have one: its remainder is missing.
    #[error(
        "{database} has no row while other databases of the group do; create it with the \
         missing remainder (or through the admin route, which creates every row)"
    )]
    MissingRow {
        /// The database without the row.
        database: String,
    },
}

/// Map the store's own unknown-tag, exhausted-tag and invalid-input errors onto ours, so callers
/// match one variant whichever layer noticed.
///
/// Every [`StoreError::InvalidInput`] is the caller's mistake, never the database's: it becomes
/// [`SegmentError::InvalidTag`] when `tag` itself breaks the store's tag rule, else
/// [`SegmentError::InvalidInput`] (a step, a description), never [`SegmentError::Store`], which
/// callers read as "the database failed".
pub(crate) fn from_store(tag: &str, error: StoreError) -> SegmentError {
    match error {
        StoreError::UnknownTag(tag) => SegmentError::UnknownTag(tag),
        StoreError::TagExhausted { tag, max_id, .. } => SegmentError::TagExhausted { tag, max_id },
        StoreError::InvalidInput(reason) if uidgen_store::validate_tag(tag).is_err() => {
            SegmentError::InvalidTag {
                tag: display_tag(tag),
                reason,
            }
        }
        StoreError::InvalidInput(reason) => SegmentError::InvalidInput(reason),
        other => SegmentError::Store(other),
    }
}

/// A tag shortened for messages: a 10 kB tag should not become a 10 kB log line.
pub(crate) fn display_tag(tag: &str) -> String {
    const SHOWN: usize = 64;
    if tag.chars().count() <= SHOWN {
        tag.to_owned()
    } else {
        let head: String = tag.chars().take(SHOWN).collect();
        format!("{head}…")
    }
}

#[cfg(test)]
mod tests {
    use uidgen_store::StoreError;

    use super::{SegmentError, from_store};

    #[test]
    fn store_input_errors_stay_input_errors_naming_the_field() {
        let refused = StoreError::InvalidInput(
            "description is 257 characters long; at most 256 fit".to_owned(),
        );
        let error = from_store("order", refused);
        assert!(matches!(error, SegmentError::InvalidInput(_)), "{error:?}");
        assert_eq!(error.code(), -4);
        assert_eq!(
            error.to_string(),
            "invalid input: description is 257 characters long; at most 256 fit"
        );
    }

    #[test]
    fn store_input_errors_about_a_bad_tag_are_invalid_tag() {
        let refused = StoreError::InvalidInput("biz tag is empty".to_owned());
        let error = from_store("", refused);
        assert!(
            matches!(error, SegmentError::InvalidTag { .. }),
            "{error:?}"
        );
    }

    #[test]
    fn other_store_errors_stay_store_errors() {
        let error = from_store("order", StoreError::LeaseContention { attempts: 3 });
        assert!(matches!(error, SegmentError::Store(_)), "{error:?}");
    }
}
