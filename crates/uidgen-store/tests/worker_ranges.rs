#![allow(clippy::unwrap_used)]
//! Several assigners on one store: each registers its worker-id range in `worker_id_range`, and
//! overlapping or changed ranges are refused before any id is taken.

mod common;

use std::sync::Arc;

use common::narrow_layout;
use uidgen_core::ManualClock;
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_store::{
    DEFAULT_SPACE, DisposableWorkerIdAssigner, LeasedWorkerIdAssigner, NodeType, Store, StoreError,
    StoreOptions, WorkerNode,
};
use uidgen_worker::{
    LeaseOptions, StaticWorkerIdAssigner, WorkerError, WorkerIdAssigner, WorkerIdRange,
};

const T0: u64 = 1_800_000_000_000;

fn range(text: &str) -> WorkerIdRange {
    text.parse().unwrap()
}

fn disposable(store: &Store, range: Option<WorkerIdRange>) -> DisposableWorkerIdAssigner {
    let node = WorkerNode {
        host_name: "10.0.0.1".to_owned(),
        port: "8080".to_owned(),
        node_type: NodeType::Container,
        launch_date: None,
    };
    let assigner = DisposableWorkerIdAssigner::with_node(store.clone(), node);
    match range {
        Some(range) => assigner.with_range(range),
        None => assigner,
    }
}

fn leased(store: &Store, range: Option<WorkerIdRange>, holder: &str) -> LeasedWorkerIdAssigner {
    let options = LeaseOptions {
        heartbeat_interval: None,
        holder: Some(holder.to_owned()),
        range,
        ..LeaseOptions::default()
    };
    LeasedWorkerIdAssigner::new(store.clone(), ManualClock::new(T0), options)
}

/// A static assigner whose state file lives in a directory kept for the test process.
fn fixed(id: u64) -> StaticWorkerIdAssigner {
    let dir = tempfile::tempdir().unwrap().keep();
    StaticWorkerIdAssigner::new(id, dir.join("worker.state"))
}

fn is_conflict(error: &StoreError, asking: &str, recorded: &str) -> bool {
    matches!(error, StoreError::WorkerRangeConflict { assigner, other, .. }
        if assigner == asking && other == recorded)
}

per_db! {
    async fn disposable_and_leased_with_default_ranges_cannot_share_a_store(db: TestDb) {
        let layout = narrow_layout(4); // worker ids 0..=15

        // Disposable first: 1-max is recorded; leased's default 0-max overlaps it.
        let (store, _) = fresh_store(db).await.unwrap();
        assert_eq!(disposable(&store, None).assign(&layout).await.unwrap().worker_id, 1);
        let error = leased(&store, None, "a").assign(&layout).await.unwrap_err();
        assert!(is_conflict(&error, "leased", "disposable"), "{error:?}");
        assert_eq!(
            error.to_string(),
            "worker id range 0-max of the leased assigner overlaps 1-max, recorded on this store for the disposable assigner: both could hand out the same worker id; set `worker.range` so that the ranges are disjoint (every leased service on this store alike)"
        );
        assert!(store.lease_rows(DEFAULT_SPACE, 15).await.unwrap().is_empty(), "no id was leased");

        // Leased first: the disposable assigner is refused before it inserts a worker_node row.
        let (store, _) = fresh_store(db).await.unwrap();
        assert_eq!(leased(&store, None, "a").claim(&layout).await.unwrap().worker_id(), 0);
        let error = disposable(&store, None).assign(&layout).await.unwrap_err();
        assert!(is_conflict(&error, "disposable", "leased"), "{error:?}");
        assert_eq!(store.count_worker_nodes().await.unwrap(), 0, "no worker_node row was taken");
        let ranges = store.worker_ranges().await.unwrap();
        assert_eq!(ranges.len(), 1);
        assert_eq!((ranges[0].assigner.as_str(), ranges[0].range), ("leased", range("0-max")));
    }
}

