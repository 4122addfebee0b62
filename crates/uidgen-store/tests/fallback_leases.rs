#![allow(clippy::unwrap_used)]
//! Fallback worker ids that servers lease to clients (`FallbackLeases`), and the client's side
//! of such a lease (`RemoteLease`): distinct ids under racing claims on every database, the
//! floor a takeover or a release hands the next holder, the embedded range's registration, and
//! the fence a lease puts on the client's generator, across a restart from its state file.

mod common;

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{
    Clock, DefaultUidGenerator, Layout, ManualClock, SystemClock, TimeFence, UidError, UidGenerator,
};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{DEFAULT_SPACE, FallbackLeases, LeasedWorkerIdAssigner, Store, StoreError};
use uidgen_worker::{LeaseGrant, LeaseOptions, RemoteLease, Resumable, WorkerIdRange, read_cache};

const T0: u64 = 1_800_000_000_000;
const TTL: Duration = Duration::from_secs(30);

fn vesta() -> Layout {
    Layout::vesta_max_peak().unwrap()
}

fn embedded() -> WorkerIdRange {
    WorkerIdRange::new(0, 923).unwrap()
}

per_db! {
    async fn claims_get_distinct_ids_and_renewal_and_release_match_the_holder(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let leases = FallbackLeases::new(store.clone(), embedded()).with_clock(clock.clone());
        let a = leases.claim(&vesta(), "app-a/1", TTL).await.unwrap();
        let b = leases.claim(&vesta(), "app-b/2", TTL).await.unwrap();
        assert_eq!((a.worker_id, b.worker_id), (0, 1));
        assert_eq!((a.valid_until_ms, a.floor_ms), (T0 + 30_000, T0));
        assert!(a.holder.starts_with("app-a/1#"), "{}", a.holder);
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms), (a.holder.as_str(), T0 + 30_000));

        clock.advance(10_000);
        let renewed = leases.renew(&vesta(), 0, &a.holder, TTL, T0 + 9_000).await.unwrap();
        assert_eq!(renewed, T0 + 40_000);
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.expires_at_ms, row.last_issued_ms), (T0 + 40_000, T0 + 9_000));

        // Another holder string (b's, or a's name with another token) renews nothing.
        let forged = format!("app-a/1#{:016x}", 7);
        for holder in [b.holder.as_str(), forged.as_str()] {
            let error = leases.renew(&vesta(), 0, holder, TTL, 0).await.unwrap_err();
            assert!(matches!(error, StoreError::LeaseLost { worker_id: 0, .. }), "{error:?}");
        }
        assert!(!leases.release(&vesta(), 0, &b.holder, 0).await.unwrap());

        assert!(leases.release(&vesta(), 0, &a.holder, T0 + 12_000).await.unwrap());
        let error = leases.renew(&vesta(), 0, &a.holder, TTL, 0).await.unwrap_err();
        assert!(error.to_string().contains("taken over after it expired, or released"), "{error}");
        let row = store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap();
        assert_eq!((row.holder.as_str(), row.expires_at_ms, row.last_issued_ms), ("", 0, T0 + 12_000));
    }
}

per_db! {
    async fn a_takeover_starts_above_the_predecessors_limit_and_issued_until(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let clock = ManualClock::new(T0);
        let one = WorkerIdRange::new(5, 5).unwrap();
        let leases = FallbackLeases::new(store.clone(), one).with_clock(clock.clone());
        let old = leases.claim(&vesta(), "old", TTL).await.unwrap();
        clock.advance(20_000);
        let limit = leases.renew(&vesta(), 5, &old.holder, TTL, T0 + 19_000).await.unwrap();
        let busy = leases.claim(&vesta(), "new", TTL).await.unwrap_err();
        assert!(matches!(busy, StoreError::NoFreeWorkerId { max: 5, count: 1, .. }), "{busy:?}");

        // The old holder went silent; once its last confirmed valid_until has passed, the id
        // changes hands with a floor above everything the old holder could stamp.
        clock.set(limit + 1);
        let new = leases.claim(&vesta(), "new", TTL).await.unwrap();
        assert_eq!(new.worker_id, 5);
        assert!(new.floor_ms > limit && new.floor_ms >= T0 + 19_000, "{new:?}");
        // The old holder's next renewal finds the lease gone.
        let lost = leases.renew(&vesta(), 5, &old.holder, TTL, 0).await.unwrap_err();
        assert!(matches!(lost, StoreError::LeaseLost { worker_id: 5, .. }), "{lost:?}");

        // A released id changes hands at once, above what its last holder said it issued,
        // even when that lies ahead of the clock.
        let issued = clock.now_millis() + 5_000;
        assert!(leases.release(&vesta(), 5, &new.holder, issued).await.unwrap());
        let next = leases.claim(&vesta(), "next", TTL).await.unwrap();
        assert_eq!((next.worker_id, next.floor_ms), (5, issued));
    }
}

