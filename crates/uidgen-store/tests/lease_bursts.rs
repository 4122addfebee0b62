#![allow(clippy::unwrap_used)]
//! Issue #8, case 4: a leased worker id with the cached generator. Bursts larger than what the
//! lease lets it borrow wait for the clock; they never get a false "generation has stopped".

mod common;

use std::time::Duration;

use uidgen_core::{
    CachedOptions, Clock, FieldKind, Layout, ManualClock, SystemClock, TimeUnit, UidGenerator,
};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{LeaseGuard, LeasedWorkerIdAssigner};
use uidgen_worker::{GeneratorBuilder, LeaseOptions, WorkerIdRange};

/// Milliseconds with a 4-bit sequence: 16,000 IDs a second, so a burst of tens of thousands
/// borrows seconds ahead, as Baidu's 100 k batches do on its 13-bit sequence.
fn tiny_sequence_layout() -> Layout {
    use FieldKind::{Sequence, Sign, Time, Worker};
    Layout::new(
        "tiny",
        &[(Sign, 1), (Time, 41), (Worker, 18), (Sequence, 4)],
        TimeUnit::Millis,
        "2026-01-01",
    )
    .unwrap()
}

per_db! {
    async fn bursts_past_the_borrowing_bound_wait_for_the_clock_and_never_stop(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = tiny_sequence_layout();
        // A 3 s lease: the lease lets the ring borrow a third of it, 1 s (16,000 IDs).
        let options = LeaseOptions {
            ttl: Duration::from_secs(3),
            heartbeat_interval: Some(Duration::from_millis(500)),
            max_takeover_wait: Duration::from_secs(1),
            ..LeaseOptions::default()
        };
        let built = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store, SystemClock, options))
            .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(1)))
            .await
            .unwrap();
        let lease = LeaseGuard::of(&built.assignment).unwrap();
        let generator = std::sync::Arc::clone(&built.generator);
        // Three bursts of 20,000 (3.75 s of IDs against a 3 s lease: refused before this fix), then
        // single IDs for a while: every call succeeds.
        let ids = tokio::task::spawn_blocking(move || {
            let mut ids = Vec::new();
            for _ in 0..3 {
                ids.extend(generator.next_ids(20_000).unwrap());
                assert!(generator.inner().borrowed_units() <= 1_000, "{}", generator.inner().borrowed_units());
            }
            for _ in 0..2_000 {
                ids.push(generator.next_id().unwrap());
            }
            ids
        })
        .await
        .unwrap();
        assert!(lease.is_valid());
        // Every ID ends before the lease's expiry as it stands now (it only ever rises).
        let valid_until = lease.valid_until_ms();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), ids.len(), "duplicates");
        for id in ids {
            let time = layout.decompose(id).unwrap().time;
            assert!(layout.millis_of(time + 1) <= valid_until);
        }
        lease.release().await.unwrap();
    }
}

/// Take IDs until the generator is at its borrowing bound: with the clock stopped, the ring
/// empties and padding may not go further, so a take waits out its policy's timeout and fails
/// (one at a time: a batch would wait out a longer stall limit).
fn burst_to_the_bound<G: UidGenerator>(generator: &G) -> usize {
    let mut taken = 0;
    while generator.next_id().is_ok() {
        taken += 1;
    }
    taken
}

/// Issue 18: whatever the layout, the ttl and the cache, a holder that bursts as far as its
/// lease lets it never runs further ahead of its clock than a successor on that clock waits:
/// neither its issued-until time (what a release records) nor its cache's mark (what a
/// restart from the cache waits for). A successor claiming right after the release is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_takeover_wait_covers_the_farthest_a_burst_runs_ahead() {
    let dir = tempfile::tempdir().unwrap();
    let layouts = [
        Layout::baidu_default().unwrap(),
        Layout::sonyflake().unwrap(),
        tiny_sequence_layout(),
    ];
    let mut case = 0;
    for layout in &layouts {
        for ttl_secs in [30, 9] {
            for cached in [false, true] {
                case += 1;
                let (store, _) = fresh_store(TestDb::Sqlite).await.unwrap();
                let cache = dir.path().join(format!("worker-{case}.cache"));
                let options = LeaseOptions {
                    cache_path: cached.then(|| cache.clone()),
                    holder: Some(format!("case-{case}")),
                    // One id: the successor must take over the holder's.
                    range: Some(WorkerIdRange::new(0, 0).unwrap()),
                    ..LeaseOptions::with_ttl(Duration::from_secs(ttl_secs))
                };
                let what = format!("{} ttl {ttl_secs} s cache {cached}", layout.name());
                options
                    .validate_for(layout)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                let wait_ms = u64::try_from(options.max_takeover_wait.as_millis()).unwrap();
                let clock = ManualClock::new(1_800_000_000_000 + case * 100_000);
                let assigner =
                    LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options.clone());
                let built = GeneratorBuilder::new(layout.clone())
                    .assigner(assigner.clone())
                    .build_cached(
                        clock.clone(),
                        CachedOptions::waiting(Duration::from_millis(100)),
                    )
                    .await
                    .unwrap();
                let generator = std::sync::Arc::clone(&built.generator);
                let taken = tokio::task::spawn_blocking(move || burst_to_the_bound(&*generator))
                    .await
                    .unwrap();
                let now = clock.now_millis();
                let issued = built.generator.issued_until_ms().unwrap();
                // A successor waits until its clock reads 1 ms past the time it waits for.
                assert!(
                    issued - now < wait_ms,
                    "{what}: {taken} IDs ran {} ms ahead; the wait is {wait_ms} ms",
                    issued - now
                );
                assert!(
                    built.generator.inner().borrowed_units() >= 1,
                    "{what}: no borrowing after {taken} IDs"
                );
                if cached {
                    let mark = uidgen_worker::read_cache(&cache).unwrap().until_ms;
                    assert!(
                        mark - now < wait_ms,
                        "{what}: the mark ran {} ms ahead; the wait is {wait_ms} ms",
                        mark - now
                    );
                }
                LeaseGuard::of(&built.assignment)
                    .unwrap()
                    .release()
                    .await
                    .unwrap();
                drop(built);

                // The successor, on the same clock, waits (the clock moves on meanwhile) and is served.
                let successor = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options);
                let ticking = {
                    let clock = clock.clone();
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(Duration::from_millis(1)).await;
                            clock.advance(100);
                        }
                    })
                };
                let lease = successor.claim(layout).await;
                ticking.abort();
                let lease =
                    lease.unwrap_or_else(|e| panic!("{what}: the successor was refused: {e}"));
                assert_eq!(lease.worker_id(), 0);
                lease.release().await.unwrap();
            }
        }
    }
}
