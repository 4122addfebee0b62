//! Property: `compose` and `decompose` are exact inverses for every preset.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use proptest::prelude::*;
use uidgen_core::{FieldKind, Layout, UidParts};

/// Every preset, `keyworker` included.
const PRESETS: [&str; 8] = uidgen_core::layout::PRESET_NAMES;

fn in_range(layout: &Layout, raw: [u64; 6]) -> UidParts {
    let fit = |kind: FieldKind, v: u64| match layout.max(kind) {
        0 => 0,
        max => v % (max + 1),
    };
    UidParts {
        time: fit(FieldKind::Time, raw[0]),
        worker: fit(FieldKind::Worker, raw[1]),
        sequence: fit(FieldKind::Sequence, raw[2]),
        version: fit(FieldKind::Version, raw[3]),
        kind: fit(FieldKind::Type, raw[4]),
        method: fit(FieldKind::Method, raw[5]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn compose_then_decompose_returns_the_parts(preset in 0..PRESETS.len(), raw in any::<[u64; 6]>()) {
        let layout = Layout::preset(PRESETS[preset]).unwrap();
        let parts = in_range(&layout, raw);
        let id = layout.compose(&parts).unwrap();
        prop_assert_eq!(layout.decompose(id).unwrap(), parts);
        let decoded = layout.decode(id).unwrap();
        prop_assert_eq!(decoded.timestamp_ms, layout.epoch_ms() + parts.time * layout.unit().millis());
    }

    #[test]
    fn decompose_then_compose_returns_the_id(preset in 0..PRESETS.len(), id in any::<u64>()) {
        let layout = Layout::preset(PRESETS[preset]).unwrap();
        match layout.decompose(id) {
            Ok(parts) => prop_assert_eq!(layout.compose(&parts).unwrap(), id),
            // Only a set sign bit makes an ID undecodable.
            Err(_) => prop_assert!(layout.shift(FieldKind::Sign) == Some(63) && id >> 63 == 1),
        }
    }

    #[test]
    fn compose_refuses_any_out_of_range_field(preset in 0..PRESETS.len(), field in 0..6usize, excess in 1..1_000u64) {
        let layout = Layout::preset(PRESETS[preset]).unwrap();
        let kinds = [FieldKind::Time, FieldKind::Worker, FieldKind::Sequence, FieldKind::Version, FieldKind::Type, FieldKind::Method];
        let mut parts = UidParts::default();
        let value = layout.max(kinds[field]).saturating_add(excess);
        match kinds[field] {
            FieldKind::Time => parts.time = value,
            FieldKind::Worker => parts.worker = value,
            FieldKind::Sequence => parts.sequence = value,
            FieldKind::Version => parts.version = value,
            FieldKind::Type => parts.kind = value,
            _ => parts.method = value,
        }
        prop_assert!(layout.compose(&parts).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// A keyworker ID decodes to a machine and a process part that join back into its worker,
    /// and the bits are Snowflake's: the split only changes how the worker is shown.
    #[test]
    fn keyworker_decodes_machine_and_process_that_make_up_the_worker(
        time in any::<u64>(), machine in 0..32u64, process in 0..32u64, sequence in 0..4096u64,
    ) {
        let layout = Layout::keyworker().unwrap();
        let split = layout.worker_split().unwrap();
        let time = time % (layout.max_time() + 1);
        let worker = split.join(machine, process).unwrap();
        let id = layout.compose(&layout.parts(time, worker, sequence)).unwrap();
        let decoded = layout.decode(id).unwrap();
        prop_assert_eq!(decoded.parts.worker, worker);
        let parts = decoded.worker_parts.unwrap();
        prop_assert_eq!((parts.machine, parts.process), (machine, process));
        let snowflake = Layout::snowflake().unwrap();
        prop_assert_eq!(snowflake.compose(&snowflake.parts(time, worker, sequence)).unwrap(), id);
    }
}

#[test]
fn with_method_rewrites_only_the_method_bits_on_vesta_layouts_and_nothing_elsewhere() {
    use uidgen_core::GenMethod;
    for layout in [
        Layout::vesta_max_peak().unwrap(),
        Layout::vesta_min_granularity()
            .unwrap()
            .with_defaults(1, 1, 0)
            .unwrap(),
    ] {
        let parts = layout.parts(123_456, 1021, 77);
        let id = layout.compose(&parts).unwrap();
        let mut seen = std::collections::HashSet::new();
        for method in [
            GenMethod::Embedded,
            GenMethod::CenterServer,
            GenMethod::Rest,
        ] {
            let stamped = layout.with_method(id, method.value()).unwrap();
            let got = layout.decompose(stamped).unwrap();
            assert_eq!(
                got,
                UidParts {
                    method: method.value(),
                    ..parts
                },
                "{}",
                layout.name()
            );
            // Stamping twice is stamping once: a channel may stamp an already stamped ID.
            assert_eq!(
                layout.with_method(stamped, method.value()).unwrap(),
                stamped
            );
            seen.insert(stamped);
        }
        assert_eq!(seen.len(), 3, "one ID per channel");
        assert!(layout.with_method(id, 4).is_err(), "2 bits hold 0 to 3");
    }
    for layout in [
        Layout::baidu_default().unwrap(),
        Layout::snowflake().unwrap(),
        Layout::sonyflake().unwrap(),
    ] {
        let id = layout.compose(&layout.parts(99, 3, 5)).unwrap();
        for method in 0..=7 {
            assert_eq!(
                layout.with_method(id, method).unwrap(),
                id,
                "{}",
                layout.name()
            );
        }
    }
}
