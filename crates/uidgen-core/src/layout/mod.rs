//! Bit layouts: how a 64-bit ID is cut into fields (Baidu's `BitsAllocator`, generalised).

mod fields;
mod presets;
mod split;

pub use fields::{DecodedUid, FieldKind, GenMethod, TimeUnit, UidParts};
pub use presets::{
    BAIDU_LEGACY_EPOCH_MS, DEFAULT_EPOCH, PRESET_NAMES, SONYFLAKE_EPOCH_MS, TWITTER_EPOCH_MS,
    VESTA_EPOCH_MS,
};
pub use split::{WorkerParts, WorkerSplit};

use crate::calendar;
use crate::clock::{Clock, SystemClock};
use crate::error::{Result, UidError};

/// Where one field sits: its width and its shift from bit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    bits: u32,
    shift: u32,
}

impl Slot {
    fn max(self) -> u64 {
        if self.bits == 0 {
            0
        } else {
            u64::MAX >> (64 - self.bits)
        }
    }
}

/// How a 64-bit ID is cut into fields, in which time unit, from which epoch.
///
/// Fields are listed from the most significant bit down. Construction validates the layout, so a
/// `Layout` value is always usable.
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
/// ).unwrap();
/// let parts = UidParts { time: 100, worker: 7, sequence: 9, ..Default::default() };
/// let id = layout.compose(&parts).unwrap();
/// assert_eq!(layout.decompose(id).unwrap(), parts);
/// assert_eq!(layout.max_worker_id(), 65_535);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    name: String,
    fields: Vec<(FieldKind, u32)>,
    slots: [Option<Slot>; 7],
    unit: TimeUnit,
    epoch_ms: u64,
    defaults: UidParts,
    /// How decoding reads the worker field as machine and process parts (`keyworker`); it
    /// changes no bit of any ID.
    worker_split: Option<WorkerSplit>,
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

use FieldKind::{Method, Sequence, Sign, Time, Type, Version, Worker};

impl Layout {
    /// Build and validate a layout. `fields` run from the most significant bit down.
    ///
    /// Rules: widths sum to 64; each kind appears at most once; time, worker and sequence appear;
    /// time and sequence have at least one bit and together at most 63 (generators pack them into
    /// one atomic word); a sign field is the top bit and one bit wide; the epoch is not in the
    /// future by the system clock.
    pub fn new(
        name: impl Into<String>,
        fields: &[(FieldKind, u32)],
        unit: TimeUnit,
        epoch: impl IntoEpoch,
    ) -> Result<Self> {
        let epoch_ms = epoch.into_epoch_ms()?;
        let now_ms = SystemClock.now_millis();
        if epoch_ms > now_ms {
            return Err(UidError::EpochInFuture { epoch_ms, now_ms });
        }
        // Summed as u64 so that huge widths (from a config file) cannot wrap to 64 and pass.
        let total: u64 = fields.iter().map(|&(_, bits)| u64::from(bits)).sum();
        if total != 64 {
            return Err(UidError::BitsDoNotSumTo64 { total });
        }
        let mut slots = [None; 7];
        let mut shift = 64;
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
        let width = |k: FieldKind| slots[k.index()].map_or(0, |s: Slot| s.bits);
        for kind in [Time, Sequence] {
            if width(kind) == 0 {
                return Err(UidError::InvalidFieldWidth {
                    field: kind,
                    bits: 0,
                    reason: "needs at least one bit",
                });
            }
        }
        if width(Time) + width(Sequence) > 63 {
            return Err(UidError::InvalidFieldWidth {
                field: Time,
                bits: width(Time),
                reason: "time and sequence together may use at most 63 bits",
            });
        }
        Ok(Self {
            name: name.into(),
            fields: fields.to_vec(),
            slots,
            unit,
            epoch_ms,
            defaults: UidParts::default(),
            worker_split: None,
        })
    }