per_db! {
    async fn racing_claims_from_separate_pools_get_distinct_ids(db: TestDb) {
        let (_store, url) = fresh_store(db).await.unwrap();
        const CLAIMANTS: usize = 12;
        let range = WorkerIdRange::new(100, 100 + CLAIMANTS as u64 - 1).unwrap();
        // Each claimant is a "process" of its own: its own pool, several claims at once.
        let mut tasks = Vec::new();
        for i in 0..CLAIMANTS / 3 {
            let store = Store::connect(&url).await.unwrap();
            for j in 0..3 {
                let leases = FallbackLeases::new(store.clone(), range);
                tasks.push(tokio::spawn(async move {
                    leases.claim(&vesta(), &format!("c{i}-{j}"), TTL).await
                }));
            }
        }
        let mut ids = Vec::new();
        for task in tasks {
            ids.push(task.await.unwrap().unwrap().worker_id);
        }
        ids.sort_unstable();
        let expected: Vec<u64> = (100..100 + CLAIMANTS as u64).collect();
        assert_eq!(ids, expected, "every claimant got its own id");
        let full = FallbackLeases::new(Store::connect(&url).await.unwrap(), range)
            .claim(&vesta(), "late", TTL)
            .await
            .unwrap_err();
        assert!(matches!(full, StoreError::NoFreeWorkerId { .. }), "{full:?}");
    }
}

per_db! {
    async fn the_embedded_range_is_registered_and_keeps_other_assigners_out(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let leases = FallbackLeases::new(store.clone(), embedded());
        leases.claim(&vesta(), "app", TTL).await.unwrap();
        let ranges = store.worker_ranges().await.unwrap();
        assert!(
            ranges.iter().any(|r| r.assigner == FallbackLeases::REGISTRY_NAME && r.range == embedded()),
            "{ranges:?}"
        );
        // A server's leased assigner over the whole layout would hand out the same ids.
        let leased = LeasedWorkerIdAssigner::new(store.clone(), SystemClock, LeaseOptions::default());
        let error = leased.claim(&vesta()).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::WorkerRangeConflict { other, .. } if other == "fallback"),
            "{error:?}"
        );
        // Vesta's server range next to it is fine.
        let servers = leased.with_range(WorkerIdRange::new(924, 1023).unwrap());
        assert_eq!(servers.claim(&vesta()).await.unwrap().worker_id(), 924);
        // Another embedded range on the same store is refused.
        let other = FallbackLeases::new(store, WorkerIdRange::new(0, 99).unwrap());
        let changed = other.claim(&vesta(), "app", TTL).await.unwrap_err();
        assert!(matches!(changed, StoreError::WorkerRangeChanged { .. }), "{changed:?}");
    }
}

