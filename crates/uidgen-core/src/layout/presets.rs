//! The preset layouts of the ID schemes uidgen speaks: Baidu, Snowflake, Leaf, Vesta, Sonyflake,
//! the machine+process Snowflake variant (`keyworker`), JavaScript-safe IDs (`safe_js`), and
//! Baidu's layout continued past its 2024 exhaustion (`baidu_continued`).

use super::epochs::{
    BAIDU_LEGACY_EPOCH_MS, DEFAULT_EPOCH, LEAF_RANDOM_START_BOUND, PRESET_NAMES,
    SONYFLAKE_EPOCH_MS, TWITTER_EPOCH_MS, VESTA_EPOCH_MS,
};
use super::split::PartOrder;
use super::types::{IntoEpoch, Layout};
use crate::error::{Result, UidError};
use crate::fields::FieldKind::{Method, Sequence, Sign, Time, Type, Version, Worker};
use crate::fields::TimeUnit;

/// The presets, by constructor or by name.
///
/// ```
/// use uidgen_core::{FieldKind, Layout, TimeUnit};
/// let baidu = Layout::baidu("2024-01-01")?;
/// let bits = |kind| baidu.bits(kind);
/// assert_eq!(
///     (bits(FieldKind::Time), bits(FieldKind::Worker), bits(FieldKind::Sequence)),
///     (28, 22, 13)
/// );
/// assert_eq!(baidu.unit(), TimeUnit::Seconds);
/// let snowflake = Layout::snowflake()?;
/// assert_eq!(snowflake.max_worker_id(), 1023);
/// assert_eq!(snowflake.unit(), TimeUnit::Millis);
/// // The service configuration names presets; the name is the constructor's.
/// assert_eq!(Layout::preset("sonyflake")?, Layout::sonyflake()?);
/// assert_eq!(Layout::preset("leaf")?.name(), "leaf");
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
impl Layout {
    /// Baidu uid-generator's layout, 1/28/22/13 in seconds, from the given epoch.
    ///
    /// 28 bits of seconds last about 8.5 years from the epoch: pick a recent one.
    pub fn baidu(epoch: impl IntoEpoch) -> Result<Self> {
        Self::baidu_bits(28, 22, 13, epoch)
    }

    /// Baidu's layout with custom widths (`timeBits`, `workerBits`, `seqBits`).
    pub fn baidu_bits(
        time_bits: u32,
        worker_bits: u32,
        seq_bits: u32,
        epoch: impl IntoEpoch,
    ) -> Result<Self> {
        Self::new(
            "baidu",
            &[
                (Sign, 1),
                (Time, time_bits),
                (Worker, worker_bits),
                (Sequence, seq_bits),
            ],
            TimeUnit::Seconds,
            epoch,
        )
    }

    /// Baidu's layout from [`DEFAULT_EPOCH`]: the service default.
    pub fn baidu_default() -> Result<Self> {
        Self::baidu(DEFAULT_EPOCH)
    }

    /// Baidu's layout with its original epoch (2016-05-20 +08:00). Decodes old IDs; generating
    /// with it fails with [`UidError::TimestampExhausted`] since 2024-11-20. To go on issuing
    /// IDs that sort above the old ones, use [`Layout::baidu_continued`].
    pub fn baidu_legacy() -> Result<Self> {
        Ok(Self::baidu(BAIDU_LEGACY_EPOCH_MS)?.named("baidu_legacy"))
    }

