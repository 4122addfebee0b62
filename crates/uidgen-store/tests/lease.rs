#![allow(clippy::unwrap_used)]
//! Leased worker ids on a manual clock: claim, renew, release, takeover, races, heartbeat
//! loss and the local cache.

mod common;

use std::time::Duration;

use common::leases::{cached_options, crash_holding, down_store, flaky_store, options, temp_cache};
use common::narrow_layout;
use uidgen_core::{Clock, ManualClock, SystemClock, UidError, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store, occupy_pool};
use uidgen_store::{DEFAULT_SPACE, LeaseGuard, LeasedWorkerIdAssigner, Store, StoreError};
use uidgen_worker::{GeneratorBuilder, LeaseOptions, MAX_HOLDER_NAME_LEN, WorkerError, read_cache};

const T0: u64 = 1_800_000_000_000;

per_db! {
    async fn claim_renew_release(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(2);
        let a = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("a"));
        let lease = a.claim(&layout).await.unwrap();
        assert_eq!(lease.worker_id(), 0);
        assert_eq!(lease.valid_until_ms(), T0 + 30_000);
        assert!(lease.is_valid());
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms), (lease.holder(), T0 + 30_000));
        assert!(lease.holder().starts_with("a#"), "{}", lease.holder());

        // A second holder gets the next id while the first is live.
        let b = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("b"));
        assert_eq!(b.claim(&layout).await.unwrap().worker_id(), 1);

        clock.advance(20_000);
        lease.record_issued_until(T0 + 21_000);
        lease.renew().await.unwrap();
        assert_eq!(lease.valid_until_ms(), T0 + 50_000);
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.expires_at_ms, row.last_issued_ms), (T0 + 50_000, T0 + 21_000));

        lease.release().await.unwrap();
        let error = lease.check().unwrap_err();
        assert!(matches!(&error, StoreError::LeaseLost { worker_id: 0, reason } if reason == "released"), "{error:?}");
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms, row.last_issued_ms), ("", 0, T0 + 21_000));
    }
}

per_db! {
    async fn lease_without_renewal_expires_by_the_clock(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let lease = LeasedWorkerIdAssigner::new(store, clock.clone(), options("a"))
            .claim(&narrow_layout(2))
            .await
            .unwrap();
        clock.advance(29_999);
        assert!(lease.is_valid());
        clock.advance(1);
        let error = lease.check().unwrap_err();
        assert!(error.to_string().contains("expired at"), "{error}");
    }
}

per_db! {
    async fn takeover_after_expiry_waits_for_the_recorded_time(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0); // exactly one worker id
        let a = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("a"));
        let old = a.claim(&layout).await.unwrap();
        // The old holder's generator borrowed 10 s ahead of its clock.
        old.record_issued_until(T0 + 40_000);
        old.renew().await.unwrap();

        let busy = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("b"));
        assert!(matches!(busy.claim(&layout).await, Err(StoreError::NoFreeWorkerId { max: 0, count: 1, retry_in_ms: 30_001 })));

        clock.set(T0 + 30_001); // expired, but 10 s before the recorded last issued time
        let patient = LeasedWorkerIdAssigner::new(
            store.clone(),
            clock.clone(),
            LeaseOptions { max_takeover_wait: Duration::from_secs(20), ..options("b") },
        );
        let claim = tokio::spawn(async move { patient.claim(&narrow_layout(0)).await });
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(!claim.is_finished(), "must wait for the clock to pass the last issued time");
        clock.set(T0 + 40_001);
        let new = claim.await.unwrap().unwrap();
        assert_eq!(new.worker_id(), 0);
        assert!(clock.now_millis() > T0 + 40_000);
        // The wait came out of the claim's ttl: renewed at once, from a whole ttl, recording the
        // old holder's time (nothing is issued yet), not the new expiry.
        assert_eq!(new.valid_until_ms(), T0 + 40_001 + 30_000);
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.expires_at_ms, row.last_issued_ms), (T0 + 70_001, T0 + 40_000));

        // The old holder finds out at its next renewal and stops for good.
        let error = old.renew().await.unwrap_err();
        assert!(matches!(&error, StoreError::LeaseLost { reason, .. } if reason.contains("taken over")), "{error:?}");
        assert!(!old.is_valid());
        assert!(new.is_valid());
    }
}

