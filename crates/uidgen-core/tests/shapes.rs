//! The datacenter field, `keyworker` in the write-up's order, and Leaf's random sequence start
//! as the `leaf` layout's default.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use common::{assert_no_duplicates, hammer};
use proptest::prelude::*;
use uidgen_core::layout::PartOrder;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, FieldKind, Layout, ManualClock,
    SnowflakeGenerator, SystemClock, UidError, UidGenerator,
};

/// Twitter's Snowflake: 5 datacenter bits above 5 worker bits.
fn twitter(datacenter: u64) -> Layout {
    Layout::snowflake()
        .unwrap()
        .with_datacenter_bits(5)
        .unwrap()
        .with_datacenter_id(datacenter)
        .unwrap()
}

#[test]
fn one_worker_id_in_two_datacenters_never_issues_the_same_id() {
    // The same worker id, the same clock, two datacenters: every ID differs in the datacenter
    // bits alone, so the two sets cannot meet.
    let clock = ManualClock::auto_advancing(1_800_000_000_000);
    let east = Arc::new(SnowflakeGenerator::new(twitter(1), 31, clock.clone()).unwrap());
    let west = Arc::new(SnowflakeGenerator::new(twitter(2), 31, clock).unwrap());
    let mut ids = hammer(Arc::clone(&east), 2, 50_000);
    ids.extend(hammer(Arc::clone(&west), 2, 50_000));
    ids.sort_unstable();
    assert_eq!(ids.len(), 200_000);
    assert_no_duplicates(&ids);
    let by_datacenter: BTreeSet<(Option<u64>, u64)> = ids
        .iter()
        .map(|&id| {
            let decoded = east.parse(id).unwrap();
            (decoded.datacenter, decoded.parts.worker)
        })
        .collect();
    assert_eq!(
        by_datacenter,
        BTreeSet::from([(Some(1), 31), (Some(2), 31)])
    );
}

#[test]
fn every_generator_stamps_the_layouts_datacenter() {
    // Baidu's 22 worker bits as 5 datacenter bits over 17 worker bits.
    let layout = Layout::baidu_default()
        .unwrap()
        .with_datacenter_bits(5)
        .unwrap()
        .with_datacenter_id(17)
        .unwrap();
    assert_eq!(
        layout.fields(),
        [
            (FieldKind::Sign, 1),
            (FieldKind::Time, 28),
            (FieldKind::Datacenter, 5),
            (FieldKind::Worker, 17),
            (FieldKind::Sequence, 13)
        ]
    );
    assert_eq!(layout.max_worker_id(), (1 << 17) - 1);
    let clock = ManualClock::auto_advancing(layout.epoch_ms() + 10_000);
    let generators: [Box<dyn UidGenerator>; 3] = [
        Box::new(DefaultUidGenerator::new(layout.clone(), 131_071, clock.clone()).unwrap()),
        Box::new(SnowflakeGenerator::new(layout.clone(), 131_071, clock.clone()).unwrap()),
        Box::new(
            CachedUidGenerator::new(
                layout.clone(),
                131_071,
                clock,
                CachedOptions::waiting(Duration::from_secs(10)),
            )
            .unwrap(),
        ),
    ];
    for generator in &generators {
        let id = generator.next_id().unwrap();
        let decoded = layout.decode(id).unwrap();
        assert_eq!(
            (decoded.datacenter, decoded.parts.datacenter),
            (Some(17), 17)
        );
        assert_eq!(decoded.parts.worker, 131_071);
        // The bits are Baidu's 22-bit worker field holding `17 << 17 | 131_071`.
        let plain = Layout::baidu_default().unwrap().decode(id).unwrap();
        assert_eq!(plain.parts.worker, (17 << 17) | 131_071);
    }
    assert!(matches!(
        DefaultUidGenerator::new(layout, 1 << 17, SystemClock),
        Err(UidError::WorkerIdOverflow { .. })
    ));
}

