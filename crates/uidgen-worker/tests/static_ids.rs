#![allow(clippy::unwrap_used)]
//! Issue #8, case 3: a static worker id survives restarts on its own host. Its state file's
//! reserved-until mark is on disk before any ID past it is issued, and a restart starts after it.

use std::time::Duration;

use uidgen_core::{CachedOptions, Clock, Layout, ManualClock, SystemClock, UidGenerator};
use uidgen_worker::{
    GeneratorBuilder, StaticWorkerIdAssigner, WorkerAssignment, WorkerError, WorkerIdAssigner,
    read_cache,
};

fn state_file() -> std::path::PathBuf {
    tempfile::tempdir().unwrap().keep().join("worker-5.state")
}

/// Static worker id `id` with its mark in `state`, default options.
async fn assign_static(
    id: u64,
    state: &std::path::Path,
    layout: &Layout,
) -> uidgen_worker::Result<WorkerAssignment> {
    StaticWorkerIdAssigner::new(id, state).assign(layout).await
}

#[tokio::test]
async fn a_restart_within_the_same_second_waits_for_the_previous_mark() {
    let layout = Layout::baidu_default().unwrap();
    let state = state_file();
    let second = layout.epoch_ms() + 100_000_000;
    let clock = ManualClock::new(second + 200);
    let first_life = GeneratorBuilder::new(layout.clone())
        .assigner(StaticWorkerIdAssigner::new(5, &state).with_clock(clock.clone()))
        .build_default(clock.clone())
        .await
        .unwrap();
    let mut ids = first_life.generator.next_ids(100).unwrap();
    drop(first_life); // a crash: nothing is released

    // 600 ms later, in the same second: Baidu's Default generator would repeat these IDs.
    clock.set(second + 800);
    let error = StaticWorkerIdAssigner::new(5, &state)
        .with_clock(clock.clone())
        .max_start_wait(Duration::ZERO)
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            WorkerError::ClockBehindLastIssued { worker_id: 5, .. }
        ),
        "{error:?}"
    );

    let mark = read_cache(&state).unwrap().until_ms;
    assert!(
        mark >= second + 1_000,
        "the mark {mark} covers the second stamped"
    );
    clock.set(mark + 1);
    let second_life = GeneratorBuilder::new(layout.clone())
        .assigner(StaticWorkerIdAssigner::new(5, &state).with_clock(clock.clone()))
        .build_default(clock.clone())
        .await
        .unwrap();
    ids.extend(second_life.generator.next_ids(100).unwrap());
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "a restart repeated IDs");
}

#[tokio::test]
async fn borrowed_seconds_are_on_disk_before_their_ids_are_issued() {
    let layout = Layout::baidu_default().unwrap(); // 8,192 IDs a second
    let state = state_file();
    let built = GeneratorBuilder::new(layout.clone())
        .assigner(StaticWorkerIdAssigner::new(5, &state))
        .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(5)))
        .await
        .unwrap();
    let generator = std::sync::Arc::clone(&built.generator);
    // About five seconds ahead of the clock, within the static bound of ten.
    let ids = tokio::task::spawn_blocking(move || generator.next_ids(40_000).unwrap())
        .await
        .unwrap();
    let mark = read_cache(&state).unwrap().until_ms;
    let last_end = ids
        .iter()
        .map(|&id| layout.millis_of(layout.decompose(id).unwrap().time + 1))
        .max()
        .unwrap();
    assert!(
        last_end > SystemClock.now_millis() + 1_000,
        "the burst borrowed ahead"
    );
    assert!(
        mark >= last_end,
        "mark {mark} lies before an issued unit ending at {last_end}"
    );
    assert!(built.generator.inner().borrowed_units() <= 10);

    // A restart right away is refused (it would have to wait seconds), not let through.
    drop(built);
    let error = StaticWorkerIdAssigner::new(5, &state)
        .max_start_wait(Duration::from_millis(100))
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(
        matches!(error, WorkerError::ClockBehindLastIssued { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn two_live_users_of_one_static_id_on_a_host_are_refused() {
    let layout = Layout::snowflake().unwrap();
    let state = state_file();
    let first = assign_static(5, &state, &layout).await.unwrap();
    let error = assign_static(5, &state, &layout).await.unwrap_err();
    assert!(
        matches!(&error, WorkerError::Cache { reason, .. } if reason.contains("another process on this host")),
        "{error:?}"
    );
    drop(first);
}

#[tokio::test]
async fn a_state_file_of_another_worker_id_is_refused() {
    let layout = Layout::snowflake().unwrap();
    let state = state_file();
    drop(assign_static(5, &state, &layout).await.unwrap());
    let error = assign_static(6, &state, &layout).await.unwrap_err();
    assert!(
        matches!(&error, WorkerError::Cache { reason, .. } if reason.contains("records worker id 5, not 6")),
        "{error:?}"
    );
}