per_db! {
    async fn takeover_refuses_to_wait_past_the_bound(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let old = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("a"))
            .claim(&layout)
            .await
            .unwrap();
        old.record_issued_until(T0 + 60_000);
        old.renew().await.unwrap();
        clock.set(T0 + 30_001);
        let b = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("b"));
        let error = b.claim(&layout).await.unwrap_err();
        match &error {
            StoreError::Worker(WorkerError::ClockBehindLastIssued { worker_id: 0, until_ms, now_ms, max_wait_ms: 5_000, .. }) => {
                assert_eq!((*until_ms, *now_ms), (T0 + 60_000, T0 + 30_001));
            }
            other => panic!("{other:?}"),
        }
        assert!(error.to_string().contains("refusing to issue IDs"), "{error}");
        // The refused claimant handed the id back with its last issued time intact.
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.last_issued_ms), ("", T0 + 60_000));
        clock.set(T0 + 60_001);
        assert_eq!(b.claim(&layout).await.unwrap().worker_id(), 0);
    }
}

per_db! {
    async fn concurrent_takeover_by_two_claimants_has_one_winner(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let first = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("first"));
        first.claim(&layout).await.unwrap();
        clock.set(T0 + 30_001);
        // Two "processes": separate stores (pools) on the same database.
        let mut tasks = Vec::new();
        for holder in ["b", "c"] {
            let other = Store::connect(&url).await.unwrap();
            let assigner = LeasedWorkerIdAssigner::new(other, clock.clone(), options(holder));
            tasks.push(tokio::spawn(async move { assigner.claim(&narrow_layout(0)).await }));
        }
        let mut winners = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(lease) => {
                    winners += 1;
                    assert_eq!(lease.worker_id(), 0);
                }
                Err(error) => assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}"),
            }
        }
        assert_eq!(winners, 1);

        // The row-level primitives: 8 racers, one winner each time.
        let mut inserts = Vec::new();
        let mut takeovers = Vec::new();
        for i in 0..8 {
            let store = store.clone();
            inserts.push(tokio::spawn(async move { store.try_insert_lease(DEFAULT_SPACE, 7, &format!("h{i}"), T0 + 1).await }));
        }
        let won: usize = futures_count(inserts).await;
        assert_eq!(won, 1);
        for i in 0..8 {
            let store = store.clone();
            takeovers.push(tokio::spawn(async move { store.try_take_over_lease(DEFAULT_SPACE, 7, &format!("t{i}"), T0 + 100_000, T0 + 2).await }));
        }
        assert_eq!(futures_count(takeovers).await, 1);
    }
}

async fn futures_count(tasks: Vec<tokio::task::JoinHandle<uidgen_store::Result<bool>>>) -> usize {
    let mut won = 0;
    for task in tasks {
        if task.await.unwrap().unwrap() {
            won += 1;
        }
    }
    won
}