    /// `baidu_legacy` continued past 2024-11-20 ([`Layout::continued`]): 29 bits of seconds
    /// from the same 2016 epoch, taking the sign bit, the worker and sequence fields where they
    /// were. It decodes every legacy ID unchanged, and every ID it issues has bit 63 set, so it
    /// is above every legacy ID as an unsigned number and equal to none; it runs until
    /// 2033-05-24. A deployment that used its own Baidu epoch continues with
    /// `Layout::preset_with_epoch("baidu_continued", Some(epoch))`.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, Layout};
    /// let layout = Layout::baidu_continued()?;
    /// assert_eq!(layout.fields(), [(FieldKind::Time, 29), (FieldKind::Worker, 22), (FieldKind::Sequence, 13)]);
    /// assert_eq!(layout.first_time(), 1 << 28);
    /// let first = layout.compose(&layout.parts(layout.first_time(), 0, 0))?;
    /// assert_eq!(first, 1 << 63);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn baidu_continued() -> Result<Self> {
        Ok(Self::baidu_legacy()?.continued()?.named("baidu_continued"))
    }

    /// Twitter Snowflake: 1/41/10/12 in milliseconds from 2010-11-04T01:42:54.657Z.
    pub fn snowflake() -> Result<Self> {
        Self::new(
            "snowflake",
            &[(Sign, 1), (Time, 41), (Worker, 10), (Sequence, 12)],
            TimeUnit::Millis,
            TWITTER_EPOCH_MS,
        )
    }

    /// Meituan Leaf's snowflake mode: 41/10/12 under a sign bit, Leaf's `twepoch`, and Leaf's
    /// random sequence start below 100 in each new millisecond
    /// ([`Layout::random_start_bound`]), which the sequencing generators read as their default.
    pub fn leaf() -> Result<Self> {
        Self::snowflake()?
            .named("leaf")
            .with_random_start(LEAF_RANDOM_START_BOUND)
    }

    /// Vesta's max-peak type: machine bits 0-9, sequence 10-29, seconds 30-59, method 60-61,
    /// type 62 (= 0), version 63.
    pub fn vesta_max_peak() -> Result<Self> {
        Self::new(
            "vesta_max_peak",
            &[
                (Version, 1),
                (Type, 1),
                (Method, 2),
                (Time, 30),
                (Sequence, 20),
                (Worker, 10),
            ],
            TimeUnit::Seconds,
            VESTA_EPOCH_MS,
        )
    }

    /// Vesta's min-granularity type: machine 0-9, sequence 10-19, milliseconds 20-59, method
    /// 60-61, type 62 (= 1), version 63.
    pub fn vesta_min_granularity() -> Result<Self> {
        let mut layout = Self::new(
            "vesta_min_granularity",
            &[
                (Version, 1),
                (Type, 1),
                (Method, 2),
                (Time, 40),
                (Sequence, 10),
                (Worker, 10),
            ],
            TimeUnit::Millis,
            VESTA_EPOCH_MS,
        )?;
        layout.defaults.kind = 1;
        Ok(layout)
    }

    /// Sonyflake: 39 bits of 10 ms, 8-bit sequence, 16-bit machine, in that order.
    pub fn sonyflake() -> Result<Self> {
        Self::new(
            "sonyflake",
            &[(Sign, 1), (Time, 39), (Sequence, 8), (Worker, 16)],
            TimeUnit::TenMillis,
            SONYFLAKE_EPOCH_MS,
        )
    }

    /// The Snowflake variant with a machine and a process part (the "keyworker" write-up):
    /// 1 sign bit, 41 bits of milliseconds, a 10-bit worker field holding a 5-bit process part
    /// above a 5-bit machine part, as the write-up's code packs them
    /// (`(processId << 17) | (machineId << 12)`), and 12 bits of sequence. The worker number
    /// that assigners hand out and generators take stays `machine << 5 | process`
    /// ([`WorkerSplit`](super::WorkerSplit)); composing places the parts, decoding shows both
    /// ([`DecodedUid::worker_parts`](super::DecodedUid::worker_parts)). The `machine` worker-id
    /// assigner of `uidgen-store` fills the two parts from the host's MAC addresses and the
    /// process id.
    ///
    /// Until this order was fixed the preset put the machine part above the process part
    /// (its IDs had Snowflake's bits for worker `machine << 5 | process`); an ID issued then
    /// decodes here with its two parts swapped: docs/API.md says how to read one.
    ///
    /// Two corrections to the write-up, both so that IDs stay positive 64-bit numbers:
    /// - it counts "42 bits" of time because its `(timestamp - twepoch) << 22` is not masked and
    ///   so also fills the sign bit; 1 + 42 + 5 + 5 + 12 would be 65 bits, so the time gets the
    ///   41 bits under the sign, as in every other preset (enough until 2080);
    /// - its epoch constant `12888349746579` is Twitter's `1288834974657` with a digit too many:
    ///   ten times Twitter's, in the year 2378, so every time difference would be negative.
    ///   This preset uses Twitter's epoch, [`TWITTER_EPOCH_MS`] (a deployment that really used
    ///   another sets `layout.epoch`).
    ///
    /// ```
    /// use uidgen_core::layout::TWITTER_EPOCH_MS;
    /// use uidgen_core::{FieldKind, Layout};
    /// let layout = Layout::keyworker()?;
    /// assert_eq!(layout.epoch_ms(), TWITTER_EPOCH_MS);
    /// let bits = |kind| layout.bits(kind);
    /// assert_eq!(
    ///     (bits(FieldKind::Time), bits(FieldKind::Worker), bits(FieldKind::Sequence)),
    ///     (41, 10, 12)
    /// );
    /// let (machine, process) = (7, 30);
    /// let worker = (machine << 5) | process;
    /// let id = layout.compose(&layout.parts(1_000, worker, 9))?;
    /// // The write-up's packing, bit for bit.
    /// assert_eq!(id, (1_000 << 22) | (process << 17) | (machine << 12) | 9);
    /// let decoded = layout.decode(id)?;
    /// let parts = decoded.worker_parts.expect("both parts are shown");
    /// assert_eq!((parts.machine, parts.process, decoded.parts.worker), (7, 30, worker));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn keyworker() -> Result<Self> {
        Self::new(
            "keyworker",
            &[(Sign, 1), (Time, 41), (Worker, 10), (Sequence, 12)],
            TimeUnit::Millis,
            TWITTER_EPOCH_MS,
        )?
        .with_worker_split_order(5, PartOrder::ProcessHigh)
    }

    /// IDs that JavaScript reads back exactly: 53 bits, so every ID is at most
    /// [`JS_MAX_SAFE_INTEGER`](super::epochs::JS_MAX_SAFE_INTEGER) (`Number.MAX_SAFE_INTEGER`); a browser parses larger numbers to
    /// the nearest double and silently changes them (CosId's `SafeJavaScriptSnowflakeId`,
    /// <https://github.com/Ahoo-Wang/CosId>; Sonyflake issue
    /// [#56](https://github.com/sony/sonyflake/issues/56)).
    ///
    /// 31 bits of seconds from [`DEFAULT_EPOCH`] (68 years, until 2094), a 10-bit worker and a
    /// 12-bit sequence. Why these widths:
    /// - **seconds**, because 53 bits leave no room for both a long life and millisecond
    ///   precision: 41 bits of ms (Snowflake's 69 years) would leave 12 bits for worker and
    ///   sequence together. CosId's millisecond variant does that with 3 worker bits;
    /// - **10 worker bits** (1,024 ids), the range every worker-id assigner here serves: leases
    ///   need spare ids while an expired holder's fence runs out, ZooKeeper and the `machine`
    ///   assigner hand out ids up to 1023. CosId's second variant keeps 3 bits (8 machines);
    /// - **12 sequence bits**: 4,096 IDs per second per worker, sustained; the cached generator
    ///   absorbs bursts by borrowing future seconds. A deployment that needs more per worker
    ///   and fewer workers builds its own with [`Layout::new`] (e.g. 31/6/16).
    ///
    /// When its 31 bits run out, generators fail with [`UidError::TimestampExhausted`]; no ID
    /// ever spills past bit 53.
    ///
    /// ```
    /// use uidgen_core::layout::JS_MAX_SAFE_INTEGER;
    /// use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidError, UidGenerator};
    /// let layout = Layout::safe_js()?;
    /// let last = layout.compose(&layout.parts(layout.max_time(), 1023, 4095))?;
    /// assert_eq!(last, JS_MAX_SAFE_INTEGER);
    /// // At the end of the time field: the last second's IDs, then a typed error.
    /// let end = layout.millis_of(layout.max_time());
    /// let generator = SnowflakeGenerator::new(layout.clone(), 5, ManualClock::new(end))?;
    /// assert!(generator.next_id()? <= JS_MAX_SAFE_INTEGER);
    /// let generator = SnowflakeGenerator::new(layout, 5, ManualClock::new(end + 1_000))?;
    /// assert!(matches!(generator.next_id(), Err(UidError::TimestampExhausted { .. })));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn safe_js() -> Result<Self> {
        Self::new(
            "safe_js",
            &[(Time, 31), (Worker, 10), (Sequence, 12)],
            TimeUnit::Seconds,
            DEFAULT_EPOCH,
        )
    }

    /// Look a preset up by name: `baidu` (with [`DEFAULT_EPOCH`]), `baidu_legacy`,
    /// `baidu_continued`, `snowflake`, `leaf`, `vesta_max_peak`, `vesta_min_granularity`,
    /// `sonyflake`, `keyworker`, `safe_js`.
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "baidu" => Self::baidu_default(),
            "baidu_legacy" => Self::baidu_legacy(),
            "baidu_continued" => Self::baidu_continued(),
            "snowflake" => Self::snowflake(),
            "leaf" => Self::leaf(),
            "vesta_max_peak" => Self::vesta_max_peak(),
            "vesta_min_granularity" => Self::vesta_min_granularity(),
            "sonyflake" => Self::sonyflake(),
            "keyworker" => Self::keyworker(),
            "safe_js" => Self::safe_js(),
            _ => Err(UidError::InvalidOption {
                name: "layout",
                reason: format!(
                    "unknown preset {name:?}; expected one of {}",
                    PRESET_NAMES.join(", ")
                ),
            }),
        }
    }

    /// A preset by name counting time from `epoch` instead of its scheme's own, so that a
    /// deployment that changed its epoch (Leaf's `twepoch`, Sonyflake's start time, Baidu's
    /// `epochStr`) continues its ID space; `None` keeps the preset's epoch. `baidu_legacy`
    /// exists only for its fixed 2016 epoch and takes none (use `baidu` with that epoch).
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let snowflake = Layout::preset_with_epoch("snowflake", Some("2020-01-01"))?;
    /// assert_eq!(snowflake.epoch_ms(), 1_577_836_800_000);
    /// assert_eq!(Layout::preset_with_epoch("leaf", None::<u64>)?, Layout::leaf()?);
    /// assert!(matches!(
    ///     Layout::preset_with_epoch("baidu_legacy", Some(0u64)),
    ///     Err(UidError::InvalidOption { name: "epoch", .. })
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn preset_with_epoch(name: &str, epoch: Option<impl IntoEpoch>) -> Result<Self> {
        let Some(epoch) = epoch else {
            return Self::preset(name);
        };
        if name == "baidu_legacy" {
            return Err(UidError::InvalidOption {
                name: "epoch",
                reason: "baidu_legacy is Baidu's layout with its 2016 epoch, kept to decode old \
                         IDs; use the baidu preset to choose an epoch"
                    .to_owned(),
            });
        }
        // Parsed before the preset is built, so a bad epoch is reported as one even when the
        // name is unknown too.
        let epoch_ms = epoch.into_epoch_ms()?;
        Self::preset(name)?.with_epoch(epoch_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::FieldKind;

    fn positions(layout: &Layout) -> Vec<(FieldKind, u32, u32)> {
        layout
            .fields()
            .iter()
            .map(|&(k, bits)| (k, layout.shift(k).unwrap(), bits))
            .collect()
    }

    #[test]
    fn presets_pin_their_bit_positions() {
        assert_eq!(
            positions(&Layout::baidu_default().unwrap()),
            [
                (Sign, 63, 1),
                (Time, 35, 28),
                (Worker, 13, 22),
                (Sequence, 0, 13)
            ]
        );
        for l in [Layout::snowflake().unwrap(), Layout::leaf().unwrap()] {
            assert_eq!(
                positions(&l),
                [
                    (Sign, 63, 1),
                    (Time, 22, 41),
                    (Worker, 12, 10),
                    (Sequence, 0, 12)
                ]
            );
            assert_eq!(l.epoch_ms(), 1_288_834_974_657);
            assert_eq!(l.unit(), TimeUnit::Millis);
        }
        let peak = Layout::vesta_max_peak().unwrap();
        assert_eq!(
            positions(&peak),
            [
                (Version, 63, 1),
                (Type, 62, 1),
                (Method, 60, 2),
                (Time, 30, 30),
                (Sequence, 10, 20),
                (Worker, 0, 10)
            ]
        );
        assert_eq!(peak.epoch_ms(), 1_420_041_600_000);
        let min = Layout::vesta_min_granularity().unwrap();
        assert_eq!(
            positions(&min),
            [
                (Version, 63, 1),
                (Type, 62, 1),
                (Method, 60, 2),
                (Time, 20, 40),
                (Sequence, 10, 10),
                (Worker, 0, 10)
            ]
        );
        assert_eq!(min.compose_unchecked(0, 0, 0), 1 << 62, "type bit is 1");
        assert_eq!(
            positions(&Layout::sonyflake().unwrap()),
            [
                (Sign, 63, 1),
                (Time, 24, 39),
                (Sequence, 16, 8),
                (Worker, 0, 16)
            ]
        );
        assert_eq!(Layout::sonyflake().unwrap().unit().millis(), 10);
        let legacy = Layout::baidu_legacy().unwrap();
        assert_eq!(legacy.epoch_ms(), 1_463_673_600_000);
        let keyworker = Layout::keyworker().unwrap();
        assert_eq!(
            positions(&keyworker),
            [
                (Sign, 63, 1),
                (Time, 22, 41),
                (Worker, 12, 10),
                (Sequence, 0, 12)
            ]
        );
        assert_eq!(keyworker.epoch_ms(), TWITTER_EPOCH_MS);
    }

    #[test]
    fn only_keyworker_splits_its_worker_field() {
        for name in PRESET_NAMES {
            let layout = Layout::preset(name).unwrap();
            assert_eq!(layout.name(), name);
            assert_eq!(
                layout.worker_split().is_some(),
                name == "keyworker",
                "{name}"
            );
            let id = layout.compose(&layout.parts(1, 5, 1)).unwrap();
            assert_eq!(
                layout.decode(id).unwrap().worker_parts.is_some(),
                name == "keyworker",
                "{name}"
            );
        }
    }

    #[test]
    fn every_preset_but_baidu_legacy_takes_an_epoch() {
        let twepoch = 1_500_000_000_000u64;
        for name in PRESET_NAMES {
            let custom = Layout::preset_with_epoch(name, Some(twepoch));
            if name == "baidu_legacy" {
                assert!(custom.is_err());
                continue;
            }
            let custom = custom.unwrap();
            let preset = Layout::preset(name).unwrap();
            assert_eq!(custom.epoch_ms(), twepoch, "{name}");
            assert_eq!(
                (
                    custom.fields(),
                    custom.unit(),
                    custom.name(),
                    custom.worker_split()
                ),
                (
                    preset.fields(),
                    preset.unit(),
                    preset.name(),
                    preset.worker_split()
                ),
                "{name}: only the epoch changes"
            );
        }
        assert_eq!(
            Layout::preset_with_epoch("baidu", Some("2024-01-01")).unwrap(),
            Layout::baidu("2024-01-01").unwrap()
        );
    }
}
