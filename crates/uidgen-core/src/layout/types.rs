//! The [`Layout`] type, its checks and accessors; the other files of the module add to it.

use super::split::WorkerSplit;
use crate::calendar;
use crate::clock::{Clock, SystemClock};
use crate::error::{Result, UidError};
use crate::fields::{FieldKind, TimeUnit, UidParts};

/// Where one field sits: its width and its shift from bit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Slot {
    pub(super) bits: u32,
    pub(super) shift: u32,
}

impl Slot {
    pub(super) fn max(self) -> u64 {
        low_mask(self.bits)
    }
}

/// The lowest `bits` bits set (all 64 for 64).
pub(super) fn low_mask(bits: u32) -> u64 {
    if bits == 0 {
        0
    } else {
        u64::MAX >> (64 - bits.min(64))
    }
}

/// How an ID is cut into fields, in which time unit, from which epoch.
///
/// Fields are listed from the most significant bit down and tile the ID's low
/// [`width`](Layout::width) bits: 64 for every classic scheme, fewer for a layout whose IDs must
/// stay small (53 for JavaScript's `Number`, [`Layout::safe_js`]). Construction validates the
/// layout, so a `Layout` value is always usable.
///
/// ```
/// use uidgen_core::{FieldKind, Layout, TimeUnit, UidParts};
/// let layout = Layout::new(
///     "custom",
///     &[
///         (FieldKind::Sign, 1),
///         (FieldKind::Time, 31),
///         (FieldKind::Worker, 16),
///         (FieldKind::Sequence, 16),
///     ],
///     TimeUnit::Seconds,
///     "2020-01-01",
/// )?;
/// let parts = UidParts { time: 100, worker: 7, sequence: 9, ..Default::default() };
/// let id = layout.compose(&parts)?;
/// assert_eq!(layout.decompose(id)?, parts);
/// assert_eq!(layout.max_worker_id(), 65_535);
/// // A narrower layout: 40 bits, so every ID stays below 2^40.
/// let small = Layout::new(
///     "small",
///     &[(FieldKind::Time, 24), (FieldKind::Worker, 6), (FieldKind::Sequence, 10)],
///     TimeUnit::Seconds,
///     "2020-01-01",
/// )?;
/// assert_eq!((small.width(), small.max_id()), (40, (1 << 40) - 1));
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub(super) name: String,
    pub(super) fields: Vec<(FieldKind, u32)>,
    pub(super) slots: [Option<Slot>; FieldKind::COUNT],
    /// The sum of the field widths: every ID is below `2^width`.
    pub(super) width: u32,
    pub(super) unit: TimeUnit,
    pub(super) epoch_ms: u64,
    /// What generators stamp in the fields they are not given: Vesta's version, type and
    /// method, and the datacenter.
    pub(super) defaults: UidParts,
    /// How the worker field reads as machine and process parts (`keyworker`).
    pub(super) worker_split: Option<WorkerSplit>,
    /// Sequencing generators start each new time unit at a random sequence below this bound
    /// (Leaf: 100); 0 starts at 0.
    pub(super) random_start_bound: u64,
    /// The first time value generators may stamp: above 0 only for a layout that continues
    /// another whose time field ran out ([`Layout::continued`]).
    pub(super) first_time: u64,
}

/// An epoch given either as milliseconds or as a date string (parsed by
/// [`calendar::parse_epoch_ms`]).
///
/// ```
/// use uidgen_core::{IntoEpoch, Layout};
/// assert_eq!("2016-05-20+08:00".into_epoch_ms()?, 1_463_673_600_000);
/// assert_eq!(1_463_673_600_000u64.into_epoch_ms()?, 1_463_673_600_000);
/// // Either form works wherever a layout takes an epoch.
/// assert_eq!(Layout::baidu("2016-05-20+08:00")?, Layout::baidu(1_463_673_600_000)?);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub trait IntoEpoch {
    /// Milliseconds since the Unix epoch.
    fn into_epoch_ms(self) -> Result<u64>;
}

