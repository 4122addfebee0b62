//! The preset layouts of the ID schemes uidgen speaks: Baidu, Snowflake, Leaf, Vesta, Sonyflake.

use super::FieldKind::{Method, Sequence, Sign, Time, Type, Version, Worker};
use super::{IntoEpoch, Layout, TimeUnit};
use crate::error::{Result, UidError};

/// The epoch of the default service layout: recent, so 28 bits of seconds last until 2034.
pub const DEFAULT_EPOCH: &str = "2026-01-01";
/// Twitter's Snowflake epoch, also Leaf's `twepoch`.
pub const TWITTER_EPOCH_MS: u64 = 1_288_834_974_657;
/// Baidu uid-generator's default epoch, 2016-05-20 in UTC+8. Its 28 bits of seconds ran out on
/// 2024-11-20 (Baidu issue #100); kept only to decode old IDs.
pub const BAIDU_LEGACY_EPOCH_MS: u64 = 1_463_673_600_000;
/// Vesta's epoch, 2015-01-01 00:00 in UTC+8.
pub const VESTA_EPOCH_MS: u64 = 1_420_041_600_000;
/// Sonyflake's default start time, 2014-09-01 00:00 UTC.
pub const SONYFLAKE_EPOCH_MS: u64 = 1_409_529_600_000;

/// The presets, by constructor or by name.
///
/// ```
/// use uidgen_core::{FieldKind, Layout, TimeUnit};
/// let baidu = Layout::baidu("2024-01-01")?;
/// assert_eq!((baidu.bits(FieldKind::Time), baidu.bits(FieldKind::Worker), baidu.bits(FieldKind::Sequence)), (28, 22, 13));
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
    /// with it fails with [`UidError::TimestampExhausted`] since 2024-11-20.
    pub fn baidu_legacy() -> Result<Self> {
        Ok(Self::baidu(BAIDU_LEGACY_EPOCH_MS)?.named("baidu_legacy"))
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

    /// Meituan Leaf's snowflake mode: 41/10/12 under a sign bit, Leaf's `twepoch`.
    pub fn leaf() -> Result<Self> {
        Ok(Self::snowflake()?.named("leaf"))
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

    /// Look a preset up by name: `baidu` (with [`DEFAULT_EPOCH`]), `baidu_legacy`, `snowflake`,
    /// `leaf`, `vesta_max_peak`, `vesta_min_granularity`, `sonyflake`.
    pub fn preset(name: &str) -> Result<Self> {
        match name {
            "baidu" => Self::baidu_default(),
            "baidu_legacy" => Self::baidu_legacy(),
            "snowflake" => Self::snowflake(),
            "leaf" => Self::leaf(),
            "vesta_max_peak" => Self::vesta_max_peak(),
            "vesta_min_granularity" => Self::vesta_min_granularity(),
            "sonyflake" => Self::sonyflake(),
            _ => Err(UidError::InvalidOption {
                name: "layout",
                reason: format!(
                    "unknown preset {name:?}; expected one of baidu, baidu_legacy, snowflake, leaf, vesta_max_peak, vesta_min_granularity, sonyflake"
                ),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::FieldKind;
    use super::*;

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
    }
}
