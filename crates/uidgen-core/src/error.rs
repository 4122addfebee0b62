//! The one error type of `uidgen-core`.

use crate::fields::FieldKind;

/// Everything that can go wrong while laying out, generating or decoding an ID.
///
/// Messages are written for the person operating the service: they say what happened and, where
/// there is one, what to change.
///
/// ```
/// use uidgen_core::UidError;
/// let err = UidError::ClockMovedBackwards { by_ms: 12 };
/// assert_eq!(err.to_string(), "clock moved backwards by 12 ms; refusing to issue IDs");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UidError {
    /// The field widths of a layout with a sign bit (which is bit 63) do not add up to 64.
    #[error("layout bits must sum to 64, but the fields sum to {total}")]
    BitsDoNotSumTo64 {
        /// The sum of all field widths (u64: no sum of u32 widths can wrap it).
        total: u64,
    },
    /// The field widths of a layout add up to more than the 64 bits of an ID.
    #[error("layout fields sum to {total} bits, more than the 64 an ID has; narrow a field")]
    LayoutTooWide {
        /// The sum of all field widths (u64: no sum of u32 widths can wrap it).
        total: u64,
    },
    /// A layout field that must have at least one bit has none, or a field is wider than allowed.
    #[error("layout field `{field}` has invalid width {bits}: {reason}")]
    InvalidFieldWidth {
        /// The field.
        field: FieldKind,
        /// Its width in bits.
        bits: u32,
        /// Why the width is invalid.
        reason: &'static str,
    },
    /// A layout names the same field twice, or a required field is missing.
    #[error("layout is malformed: {0}")]
    MalformedLayout(&'static str),
    /// The layout's epoch lies after the current time, so no ID could carry a non-negative time.
    #[error(
        "epoch {epoch_ms} ms lies in the future (now is {now_ms} ms); pick an epoch in the past"
    )]
    EpochInFuture {
        /// The epoch in milliseconds since the Unix epoch.
        epoch_ms: u64,
        /// The clock's reading when the check was made.
        now_ms: u64,
    },
    /// An epoch string could not be parsed.
    #[error(
        "cannot parse epoch {input:?}: {reason} (expected e.g. \"2016-05-20\", \
         \"2016-05-20+08:00\" or \"2016-05-20T00:00:00Z\")"
    )]
    InvalidEpoch {
        /// What was given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A calendar date is impossible or outside 1970-01-01 to 9999-12-31.
    #[error("invalid date {input}: {reason}; dates run from 1970-01-01 to 9999-12-31")]
    InvalidDate {
        /// The date as given (or as computed, `YYYY-MM-DD`).
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A time zone could not be understood.
    #[error(
        "unknown time zone {input:?}: {reason} (expected \"UTC\", an offset such as \"+08:00\", \
         or an IANA name such as \"Asia/Shanghai\")"
    )]
    InvalidZone {
        /// What was given (at most 64 characters of it).
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value is too large for its field.
    #[error("{field} value {value} does not fit in {bits} bits (maximum {max})")]
    FieldOverflow {
        /// The field.
        field: FieldKind,
        /// The offending value.
        value: u64,
        /// The field's width.
        bits: u32,
        /// The largest value the field holds.
        max: u64,
    },
    /// The worker id does not fit the layout's worker field.
    #[error(
        "worker id {worker_id} exceeds the layout's maximum {max}; widen the worker bits or use a \
         smaller id"
    )]
    WorkerIdOverflow {
        /// The worker id given.
        worker_id: u64,
        /// The largest worker id the layout holds.
        max: u64,
    },
    /// The clock reads earlier than the last time an ID was issued.
    #[error("clock moved backwards by {by_ms} ms; refusing to issue IDs")]
    ClockMovedBackwards {
        /// How far back, in milliseconds.
        by_ms: u64,
    },
    /// The clock reads earlier than the layout's epoch.
    #[error(
        "clock reads {now_ms} ms, before the layout's epoch {epoch_ms} ms; refusing to issue IDs"
    )]
    ClockBeforeEpoch {
        /// The clock's reading.
        now_ms: u64,
        /// The layout's epoch.
        epoch_ms: u64,
    },
    /// The clock reads earlier than the first instant a continued layout issues at
    /// ([`Layout::continued`](crate::Layout::continued)): the layout it continues may still be
    /// issuing there.
    #[error(
        "clock reads {now_ms} ms, before {start_ms} ms where this layout's IDs begin (earlier \
         time belongs to the layout it continues); refusing to issue IDs"
    )]
    ClockBeforeStart {
        /// The clock's reading.
        now_ms: u64,
        /// Where the layout's first time value begins, ms since the Unix epoch.
        start_ms: u64,
    },
    /// A time given to build an ID from (`make`) lies before the layout's epoch: no ID of this
    /// layout holds it.
    #[error(
        "time {} is before the layout's epoch {}: no ID of this layout holds it; give a later \
         time, or a layout whose epoch is earlier",
        crate::civil::format_iso8601(*time_ms),
        crate::civil::format_iso8601(*epoch_ms)
    )]
    TimeBeforeEpoch {
        /// The time given, in milliseconds since the Unix epoch.
        time_ms: u64,
        /// The layout's epoch.
        epoch_ms: u64,
    },
    /// The time field has no room left: every value up to its maximum has been used.
    #[error(
        "timestamp bits exhausted: {elapsed} time units since the epoch exceed the layout's \
         maximum {max}; move the epoch forward or widen the time bits"
    )]
    TimestampExhausted {
        /// Units elapsed since the epoch (or the unit that was about to be used).
        elapsed: u64,
        /// The largest time value the layout holds.
        max: u64,
    },
    /// An ID given to decode is not one this layout can have produced.
    #[error("malformed id {id}: {reason}")]
    MalformedId {
        /// The ID as given.
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A friendly form of an ID (base36, base62, dated) could not be read back.
    #[error("malformed {form} form {input:?}: {reason}")]
    MalformedForm {
        /// The form's name: `base36`, `base62`, `decimal` or `dated`.
        form: &'static str,
        /// The text given (at most 64 characters of it).
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A number does not fit the digits of a dated form.
    #[error(
        "number {value} needs more than the form's {digits} digits; widen the form or start a \
         new day's count"
    )]
    FormOverflow {
        /// The number.
        value: u64,
        /// The form's digits.
        digits: u32,
    },
    /// A batch size is zero or above the cap.
    #[error("count {requested} is out of range; ask for 1 to {max} IDs")]
    InvalidCount {
        /// The requested count.
        requested: usize,
        /// The largest count accepted.
        max: usize,
    },
    /// The ring buffer had no ID to take (Baidu's default reject-take policy).
    #[error(
        "ring buffer is empty: padding has not caught up ({0}); retry or use the waiting \
         reject-take policy"
    )]
    RingEmpty(String),
    /// The worker id may not stamp this time unit yet: its lease or reserved-until mark (a
    /// [`TimeFence`](crate::TimeFence)) ends before the unit does.
    #[error(
        "worker id {worker_id} may stamp IDs only up to {limit_ms} ms, but this time unit ends at \
         {unit_end_ms} ms: {reason}"
    )]
    BeyondFence {
        /// The worker id.
        worker_id: u64,
        /// The end of the time unit that was to be stamped (ms since the Unix epoch).
        unit_end_ms: u64,
        /// The fence's limit (ms since the Unix epoch).
        limit_ms: u64,
        /// Why the limit is not higher.
        reason: String,
    },
    /// The padding thread stopped and the generator can issue no more IDs.
    #[error("ID generation has stopped: {0}")]
    GeneratorStopped(String),
    /// An option is out of range.
    #[error("invalid option `{name}`: {reason}")]
    InvalidOption {
        /// The option's name.
        name: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// `Result` with [`UidError`] as the default error.
pub type Result<T, E = UidError> = std::result::Result<T, E>;