impl IntoEpoch for u64 {
    fn into_epoch_ms(self) -> Result<u64> {
        Ok(self)
    }
}

impl IntoEpoch for &str {
    fn into_epoch_ms(self) -> Result<u64> {
        calendar::parse_epoch_ms(self)
    }
}

impl IntoEpoch for &String {
    fn into_epoch_ms(self) -> Result<u64> {
        calendar::parse_epoch_ms(self)
    }
}

use FieldKind::{Sequence, Sign, Time, Worker};

/// Refuse an epoch after the system clock's now.
pub(super) fn check_epoch(epoch_ms: u64) -> Result<()> {
    let now_ms = SystemClock.now_millis();
    if epoch_ms > now_ms {
        return Err(UidError::EpochInFuture { epoch_ms, now_ms });
    }
    Ok(())
}

impl Layout {
    /// Build and validate a layout. `fields` run from the most significant bit down.
    ///
    /// Rules: widths sum to at most 64 (fewer leaves the top bits of every ID zero); a sign
    /// field is bit 63, so it is listed first, one bit wide, and its layout sums to exactly 64;
    /// each kind appears at most once; time, worker and sequence appear; time and sequence have
    /// at least one bit and together at most 63 (generators pack them into one atomic word);
    /// the epoch is not in the future by the system clock.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, Layout, TimeUnit, UidError};
    /// let too_wide = Layout::new(
    ///     "t",
    ///     &[(FieldKind::Time, 41), (FieldKind::Worker, 12), (FieldKind::Sequence, 12)],
    ///     TimeUnit::Millis,
    ///     0u64,
    /// );
    /// assert_eq!(too_wide, Err(UidError::LayoutTooWide { total: 65 }));
    /// ```
    pub fn new(
        name: impl Into<String>,
        fields: &[(FieldKind, u32)],
        unit: TimeUnit,
        epoch: impl IntoEpoch,
    ) -> Result<Self> {
        let epoch_ms = epoch.into_epoch_ms()?;
        check_epoch(epoch_ms)?;
        // Summed as u64 so that huge widths (from a config file) cannot wrap and pass.
        let total: u64 = fields.iter().map(|&(_, bits)| u64::from(bits)).sum();
        // The sign is bit 63: a layout with one is a 64-bit layout.
        if total != 64 && fields.iter().any(|&(kind, _)| kind == Sign) {
            return Err(UidError::BitsDoNotSumTo64 { total });
        }
        let width = u32::try_from(total)
            .ok()
            .filter(|&w| w <= 64)
            .ok_or(UidError::LayoutTooWide { total })?;
        let mut slots = [None; FieldKind::COUNT];
        let mut shift = width;
        for (i, &(kind, bits)) in fields.iter().enumerate() {
            shift -= bits;
            if slots[kind.index()].is_some() {
                return Err(UidError::MalformedLayout("a field is listed twice"));
            }
            if kind == Sign && (i != 0 || bits != 1) {
                return Err(UidError::InvalidFieldWidth {
                    field: Sign,
                    bits,
                    reason: "the sign must be the single top bit",
                });
            }
            slots[kind.index()] = Some(Slot { bits, shift });
        }
        for kind in [Time, Worker, Sequence] {
            if slots[kind.index()].is_none() {
                return Err(UidError::MalformedLayout(
                    "a layout needs time, worker and sequence fields",
                ));
            }
        }
        let width_of = |k: FieldKind| slots[k.index()].map_or(0, |s: Slot| s.bits);
        for kind in [Time, Sequence] {
            if width_of(kind) == 0 {
                return Err(UidError::InvalidFieldWidth {
                    field: kind,
                    bits: 0,
                    reason: "needs at least one bit",
                });
            }
        }
        if width_of(Time) + width_of(Sequence) > 63 {
            return Err(UidError::InvalidFieldWidth {
                field: Time,
                bits: width_of(Time),
                reason: "time and sequence together may use at most 63 bits",
            });
        }
        Ok(Self {
            name: name.into(),
            fields: fields.to_vec(),
            slots,
            width,
            unit,
            epoch_ms,
            defaults: UidParts::default(),
            worker_split: None,
            random_start_bound: 0,
            first_time: 0,
        })
    }

