#![allow(clippy::unwrap_used)]
//! Issue #8, case 4: a leased worker id with the cached generator. Bursts larger than what the
//! lease lets it borrow wait for the clock; they never get a false "generation has stopped".

mod common;

use std::time::Duration;

use uidgen_core::{CachedOptions, FieldKind, Layout, SystemClock, TimeUnit, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{GeneratorBuilder, LeaseOptions, LeasedWorkerIdAssigner};

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
        let lease = built.assignment.lease.clone().unwrap();
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