#[test]
fn a_datacenter_cut_that_does_not_fit_is_refused_with_a_reason() {
    let snowflake = Layout::snowflake().unwrap();
    for bits in [0, 10, 11] {
        let err = snowflake.clone().with_datacenter_bits(bits).unwrap_err();
        assert!(
            matches!(
                err,
                UidError::InvalidFieldWidth {
                    field: FieldKind::Datacenter,
                    ..
                }
            ),
            "{bits}: {err}"
        );
    }
    assert_eq!(
        twitter(0).with_datacenter_bits(2).unwrap_err().to_string(),
        "layout field `datacenter` has invalid width 2: the layout already has a datacenter field"
    );
    assert!(
        Layout::keyworker()
            .unwrap()
            .with_datacenter_bits(3)
            .is_err(),
        "keyworker splits its worker field already"
    );
    assert_eq!(
        snowflake.with_datacenter_id(1).unwrap_err().to_string(),
        "invalid option `datacenter`: layout snowflake has no datacenter field; cut one with a \
         datacenter width first"
    );
    // Vesta's defaults and the datacenter do not overwrite each other.
    let vesta = Layout::vesta_min_granularity()
        .unwrap()
        .with_datacenter_bits(2)
        .unwrap()
        .with_datacenter_id(3)
        .unwrap()
        .with_defaults(1, 1, 2)
        .unwrap();
    let parts = vesta.parts(0, 0, 0);
    assert_eq!(
        (parts.version, parts.kind, parts.method, parts.datacenter),
        (1, 1, 2, 3)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// The write-up's packing, `time << 22 | process << 17 | machine << 12 | sequence`, is
    /// what a keyworker generator issues for worker `machine << 5 | process`.
    #[test]
    fn keyworker_generators_pack_the_process_above_the_machine(
        machine in 0..32u64, process in 0..32u64, ms in 0..1_000_000u64,
    ) {
        let layout = Layout::keyworker().unwrap();
        let worker = layout.worker_split().unwrap().join(machine, process).unwrap();
        let now = 1_700_000_000_000 + ms;
        let generator = DefaultUidGenerator::new(layout.clone(), worker, ManualClock::new(now)).unwrap();
        let id = generator.next_id().unwrap();
        let time = now - layout.epoch_ms();
        prop_assert_eq!(id, (time << 22) | (process << 17) | (machine << 12));
        let parts = generator.parse(id).unwrap().worker_parts.unwrap();
        prop_assert_eq!((parts.machine, parts.process), (machine, process));
    }
}

#[test]
fn an_id_from_the_old_keyworker_order_reads_back_with_its_parts_swapped() {
    // What docs/API.md tells users holding keyworker IDs issued before the order was fixed:
    // the old preset was `snowflake` with a machine-high split.
    let old = Layout::snowflake()
        .unwrap()
        .with_worker_split_order(5, PartOrder::MachineHigh)
        .unwrap();
    let id = old.compose(&old.parts(1_000, (7 << 5) | 30, 9)).unwrap();
    let under_old = old.decode(id).unwrap().worker_parts.unwrap();
    let under_new = Layout::keyworker()
        .unwrap()
        .decode(id)
        .unwrap()
        .worker_parts
        .unwrap();
    assert_eq!((under_old.machine, under_old.process), (7, 30));
    assert_eq!((under_new.machine, under_new.process), (30, 7));
}

/// The sequence each of the first `units` time units starts at.
fn first_sequences(generator: &dyn UidGenerator, clock: &ManualClock, units: u64) -> Vec<u64> {
    (0..units)
        .map(|_| {
            clock.advance(1);
            generator
                .parse(generator.next_id().unwrap())
                .unwrap()
                .parts
                .sequence
        })
        .collect()
}

#[test]
fn the_leaf_layout_starts_each_millisecond_below_100_by_default() {
    let leaf = Layout::leaf().unwrap();
    assert_eq!(leaf.random_start_bound(), 100);
    let clock = ManualClock::new(1_700_000_000_000);
    let generators: [Box<dyn UidGenerator>; 2] = [
        Box::new(SnowflakeGenerator::new(leaf.clone(), 1, clock.clone()).unwrap()),
        Box::new(DefaultUidGenerator::new(leaf.clone(), 2, clock.clone()).unwrap()),
    ];
    for generator in &generators {
        let starts = first_sequences(&**generator, &clock, 200);
        assert!(starts.iter().all(|&s| s < 100), "{starts:?}");
        // Random below 100: 200 starts all alike would be a one-in-10^398 draw.
        let distinct: BTreeSet<u64> = starts.iter().copied().collect();
        assert!(distinct.len() > 1, "{starts:?}");
    }
    // The generator's switch overrides the layout: off starts at 0, on starts below 100.
    let off = SnowflakeGenerator::new(leaf, 3, clock.clone())
        .unwrap()
        .random_sequence_start(false);
    assert!(first_sequences(&off, &clock, 50).iter().all(|&s| s == 0));
    let snowflake = Layout::snowflake().unwrap();
    let plain = SnowflakeGenerator::new(snowflake.clone(), 4, clock.clone()).unwrap();
    assert!(first_sequences(&plain, &clock, 50).iter().all(|&s| s == 0));
    let on = SnowflakeGenerator::new(snowflake, 5, clock.clone())
        .unwrap()
        .random_sequence_start(true);
    let starts = first_sequences(&on, &clock, 200);
    assert!(starts.iter().all(|&s| s < 100));
    assert!(starts.iter().collect::<BTreeSet<_>>().len() > 1);
}

#[test]
fn leaf_ids_with_a_random_start_are_unique_across_four_threads() {
    let generator =
        Arc::new(SnowflakeGenerator::new(Layout::leaf().unwrap(), 9, SystemClock).unwrap());
    let ids = hammer(generator, 4, 250_000);
    assert_no_duplicates(&ids);
    assert_eq!(ids.len(), 1_000_000);
}