#[tokio::test]
async fn malformed_requests_are_refused_before_the_database() {
    // A lazy pool on a file nobody can create (its folder exists, as connecting checks, but
    // /proc takes no new files): every refusal below comes before any query.
    let store = Store::connect_lazy(
        "sqlite:///proc/uidgen-never-opened.db",
        uidgen_store::StoreOptions::default(),
    )
    .unwrap();
    let leases = FallbackLeases::new(store, embedded()).with_clock(ManualClock::new(T0));
    let layout = vesta();
    let invalid = |result: uidgen_store::Result<_>| match result {
        Err(StoreError::InvalidInput(message)) => message,
        other => panic!("expected InvalidInput, got {other:?}"),
    };
    let short = invalid(
        leases
            .claim(&layout, "app", Duration::from_millis(999))
            .await
            .map(drop),
    );
    assert!(
        short.contains("ttl 999 ms is out of range: ask for 1000 to 86400000 ms"),
        "{short}"
    );
    invalid(
        leases
            .claim(&layout, "app", Duration::from_secs(86_401))
            .await
            .map(drop),
    );
    invalid(leases.claim(&layout, "", TTL).await.map(drop));
    invalid(leases.claim(&layout, "a\nb", TTL).await.map(drop));
    invalid(leases.claim(&layout, &"x".repeat(112), TTL).await.map(drop));
    let outside = invalid(leases.renew(&layout, 924, "app#1", TTL, 0).await.map(drop));
    assert!(
        outside.contains("not a fallback worker id: this server leases 0-923"),
        "{outside}"
    );
    invalid(leases.renew(&layout, 1, "no-token", TTL, 0).await.map(drop));
    let ahead = invalid(
        leases
            .release(&layout, 1, "app#1", T0 + 86_400_001)
            .await
            .map(drop),
    );
    assert!(ahead.contains("issued_until_ms"), "{ahead}");
}

/// A grant as a server would answer it.
fn grant(worker_id: u64, valid_until_ms: u64, floor_ms: u64) -> LeaseGrant {
    LeaseGrant {
        worker_id,
        holder: format!("test/{}#{:016x}", std::process::id(), fastrand::u64(..)),
        valid_until_ms,
        floor_ms,
    }
}

/// Keep `grant` in `dir` on `clock`: the lease (its file must be free).
async fn kept(dir: &std::path::Path, grant: &LeaseGrant, clock: &ManualClock) -> RemoteLease {
    RemoteLease::start(dir, &vesta(), grant, Arc::new(clock.clone()))
        .await
        .unwrap()
        .unwrap()
}

#[tokio::test]
async fn a_remote_lease_fences_its_generator_by_the_confirmed_valid_until_and_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let layout = vesta();
    let clock = ManualClock::new(T0);
    let lease = Arc::new(kept(dir.path(), &grant(7, T0 + 3_000, T0 - 1), &clock).await);
    let generator = DefaultUidGenerator::new(layout.clone(), 7, clock.clone())
        .unwrap()
        .fenced(Arc::clone(&lease) as Arc<dyn TimeFence>);
    assert_eq!(lease.floor_ms(), T0 - 1);
    let first = layout.decompose(generator.next_id().unwrap()).unwrap();
    assert_eq!((first.worker, first.method), (7, 0));
    clock.set(T0 + 2_000);
    generator.next_id().unwrap(); // the unit ending at T0 + 3 s, the lease's end
    clock.set(T0 + 3_000);
    let beyond = generator.next_id().unwrap_err();
    assert!(
        beyond.to_string().contains("no server has renewed it"),
        "{beyond}"
    );
    // A renewal a server confirmed lets it go on, and is in the state file for a restart.
    lease.confirm(T0 + 9_000);
    generator.next_id().unwrap();
    let file = read_cache(&RemoteLease::state_file(dir.path(), 7)).unwrap();
    assert_eq!(file.lease_expires_ms, Some(T0 + 9_000));
    assert_eq!(file.holder.as_deref(), Some(lease.holder()));
    // A lost lease stops at once and leaves no file to restart from.
    lease.lose("taken over");
    assert!(matches!(
        generator.next_id(),
        Err(UidError::GeneratorStopped(_))
    ));
    assert!(!RemoteLease::state_file(dir.path(), 7).exists());
    assert_eq!(lease.limit_ms(), 0);
}

