//! Property: `compose` and `decompose` are exact inverses for every preset.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use proptest::prelude::*;
use uidgen_core::{FieldKind, Layout, UidParts};

/// Every preset, `keyworker` included.
const PRESETS: [&str; 10] = uidgen_core::layout::PRESET_NAMES;

/// Every preset, and each with a 5-bit datacenter field cut from its worker field (`keyworker`
/// splits its 10 worker bits already, so it keeps them).
fn layout(i: usize) -> Layout {
    let preset = Layout::preset(PRESETS[i % PRESETS.len()]).unwrap();
    if i >= PRESETS.len() && preset.worker_split().is_none() {
        preset.with_datacenter_bits(5).unwrap()
    } else {
        preset
    }
}

const LAYOUTS: usize = 2 * PRESETS.len();

fn in_range(layout: &Layout, raw: [u64; 7]) -> UidParts {
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
        datacenter: fit(FieldKind::Datacenter, raw[6]),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn compose_then_decompose_returns_the_parts(preset in 0..LAYOUTS, raw in any::<[u64; 7]>()) {
        let layout = layout(preset);
        let parts = in_range(&layout, raw);
        let id = layout.compose(&parts).unwrap();
        prop_assert_eq!(layout.decompose(id).unwrap(), parts);
        let decoded = layout.decode(id).unwrap();
        prop_assert_eq!(decoded.timestamp_ms, layout.epoch_ms() + parts.time * layout.unit().millis());
        prop_assert!(id <= layout.max_id());
        prop_assert_eq!(decoded.datacenter.is_some(), layout.has(FieldKind::Datacenter));
    }

    #[test]
    fn decompose_then_compose_returns_the_id(preset in 0..LAYOUTS, id in any::<u64>(), narrow in any::<bool>()) {
        let layout = layout(preset);
        // Half the cases within the layout's width, so narrow layouts are exercised too.
        let id = if narrow { id & layout.max_id() } else { id };
        match layout.decompose(id) {
            Ok(parts) => prop_assert_eq!(layout.compose(&parts).unwrap(), id),
            // Only a set sign bit, or a bit above the width, makes an ID undecodable.
            Err(_) => prop_assert!(id > layout.max_id()),
        }
    }

    #[test]
    fn compose_refuses_any_out_of_range_field(preset in 0..LAYOUTS, field in 0..7usize, excess in 1..1_000u64) {
        let layout = layout(preset);
        let kinds = [FieldKind::Time, FieldKind::Worker, FieldKind::Sequence, FieldKind::Version, FieldKind::Type, FieldKind::Method, FieldKind::Datacenter];
        let mut parts = UidParts::default();
        let value = layout.max(kinds[field]).saturating_add(excess);
        parts.set(kinds[field], value);
        prop_assert!(layout.compose(&parts).is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// A keyworker ID decodes to a machine and a process part that join back into its worker,
    /// and its bits are the write-up's `time << 22 | process << 17 | machine << 12 | sequence`.
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
        prop_assert_eq!(id, (time << 22) | (process << 17) | (machine << 12) | sequence);
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
