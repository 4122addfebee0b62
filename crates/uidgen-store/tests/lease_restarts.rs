#![allow(clippy::unwrap_used)]
//! Issue 36, point 3: a leased restart after `kill -9` while the database answers continues
//! the lease its crashed life recorded in the cache, instead of waiting for that lease to
//! expire (ttl + cache reserve), and still never stamps a unit the crashed life stamped. Only
//! a process holding the cache's lock may do so, and of two restarts from copies of one cache
//! only one wins.

mod common;

use std::time::Duration;

use common::leases::{cached_options, crash_holding, options, temp_cache};
use common::narrow_layout;
use uidgen_core::{ManualClock, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{DEFAULT_SPACE, LeaseGuard, LeasedWorkerIdAssigner, StoreError};
use uidgen_worker::{GeneratorBuilder, LeaseOptions, WorkerError, read_cache};

const T0: u64 = 1_800_000_000_000;

per_db! {
    async fn a_restart_before_its_clock_passed_the_mark_is_refused_and_hands_the_id_back(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0); // one worker id, as `worker.range = "5-5"`
        let cache = temp_cache();
        let (worker_id, crashed) = crash_holding(&store, &clock, &cache, &layout).await;
        let mark = read_cache(&cache).unwrap().until_ms;
        // The crashed life's row holds the id for its ttl and the reserve: 90 s.
        let row = store.lease_row(DEFAULT_SPACE, worker_id).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms), (crashed.as_str(), T0 + 90_000));

        // Before the clock passed the mark, a restart that may not wait is refused, naming the
        // clock; it hands the id back recording the mark, so nothing stays blocked for 90 s.
        clock.set(T0 + 500);
        let impatient = LeaseOptions { max_takeover_wait: Duration::ZERO, ..cached_options("b", &cache) };
        let error = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), impatient)
            .claim(&layout)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Worker(WorkerError::ClockBehindLastIssued { until_ms, .. }) if until_ms == mark), "{error:?}");
        let row = store.lease_row(DEFAULT_SPACE, worker_id).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.last_issued_ms), ("", mark));
        assert!(!cache.exists(), "the refused restart gave the id up");
    }
}

per_db! {
    async fn a_restart_after_a_crash_is_served_above_the_crashed_life_without_waiting_for_the_expiry(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        let first = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("a", &cache)))
            .build_default(clock.clone())
            .await
            .unwrap();
        let crashed = LeaseGuard::of(&first.assignment).unwrap().holder().to_owned();
        let mut before = Vec::new();
        for step in 0..3 {
            clock.set(T0 + step * 700);
            before.push(first.generator.next_id().unwrap());
        }
        let mark = read_cache(&cache).unwrap().until_ms;
        drop(first); // kill -9: no release; the cache's lock goes with the process

        // Past the mark, an hour of lease left: a claimant without the cache is refused and
        // told when to retry; the restart from the cache is served at once.
        clock.set(mark + 1);
        let other = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("c"));
        let error = other.claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { retry_in_ms, .. } if retry_in_ms == T0 + 90_000 - mark), "{error:?}");
        assert!(error.to_string().contains(&format!("ends in {}.", (T0 + 90_000 - mark) / 1_000)), "{error}");

        let second = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("b", &cache)))
            .build_default(clock.clone())
            .await
            .unwrap();
        assert_eq!(second.assignment.kind, LeasedWorkerIdAssigner::KIND, "confirmed by the database");
        let lease = LeaseGuard::of(&second.assignment).unwrap();
        assert_eq!(lease.worker_id(), 0);
        assert!(lease.holder().starts_with("b#"), "a holder string of its own: {}", lease.holder());
        assert!(!lease.is_from_local_cache());
        assert_eq!(lease.valid_until_ms(), mark + 1 + 30_000);
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!(row.holder, lease.holder(), "handed over in the database");
        assert!(row.last_issued_ms >= mark, "the crashed life's mark is recorded");
        let cached = read_cache(&cache).unwrap();
        assert_eq!(cached.holder.as_deref(), Some(lease.holder()), "the cache names this life");
        assert!(cached.until_ms >= mark);

        let after: Vec<u64> = (0..3).map(|_| second.generator.next_id().unwrap()).collect();
        let last_before = before.iter().map(|&id| layout.decompose(id).unwrap().time).max().unwrap();
        let first_after = after.iter().map(|&id| layout.decompose(id).unwrap().time).min().unwrap();
        assert!(last_before < first_after, "the restart stamped unit {first_after}, the crashed life {last_before}");

        // The crashed life's holder string is gone: nothing may renew or continue it.
        assert!(!store.renew_lease(DEFAULT_SPACE, 0, &crashed, T0 + 200_000, 0).await.unwrap());
        LeaseGuard::of(&second.assignment).unwrap().renew().await.unwrap();
    }
}

per_db! {
    async fn a_cache_a_live_lease_holds_is_never_continued(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        let live = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("a", &cache))
            .claim(&layout)
            .await
            .unwrap();
        clock.set(T0 + 10_000);
        // A second process configured with the same cache file (a start beside a running one).
        let beside = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("b", &cache));
        let error = beside.claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}");
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!(row.holder, live.holder(), "the live lease is untouched");
        live.renew().await.unwrap();
        assert_eq!(read_cache(&cache).unwrap().holder.as_deref(), Some(live.holder()));
    }
}

per_db! {
    async fn a_cache_whose_lease_was_taken_over_is_not_continued(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        crash_holding(&store, &clock, &cache, &layout).await;
        // Past the ttl and the reserve another process takes the id over.
        clock.set(T0 + 90_001);
        let winner = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("c"))
            .claim(&layout)
            .await
            .unwrap();
        clock.set(T0 + 95_000);
        let error = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("a", &cache))
            .claim(&layout)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}");
        assert_eq!(store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap().holder, winner.holder());
        winner.renew().await.unwrap();
    }
}

per_db! {
    /// Two hosts restarted from copies of one state directory (a restored snapshot): the
    /// hand-over matches the crashed holder string, so exactly one continues the lease.
    async fn of_two_restarts_from_copies_of_one_cache_exactly_one_continues(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        crash_holding(&store, &clock, &cache, &layout).await;
        let copy = temp_cache();
        std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
        std::fs::copy(&cache, &copy).unwrap();
        clock.set(T0 + 10_000);
        let restart = |path: &std::path::Path, holder: &str| {
            let assigner = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options(holder, path));
            let layout = layout.clone();
            tokio::spawn(async move { assigner.claim(&layout).await })
        };
        let (a, b) = (restart(&cache, "a"), restart(&copy, "b"));
        let outcomes = [a.await.unwrap(), b.await.unwrap()];
        let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "{outcomes:?}");
        for outcome in &outcomes {
            if let Err(error) = outcome {
                assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}");
            }
        }
        assert_eq!(store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap().holder, won[0].holder());
    }
}