#[tokio::test]
async fn a_restart_continues_an_unexpired_lease_from_its_file_above_its_mark_only() {
    let dir = tempfile::tempdir().unwrap();
    let layout = vesta();
    let now = SystemClock.now_millis();
    let first = RemoteLease::start(
        dir.path(),
        &layout,
        &grant(3, now + 60_000, now - 1),
        Arc::new(SystemClock),
    )
    .await
    .unwrap()
    .unwrap();
    let first = Arc::new(first);
    let generator = DefaultUidGenerator::new(layout.clone(), 3, SystemClock)
        .unwrap()
        .fenced(Arc::clone(&first) as Arc<dyn TimeFence>);
    let ids: Vec<u64> = (0..5_000).map(|_| generator.next_id().unwrap()).collect();
    let last_time = ids
        .iter()
        .map(|id| layout.decompose(*id).unwrap().time)
        .max()
        .unwrap();

    // Held: a second process finds the lease held by another, and cannot start on that id.
    let found = RemoteLease::find_resumable(dir.path(), &layout, Arc::new(SystemClock)).unwrap();
    assert!(
        matches!(&found, Resumable::Held(held) if held[0].worker_id == 3),
        "{found:?}"
    );
    let again = grant(3, now + 60_000, now);
    let again = RemoteLease::start(dir.path(), &layout, &again, Arc::new(SystemClock)).await;
    assert!(again.unwrap().is_none());

    // The process dies (its lock goes); a restart with no server continues the same lease.
    let holder = first.holder().to_owned();
    drop(generator);
    drop(first);
    let resumed = resume(dir.path(), &layout, Arc::new(SystemClock))
        .await
        .unwrap();
    assert_eq!(
        (resumed.worker_id(), resumed.holder()),
        (3, holder.as_str())
    );
    assert!(!resumed.is_confirmed());
    assert_eq!(resumed.valid_until_ms(), now + 60_000);
    assert!(resumed.floor_ms() >= layout.millis_of(last_time + 1));
    let resumed = Arc::new(resumed);
    let generator = DefaultUidGenerator::new(layout.clone(), 3, SystemClock)
        .unwrap()
        .fenced(Arc::clone(&resumed) as Arc<dyn TimeFence>);
    for _ in 0..5_000 {
        let id = generator.next_id().unwrap();
        assert!(
            layout.decompose(id).unwrap().time > last_time,
            "ID {id} reuses a unit"
        );
        assert!(!ids.contains(&id));
    }
    // Let go: the file is gone, the issued-until time covers every ID.
    let issued = resumed.let_go(|| generator.issued_until_ms()).unwrap();
    assert!(issued >= generator.issued_until_ms().unwrap());
    assert!(!resumed.path().exists());
    assert!(generator.next_id().is_err());
}

/// What a restart with no server finds to continue in `dir`: the lease it continues, if any.
async fn resume(
    dir: &std::path::Path,
    layout: &uidgen_core::Layout,
    clock: Arc<dyn uidgen_core::Clock>,
) -> Option<RemoteLease> {
    match RemoteLease::find_resumable(dir, layout, Arc::clone(&clock)).unwrap() {
        Resumable::Ready(pending) => pending.start(layout, clock).await.unwrap(),
        Resumable::Held(_) | Resumable::Nothing => None,
    }
}

#[tokio::test]
async fn an_expired_lease_is_not_continued_and_its_file_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let layout = vesta();
    let clock = ManualClock::new(T0);
    drop(kept(dir.path(), &grant(9, T0 + 2_000, T0 - 1), &clock).await);
    clock.set(T0 + 2_000);
    assert!(
        resume(dir.path(), &layout, Arc::new(clock.clone()))
            .await
            .is_none()
    );
    assert!(!RemoteLease::state_file(dir.path(), 9).exists());
    // An empty or missing directory has nothing to continue.
    let missing = dir.path().join("missing");
    assert!(resume(&missing, &layout, Arc::new(clock)).await.is_none());
}