per_db! {
    async fn default_ranges_do_not_depend_on_the_layout(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        // One assigner on several layouts registers one range, up to each layout's maximum.
        let assign = |worker_bits| {
            let assigner = disposable(&store, None);
            async move { assigner.assign(&narrow_layout(worker_bits)).await }
        };
        assert_eq!(assign(4).await.unwrap().worker_id, 1);
        let error = assign(1).await.unwrap_err(); // row 2 is past worker id 1
        assert!(matches!(error, StoreError::WorkerIdsExhausted { id: 2, max: 1 }), "{error:?}");
        assert_eq!(assign(2).await.unwrap().worker_id, 3);
        let ranges = store.worker_ranges().await.unwrap();
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges[0].range.to_string(), "1-max");
    }
}

per_db! {
    async fn disjoint_ranges_share_a_store_and_disposable_ids_are_offset_by_low(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(4);
        let fresh = disposable(&store, Some(range("12-13")));
        let lease = leased(&store, Some(range("0-11")), "a");
        // worker_node rows 1 and 2 are worker ids 12 and 13.
        assert_eq!(fresh.assign(&layout).await.unwrap().worker_id, 12);
        assert_eq!(lease.claim(&layout).await.unwrap().worker_id(), 0);
        assert_eq!(fresh.assign(&layout).await.unwrap().worker_id, 13);
        assert_eq!(leased(&store, Some(range("0-11")), "b").claim(&layout).await.unwrap().worker_id(), 1);

        // Row 3 would be worker id 14: past the range, though inside the layout.
        let error = fresh.assign(&layout).await.unwrap_err();
        assert!(
            matches!(error, StoreError::WorkerRangeExhausted { id: 14, range } if range.to_string() == "12-13"),
            "{error:?}"
        );
        assert!(error.to_string().contains("widen `worker.range`"), "{error}");

        let ranges: Vec<_> = store
            .worker_ranges()
            .await
            .unwrap()
            .into_iter()
            .map(|row| (row.assigner, row.range.to_string()))
            .collect();
        assert_eq!(
            ranges,
            [("leased".to_owned(), "0-11".to_owned()), ("disposable".to_owned(), "12-13".to_owned())]
        );
    }
}

per_db! {
    async fn a_leased_range_is_honoured_until_it_is_used_up(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(3); // worker ids 0..=7
        let within = Some(range("4-6"));
        let mut ids = Vec::new();
        for holder in ["a", "b", "c"] {
            ids.push(leased(&store, within, holder).claim(&layout).await.unwrap().worker_id());
        }
        assert_eq!(ids, [4, 5, 6]);
        // Ids 0-3 and 7 are free, but not this assigner's.
        let error = leased(&store, within, "d").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::NoFreeWorkerId { max: 6, count: 3, .. }), "{error:?}");
        assert!(error.to_string().contains("all 3 worker ids (4 to 6) are leased"), "{error}");
        let leased_ids: Vec<_> = store.lease_rows(DEFAULT_SPACE, 7).await.unwrap().iter().map(|r| r.worker_id).collect();
        assert_eq!(leased_ids, [4, 5, 6]);
    }
}

per_db! {
    async fn a_changed_range_for_the_same_assigner_is_refused(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(4);
        leased(&store, Some(range("0-7")), "a").claim(&layout).await.unwrap();
        // The same range again (another service, a restart) is fine.
        leased(&store, Some(range("0-7")), "b").claim(&layout).await.unwrap();

        let error = leased(&store, Some(range("0-5")), "c").claim(&layout).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::WorkerRangeChanged { assigner, recorded, requested }
                if assigner == "leased" && recorded.to_string() == "0-7" && requested.to_string() == "0-5"),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("every leased service on one store must use the same range"), "{message}");
        assert!(message.contains("`worker.range = \"0-7\"`"), "{message}");
        assert!(
            message.contains("UPDATE worker_id_range SET low = 0, high = 5 WHERE assigner = 'leased'"),
            "{message}"
        );
        // The default (full) range is a different range too.
        let error = leased(&store, None, "d").claim(&layout).await.unwrap_err();
        assert!(matches!(error, StoreError::WorkerRangeChanged { .. }), "{error:?}");
        assert_eq!(store.lease_rows(DEFAULT_SPACE, 15).await.unwrap().len(), 2, "nothing more was leased");
    }
}