per_db! {
    async fn heartbeat_renews_and_its_loss_stops_issuing(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(SystemClock.now_millis());
        let start = clock.now_millis();
        let assigner = LeasedWorkerIdAssigner::new(
            store.clone(),
            clock.clone(),
            LeaseOptions { heartbeat_interval: Some(Duration::from_millis(20)), ..options("hb") },
        );
        let built = GeneratorBuilder::new(narrow_layout(2))
            .assigner(assigner)
            .build_default(clock.clone())
            .await
            .unwrap();
        assert_eq!(built.assignment.kind, LeasedWorkerIdAssigner::KIND);
        let lease = LeaseGuard::of(&built.assignment).unwrap();
        built.generator.next_id().unwrap();

        // The heartbeat extends the lease and records the generator's issued-until time.
        clock.advance(20_000);
        built.generator.next_id().unwrap();
        wait_until(|| lease.valid_until_ms() >= start + 50_000).await;
        let issued = built.generator.issued_until_ms().unwrap();
        let mut recorded = 0;
        for _ in 0..100 {
            recorded = store.lease_row(DEFAULT_SPACE, lease.worker_id()).await.unwrap().unwrap().last_issued_ms;
            if recorded >= issued {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(recorded >= issued, "{recorded} < {issued}");

        // The database goes away: the lease stays valid until its expiry, then issuing stops.
        store.close().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        built.generator.next_id().unwrap();
        clock.advance(31_000);
        tokio::time::sleep(Duration::from_millis(60)).await;
        let error = built.generator.next_id().unwrap_err();
        assert!(matches!(&error, UidError::GeneratorStopped(message) if message.contains("lease on worker id")), "{error:?}");
        assert!(built.generator.next_ids(3).is_err());
        assert!(built.assignment.check().is_err());
    }
}

async fn wait_until(mut condition: impl FnMut() -> bool) {
    for _ in 0..200 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("condition not reached in 2 s");
}

per_db! {
    async fn ids_past_the_lease_expiry_are_refused(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let now = SystemClock.now_millis();
        // Stamp units of 1 s: the unit containing the expiry must not be issued.
        let clock = ManualClock::new(now - now % 1000 + 500);
        let lease_opts = LeaseOptions {
            ttl: Duration::from_millis(1_200),
            max_takeover_wait: Duration::from_millis(500),
            ..options("x")
        };
        let built = GeneratorBuilder::new(narrow_layout(2))
            .assigner(LeasedWorkerIdAssigner::new(store, clock.clone(), lease_opts))
            .build_default(clock.clone())
            .await
            .unwrap();
        built.generator.next_id().unwrap(); // unit ends 500 ms from now, before expiry
        clock.advance(600); // next unit ends 1 500 ms after the claim, past the 1 200 ms expiry
        let error = built.generator.next_id().unwrap_err();
        assert!(
            matches!(&error, UidError::BeyondFence { reason, .. } if reason.contains("the lease on worker id")),
            "{error:?}"
        );
    }
}

per_db! {
    async fn a_restart_on_the_cache_runs_only_between_its_mark_and_the_recorded_expiry(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(2);
        let cache = temp_cache();
        let (worker_id, holder) = crash_holding(&store, &clock, &cache, &layout).await;
        let cached = read_cache(&cache).unwrap();
        assert_eq!((cached.worker_id, cached.holder.as_deref()), (worker_id, Some(holder.as_str())));
        assert_eq!(cached.lease_expires_ms, Some(T0 + 90_000));
        // The mark covers the unit stamped (it ends at T0 + 1 s on this clock) and a step more.
        assert!(cached.until_ms >= T0 + 1_000 && cached.until_ms <= T0 + 4_000, "{cached:?}");
        let row = store.lease_row(DEFAULT_SPACE, worker_id).await.unwrap().unwrap();
        assert_eq!(row.expires_at_ms, T0 + 90_000);

        let down = down_store(&url).await;
        let restart = |options: LeaseOptions| LeasedWorkerIdAssigner::new(down.clone(), clock.clone(), options);
        // Before the mark: the crashed life may have stamped up to it.
        let impatient = LeaseOptions { max_takeover_wait: Duration::ZERO, ..cached_options("b", &cache) };
        let error = restart(impatient).assign(&layout).await.unwrap_err();
        assert!(matches!(&error, StoreError::Cache { reason, .. } if reason.contains("clock")), "{error:?}");

        // Past the mark, inside the reserve: the same lease, until the recorded expiry.
        clock.set(T0 + 31_000);
        let assignment = restart(cached_options("b", &cache)).assign(&layout).await.unwrap();
        assert_eq!((assignment.kind, assignment.worker_id), (LeasedWorkerIdAssigner::LOCAL_CACHE_KIND, worker_id));
        let local = LeaseGuard::of(&assignment).unwrap();
        assert!(local.is_from_local_cache());
        assert_eq!((local.holder(), local.valid_until_ms()), (holder.as_str(), T0 + 90_000));
        drop((assignment, local));

        // Past the recorded expiry the id may belong to someone else: refused.
        clock.set(T0 + 90_000);
        let error = restart(cached_options("b", &cache)).assign(&layout).await.unwrap_err();
        assert!(matches!(&error, StoreError::Cache { reason, .. } if reason.contains("another process may hold")), "{error:?}");

        // Without a cache file the unreachable database is the error.
        std::fs::remove_file(&cache).unwrap();
        let error = restart(cached_options("c", &cache)).assign(&layout).await.unwrap_err();
        assert!(error.is_unreachable(), "{error:?}");
    }
}

per_db! {
    /// Issue #8, case 1: A crashes holding a cached lease; B, which reaches the database,
    /// and A's restart, which does not, must never hold the id at once.
    async fn a_database_takeover_and_a_cache_restart_never_overlap(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(0); // one worker id
        let cache = temp_cache();
        let clock_a = ManualClock::new(T0);
        let clock_b = ManualClock::new(T0);
        let (worker_id, _) = crash_holding(&store, &clock_a, &cache, &layout).await;

        // Past A's own expiry (30 s), inside its reserve: B is refused, A's restart runs.
        clock_b.set(T0 + 31_000);
        let b = LeasedWorkerIdAssigner::new(store.clone(), clock_b.clone(), options("b"));
        assert!(matches!(b.claim(&layout).await, Err(StoreError::NoFreeWorkerId { .. })));
        clock_a.set(T0 + 31_000);
        let a2 = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(down_store(&url).await, clock_a.clone(), cached_options("a", &cache)))
            .build_default(clock_a.clone())
            .await
            .unwrap();
        assert_eq!(a2.assignment.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
        let mut a_ids = vec![a2.generator.next_id().unwrap()];
        clock_a.set(T0 + 89_000);
        a_ids.push(a2.generator.next_id().unwrap());
        clock_a.set(T0 + 89_500); // the unit [89 s, 90 s) still ends by the expiry
        a_ids.push(a2.generator.next_id().unwrap());
        clock_a.set(T0 + 90_000);
        let error = a2.generator.next_id().unwrap_err();
        assert!(matches!(error, UidError::BeyondFence { .. } | UidError::GeneratorStopped(_)), "{error:?}");

        // Past the reserve B takes the id over and stamps from there on.
        clock_b.set(T0 + 90_001);
        let b = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store.clone(), clock_b.clone(), options("b")))
            .build_default(clock_b.clone())
            .await
            .unwrap();
        assert_eq!(b.worker_id(), worker_id);
        clock_b.set(T0 + 90_500);
        let b_ids = [b.generator.next_id().unwrap()];

        // And A restarting on its cache now is refused, even though the database is down.
        drop(a2);
        let error = LeasedWorkerIdAssigner::new(down_store(&url).await, clock_a.clone(), cached_options("a", &cache))
            .assign(&layout)
            .await
            .unwrap_err();
        assert!(matches!(&error, StoreError::Cache { reason, .. } if reason.contains("another process may hold")), "{error:?}");

        let a_last = a_ids.iter().map(|&id| layout.decompose(id).unwrap().time).max().unwrap();
        let b_first = b_ids.iter().map(|&id| layout.decompose(id).unwrap().time).min().unwrap();
        assert!(a_last < b_first, "A stamped unit {a_last}, B unit {b_first}");
    }
}