    /// How the worker field divides into machine and process parts, if the layout says so.
    pub fn worker_split(&self) -> Option<WorkerSplit> {
        self.worker_split
    }

    /// The layout's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The fields, most significant first.
    pub fn fields(&self) -> &[(FieldKind, u32)] {
        &self.fields
    }

    /// The time unit.
    pub fn unit(&self) -> TimeUnit {
        self.unit
    }

    /// The epoch in milliseconds since the Unix epoch.
    pub fn epoch_ms(&self) -> u64 {
        self.epoch_ms
    }

    /// How many low bits the fields cover: 64, or fewer for a narrower layout, whose IDs keep
    /// every bit above zero.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// assert_eq!(Layout::snowflake()?.width(), 64);
    /// assert_eq!(Layout::safe_js()?.width(), 53);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn width(&self) -> u32 {
        self.width
    }

    /// The largest ID the layout can hold: `2^63 - 1` under a sign bit, `2^width - 1`
    /// otherwise.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_core::layout::JS_MAX_SAFE_INTEGER;
    /// assert_eq!(Layout::snowflake()?.max_id(), i64::MAX as u64);
    /// assert_eq!(Layout::vesta_max_peak()?.max_id(), u64::MAX);
    /// assert_eq!(Layout::safe_js()?.max_id(), JS_MAX_SAFE_INTEGER);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn max_id(&self) -> u64 {
        let sign = u32::from(self.slots[Sign.index()].is_some());
        low_mask(self.width - sign)
    }

    /// Width of a field in bits (0 if the layout lacks it).
    pub fn bits(&self, kind: FieldKind) -> u32 {
        self.slots[kind.index()].map_or(0, |s| s.bits)
    }

    /// Shift of a field from bit 0, if the layout has it.
    pub fn shift(&self, kind: FieldKind) -> Option<u32> {
        self.slots[kind.index()].map(|s| s.shift)
    }

    /// The largest value a field holds (0 if the layout lacks it).
    pub fn max(&self, kind: FieldKind) -> u64 {
        self.slots[kind.index()].map_or(0, Slot::max)
    }

    /// Whether the layout has a field of this kind with at least one bit: what decoders show.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, Layout};
    /// assert!(Layout::vesta_max_peak()?.has(FieldKind::Method));
    /// assert!(!Layout::baidu_default()?.has(FieldKind::Method));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn has(&self, kind: FieldKind) -> bool {
        self.bits(kind) > 0
    }

    /// The largest worker id.
    pub fn max_worker_id(&self) -> u64 {
        self.max(Worker)
    }

    /// The largest sequence value: `max_sequence() + 1` IDs fit in one time unit per worker.
    pub fn max_sequence(&self) -> u64 {
        self.max(Sequence)
    }

    /// The largest time value.
    pub fn max_time(&self) -> u64 {
        self.max(Time)
    }

    /// The first time value generators stamp: 0, except on a layout that continues another
    /// ([`Layout::continued`]), whose IDs begin where the other's time field ran out.
    pub fn first_time(&self) -> u64 {
        self.first_time
    }

    /// The bound below which sequencing generators start each new time unit (0: they start
    /// at 0). The `leaf` preset sets Leaf's 100; see [`Layout::with_random_start`].
    pub fn random_start_bound(&self) -> u64 {
        self.random_start_bound
    }

    /// The datacenter id generators stamp (0 on a layout without a datacenter field).
    pub fn datacenter_id(&self) -> u64 {
        self.defaults.datacenter
    }

    /// Check that a worker id fits this layout.
    pub fn check_worker_id(&self, worker_id: u64) -> Result<()> {
        if worker_id > self.max_worker_id() {
            return Err(UidError::WorkerIdOverflow {
                worker_id,
                max: self.max_worker_id(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_layouts_are_refused_with_a_reason() {
        let err = |fields: &[(FieldKind, u32)]| {
            Layout::new("t", fields, TimeUnit::Seconds, 0u64)
                .unwrap_err()
                .to_string()
        };
        let cases: [(&[(FieldKind, u32)], &str); 10] = [
            (
                &[(Time, 29), (Worker, 23), (Sequence, 13)],
                "layout fields sum to 65 bits, more than the 64 an ID has; narrow a field",
            ),
            // u32 widths that would wrap in a u32 sum must not pass as a valid layout.
            (
                &[(Time, u32::MAX), (Worker, 32), (Sequence, 32)],
                "layout fields sum to 4294967359 bits, more than the 64 an ID has; narrow a field",
            ),
            (
                &[(Sign, 1), (Time, u32::MAX), (Worker, 32), (Sequence, 32)],
                "layout bits must sum to 64, but the fields sum to 4294967360",
            ),
            (
                &[(Sign, 1), (Time, 0), (Worker, 50), (Sequence, 13)],
                "layout field `time` has invalid width 0: needs at least one bit",
            ),
            (
                &[(Sign, 1), (Time, 41), (Worker, 22), (Sequence, 0)],
                "layout field `sequence` has invalid width 0: needs at least one bit",
            ),
            (
                &[(Time, 28), (Sign, 1), (Worker, 22), (Sequence, 13)],
                "layout field `sign` has invalid width 1: the sign must be the single top bit",
            ),
            (
                &[(Sign, 1), (Time, 28), (Worker, 11), (Sequence, 13)],
                "layout bits must sum to 64, but the fields sum to 53",
            ),
            (
                &[(Sign, 1), (Time, 28), (Time, 22), (Sequence, 13)],
                "layout is malformed: a field is listed twice",
            ),
            (
                &[(Sign, 1), (Time, 50), (Sequence, 13)],
                "layout is malformed: a layout needs time, worker and sequence fields",
            ),
            (
                &[(Time, 50), (Worker, 0), (Sequence, 14)],
                "layout field `time` has invalid width 50: time and sequence together may use \
                 at most 63 bits",
            ),
        ];
        for (fields, message) in cases {
            assert_eq!(err(fields), message, "{fields:?}");
        }
        let before = SystemClock.now_millis();
        let err = Layout::baidu("2999-01-01").unwrap_err();
        // The message carries the system clock's reading: take it from the error, then check it
        // is that reading and that the whole message is the one promised.
        let UidError::EpochInFuture { now_ms, .. } = err else {
            panic!("expected EpochInFuture, got {err:?}");
        };
        assert!((before..=SystemClock.now_millis()).contains(&now_ms));
        assert_eq!(
            err.to_string(),
            format!(
                "epoch 32472144000000 ms lies in the future (now is {now_ms} ms); pick an epoch in \
                 the past"
            )
        );
        assert_eq!(
            Layout::baidu("2016-13-01").unwrap_err().to_string(),
            "cannot parse epoch \"2016-13-01\": no such calendar date (expected e.g. \
             \"2016-05-20\", \"2016-05-20+08:00\" or \"2016-05-20T00:00:00Z\")"
        );
        assert!(
            Layout::preset("nope")
                .unwrap_err()
                .to_string()
                .contains("unknown preset")
        );
    }

    #[test]
    fn narrow_layouts_tile_their_low_bits() {
        let layout = Layout::new(
            "narrow",
            &[(Time, 20), (Worker, 4), (Sequence, 8)],
            TimeUnit::Seconds,
            0u64,
        )
        .unwrap();
        assert_eq!(layout.width(), 32);
        assert_eq!(layout.max_id(), u64::from(u32::MAX));
        assert_eq!(
            [Time, Worker, Sequence].map(|k| layout.shift(k)),
            [Some(12), Some(8), Some(0)]
        );
    }
}
