//! The vocabulary of a layout: field kinds, time units, an ID's parts.

use std::fmt;

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
    /// The datacenter id: fixed per deployment, stamped by every generator of the layout
    /// ([`Layout::with_datacenter_id`](crate::Layout::with_datacenter_id)), above the worker as
    /// in Twitter's Snowflake (5 + 5 bits) and Baidu's 5 + 17 split of its 22 worker bits.
    Datacenter,
    /// The worker (machine) id.
    Worker,
    /// The sequence within one time unit.
    Sequence,
}

impl FieldKind {
    /// How many kinds there are.
    pub(super) const COUNT: usize = 8;

    /// Every kind, in the order `compose` checks them.
    pub(super) const ALL: [FieldKind; Self::COUNT] = [
        FieldKind::Sign,
        FieldKind::Version,
        FieldKind::Type,
        FieldKind::Method,
        FieldKind::Time,
        FieldKind::Datacenter,
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
            FieldKind::Datacenter => 7,
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
            FieldKind::Datacenter => "datacenter",
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
    /// Datacenter id, on layouts with a datacenter field.
    pub datacenter: u64,
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
            FieldKind::Datacenter => self.datacenter,
            FieldKind::Worker => self.worker,
            FieldKind::Sequence => self.sequence,
        }
    }

    /// Set one field, the counterpart of [`get`](Self::get); setting the sign does nothing.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, UidParts};
    /// let mut parts = UidParts::default();
    /// parts.set(FieldKind::Worker, 7);
    /// assert_eq!(parts.worker, 7);
    /// ```
    pub fn set(&mut self, kind: FieldKind, value: u64) {
        match kind {
            FieldKind::Sign => {}
            FieldKind::Version => self.version = value,
            FieldKind::Type => self.kind = value,
            FieldKind::Method => self.method = value,
            FieldKind::Time => self.time = value,
            FieldKind::Datacenter => self.datacenter = value,
            FieldKind::Worker => self.worker = value,
            FieldKind::Sequence => self.sequence = value,
        }
    }
}
