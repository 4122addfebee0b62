#![allow(clippy::unwrap_used)]
//! Issue #9: the zero-config `machine` assigner. Processes on one host that share a state
//! directory never hold one worker id at once, all 32 process values held is a typed error,
//! and a later process that takes a value again starts past the value's previous mark.
//! (Separate OS processes: crates/uidgen-server/tests/machine.rs, with the real binary.)

use std::time::Duration;

use uidgen_core::{Clock, Layout, ManualClock, UidGenerator};
use uidgen_worker::{
    GeneratorBuilder, MachineWorkerIdAssigner, WorkerError, WorkerIdAssigner, read_cache,
};

/// One "process" on machine part 9 with the given pid, its files in `dir`.
fn process(dir: &std::path::Path, pid: u32) -> MachineWorkerIdAssigner {
    MachineWorkerIdAssigner::new(dir)
        .with_machine_part(9)
        .with_process_id(pid)
}

#[tokio::test]
async fn processes_sharing_a_state_dir_get_distinct_values_until_all_32_are_taken() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::keyworker().unwrap();
    // Every pid lands on process value 5 first: each later one moves on to the next free.
    let mut held = Vec::new();
    for i in 0..32u32 {
        let assignment = process(dir.path(), 5 + 32 * i)
            .assign(&layout)
            .await
            .unwrap();
        held.push(assignment);
    }
    let mut workers: Vec<u64> = held.iter().map(|a| a.worker_id).collect();
    assert_eq!(workers[..3], [(9 << 5) | 5, (9 << 5) | 6, (9 << 5) | 7]);
    assert_eq!(
        workers[27],
        9 << 5,
        "wraps within the machine part: process 0"
    );
    workers.sort_unstable();
    assert_eq!(workers, ((9 << 5)..(10 << 5)).collect::<Vec<u64>>());

    let error = process(dir.path(), 77).assign(&layout).await.unwrap_err();
    assert!(
        matches!(
            &error,
            WorkerError::MachineProcessValuesTaken { machine: 9, count: 32, state_dir }
                if *state_dir == dir.path().display().to_string()
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("all 32 process values of machine part 9")
    );

    // A process that stops frees its value (its lock goes with it) for the next one.
    let freed = held.remove(12).worker_id;
    let next = process(dir.path(), 77).assign(&layout).await.unwrap();
    assert_eq!(next.worker_id, freed);
}

#[tokio::test]
async fn another_machine_part_has_its_own_32_values() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::snowflake().unwrap();
    let a = process(dir.path(), 3).assign(&layout).await.unwrap();
    let b = MachineWorkerIdAssigner::new(dir.path())
        .with_machine_part(10)
        .with_process_id(3)
        .assign(&layout)
        .await
        .unwrap();
    assert_eq!((a.worker_id, b.worker_id), ((9 << 5) | 3, (10 << 5) | 3));
}

/// A crash and a later process that takes the same value while the clock still reads inside
/// the time the first one stamped (a millisecond layout makes that the rule, not a corner).
#[tokio::test]
async fn a_restart_on_the_same_value_waits_past_the_previous_mark() {
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout::keyworker().unwrap();
    let start = layout.epoch_ms() + 500_000_000_000;
    let clock = ManualClock::new(start);
    let first_life = GeneratorBuilder::new(layout.clone())
        .assigner(process(dir.path(), 4).with_clock(clock.clone()))
        .build_snowflake(clock.clone())
        .await
        .unwrap();
    let worker = first_life.worker_id();
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.extend(first_life.generator.next_ids(3_000).unwrap());
        clock.advance(100);
    }
    drop(first_life); // a crash: its lock goes, its state file stays
    let mark = read_cache(&MachineWorkerIdAssigner::new(dir.path()).state_path(worker))
        .unwrap()
        .until_ms;
    let last_issued_end = ids
        .iter()
        .map(|&id| layout.millis_of(layout.decompose(id).unwrap().time + 1))
        .max()
        .unwrap();
    assert!(
        mark >= last_issued_end,
        "mark {mark} below issued {last_issued_end}"
    );

    // The clock steps back to where the first life started: the same value is free, and
    // taking it must not mean stamping those milliseconds again.
    clock.set(start);
    let error = process(dir.path(), 4)
        .with_clock(clock.clone())
        .max_start_wait(Duration::from_millis(50))
        .assign(&layout)
        .await
        .unwrap_err();
    assert!(
        matches!(error, WorkerError::ClockBehindLastIssued { worker_id, until_ms, .. } if worker_id == worker && until_ms == mark),
        "{error:?}"
    );

    // With time to wait, the start waits until the clock has passed the mark.
    let ticking = clock.clone();
    let ticker = tokio::spawn(async move {
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            ticking.advance(100);
        }
    });
    let second_life = GeneratorBuilder::new(layout.clone())
        .assigner(
            process(dir.path(), 4)
                .with_clock(clock.clone())
                .max_start_wait(Duration::from_secs(60)),
        )
        .build_snowflake(clock.clone())
        .await
        .unwrap();
    assert_eq!(second_life.worker_id(), worker, "the same value, reused");
    assert!(
        clock.now_millis() > mark,
        "started before the previous mark"
    );
    let fence = second_life.assignment.fence.as_ref().unwrap();
    assert_eq!(fence.floor_ms(), mark, "the previous mark is the new floor");
    ticker.await.unwrap();
    let second_ids = second_life.generator.next_ids(3_000).unwrap();
    let first_new_unit = second_ids
        .iter()
        .map(|&id| layout.millis_of(layout.decompose(id).unwrap().time))
        .min()
        .unwrap();
    assert!(
        first_new_unit >= mark,
        "stamped {first_new_unit}, below the mark {mark}"
    );
    ids.extend(second_ids);
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "a restart on the same value repeated IDs");
}