per_db! {
    /// Issue #8, case 2: a renewal after the holder's clock stepped back must not lower the
    /// expiry the database shows to a successor.
    async fn a_renewal_after_the_clock_stepped_back_never_lowers_the_expiry(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(0);
        let clock_a = ManualClock::new(T0);
        let built = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store.clone(), clock_a.clone(), options("a")))
            .build_default(clock_a.clone())
            .await
            .unwrap();
        let lease = LeaseGuard::of(&built.assignment).unwrap();
        assert_eq!(lease.valid_until_ms(), T0 + 30_000);

        clock_a.rewind(20_000);
        lease.renew().await.unwrap();
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!(row.expires_at_ms, T0 + 30_000, "the database keeps the higher expiry");
        assert_eq!(lease.valid_until_ms(), T0 + 30_000);

        // A loses the database but keeps serving up to its expiry; its clock catches up.
        clock_a.set(T0 + 15_000);
        let a_id = built.generator.next_id().unwrap();

        // B, on a correct clock, cannot take over at T0 + 11 s (the database said T0 + 10 s before).
        let clock_b = ManualClock::new(T0 + 11_000);
        let b = LeasedWorkerIdAssigner::new(store.clone(), clock_b.clone(), options("b"));
        assert!(matches!(b.claim(&layout).await, Err(StoreError::NoFreeWorkerId { .. })));
        clock_b.set(T0 + 30_001);
        let b = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(store.clone(), clock_b.clone(), options("b")))
            .build_default(clock_b.clone())
            .await
            .unwrap();
        let b_id = b.generator.next_id().unwrap();
        assert!(layout.decompose(a_id).unwrap().time < layout.decompose(b_id).unwrap().time);
    }
}

