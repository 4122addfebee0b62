//! Helpers shared by the core's integration tests.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::layout::PRESET_NAMES;
use uidgen_core::{
    CachedOptions, CachedUidGenerator, DefaultUidGenerator, Layout, ManualClock,
    SnowflakeGenerator, UidError, UidGenerator,
};

/// Take `per_thread` IDs on each of `threads` threads at once and return them all, sorted.
pub fn hammer<G: UidGenerator + 'static>(
    generator: Arc<G>,
    threads: usize,
    per_thread: usize,
) -> Vec<u64> {
    on_threads(generator, threads, move |generator| {
        let mut ids = Vec::with_capacity(per_thread);
        for _ in 0..per_thread {
            ids.push(generator.next_id().expect("next_id"));
        }
        ids
    })
}

/// Run `take` on each of `threads` threads, started together, and return every ID they took,
/// sorted.
pub fn on_threads<G, F>(generator: Arc<G>, threads: usize, take: F) -> Vec<u64>
where
    G: UidGenerator + 'static,
    F: Fn(&G) -> Vec<u64> + Send + Sync + 'static,
{
    let barrier = Arc::new(std::sync::Barrier::new(threads));
    let take = Arc::new(take);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let generator = Arc::clone(&generator);
            let barrier = Arc::clone(&barrier);
            let take = Arc::clone(&take);
            std::thread::spawn(move || {
                barrier.wait();
                take(&generator)
            })
        })
        .collect();
    let mut all: Vec<u64> = handles
        .into_iter()
        .flat_map(|h| h.join().expect("hammer thread panicked"))
        .collect();
    all.sort_unstable();
    all
}

/// Assert a sorted list holds no ID twice, naming the first duplicate.
pub fn assert_no_duplicates(sorted: &[u64]) {
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        let dups = sorted.windows(2).filter(|w| w[0] == w[1]).count();
        panic!("{dups} duplicate IDs, first {}", w[0]);
    }
}

/// Assert every ID decodes under the generator's layout to `worker`.
pub fn assert_worker<G: UidGenerator>(generator: &G, ids: &[u64], worker: u64) {
    for &id in ids {
        let parts = generator.parse(id).expect("decodes").parts;
        assert_eq!(
            parts.worker, worker,
            "id {id} decodes to worker {}",
            parts.worker
        );
    }
}

/// Assert `err` is the exhaustion of a 4-bit time field (16 seconds of life) one unit past its
/// end, with the message that tells the operator what to change.
pub fn assert_exhausted_after_16_units(err: &UidError) {
    assert_eq!(
        *err,
        UidError::TimestampExhausted {
            elapsed: 16,
            max: 15
        }
    );
    assert_eq!(
        err.to_string(),
        "timestamp bits exhausted: 16 time units since the epoch exceed the layout's maximum 15; move the epoch forward or widen the time bits"
    );
}

/// Every preset but `baidu_legacy` (the same fields as `baidu`, only an older epoch).
pub fn presets_but_legacy() -> impl Iterator<Item = &'static str> {
    PRESET_NAMES
        .into_iter()
        .filter(|&name| name != "baidu_legacy")
}

/// How many kinds [`generator_of_kind`] makes.
pub const GENERATOR_KINDS: usize = 4;

/// One generator of each kind: 0 Default, 1 Snowflake, 2 Snowflake with Leaf's random start,
/// 3 cached (a ring of `2^boost_power` units of IDs, waiting up to 10 s when empty).
pub fn generator_of_kind(
    kind: usize,
    layout: Layout,
    worker: u64,
    clock: ManualClock,
    boost_power: u32,
) -> Box<dyn UidGenerator> {
    match kind {
        0 => Box::new(DefaultUidGenerator::new(layout, worker, clock).expect("default")),
        1 => Box::new(SnowflakeGenerator::new(layout, worker, clock).expect("snowflake")),
        2 => Box::new(
            SnowflakeGenerator::new(layout, worker, clock)
                .expect("snowflake")
                .random_sequence_start(true),
        ),
        _ => Box::new(
            CachedUidGenerator::new(
                layout,
                worker,
                clock,
                CachedOptions {
                    boost_power,
                    ..CachedOptions::waiting(Duration::from_secs(10))
                },
            )
            .expect("cached"),
        ),
    }
}

/// The largest ID `layout` composes with its defaults: every time, worker and sequence bit set.
pub fn largest_composed(layout: &Layout) -> u64 {
    layout
        .compose(&layout.parts(
            layout.max_time(),
            layout.max_worker_id(),
            layout.max_sequence(),
        ))
        .expect("the maxima fit")
}

/// A Baidu layout with a small sequence, so rings are small and seconds turn over quickly.
pub fn small_layout(seq_bits: u32) -> Layout {
    Layout::baidu_bits(28, 35 - seq_bits, seq_bits, "2026-01-01").expect("a valid layout")
}

/// A clock standing `seconds_after_epoch` seconds after `layout`'s epoch until told to move.
pub fn standing_clock(layout: &Layout, seconds_after_epoch: u64) -> ManualClock {
    ManualClock::new(layout.epoch_ms() + seconds_after_epoch * 1000)
}

/// A cached generator of Baidu's widths but 4 time bits (seconds 0 to 15) started at second 14
/// with no boost: the 2 × 8192 IDs of seconds 14 and 15 are all it will ever issue.
pub fn cached_with_two_seconds_left() -> CachedUidGenerator<ManualClock> {
    let layout = Layout::baidu_bits(4, 46, 13, "2026-01-01").expect("a valid layout");
    let clock = standing_clock(&layout, 14);
    let options = CachedOptions {
        boost_power: 0,
        ..CachedOptions::waiting(Duration::from_secs(10))
    };
    CachedUidGenerator::new(layout, 1, clock, options).expect("a clock inside the time range")
}

/// Calls `next` until it fails: the IDs it gave, in order, and the error that ended it.
pub fn take_until_error(mut next: impl FnMut() -> Result<u64, UidError>) -> (Vec<u64>, UidError) {
    let mut ids = Vec::new();
    loop {
        match next() {
            Ok(id) => ids.push(id),
            Err(error) => return (ids, error),
        }
    }
}