per_db! {
    /// The argument of docs/OPERATIONS.md for the leased client fallback, on two "hosts" with
    /// clocks of their own (separate state directories, separate clocks, one database): host A
    /// (2 s ahead of the server) issues under its lease until the lease stops it; once the
    /// server's clock has passed the row's expiry, host B (5 s behind, then stepped back 3 s
    /// more) takes the id over. B's floor lies above A's limit, so B never stamps a unit A
    /// stamped, whatever its clock reads: no ID in common.
    async fn a_successor_on_another_host_never_stamps_a_unit_of_its_predecessor(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = vesta();
        let server = ManualClock::new(T0);
        let one = WorkerIdRange::new(3, 3).unwrap();
        let leases = FallbackLeases::new(store, one).with_clock(server.clone());
        let ttl = Duration::from_secs(10);

        let (dir_a, clock_a) = (tempfile::tempdir().unwrap(), ManualClock::new(T0 + 2_000));
        let grant_a = leases.claim(&layout, "host-a", ttl).await.unwrap();
        let lease_a = Arc::new(kept(dir_a.path(), &grant_a, &clock_a).await);
        let gen_a = DefaultUidGenerator::new(layout.clone(), 3, clock_a.clone())
            .unwrap()
            .fenced(Arc::clone(&lease_a) as Arc<dyn TimeFence>);
        // A renewal the store accepted raises A's limit; A issues until its lease stops it.
        server.advance(4_000);
        let renewed = leases.renew(&layout, 3, &grant_a.holder, ttl, 0).await.unwrap();
        lease_a.confirm(renewed);
        let mut ids_a = Vec::new();
        let stopped = loop {
            match gen_a.next_id() {
                Ok(id) => ids_a.push(id),
                Err(error) => break error,
            }
            if ids_a.len() % 1_000 == 0 {
                clock_a.advance(500);
            }
        };
        assert!(matches!(stopped, UidError::BeyondFence { .. }), "{stopped:?}");
        let a_last = ids_a.iter().map(|id| layout.decompose(*id).unwrap().time).max().unwrap();
        assert!(layout.millis_of(a_last + 1) <= renewed);

        // B's claim waits for the server's clock to pass the row's expiry.
        server.set(renewed);
        let busy = leases.claim(&layout, "host-b", ttl).await.unwrap_err();
        assert!(matches!(busy, StoreError::NoFreeWorkerId { .. }), "{busy:?}");
        server.set(renewed + 1);
        let grant_b = leases.claim(&layout, "host-b", ttl).await.unwrap();
        assert!(grant_b.floor_ms > renewed, "{grant_b:?}");
        // B's clock is 5 s behind the server's: its start waits for the clock to pass the floor.
        let clock_b = ManualClock::new(renewed + 1 - 5_000);
        let stepper = {
            let clock_b = clock_b.clone();
            let floor = grant_b.floor_ms;
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                clock_b.set(floor + 1);
            })
        };
        let dir_b = tempfile::tempdir().unwrap();
        let lease_b = Arc::new(kept(dir_b.path(), &grant_b, &clock_b).await);
        stepper.await.unwrap();
        let gen_b = DefaultUidGenerator::new(layout.clone(), 3, clock_b.clone())
            .unwrap()
            .fenced(Arc::clone(&lease_b) as Arc<dyn TimeFence>);
        let mut ids_b: Vec<u64> = (0..1_000).map(|_| gen_b.next_id().unwrap()).collect();
        // B's clock steps back 3 s: refused, never an old unit.
        clock_b.rewind(3_000);
        assert!(matches!(gen_b.next_id(), Err(UidError::ClockMovedBackwards { .. })));
        clock_b.advance(4_000);
        ids_b.extend((0..1_000).map(|_| gen_b.next_id().unwrap()));
        let b_first = ids_b.iter().map(|id| layout.decompose(*id).unwrap().time).min().unwrap();
        assert!(b_first > a_last, "B stamped unit {b_first}, A up to {a_last}");
        let a: std::collections::HashSet<u64> = ids_a.iter().copied().collect();
        assert_eq!(ids_b.iter().filter(|id| a.contains(id)).count(), 0);
    }
}