per_db! {
    async fn cache_is_forgotten_whenever_the_worker_id_is_given_up(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let down = down_store(&url).await;

        // Released: a later start without the database must not pick the id from the cache.
        let cache = temp_cache();
        let released = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("a", &cache));
        released.claim(&layout).await.unwrap().release().await.unwrap();
        assert!(!cache.exists());
        clock.set(T0 + 60_000);
        let error = LeasedWorkerIdAssigner::new(down.clone(), clock.clone(), cached_options("a", &cache))
            .assign(&layout)
            .await
            .unwrap_err();
        assert!(error.is_unreachable(), "{error:?}");

        // Taken over: the lost lease forgets its cache.
        let lost_cache = temp_cache();
        let lost = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("b", &lost_cache))
            .claim(&layout)
            .await
            .unwrap();
        assert_eq!(read_cache(&lost_cache).unwrap().worker_id, 0);
        clock.set(T0 + 150_001); // past its ttl and reserve
        let winner = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("c"))
            .claim(&layout)
            .await
            .unwrap();
        assert!(matches!(lost.renew().await, Err(StoreError::LeaseLost { .. })));
        assert!(!lost_cache.exists());

        // Refused takeover: this host never got the id, so nothing may cache it.
        winner.record_issued_until(T0 + 300_000);
        winner.renew().await.unwrap();
        clock.set(T0 + 180_002);
        let refused_cache = temp_cache();
        let error = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), cached_options("d", &refused_cache))
            .claim(&layout)
            .await
            .unwrap_err();
        assert!(matches!(error, StoreError::Worker(WorkerError::ClockBehindLastIssued { .. })), "{error:?}");
        assert!(!refused_cache.exists());
    }
}

