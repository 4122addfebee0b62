//! `[layout]`: the bit layout of IDs, parsed into the library's [`Layout`] (whose
//! construction is the check).

use serde::{Deserialize, Serialize};
use uidgen_core::{Layout, UidError};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// `[layout]`: the bit layout of IDs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LayoutConfig {
    /// A preset name: baidu, baidu_legacy, baidu_continued, snowflake, leaf, vesta_max_peak,
    /// vesta_min_granularity, sonyflake, keyworker, safe_js.
    pub preset: String,
    /// Epoch override for any preset but `baidu_legacy` (a Leaf `twepoch`, a Sonyflake start
    /// time): `"2026-01-01"`, `"2026-01-01+08:00"` or ms.
    pub epoch: Option<String>,
    /// Custom Baidu-style widths (all three or none): time bits (seconds).
    pub time_bits: Option<u32>,
    /// Custom worker bits.
    pub worker_bits: Option<u32>,
    /// Custom sequence bits.
    pub seq_bits: Option<u32>,
    /// Vesta's version bit, stamped on every ID of a layout with the field (default 0).
    pub version: Option<u64>,
    /// Vesta's type bit, stamped on every ID of a layout with the field (default: the
    /// preset's own, 0 max-peak, 1 min-granularity).
    #[serde(rename = "type")]
    pub kind: Option<u64>,
    /// Cut this many bits off the top of the worker field as a datacenter field (Twitter's
    /// 5 + 5); worker ids then range over the bits left. Unset: no datacenter field.
    pub datacenter_bits: Option<u32>,
    /// The datacenter id every ID of this server carries (default 0); needs `datacenter_bits`.
    pub datacenter_id: Option<u64>,
}

impl Default for LayoutConfig {
    fn default() -> Self {
        Self {
            preset: "baidu".into(),
            epoch: None,
            time_bits: None,
            worker_bits: None,
            seq_bits: None,
            version: None,
            kind: None,
            datacenter_bits: None,
            datacenter_id: None,
        }
    }
}

/// The `[layout]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["layout", "preset"], Kind::Str),
    (&["layout", "epoch"], Kind::Str),
    (&["layout", "time_bits"], Kind::Int),
    (&["layout", "worker_bits"], Kind::Int),
    (&["layout", "seq_bits"], Kind::Int),
    (&["layout", "version"], Kind::Int),
    (&["layout", "type"], Kind::Int),
    (&["layout", "datacenter_bits"], Kind::Int),
    (&["layout", "datacenter_id"], Kind::Int),
];

impl LayoutConfig {
    /// The layout this section describes; an error names the key that made it invalid.
    ///
    /// ```
    /// use uidgen_server::config::layout::LayoutConfig;
    /// let leaf = LayoutConfig { preset: "leaf".into(), ..LayoutConfig::default() };
    /// assert_eq!(leaf.build()?.name(), "leaf");
    /// # Ok::<(), uidgen_server::config::error::ConfigError>(())
    /// ```
    pub fn build(&self) -> Result<Layout, ConfigError> {
        let l = self;
        let result = match (l.time_bits, l.worker_bits, l.seq_bits) {
            // Every preset takes an epoch (but baidu_legacy, whose epoch is its point), so a
            // deployment that set its own (Leaf's twepoch) continues its ID space.
            (None, None, None) => Layout::preset_with_epoch(&l.preset, l.epoch.as_ref()),
            (Some(t), Some(w), Some(s)) => {
                if l.preset != "baidu" {
                    return Err(invalid(
                        "layout.preset",
                        "custom bits are Baidu-style; set preset = \"baidu\"",
                    ));
                }
                let epoch = l
                    .epoch
                    .as_deref()
                    .unwrap_or(uidgen_core::layout::DEFAULT_EPOCH);
                Layout::baidu_bits(t, w, s, epoch)
            }
            _ => {
                return Err(invalid(
                    "layout.time_bits",
                    "set all three of time_bits, worker_bits and seq_bits, or none",
                ));
            }
        };
        let result = result.and_then(|layout| {
            if l.version.is_none() && l.kind.is_none() {
                return Ok(layout);
            }
            let preset = layout.parts(0, 0, 0);
            layout
                .with_defaults(
                    l.version.unwrap_or(preset.version),
                    l.kind.unwrap_or(preset.kind),
                    preset.method,
                )
                .map_err(|e| UidError::InvalidOption {
                    name: "version/type",
                    reason: format!("{e}; only the Vesta presets have these fields"),
                })
        });
        let layout = self.refused(result)?;
        self.with_datacenter(layout)
    }

