#![allow(clippy::unwrap_used)]
//! Issue 18: a worker id decided before the store is asked (`static`, `machine`) is leased in
//! the shared store as an exact id, so two hosts that share no files still never hold it at
//! once, and a successor continues where its predecessor stopped.
//!
//! "Two hosts" here are two assigners with state files in different directories: nothing
//! local is shared between them, only the store.

use std::time::Duration;

use uidgen_core::{Layout, ManualClock, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{DEFAULT_SPACE, LeaseGuard, Store};
use uidgen_worker::{
    ContainerProbe, GeneratorBuilder, LeaseOptions, MachineWorkerIdAssigner,
    StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner,
};

mod common;

/// A clock reading well past every layout's epoch.
const T0: u64 = 1_800_000_000_000;

/// A host of its own: an empty directory for its state files.
fn host() -> std::path::PathBuf {
    tempfile::tempdir().unwrap().keep()
}

/// Leases without a heartbeat (the tests renew, or let them lapse, by hand).
fn manual_leases() -> LeaseOptions {
    LeaseOptions {
        heartbeat_interval: None,
        ..LeaseOptions::with_ttl(Duration::from_secs(30))
    }
}

/// Static worker id `id` on the host whose files are in `dir`, registered in `store`.
fn static_on_host(
    id: u64,
    dir: &std::path::Path,
    store: &Store,
    clock: &ManualClock,
) -> StaticWorkerIdAssigner {
    StaticWorkerIdAssigner::new(id, dir.join(format!("worker-{id}.state")))
        .registered_in(store.clone())
        .with_lease_options(manual_leases())
        .with_clock(clock.clone())
}

per_db! {
    async fn a_static_id_is_held_by_one_host_and_its_successor_starts_above_its_mark(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Layout::snowflake().unwrap();
        let clock = ManualClock::new(T0);
        let on = |dir: &std::path::Path| static_on_host(7, dir, &store, &clock);
        let (host_a, host_b) = (host(), host());
        let first = GeneratorBuilder::new(layout.clone())
            .assigner(on(&host_a))
            .build_default(clock.clone())
            .await
            .unwrap();
        assert_eq!(first.worker_id(), 7);
        let lease = LeaseGuard::of(&first.assignment).expect("a static id in a store is leased");
        assert!(lease.holder().contains('#'), "{}", lease.holder());
        clock.advance(2_000);
        let ids_a = first.generator.next_ids(4_000).unwrap();

        // Host B, configured with the same id, is refused and told who holds it.
        let refused = on(&host_b).assign(&layout).await.unwrap_err();
        match &refused {
            WorkerError::WorkerIdHeld { worker_id: 7, holder, expires_in_ms } => {
                assert_eq!(holder, lease.holder());
                assert!(*expires_in_ms > 0);
            }
            other => panic!("expected WorkerIdHeld, got {other:?}"),
        }
        let said = refused.to_string();
        assert!(said.contains("static worker id 7 is held by"), "{said}");
        assert!(said.contains(lease.holder()), "{said}");

        // A clean stop records how far A issued; B starts above it.
        let issued = first.generator.issued_until_ms().unwrap();
        lease.release().await.unwrap();
        let row = store.lease_row(DEFAULT_SPACE, 7).await.unwrap().unwrap();
        assert!(row.last_issued_ms >= issued, "{row:?} < {issued}");
        clock.set(issued + 1);
        let second = GeneratorBuilder::new(layout.clone())
            .assigner(on(&host_b))
            .build_default(clock.clone())
            .await
            .unwrap();
        let fence = second.assignment.fence.clone().unwrap();
        assert!(fence.floor_ms() >= issued, "floor {} < {issued}", fence.floor_ms());
        let ids_b = second.generator.next_ids(4_000).unwrap();
        let mut all = ids_a;
        all.extend(ids_b);
        let total = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), total, "{} equal IDs", total - all.len());
        LeaseGuard::of(&second.assignment).unwrap().release().await.unwrap();
    }
}

per_db! {
    async fn a_crashed_holders_id_changes_hands_only_after_its_lease_expired(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Layout::snowflake().unwrap();
        let clock = ManualClock::new(T0);
        let on = |dir: &std::path::Path| static_on_host(9, dir, &store, &clock);
        let crashed = GeneratorBuilder::new(layout.clone())
            .assigner(on(&host()))
            .build_default(clock.clone())
            .await
            .unwrap();
        clock.advance(10_000);
        LeaseGuard::of(&crashed.assignment).unwrap().renew().await.unwrap();
        let ids_old = crashed.generator.next_ids(3_000).unwrap();
        let valid_until = LeaseGuard::of(&crashed.assignment).unwrap().valid_until_ms();
        let newest = ids_old.iter().map(|&id| layout.decompose(id).unwrap().time).max().unwrap();
        std::mem::forget(crashed); // a crash: nothing is released, no heartbeat runs

        // Up to its expiry the id is still the crashed holder's.
        clock.set(valid_until);
        let held = on(&host()).assign(&layout).await.unwrap_err();
        assert!(matches!(held, WorkerError::WorkerIdHeld { worker_id: 9, .. }), "{held:?}");

        clock.set(valid_until + 1);
        let successor = on(&host()).assign(&layout).await.unwrap();
        let floor = successor.fence.as_ref().unwrap().floor_ms();
        assert!(floor > valid_until, "floor {floor} <= {valid_until}");
        let newest_end = layout.millis_of(newest + 1);
        assert!(floor >= newest_end, "the newest unit stamped ends at {newest_end} > {floor}");
        LeaseGuard::of(&successor).unwrap().release().await.unwrap();
    }
}

