//! The vocabulary of a layout: field kinds, time units, an ID's parts and its decoded form.

use std::fmt;

use super::WorkerParts;
use crate::calendar;

/// How an ID was issued, as Vesta's genMethod field records it on the layouts that have one.
///
/// ```
/// use uidgen_core::GenMethod;
/// assert_eq!(GenMethod::Embedded.value(), 0);
/// assert_eq!(GenMethod::CenterServer.value(), 1);
/// assert_eq!(GenMethod::Rest.value(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GenMethod {
    /// The library in the caller's process, and the `uidgen` CLI (0).
    Embedded,
    /// The gRPC center server (1).
    CenterServer,
    /// The HTTP (REST) API (2).
    Rest,
}

impl GenMethod {
    /// The value the method field holds.
    pub fn value(self) -> u64 {
        match self {
            GenMethod::Embedded => 0,
            GenMethod::CenterServer => 1,
            GenMethod::Rest => 2,
        }
    }
}

/// What a run of bits in an ID means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FieldKind {
    /// The sign bit, always 0 so IDs stay positive as `i64` (Java `long`, SQL `BIGINT`).
    Sign,
    /// Vesta's version bit.
    Version,
    /// Vesta's ID type bit (0 max-peak, 1 min-granularity).
    Type,
    /// Vesta's generation method (0 embedded, 1 central server, 2 REST).
    Method,
    /// Time units since the layout's epoch.
    Time,
    /// The worker (machine) id.
    Worker,
    /// The sequence within one time unit.
    Sequence,
}

impl FieldKind {
    pub(super) const ALL: [FieldKind; 7] = [
        FieldKind::Sign,
        FieldKind::Version,
        FieldKind::Type,
        FieldKind::Method,
        FieldKind::Time,
        FieldKind::Worker,
        FieldKind::Sequence,
    ];

    pub(super) fn index(self) -> usize {
        match self {
            FieldKind::Sign => 0,
            FieldKind::Version => 1,
            FieldKind::Type => 2,
            FieldKind::Method => 3,
            FieldKind::Time => 4,
            FieldKind::Worker => 5,
            FieldKind::Sequence => 6,
        }
    }

    /// The field's name as used in configuration and messages.
    pub fn name(self) -> &'static str {
        match self {
            FieldKind::Sign => "sign",
            FieldKind::Version => "version",
            FieldKind::Type => "type",
            FieldKind::Method => "method",
            FieldKind::Time => "time",
            FieldKind::Worker => "worker",
            FieldKind::Sequence => "sequence",
        }
    }
}

impl fmt::Display for FieldKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The unit of the time field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeUnit {
    /// One second (Baidu, Vesta max-peak).
    Seconds,
    /// Ten milliseconds (Sonyflake).
    TenMillis,
    /// One millisecond (Snowflake, Leaf, Vesta min-granularity).
    Millis,
}

impl TimeUnit {
    /// Milliseconds per unit.
    ///
    /// ```
    /// assert_eq!(uidgen_core::TimeUnit::Seconds.millis(), 1000);
    /// ```
    pub fn millis(self) -> u64 {
        match self {
            TimeUnit::Seconds => 1000,
            TimeUnit::TenMillis => 10,
            TimeUnit::Millis => 1,
        }
    }
}

/// The values of an ID's fields. Fields the layout lacks must stay 0.
///
/// `time` is in the layout's units since its epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UidParts {
    /// Time units since the epoch.
    pub time: u64,
    /// Worker (machine) id.
    pub worker: u64,
    /// Sequence within the time unit.
    pub sequence: u64,
    /// Vesta version bit.
    pub version: u64,
    /// Vesta type bit.
    pub kind: u64,
    /// Vesta generation method.
    pub method: u64,
}

impl UidParts {
    /// The value of one field (the sign is always 0).
    ///
    /// ```
    /// use uidgen_core::{FieldKind, UidParts};
    /// let parts = UidParts { time: 5, method: 2, ..Default::default() };
    /// assert_eq!(parts.get(FieldKind::Time), 5);
    /// assert_eq!(parts.get(FieldKind::Method), 2);
    /// ```
    pub fn get(&self, kind: FieldKind) -> u64 {
        match kind {
            FieldKind::Sign => 0,
            FieldKind::Version => self.version,
            FieldKind::Type => self.kind,
            FieldKind::Method => self.method,
            FieldKind::Time => self.time,
            FieldKind::Worker => self.worker,
            FieldKind::Sequence => self.sequence,
        }
    }

    pub(super) fn set(&mut self, kind: FieldKind, value: u64) {
        match kind {
            FieldKind::Sign => {}
            FieldKind::Version => self.version = value,
            FieldKind::Type => self.kind = value,
            FieldKind::Method => self.method = value,
            FieldKind::Time => self.time = value,
            FieldKind::Worker => self.worker = value,
            FieldKind::Sequence => self.sequence = value,
        }
    }
}

/// An ID taken apart, with the wall-clock time it encodes (Vesta's "explain", Baidu's `parseUID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedUid {
    /// The ID.
    pub id: u64,
    /// Its fields.
    pub parts: UidParts,
    /// The wall-clock time it encodes, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The name of the layout that decoded it.
    pub layout: String,
    /// The worker's machine and process parts, for a layout that splits its worker field
    /// (`keyworker`); `None` for every other layout.
    pub worker_parts: Option<WorkerParts>,
}

impl DecodedUid {
    /// The encoded time as ISO-8601 UTC, e.g. `2026-01-01T00:00:05.000Z`.
    pub fn timestamp_iso8601(&self) -> String {
        calendar::format_iso8601(self.timestamp_ms)
    }

    /// Baidu's `parseUID` JSON shape; the timestamp is `yyyy-MM-dd HH:mm:ss` in UTC.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidParts};
    /// let layout = Layout::baidu("2016-05-20").unwrap();
    /// let id = layout
    ///     .compose(&UidParts { time: 3, worker: 2, sequence: 1, ..Default::default() })
    ///     .unwrap();
    /// assert_eq!(
    ///     layout.decode(id).unwrap().to_baidu_json(),
    ///     format!(
    ///         "{{\"UID\":\"{id}\",\"timestamp\":\"2016-05-20 00:00:03\",\
    ///          \"workerId\":\"2\",\"sequence\":\"1\"}}"
    ///     )
    /// );
    /// ```
    ///
    /// A `keyworker` ID also names its worker's parts, `machineId` and `processId`, after
    /// `workerId` (Baidu's shape has no such keys, so its readers skip them):
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// let layout = Layout::keyworker()?;
    /// let id = layout.compose(&layout.parts(0, (3 << 5) | 17, 0))?;
    /// let json = layout.decode(id)?.to_baidu_json();
    /// let fields = r#""workerId":"113","machineId":"3","processId":"17","sequence":"0""#;
    /// assert!(json.contains(fields));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn to_baidu_json(&self) -> String {
        // Every value is a number or a fixed-format date, so nothing needs escaping.
        let parts = self.worker_parts.map_or_else(String::new, |p| {
            format!(
                r#","machineId":"{}","processId":"{}""#,
                p.machine, p.process
            )
        });
        format!(
            r#"{{"UID":"{}","timestamp":"{}","workerId":"{}"{parts},"sequence":"{}"}}"#,
            self.id,
            calendar::format_baidu(self.timestamp_ms),
            self.parts.worker,
            self.parts.sequence
        )
    }
}