    /// `layout` with the datacenter field `datacenter_bits` / `datacenter_id` describe; the
    /// library's builders are the check.
    fn with_datacenter(&self, layout: Layout) -> Result<Layout, ConfigError> {
        let layout = match self.datacenter_bits {
            Some(bits) => layout
                .with_datacenter_bits(bits)
                .map_err(|e| invalid("layout.datacenter_bits", e.to_string()))?,
            None => layout,
        };
        match self.datacenter_id {
            Some(id) => layout
                .with_datacenter_id(id)
                .map_err(|e| invalid("layout.datacenter_id", e.to_string())),
            None => Ok(layout),
        }
    }

    /// The key a library error while building the preset or custom bits is about.
    fn refused(&self, result: Result<Layout, UidError>) -> Result<Layout, ConfigError> {
        let l = self;
        result.map_err(|e| {
            let key = if matches!(
                e,
                UidError::InvalidEpoch { .. }
                    | UidError::EpochInFuture { .. }
                    | UidError::InvalidOption { name: "epoch", .. }
            ) {
                "layout.epoch"
            } else if matches!(
                e,
                UidError::InvalidOption {
                    name: "version/type",
                    ..
                }
            ) {
                if l.version.is_some() {
                    "layout.version"
                } else {
                    "layout.type"
                }
            } else if l.time_bits.is_some() {
                "layout.time_bits"
            } else {
                "layout.preset"
            };
            invalid(key, e.to_string())
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn every_preset_but_baidu_legacy_takes_an_epoch_from_the_file_or_the_environment() {
        // A Leaf deployment whose twepoch was 2017-07-14T02:40:00Z continues its ID space.
        let twepoch = 1_500_000_000_000u64;
        for preset in uidgen_core::layout::PRESET_NAMES {
            if preset == "baidu_legacy" {
                continue;
            }
            let text = format!("[layout]\npreset = \"{preset}\"\nepoch = \"{twepoch}\"");
            let layout = parse(&text, &[]).unwrap().build_layout().unwrap();
            assert_eq!((layout.name(), layout.epoch_ms()), (preset, twepoch));
            let from_env = parse(
                "",
                &[
                    ("UIDGEN_LAYOUT", preset),
                    ("UIDGEN_LAYOUT_EPOCH", "2017-07-14T02:40:00Z"),
                ],
            )
            .unwrap()
            .build_layout()
            .unwrap();
            assert_eq!(from_env, layout, "{preset}");
        }
        let leaf = parse("[layout]\npreset = \"leaf\"", &[]).unwrap();
        assert_eq!(
            leaf.build_layout().unwrap().epoch_ms(),
            uidgen_core::layout::TWITTER_EPOCH_MS,
            "without an epoch, the scheme's own"
        );
    }

    #[test]
    fn vesta_version_and_type_come_from_config() {
        let config = parse(
            "[layout]\npreset = \"vesta_min_granularity\"\nversion = 1",
            &[],
        )
        .unwrap();
        let layout = config.build_layout().unwrap();
        // The preset's own type (1) stays unless `type` says otherwise.
        let parts = layout.parts(0, 0, 0);
        assert_eq!((parts.version, parts.kind, parts.method), (1, 1, 0));
        let config = parse(
            "",
            &[
                ("UIDGEN_LAYOUT", "vesta_max_peak"),
                ("UIDGEN_LAYOUT_TYPE", "1"),
            ],
        )
        .unwrap();
        assert_eq!(config.build_layout().unwrap().parts(0, 0, 0).kind, 1);
    }

    #[test]
    fn a_datacenter_field_is_cut_from_the_worker_field_and_workers_range_over_the_rest() {
        let from_file = parse(
            "[layout]\npreset = \"snowflake\"\ndatacenter_bits = 5\ndatacenter_id = 3",
            &[],
        )
        .unwrap();
        let from_env = parse(
            "",
            &[
                ("UIDGEN_LAYOUT", "snowflake"),
                ("UIDGEN_LAYOUT_DATACENTER_BITS", "5"),
                ("UIDGEN_LAYOUT_DATACENTER_ID", "3"),
            ],
        )
        .unwrap();
        let settings = from_file.settings().unwrap();
        let layout = &settings.layout;
        assert_eq!(layout, &from_env.build_layout().unwrap());
        assert_eq!((layout.datacenter_id(), layout.max_worker_id()), (3, 31));
        let id = layout.compose(&layout.parts(1, 7, 0)).unwrap();
        assert_eq!(layout.decode(id).unwrap().datacenter, Some(3));
        // Every assigner is given the reduced range: the default one fits 0-31.
        let range = uidgen_worker::WorkerIdRange::from_low(0)
            .within(layout)
            .unwrap();
        assert_eq!(range.high(), 31);
        // Without an id, datacenter 0.
        let zero = parse("[layout]\ndatacenter_bits = 2", &[]).unwrap();
        assert_eq!(zero.build_layout().unwrap().datacenter_id(), 0);
    }

    #[test]
    fn a_worker_id_or_range_past_the_cut_worker_field_is_refused() {
        let cases: &[Refusal] = &[
            (
                "[layout]\npreset = \"snowflake\"\ndatacenter_bits = 5\n[worker]\nassigner = \
                 \"static\"\nid = 32",
                &[],
                "invalid config key `worker.id`: worker id 32 exceeds the layout's maximum 31",
            ),
            (
                "[layout]\npreset = \"snowflake\"\ndatacenter_bits = 5\n[worker]\nrange = \
                 \"0-63\"",
                &[],
                "invalid config key `worker.range`: worker id range 0-63 does not fit the layout, \
                 whose worker ids go up to 31",
            ),
        ];
        assert_refused(cases);
    }

    #[test]
    fn each_invalid_key_is_named_with_its_reason() {
        let cases: &[Refusal] = &[
            (
                "[layout]\npreset = \"baidu_legacy\"\nepoch = \"2020-01-01\"",
                &[],
                "invalid config key `layout.epoch`: invalid option `epoch`: baidu_legacy is \
                 Baidu's layout with its 2016 epoch",
            ),
            (
                "[layout]\npreset = \"leaf\"\nepoch = \"2999-01-01\"",
                &[],
                "invalid config key `layout.epoch`: epoch 32472144000000 ms lies in the future",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "sonyflake"),
                    ("UIDGEN_LAYOUT_EPOCH", "last tuesday"),
                ],
                "invalid config key `layout.epoch`: cannot parse epoch \"last tuesday\"",
            ),
            (
                "[layout]\npreset = \"snowflake\"\nepoch = \"2017-02-30\"",
                &[],
                "invalid config key `layout.epoch`: cannot parse epoch \"2017-02-30\": no such \
                 calendar date",
            ),
            (
                "[layout]\nepoch = \"2999-01-01\"",
                &[],
                "invalid config key `layout.epoch`",
            ),
            (
                "[layout]\ntime_bits = 30\nworker_bits = 20\nseq_bits = 10",
                &[],
                "invalid config key `layout.time_bits`: layout bits must sum to 64, but the fields \
                 sum to 61",
            ),
            (
                "[layout]\npreset = \"nope\"",
                &[],
                "invalid config key `layout.preset`: invalid option `layout`: unknown preset",
            ),
            (
                "[layout]\nversion = 1",
                &[],
                "invalid config key `layout.version`: invalid option `version/type`: version value \
                 1 does not fit in 0 bits",
            ),
            (
                "",
                &[
                    ("UIDGEN_LAYOUT", "vesta_max_peak"),
                    ("UIDGEN_LAYOUT_TYPE", "2"),
                ],
                "invalid config key `layout.type`",
            ),
            (
                "[layout]\npreset = \"snowflake\"\ndatacenter_bits = 10",
                &[],
                "invalid config key `layout.datacenter_bits`: ",
            ),
            (
                "[layout]\npreset = \"keyworker\"\ndatacenter_bits = 2",
                &[],
                "invalid config key `layout.datacenter_bits`: ",
            ),
            (
                "[layout]\npreset = \"snowflake\"\ndatacenter_bits = 5\ndatacenter_id = 32",
                &[],
                "invalid config key `layout.datacenter_id`: ",
            ),
            (
                "",
                &[("UIDGEN_LAYOUT_DATACENTER_ID", "1")],
                "invalid config key `layout.datacenter_id`: ",
            ),
        ];
        assert_refused(cases);
    }
}