    /// The same layout counting time from another epoch, checked as [`Layout::new`] checks it
    /// (not in the future). A Leaf or Snowflake deployment that set its own `twepoch` keeps
    /// its ID space this way.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let twepoch = 1_500_000_000_000; // 2017-07-14, a Leaf user's own
    /// let leaf = Layout::leaf()?.with_epoch(twepoch)?;
    /// assert_eq!((leaf.name(), leaf.epoch_ms()), ("leaf", twepoch));
    /// assert_eq!(leaf.fields(), Layout::leaf()?.fields());
    /// assert!(matches!(
    ///     Layout::leaf()?.with_epoch("2999-01-01"),
    ///     Err(UidError::EpochInFuture { .. })
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn with_epoch(mut self, epoch: impl IntoEpoch) -> Result<Self> {
        let epoch_ms = epoch.into_epoch_ms()?;
        let now_ms = SystemClock.now_millis();
        if epoch_ms > now_ms {
            return Err(UidError::EpochInFuture { epoch_ms, now_ms });
        }
        self.epoch_ms = epoch_ms;
        Ok(self)
    }

    /// Read the worker field as a machine part above a `process_bits`-wide process part when
    /// decoding (see [`WorkerSplit`]). Both parts need at least one bit.
    pub fn with_worker_split(mut self, process_bits: u32) -> Result<Self> {
        self.worker_split = Some(WorkerSplit::new(self.bits(Worker), process_bits)?);
        Ok(self)
    }

    /// How the worker field divides into machine and process parts, if the layout says so.
    pub fn worker_split(&self) -> Option<WorkerSplit> {
        self.worker_split
    }

