//! Composing IDs from parts and taking them apart: the hot path's `compose_unchecked`, the
//! checked `compose`, `decompose` and `decode`, and the time arithmetic they share.

use super::decoded::DecodedUid;
use super::types::{Layout, Slot};
use crate::error::{Result, UidError};
use crate::fields::FieldKind::{Datacenter, Method, Sequence, Sign, Time, Type, Version, Worker};
use crate::fields::{FieldKind, UidParts};

impl Layout {
    /// Time units since the epoch at wall-clock `now_ms`, checked against the time field and,
    /// on a continued layout, against its first time value.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let legacy = Layout::baidu_legacy().unwrap();
    /// let now = 1_800_000_000_000; // 2027
    /// assert!(matches!(legacy.time_at(now), Err(UidError::TimestampExhausted { .. })));
    /// let continued = Layout::baidu_continued().unwrap();
    /// assert!(continued.time_at(now).unwrap() >= 1 << 28);
    /// let then = 1_700_000_000_000; // 2023: the legacy layout's own range
    /// assert!(matches!(continued.time_at(then), Err(UidError::ClockBeforeStart { .. })));
    /// ```
    pub fn time_at(&self, now_ms: u64) -> Result<u64> {
        // The same arithmetic as `time_of`; only what an early instant means differs: here it is
        // the clock's reading, not a caller's input.
        let elapsed = self.time_of(now_ms).map_err(|error| match error {
            UidError::TimeBeforeEpoch { .. } => UidError::ClockBeforeEpoch {
                now_ms,
                epoch_ms: self.epoch_ms,
            },
            other => other,
        })?;
        if elapsed < self.first_time {
            return Err(UidError::ClockBeforeStart {
                now_ms,
                start_ms: self.millis_of(self.first_time),
            });
        }
        Ok(elapsed)
    }

    /// Time units since the epoch of the wall-clock instant `time_ms` a caller asked for (to
    /// build an ID from, as `make` does): as [`time_at`](Self::time_at), but an instant before
    /// the epoch is [`UidError::TimeBeforeEpoch`], a mistake in the input, not a clock to
    /// distrust; and a continued layout takes the time of the layout it continues, whose IDs it
    /// decodes (only generators must stay above it).
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
    /// let continued = Layout::baidu_continued().unwrap();
    /// let legacy = Layout::baidu_legacy().unwrap();
    /// let in_2020 = 1_600_000_000_000;
    /// assert_eq!(continued.time_of(in_2020).unwrap(), legacy.time_of(in_2020).unwrap());
    /// ```
    pub fn time_of(&self, time_ms: u64) -> Result<u64> {
        if time_ms < self.epoch_ms {
            return Err(UidError::TimeBeforeEpoch {
                time_ms,
                epoch_ms: self.epoch_ms,
            });
        }
        let elapsed = (time_ms - self.epoch_ms) / self.unit.millis();
        self.check_time(elapsed)?;
        Ok(elapsed)
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

    /// Parts with the layout's defaults (Vesta's fields, the datacenter) and the given time,
    /// worker and sequence.
    pub fn parts(&self, time: u64, worker: u64, sequence: u64) -> UidParts {
        UidParts {
            time,
            worker,
            sequence,
            ..self.defaults
        }
    }

    /// The bits the worker field carries for worker number `worker`: the number itself, or its
    /// machine and process parts in the layout's order ([`WorkerSplit::field_bits`]).
    ///
    /// [`WorkerSplit::field_bits`]: super::WorkerSplit::field_bits
    #[inline]
    fn worker_field(&self, worker: u64) -> u64 {
        self.worker_split.map_or(worker, |s| s.field_bits(worker))
    }

    /// Pack parts into an ID, checking every field's range.
    pub fn compose(&self, parts: &UidParts) -> Result<u64> {
        let mut id = 0u64;
        for kind in FieldKind::ALL {
            let value = parts.get(kind);
            match self.slots[kind.index()] {
                Some(slot) if value <= slot.max() => {
                    let value = if kind == Worker {
                        self.worker_field(value)
                    } else {
                        value
                    };
                    if slot.bits > 0 {
                        id |= value << slot.shift;
                    }
                }
                None if value == 0 => {}
                slot => return Err(self.overflow(kind, value, slot)),
            }
        }
        Ok(id)
    }

    /// The error for a value too large for its field (`slot`, or none).
    #[cold]
    fn overflow(&self, kind: FieldKind, value: u64, slot: Option<Slot>) -> UidError {
        match kind {
            Worker => UidError::WorkerIdOverflow {
                worker_id: value,
                max: self.max_worker_id(),
            },
            Time => UidError::TimestampExhausted {
                elapsed: value,
                max: self.max_time(),
            },
            _ => UidError::FieldOverflow {
                field: kind,
                value,
                bits: slot.map_or(0, |s| s.bits),
                max: slot.map_or(0, Slot::max),
            },
        }
    }

    /// `id` with its generation-method field (Vesta's genMethod) set to `method`; on a layout
    /// without that field, `id` unchanged.
    ///
    /// This is how a channel says how it issued an ID (Vesta: 0 embedded, 1 center server,
    /// 2 REST; see [`GenMethod`](crate::GenMethod)) while every channel shares one generator.
    /// Uniqueness survives the rewrite: two IDs of one generator already differ in time, worker
    /// or sequence, and those bits are left alone, so two IDs that differ only in their method
    /// bits can only come from two channels stamping the same issued ID, which the generator
    /// never hands out twice.
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

    /// Pack time, worker and sequence with the layout's defaults, skipping the range checks.
    ///
    /// For generators whose inputs are already checked (worker at construction, time by
    /// [`Layout::time_at`] or [`Layout::check_time`], sequence by masking): the hot path.
    #[inline]
    pub(crate) fn compose_unchecked(&self, time: u64, worker: u64, sequence: u64) -> u64 {
        let shift = |k: FieldKind| self.slots[k.index()].map_or(0, |s| s.shift);
        let mut id = (time << shift(Time)) | (sequence << shift(Sequence));
        if self.bits(Worker) > 0 {
            id |= self.worker_field(worker) << shift(Worker);
        }
        for kind in [Version, Type, Method, Datacenter] {
            let value = self.defaults.get(kind);
            if value != 0 {
                id |= value << shift(kind);
            }
        }
        id
    }

    /// Take an ID apart. An ID with its sign bit set, or with bits set above a narrower
    /// layout's width, is malformed.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let js = Layout::safe_js()?;
    /// assert!(js.decompose((1 << 53) - 1).is_ok());
    /// assert!(matches!(js.decompose(1 << 53), Err(UidError::MalformedId { .. })));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn decompose(&self, id: u64) -> Result<UidParts> {
        if self.width < 64 && id >> self.width != 0 {
            return Err(UidError::MalformedId {
                id: id.to_string(),
                reason: "bits above the layout's width are set",
            });
        }
        let mut parts = UidParts::default();
        for kind in FieldKind::ALL {
            if let Some(slot) = self.slots[kind.index()] {
                let mut value = if slot.bits == 0 {
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
                if kind == Worker
                    && let Some(split) = self.worker_split
                {
                    value = split.worker_of_field(value);
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
            datacenter: self.has(Datacenter).then_some(parts.datacenter),
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
    use super::super::epochs::TWITTER_EPOCH_MS;
    use super::*;
    use crate::clock::{Clock, SystemClock};

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