per_db! {
    async fn only_one_user_of_a_cache_file_falls_back_to_it(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(2);
        let cache = temp_cache();
        crash_holding(&store, &clock, &cache, &layout).await;
        let down = down_store(&url).await;
        clock.set(T0 + 30_001);
        let assigner = |holder| LeasedWorkerIdAssigner::new(down.clone(), clock.clone(), cached_options(holder, &cache));

        let first = assigner("b").assign(&layout).await.unwrap();
        assert_eq!(first.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
        let error = assigner("c").assign(&layout).await.unwrap_err();
        assert!(matches!(&error, StoreError::Cache { reason, .. } if reason.contains("another lease")), "{error:?}");

        // Once the first user is gone, the next may, after its mark.
        drop(first);
        clock.set(T0 + 40_000);
        let next = assigner("c").assign(&layout).await.unwrap();
        assert_eq!(next.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
    }
}

per_db! {
    async fn cached_lease_lapses_at_the_recorded_expiry_without_the_database(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let cache = temp_cache();
        crash_holding(&store, &clock, &cache, &narrow_layout(2)).await;
        clock.set(T0 + 30_001);
        let built = GeneratorBuilder::new(narrow_layout(2))
            .assigner(LeasedWorkerIdAssigner::new(down_store(&url).await, clock.clone(), cached_options("b", &cache)))
            .build_default(clock.clone())
            .await
            .unwrap();
        assert_eq!(built.assignment.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
        built.generator.next_id().unwrap();
        let lease = LeaseGuard::of(&built.assignment).unwrap();
        assert!(lease.renew().await.unwrap_err().is_unreachable());
        clock.set(T0 + 90_000);
        let error = built.generator.next_id().unwrap_err();
        assert!(matches!(&error, UidError::GeneratorStopped(message) if message.contains("expired")), "{error:?}");
    }
}

per_db! {
    async fn cached_lease_continues_in_the_database_once_it_answers(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        let (_, holder) = crash_holding(&store, &clock, &cache, &layout).await;
        clock.set(T0 + 30_001);
        let flaky = flaky_store(&url);
        let outage = occupy_pool(&flaky).await.unwrap();
        let assignment = LeasedWorkerIdAssigner::new(flaky, clock.clone(), cached_options("b", &cache))
            .assign(&layout)
            .await
            .unwrap();
        assert_eq!(assignment.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
        let lease = LeaseGuard::of(&assignment).unwrap();

        // Still down: the renewal fails, the lease holds until its recorded expiry.
        assert!(lease.renew().await.unwrap_err().is_unreachable());
        assert!(lease.is_valid() && lease.is_from_local_cache());

        // Back, and nobody took the id over: the renewal continues the recorded lease.
        drop(outage);
        clock.advance(1_000);
        lease.renew().await.unwrap();
        assert!(!lease.is_from_local_cache());
        assert_eq!(lease.valid_until_ms(), T0 + 90_000, "never lowered");
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms), (holder.as_str(), T0 + 121_001));
        assert_eq!(read_cache(&cache).unwrap().lease_expires_ms, Some(T0 + 121_001));
        // Others now see it as held.
        let other = LeasedWorkerIdAssigner::new(store, clock.clone(), options("c"));
        assert!(matches!(other.claim(&layout).await, Err(StoreError::NoFreeWorkerId { .. })));
    }
}

per_db! {
    async fn cached_lease_stops_issuing_when_the_database_shows_another_holder(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let cache = temp_cache();
        crash_holding(&store, &clock, &cache, &layout).await;
        clock.set(T0 + 30_001);
        let flaky = flaky_store(&url);
        let outage = occupy_pool(&flaky).await.unwrap();
        let built = GeneratorBuilder::new(layout.clone())
            .assigner(LeasedWorkerIdAssigner::new(flaky, clock.clone(), cached_options("b", &cache)))
            .build_default(clock.clone())
            .await
            .unwrap();
        assert_eq!(built.assignment.kind, LeasedWorkerIdAssigner::LOCAL_CACHE_KIND);
        built.generator.next_id().unwrap();

        // The lease runs out while the database is away; another process takes the id over.
        clock.set(T0 + 90_001);
        let other = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("c"))
            .claim(&layout)
            .await
            .unwrap();

        drop(outage);
        let lease = LeaseGuard::of(&built.assignment).unwrap();
        let error = lease.renew().await.unwrap_err();
        assert!(matches!(&error, StoreError::LeaseLost { worker_id: 0, reason } if reason.contains("local cache")), "{error:?}");
        let error = built.generator.next_id().unwrap_err();
        assert!(matches!(&error, UidError::GeneratorStopped(message) if message.contains("lease on worker id 0 lost")), "{error:?}");
        assert!(!cache.exists(), "a lost id must not stay cached");
        // The other holder is untouched.
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!(row.holder, other.holder());
        other.renew().await.unwrap();
    }
}

per_db! {
    async fn claims_with_the_same_holder_name_cannot_renew_or_release_each_other(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0);
        let assigner = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options("same"));
        let first = assigner.claim(&layout).await.unwrap();
        clock.set(T0 + 30_001);
        let second = assigner.claim(&layout).await.unwrap();
        assert_ne!(first.holder(), second.holder());

        let error = first.renew().await.unwrap_err();
        assert!(matches!(&error, StoreError::LeaseLost { reason, .. } if reason.contains("taken over")), "{error:?}");
        first.release().await.unwrap();
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms), (second.holder(), T0 + 60_001));
        second.renew().await.unwrap();
    }
}

per_db! {
    async fn inconsistent_lease_options_are_refused_before_claiming(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(2);
        let ttl = Duration::from_secs(10);
        let refused = [
            LeaseOptions { ttl, heartbeat_interval: Some(ttl), ..options("a") },
            LeaseOptions { ttl, heartbeat_interval: Some(Duration::ZERO), ..options("a") },
            LeaseOptions { ttl, max_takeover_wait: ttl, ..options("a") },
            LeaseOptions { ttl: Duration::ZERO, max_takeover_wait: Duration::ZERO, ..options("a") },
            options(""),
            options(&"h".repeat(MAX_HOLDER_NAME_LEN + 1)),
        ];
        for bad in refused {
            let assigner = LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), bad.clone());
            let error = assigner.assign(&layout).await.unwrap_err();
            assert!(matches!(error, StoreError::Worker(WorkerError::InvalidLeaseOptions(_))), "{bad:?}: {error:?}");
        }
        assert!(store.lease_rows(DEFAULT_SPACE, 3).await.unwrap().is_empty(), "nothing was claimed");

        let longest = options(&"h".repeat(MAX_HOLDER_NAME_LEN));
        let lease = LeasedWorkerIdAssigner::new(store.clone(), clock, longest).claim(&layout).await.unwrap();
        assert_eq!(store.lease_row(DEFAULT_SPACE, lease.worker_id()).await.unwrap().unwrap().holder, lease.holder());
    }
}