    /// Rename the layout (the name shows in decoded IDs).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Set the values generators put in the Vesta fields (version, type, method).
    pub fn with_defaults(mut self, version: u64, kind: u64, method: u64) -> Result<Self> {
        let parts = UidParts {
            version,
            kind,
            method,
            ..UidParts::default()
        };
        self.compose(&parts)?;
        self.defaults = parts;
        Ok(self)
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

    /// Time units since the epoch at wall-clock `now_ms`, checked against the time field.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let legacy = Layout::baidu_legacy().unwrap();
    /// let now = 1_800_000_000_000; // 2027
    /// assert!(matches!(legacy.time_at(now), Err(UidError::TimestampExhausted { .. })));
    /// ```
    pub fn time_at(&self, now_ms: u64) -> Result<u64> {
        if now_ms < self.epoch_ms {
            return Err(UidError::ClockBeforeEpoch {
                now_ms,
                epoch_ms: self.epoch_ms,
            });
        }
        let elapsed = (now_ms - self.epoch_ms) / self.unit.millis();
        self.check_time(elapsed)?;
        Ok(elapsed)
    }

    /// Time units since the epoch of the wall-clock instant `time_ms` a caller asked for (to
    /// build an ID from, as `make` does): as [`time_at`](Self::time_at), but an instant before
    /// the epoch is [`UidError::TimeBeforeEpoch`], a mistake in the input, not a clock to
    /// distrust.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// let baidu = Layout::baidu("2026-01-01").unwrap();
    /// assert_eq!(baidu.time_of(baidu.epoch_ms() + 5_000).unwrap(), 5);
    /// assert_eq!(
    ///     baidu.time_of(915_148_800_000).unwrap_err().to_string(),
    ///     "time 1999-01-01T00:00:00.000Z is before the layout's epoch 2026-01-01T00:00:00.000Z: \
    ///      no ID of this layout holds it; give a later time, or a layout whose epoch is earlier"
    /// );
    /// ```
    pub fn time_of(&self, time_ms: u64) -> Result<u64> {
        match self.time_at(time_ms) {
            Err(UidError::ClockBeforeEpoch { .. }) => Err(UidError::TimeBeforeEpoch {
                time_ms,
                epoch_ms: self.epoch_ms,
            }),
            other => other,
        }
    }

    /// Check that a time value (units since the epoch) fits the time field.
    pub fn check_time(&self, time: u64) -> Result<()> {
        if time > self.max_time() {
            return Err(UidError::TimestampExhausted {
                elapsed: time,
                max: self.max_time(),
            });
        }
        Ok(())
    }

    /// Wall-clock milliseconds at which time value `time` begins.
    pub fn millis_of(&self, time: u64) -> u64 {
        self.epoch_ms
            .saturating_add(time.saturating_mul(self.unit.millis()))
    }

    /// Parts with the layout's default Vesta fields and the given time, worker and sequence.
    pub fn parts(&self, time: u64, worker: u64, sequence: u64) -> UidParts {
        UidParts {
            time,
            worker,
            sequence,
            ..self.defaults
        }
    }

    /// Pack parts into an ID, checking every field's range.
    pub fn compose(&self, parts: &UidParts) -> Result<u64> {
        let mut id = 0u64;
        for kind in FieldKind::ALL {
            let value = parts.get(kind);
            match self.slots[kind.index()] {
                Some(slot) if value <= slot.max() => {
                    if slot.bits > 0 {
                        id |= value << slot.shift;
                    }
                }
                None if value == 0 => {}
                slot => {
                    let bits = slot.map_or(0, |s| s.bits);
                    if kind == Worker {
                        return Err(UidError::WorkerIdOverflow {
                            worker_id: value,
                            max: self.max_worker_id(),
                        });
                    }
                    if kind == Time {
                        return Err(UidError::TimestampExhausted {
                            elapsed: value,
                            max: self.max_time(),
                        });
                    }
                    return Err(UidError::FieldOverflow {
                        field: kind,
                        value,
                        bits,
                        max: slot.map_or(0, Slot::max),
                    });
                }
            }
        }
        Ok(id)
    }

    /// `id` with its generation-method field (Vesta's genMethod) set to `method`; on a layout
    /// without that field, `id` unchanged.
    ///
    /// This is how a channel says how it issued an ID (Vesta: 0 embedded, 1 center server,
    /// 2 REST; see [`GenMethod`]) while every channel shares one generator. Uniqueness survives
    /// the rewrite: two IDs of one generator already differ in time, worker or sequence, and
    /// those bits are left alone, so two IDs that differ only in their method bits can only
    /// come from two channels stamping the same issued ID, which the generator never hands out
    /// twice.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, GenMethod, Layout, UidError};
    /// let vesta = Layout::vesta_max_peak()?;
    /// let id = vesta.compose(&vesta.parts(1_000, 7, 3))?;
    /// let rest = vesta.with_method(id, GenMethod::Rest.value())?;
    /// assert_eq!(vesta.decompose(rest)?.method, 2);
    /// assert_eq!(vesta.decompose(rest)?.sequence, 3);
    /// assert!(matches!(
    ///     vesta.with_method(id, 4),
    ///     Err(UidError::FieldOverflow { field: FieldKind::Method, .. })
    /// ));
    /// // Layouts without the field keep their IDs as they are.
    /// let baidu = Layout::baidu_default()?;
    /// assert_eq!(baidu.with_method(12_345, GenMethod::Rest.value())?, 12_345);
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn with_method(&self, id: u64, method: u64) -> Result<u64> {
        let Some(slot) = self.slots[Method.index()].filter(|s| s.bits > 0) else {
            return Ok(id);
        };
        if method > slot.max() {
            return Err(UidError::FieldOverflow {
                field: Method,
                value: method,
                bits: slot.bits,
                max: slot.max(),
            });
        }
        let mask = slot.max() << slot.shift;
        Ok((id & !mask) | (method << slot.shift))
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

    /// Pack time, worker and sequence with the layout's defaults, skipping the range checks.
    ///
    /// For generators whose inputs are already checked (worker at construction, time by
    /// [`Layout::time_at`] or [`Layout::check_time`], sequence by masking): the hot path.
    #[inline]
    pub(crate) fn compose_unchecked(&self, time: u64, worker: u64, sequence: u64) -> u64 {
        let shift = |k: FieldKind| self.slots[k.index()].map_or(0, |s| s.shift);
        let mut id = (time << shift(Time)) | (sequence << shift(Sequence));
        if self.bits(Worker) > 0 {
            id |= worker << shift(Worker);
        }
        for kind in [Version, Type, Method] {
            let value = self.defaults.get(kind);
            if value != 0 {
                id |= value << shift(kind);
            }
        }
        id
    }

    /// Take an ID apart. An ID with its sign bit set is malformed.
    pub fn decompose(&self, id: u64) -> Result<UidParts> {
        let mut parts = UidParts::default();
        for kind in FieldKind::ALL {
            if let Some(slot) = self.slots[kind.index()] {
                let value = if slot.bits == 0 {
                    0
                } else {
                    (id >> slot.shift) & slot.max()
                };
                if kind == Sign && value != 0 {
                    return Err(UidError::MalformedId {
                        id: id.to_string(),
                        reason: "the sign bit is set",
                    });
                }
                parts.set(kind, value);
            }
        }
        Ok(parts)
    }

    /// Take an ID apart and say when it was made.
    pub fn decode(&self, id: u64) -> Result<DecodedUid> {
        let parts = self.decompose(id)?;
        Ok(DecodedUid {
            id,
            parts,
            timestamp_ms: self.millis_of(parts.time),
            layout: self.name.clone(),
            worker_parts: self.worker_split.map(|s| s.split(parts.worker)),
        })
    }

    /// Parse a decimal ID from text and decode it.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let layout = Layout::snowflake().unwrap();
    /// assert!(matches!(layout.decode_str("-5"), Err(UidError::MalformedId { .. })));
    /// assert_eq!(layout.decode_str("4194304").unwrap().parts.time, 1);
    /// ```
    pub fn decode_str(&self, text: &str) -> Result<DecodedUid> {
        let malformed = |reason| UidError::MalformedId {
            id: text.chars().take(64).collect(),
            reason,
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(malformed("empty"));
        }
        if !t.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed("not a non-negative decimal integer"));
        }
        let id: u64 = t.parse().map_err(|_| malformed("larger than 64 bits"))?;
        self.decode(id)
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
        let cases: [(&[(FieldKind, u32)], &str); 8] = [
            (
                &[(Sign, 1), (Time, 28), (Worker, 22), (Sequence, 12)],
                "layout bits must sum to 64, but the fields sum to 63",
            ),
            // u32 widths that would wrap to 64 in a u32 sum must not pass as a valid layout.
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
    fn compose_checks_every_field() {
        let layout = Layout::baidu_default().unwrap();
        let parts = |time, worker, sequence| UidParts {
            time,
            worker,
            sequence,
            ..Default::default()
        };
        assert_eq!(
            layout
                .compose(&parts(0, 1 << 22, 0))
                .unwrap_err()
                .to_string(),
            "worker id 4194304 exceeds the layout's maximum 4194303; widen the worker bits or use \
             a smaller id"
        );
        assert_eq!(
            layout.compose(&parts(1 << 28, 0, 0)),
            Err(UidError::TimestampExhausted {
                elapsed: 1 << 28,
                max: (1 << 28) - 1
            })
        );
        assert_eq!(
            layout.compose(&parts(0, 0, 8192)).unwrap_err().to_string(),
            "sequence value 8192 does not fit in 13 bits (maximum 8191)"
        );
        let with_method = UidParts {
            method: 1,
            ..Default::default()
        };
        assert_eq!(
            layout.compose(&with_method).unwrap_err().to_string(),
            "method value 1 does not fit in 0 bits (maximum 0)"
        );
        let max = layout
            .compose(&parts(
                layout.max_time(),
                layout.max_worker_id(),
                layout.max_sequence(),
            ))
            .unwrap();
        assert_eq!(max, i64::MAX.unsigned_abs(), "all bits but the sign");
    }

    #[test]
    fn decode_rejects_a_set_sign_bit_and_reports_the_time() {
        let layout = Layout::snowflake().unwrap();
        assert_eq!(
            layout.decode(1 << 63).unwrap_err().to_string(),
            "malformed id 9223372036854775808: the sign bit is set"
        );
        let id = layout.compose(&layout.parts(1000, 3, 4)).unwrap();
        let decoded = layout.decode(id).unwrap();
        assert_eq!(decoded.timestamp_ms, TWITTER_EPOCH_MS + 1000);
        assert_eq!(decoded.timestamp_iso8601(), "2010-11-04T01:42:55.657Z");
        assert_eq!(decoded.layout, "snowflake");
        for bad in ["", "abc", "-1", "1e5", "18446744073709551616"] {
            assert!(
                matches!(layout.decode_str(bad), Err(UidError::MalformedId { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn legacy_baidu_epoch_is_exhausted_today() {
        let legacy = Layout::baidu_legacy().unwrap();
        // 2016-05-19T16:00:00Z + 2^28 s = 2024-11-20T...Z: Baidu issue #100,
        // https://github.com/baidu/uid-generator/issues/100
        let last = legacy.millis_of(legacy.max_time());
        assert!(last.to_string().starts_with("1732"), "{last}");
        assert!(matches!(
            legacy.time_at(SystemClock.now_millis()),
            Err(UidError::TimestampExhausted { .. })
        ));
    }
}