per_db! {
    async fn machine_values_taken_on_another_host_are_skipped_until_all_32_are_held(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = Layout::keyworker().unwrap();
        // 33 hosts whose machine part is the same, each process with pid 40 (40 % 32 = 8), as
        // containers from one image are: each host's lock files see only itself.
        let on_new_host = || {
            MachineWorkerIdAssigner::new(host())
                .with_machine_part(4)
                .with_process_id(40)
                .registered_in(store.clone())
                .with_lease_options(manual_leases())
        };
        let mut held = Vec::new();
        for _ in 0..32 {
            held.push(on_new_host().assign(&layout).await.unwrap());
        }
        let mut workers: Vec<u64> = held.iter().map(|a| a.worker_id).collect();
        assert_eq!(workers[..2], [(4 << 5) | 8, (4 << 5) | 9]);
        workers.sort_unstable();
        assert_eq!(workers, ((4 << 5)..(5 << 5)).collect::<Vec<u64>>());
        let full = on_new_host().assign(&layout).await.unwrap_err();
        assert!(
            matches!(full, WorkerError::MachineProcessValuesHeld { machine: 4, count: 32, .. }),
            "{full:?}"
        );
        assert!(full.to_string().contains("32 by leases in the store"), "{full}");

        // One host stops: its value is the one the next host gets.
        let freed = held.remove(5);
        let lease = LeaseGuard::of(&freed).unwrap();
        // No generator ran: say so, or the release records the whole lease as issued and the
        // next holder waits out the ttl.
        lease.record_issued_until(0);
        lease.release().await.unwrap();
        let next = on_new_host().assign(&layout).await.unwrap();
        assert_eq!(next.worker_id, freed.worker_id);
    }
}

/// A fake `/` that says "container".
fn docker_root() -> std::path::PathBuf {
    let root = host();
    std::fs::write(root.join(".dockerenv"), "").unwrap();
    root
}

#[tokio::test]
async fn without_a_shared_store_a_container_is_refused_unless_allowed() {
    let layout = Layout::keyworker().unwrap();
    let probe = ContainerProbe::at(docker_root(), None);
    let machine = || MachineWorkerIdAssigner::new(host()).with_container_probe(probe.clone());
    let refused = machine().assign(&layout).await.unwrap_err();
    let said = refused.to_string();
    assert!(
        matches!(
            refused,
            WorkerError::UncoordinatedInContainer {
                assigner: "machine",
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(
        said.contains("/.dockerenv exists") && said.contains("allow_uncoordinated"),
        "{said}"
    );
    // A store private to this host coordinates nothing across containers.
    let (own, _) = fresh_store(TestDb::Sqlite).await.unwrap();
    let private = machine()
        .registered_in(own.clone())
        .with_store_shared(false);
    assert!(matches!(
        private.assign(&layout).await,
        Err(WorkerError::UncoordinatedInContainer { .. })
    ));
    // Allowed, or with a shared store, it starts.
    machine()
        .allow_uncoordinated(true)
        .assign(&layout)
        .await
        .unwrap();
    let shared = machine().registered_in(own).assign(&layout).await.unwrap();
    LeaseGuard::of(&shared).unwrap().release().await.unwrap();
    // Outside a container nothing is refused.
    let host_root = host();
    std::fs::create_dir_all(host_root.join("proc/1")).unwrap();
    std::fs::write(host_root.join("proc/1/comm"), "systemd\n").unwrap();
    MachineWorkerIdAssigner::new(host())
        .with_container_probe(ContainerProbe::at(host_root, None))
        .assign(&layout)
        .await
        .unwrap();

    // Static: refused where the caller asks for the check, naming the way out.
    let dir = host();
    let refused = StaticWorkerIdAssigner::new(5, dir.join("w.state"))
        .refuse_uncoordinated_in_container(probe.clone())
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(
        refused.to_string().contains("worker.state_file"),
        "{refused}"
    );
    StaticWorkerIdAssigner::new(5, dir.join("w.state"))
        .assign(&layout)
        .await
        .unwrap();
}