per_db! {
    async fn a_static_id_registered_in_a_store_keeps_out_of_the_leased_range(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(4);
        leased(&store, Some(range("0-7")), "a").claim(&layout).await.unwrap();

        // The default static range is the whole layout: it overlaps.
        let error = StoreError::from(fixed(9).registered_in(store.clone()).assign(&layout).await.unwrap_err());
        assert!(is_conflict(&error, "static", "leased"), "{error:?}");
        // A disjoint range, but an id outside it.
        let error = fixed(3)
            .registered_in(store.clone())
            .with_range(range("8-15"))
            .assign(&layout)
            .await
            .unwrap_err();
        assert!(
            matches!(error, WorkerError::WorkerIdNotInRange { id: 3, range } if range.to_string() == "8-15"),
            "{error:?}"
        );
        // A disjoint range and an id inside it.
        let assignment = fixed(9)
            .registered_in(store.clone())
            .with_range(range("8-15"))
            .assign(&layout)
            .await
            .unwrap();
        assert_eq!(assignment.worker_id, 9);
        assert_eq!(store.worker_ranges().await.unwrap().len(), 2);

        // Another static service asking for a different range is refused.
        let error = StoreError::from(
            fixed(10)
                .registered_in(store.clone())
                .with_range(range("6-15"))
                .assign(&layout)
                .await
                .unwrap_err(),
        );
        assert!(matches!(error, StoreError::WorkerRangeChanged { .. }), "{error:?}");
        // Without a store nothing is recorded or checked against the other assigners.
        assert_eq!(fixed(3).assign(&layout).await.unwrap().worker_id, 3);
        assert_eq!(store.worker_ranges().await.unwrap().len(), 2);
    }
}

per_db! {
    async fn a_range_past_the_layout_is_refused_before_anything_is_recorded(db: TestDb) {
        let (store, _) = fresh_store(db).await.unwrap();
        let layout = narrow_layout(3); // worker ids 0..=7
        let too_wide = Some(range("4-8"));
        let errors = [
            disposable(&store, too_wide).assign(&layout).await.unwrap_err(),
            leased(&store, too_wide, "a").assign(&layout).await.unwrap_err(),
            StoreError::from(fixed(4).registered_in(store.clone()).with_range(range("4-8")).assign(&layout).await.unwrap_err()),
        ];
        for error in errors {
            assert!(matches!(error, StoreError::Worker(WorkerError::WorkerRangeOutsideLayout { max: 7, .. })), "{error:?}");
            assert!(error.to_string().contains("set `worker.range` within 0-7"), "{error}");
        }
        assert!(store.worker_ranges().await.unwrap().is_empty());
        assert_eq!(store.count_worker_nodes().await.unwrap(), 0);
    }
}

per_db! {
    async fn concurrent_registrations_of_overlapping_ranges_have_one_winner(db: TestDb) {
        let (_, url) = fresh_store(db).await.unwrap();
        const RACERS: u64 = 12;
        const ROUNDS: u64 = 4;
        // One store (pool) per racer, as separate processes would have.
        let options = StoreOptions { max_connections: 2, migrate: false, ..StoreOptions::default() };
        let mut stores = Vec::new();
        for _ in 0..RACERS {
            stores.push(Store::connect_with(&url, options.clone()).await.unwrap());
        }
        // Each round races for its own block of ids, so every round must have its own winner.
        for round in 0..ROUNDS {
            let barrier = Arc::new(tokio::sync::Barrier::new(stores.len()));
            let mut tasks = Vec::new();
            for (i, store) in (0..RACERS).zip(stores.iter().cloned()) {
                let barrier = Arc::clone(&barrier);
                // Pairwise overlapping: every range of the round contains its ids 11..=20.
                let low = round * 100 + i;
                let wanted = WorkerIdRange::new(low, low + 20).unwrap();
                tasks.push(tokio::spawn(async move {
                    barrier.wait().await;
                    store.register_worker_range(&format!("racer-{round}-{i}"), wanted).await
                }));
            }
            let mut winners = 0;
            for task in tasks {
                match task.await.unwrap() {
                    Ok(()) => winners += 1,
                    Err(error) => assert!(matches!(error, StoreError::WorkerRangeConflict { .. }), "{error:?}"),
                }
            }
            assert_eq!(winners, 1, "round {round}");
        }
        let recorded = stores[0].worker_ranges().await.unwrap();
        assert_eq!(recorded.len(), usize::try_from(ROUNDS).unwrap(), "{recorded:?}");
    }
}
