#![allow(clippy::unwrap_used)]
//! Issue 36, point 2: leases per (ID space, worker id). IDs of two spaces may be equal, so a
//! worker id held in one space is free in every other, and a narrow space no longer shares its
//! few ids with the others; rows an older uidgen wrote are the default space's, and a named
//! space takes a worker id they held only above where they stopped.

mod common;

use common::leases::options;
use common::narrow_layout;
use uidgen_core::{ManualClock, TimeFence};
use uidgen_store::testing::{TestDb, fresh_store, fresh_url, run_script};
use uidgen_store::{
    DEFAULT_SPACE, LeaseGuard, LeasedWorkerIdAssigner, Store, StoreError, StoreOptions, migrations,
};

const T0: u64 = 1_800_000_000_000;

fn in_space(
    store: &Store,
    clock: &ManualClock,
    space: &str,
    holder: &str,
) -> LeasedWorkerIdAssigner {
    LeasedWorkerIdAssigner::new(store.clone(), clock.clone(), options(holder)).in_space(space)
}

per_db! {
    /// The case: two servers, four spaces, one of them with 2 worker bits. Each
    /// server holds one lease per space; the narrow space's 4 ids serve both.
    async fn two_servers_with_four_spaces_lease_apart_in_each_space(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let small = narrow_layout(2);
        let wide = narrow_layout(10);
        let spaces = [(DEFAULT_SPACE, &wide), ("order", &wide), ("small", &small), ("user", &wide)];
        let mut held: Vec<(String, LeaseGuard)> = Vec::new();
        for server in ["a", "b"] {
            for (space, layout) in spaces {
                let lease = in_space(&store, &clock, space, server).claim(layout).await.unwrap();
                held.push((space.to_owned(), lease));
            }
        }
        for (space, _) in spaces {
            let ids: Vec<u64> = held.iter().filter(|(s, _)| s == space).map(|(_, l)| l.worker_id()).collect();
            assert_eq!(ids, [0, 1], "{space}: each server its own id, the lowest first");
            for (s, lease) in held.iter().filter(|(s, _)| s == space) {
                let row = store.lease_row(s, lease.worker_id()).await.unwrap().unwrap();
                assert_eq!((row.space.as_str(), row.holder.as_str()), (space, lease.holder()));
            }
        }
        // A third and a fourth server still fit the narrow space; a fifth does not, and is told
        // when to retry.
        for server in ["c", "d"] {
            in_space(&store, &clock, "small", server).claim(&small).await.unwrap();
        }
        let error = in_space(&store, &clock, "small", "e").claim(&small).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { count: 4, retry_in_ms: 30_001, .. }), "{error:?}");
    }
}

per_db! {
    async fn renewing_or_releasing_in_one_space_leaves_the_others_alone(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let layout = narrow_layout(0); // worker id 0 only
        let default = in_space(&store, &clock, DEFAULT_SPACE, "a").claim(&layout).await.unwrap();
        let order = in_space(&store, &clock, "order", "a").claim(&layout).await.unwrap();
        assert_eq!((default.worker_id(), order.worker_id()), (0, 0));
        // Held in its own space: a second claimant there is refused.
        let error = in_space(&store, &clock, "order", "b").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}");

        clock.set(T0 + 10_000);
        order.record_issued_until(T0 + 12_000);
        order.renew().await.unwrap();
        let default_row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((default_row.expires_at_ms, default_row.last_issued_ms), (T0 + 30_000, 0));
        order.release().await.unwrap();
        let default_row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!(default_row.holder, default.holder(), "the default space's lease is untouched");
        let order_row = store.lease_row("order", 0).await.unwrap().unwrap();
        assert_eq!((order_row.holder.as_str(), order_row.last_issued_ms), ("", T0 + 12_000));
        default.renew().await.unwrap();

        // A name the column cannot hold is refused before anything is claimed.
        let error = in_space(&store, &clock, &"s".repeat(33), "a").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::InvalidInput(_)), "{error:?}");
    }
}

per_db! {
    /// A store an older uidgen leased in (migrations up to 0007, one row per worker id for all
    /// of a server's spaces) is migrated: its rows are the default space's, a row such a
    /// uidgen inserts later is too, and a named space takes a worker id those rows held only
    /// once the clock passed where they stopped, starting above it.
    async fn rows_an_older_uidgen_wrote_are_the_default_spaces_and_fence_the_named_ones(db: TestDb) {
        let url = fresh_url(db).await.unwrap();
        let options_no_migrate = StoreOptions { migrate: false, ..StoreOptions::default() };
        let store = Store::connect_with(&url, options_no_migrate).await.unwrap();
        for migration in migrations(store.dialect()).iter().filter(|m| m.version <= 7) {
            run_script(&store, migration.sql).await.unwrap();
        }
        // Worker 0: a crashed holder's lease, live until T0 + 30 s. Worker 1: released, its
        // IDs up to T0 + 2 s.
        run_script(
            &store,
            &format!(
                "INSERT INTO worker_lease (worker_id, holder, expires_at_ms, last_issued_ms) \
                 VALUES (0, 'old/1#0000000000000001', {}, {}), (1, '', 0, {})",
                T0 + 30_000,
                T0 + 5_000,
                T0 + 2_000
            ),
        )
        .await
        .unwrap();
        store.migrate().await.unwrap();
        let old = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((old.holder.as_str(), old.expires_at_ms), ("old/1#0000000000000001", T0 + 30_000));
        // An older uidgen's insert after the migration names no space: the default one.
        run_script(
            &store,
            "INSERT INTO worker_lease (worker_id, holder, expires_at_ms, last_issued_ms) \
             VALUES (3, 'old/2#0000000000000002', 1, 0)",
        )
        .await
        .unwrap();
        assert!(store.lease_row(DEFAULT_SPACE, 3).await.unwrap().is_some());

        let layout = narrow_layout(1); // worker ids 0 and 1
        let clock = ManualClock::new(T0 + 3_000);
        // The default space: worker 0 is the old live lease, worker 1 taken over.
        let default = in_space(&store, &clock, DEFAULT_SPACE, "a").claim(&layout).await.unwrap();
        assert_eq!(default.worker_id(), 1);
        let error = in_space(&store, &clock, DEFAULT_SPACE, "b").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { .. }), "{error:?}");

        // A named space: worker 1's old IDs are behind the clock, so it is taken, above them;
        // worker 0's old lease may have stamped this space's IDs up to T0 + 30 s: not before.
        let order = in_space(&store, &clock, "order", "a").claim(&layout).await.unwrap();
        assert_eq!(order.worker_id(), 1);
        assert!(order.floor_ms() >= T0 + 3_000);
        let error = in_space(&store, &clock, "order", "b").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { retry_in_ms: 27_001, .. }), "{error:?}");
        clock.set(T0 + 30_001);
        let later = in_space(&store, &clock, "order", "b").claim(&layout).await.unwrap();
        assert_eq!(later.worker_id(), 0);
        assert!(later.floor_ms() > T0 + 30_000, "{}", later.floor_ms());
    }
}
