//! Tinyid's delta and remainder in the buffer: a database's segments serve exactly its residue,
//! and a group of in-process databases fails over without repeating a number.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use uidgen_core::ManualClock;
use uidgen_store::Residue;

use super::{eventually, options, service_with};
use crate::error::{GroupProblem, SegmentError};
use crate::group::GroupSource;
use crate::service::SegmentService;
use crate::source::SegmentSource;
use crate::source::memory::MemorySource;

/// Every number of the residue in the claimed segments, in claim order: what the service must
/// hand out, no more, no fewer.
fn expected(source: &MemorySource, residue: Residue) -> Vec<i64> {
    source
        .claims
        .lock()
        .iter()
        .flat_map(|&(_, start, end)| (start..end).filter(move |x| residue.contains(*x)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_serves_exactly_the_numbers_of_its_residue_in_order() {
    for (delta, remainder, step) in [(3, 1, 10), (2, 0, 7), (4, 3, 4), (5, 0, 23)] {
        let residue = Residue::new(delta, remainder).unwrap();
        let source = MemorySource::with_tag("t", step);
        source.residues.lock().insert("t".to_owned(), residue);
        let service = service_with(&source, options(), &ManualClock::new(0)).await;
        let mut ids = Vec::new();
        for _ in 0..40 {
            ids.push(service.get_async("t").await.unwrap());
        }
        ids.extend(service.get_batch_async("t", 25).await.unwrap());
        let state = service.monitor().remove(0);
        let all = expected(&source, residue);
        // No gap but the numbers of other residues: the IDs are the claimed segments' numbers
        // of this residue, in order, up to what was taken.
        assert_eq!(ids, all[..ids.len()], "{residue} step {step}");
        // The monitor shows the next ID of this residue and the claimed end.
        let current = &state.segments[state.pos];
        assert!(
            residue.contains(current.value) || current.value == current.max,
            "{state:?}"
        );
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_database_tag_is_served_as_before() {
    let source = MemorySource::with_tag("t", 10);
    let service = service_with(&source, options(), &ManualClock::new(0)).await;
    let ids = service.get_batch_async("t", 25).await.unwrap();
    assert_eq!(ids, (1..26).collect::<Vec<_>>());
    let state = service.monitor().remove(0);
    assert_eq!(state.segments[state.pos].max, 31);
}

/// Two in-process databases holding `t` with delta 2 and remainders 0 and 1.
fn pair(step: i64) -> (Arc<MemorySource>, Arc<MemorySource>, Arc<GroupSource>) {
    let even = MemorySource::with_tag("t", step);
    even.residues
        .lock()
        .insert("t".into(), Residue::new(2, 0).unwrap());
    let odd = MemorySource::with_tag("t", step);
    odd.residues
        .lock()
        .insert("t".into(), Residue::new(2, 1).unwrap());
    let group = GroupSource::from_members(
        "g".into(),
        vec!["t".into()],
        vec![even.clone(), odd.clone()],
        vec!["even".into(), "odd".into()],
        Duration::from_millis(200),
    );
    (even, odd, Arc::new(group))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_fails_over_between_databases_and_never_repeats() {
    let (even, odd, group) = pair(10);
    let main = MemorySource::with_tag("plain", 10);
    let service =
        SegmentService::start_inner(main, vec![group], options(), Arc::new(ManualClock::new(0)))
            .await
            .unwrap();
    let mut seen = HashSet::new();
    let take = async |n: usize, seen: &mut HashSet<i64>| {
        for _ in 0..n {
            let id = service.get_async("t").await.unwrap();
            assert!(seen.insert(id), "duplicate {id}");
        }
    };
    take(30, &mut seen).await;
    // The first database answers, so it stays preferred: only even numbers so far.
    assert!(seen.iter().all(|id| id % 2 == 0), "{seen:?}");
    even.fail.store(true, Ordering::SeqCst);
    take(60, &mut seen).await;
    assert!(
        seen.iter().any(|id| id % 2 == 1),
        "the odd database took over"
    );
    even.fail.store(false, Ordering::SeqCst);
    odd.fail.store(true, Ordering::SeqCst);
    take(60, &mut seen).await;
    // Both down: what is buffered is served, then a typed error naming the group.
    even.fail.store(true, Ordering::SeqCst);
    let error = loop {
        match service.get_async("t").await {
            Ok(id) => assert!(seen.insert(id), "duplicate {id}"),
            Err(error) => break error,
        }
    };
    assert_eq!(error.code(), -3, "{error}");
    assert!(error.to_string().contains("segment group `g`"), "{error}");
    // A plain tag of the main store is unaffected, and a group tag cannot be leased.
    assert_eq!(service.get_async("plain").await.unwrap(), 1);
    assert!(matches!(
        service.lease("t", 10).await,
        Err(SegmentError::LeaseOfGroupTag { .. })
    ));
    odd.fail.store(false, Ordering::SeqCst);
    eventually("recovery", || service.get("t").is_ok()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_group_tag_writes_every_database_with_its_own_remainder() {
    let (even, odd, group) = pair(10);
    let row = group.upsert("new", 100, None).await.unwrap();
    assert_eq!(row.residue, Residue::new(2, 0).unwrap());
    assert_eq!(
        odd.row("new").await.unwrap().unwrap().residue,
        Residue::new(2, 1).unwrap()
    );
    // A step below the number of databases is refused.
    assert!(matches!(
        group.upsert("small", 1, None).await,
        Err(SegmentError::InvalidInput(_))
    ));
    // One database down: nothing is written anywhere.
    odd.fail.store(true, Ordering::SeqCst);
    assert!(matches!(
        group.upsert("half", 100, None).await,
        Err(SegmentError::GroupUnavailable { .. })
    ));
    assert!(even.row("half").await.unwrap().is_none());
}

/// A way to make the pair's rows disagree.
type BreakRows = fn(&MemorySource, &MemorySource);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn databases_that_disagree_are_refused_at_start_by_what_disagrees() {
    let cases: [(&str, BreakRows); 3] = [
        ("wrong delta", |_, odd| {
            odd.residues
                .lock()
                .insert("t".into(), Residue::new(3, 1).unwrap());
        }),
        ("duplicate remainder", |_, odd| {
            odd.residues
                .lock()
                .insert("t".into(), Residue::new(2, 0).unwrap());
        }),
        ("missing row", |_, odd| odd.remove("t")),
    ];
    for (what, break_it) in cases {
        let (even, odd, group) = pair(10);
        break_it(&even, &odd);
        let main = MemorySource::with_tag("plain", 10);
        let error = SegmentService::start_inner(
            main,
            vec![group],
            options(),
            Arc::new(ManualClock::new(0)),
        )
        .await
        .unwrap_err();
        let SegmentError::GroupInconsistent { problem, .. } = &error else {
            panic!("{what}: {error:?}");
        };
        let matched = match what {
            "wrong delta" => matches!(
                problem,
                GroupProblem::WrongDelta {
                    delta: 3,
                    expected: 2,
                    ..
                }
            ),
            "duplicate remainder" => {
                matches!(
                    problem,
                    GroupProblem::DuplicateRemainder { remainder: 0, .. }
                )
            }
            _ => matches!(problem, GroupProblem::MissingRow { database } if database == "odd"),
        };
        assert!(matched, "{what}: {error}");
    }
}

/// Slots reloaded again and again from alternating databases (tiny segments, the databases
/// failing in turn) while four threads take IDs and batches: no ID twice, and every ID lies in
/// a segment its residue's database granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_threads_share_no_id_while_slots_switch_between_databases() {
    let (even, odd, group) = pair(6);
    let main = MemorySource::with_tag("plain", 10);
    let options = crate::options::SegmentOptions {
        wait_timeout: Duration::from_secs(5),
        ..options()
    };
    let service =
        SegmentService::start_inner(main, vec![group], options, Arc::new(ManualClock::new(0)))
            .await
            .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (even, odd, stop) = (even.clone(), odd.clone(), stop.clone());
        tokio::spawn(async move {
            let mut turn = false;
            while !stop.load(Ordering::SeqCst) {
                // One database down at a time, never both.
                even.fail.store(turn, Ordering::SeqCst);
                odd.fail.store(!turn, Ordering::SeqCst);
                turn = !turn;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            even.fail.store(false, Ordering::SeqCst);
            odd.fail.store(false, Ordering::SeqCst);
        })
    };
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let service = service.clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                while ids.len() < 10_000 {
                    let taken = if i % 2 == 0 {
                        service.get("t").map(|id| vec![id])
                    } else {
                        service.get_batch("t", 7)
                    };
                    // A caller may meet both segments used up just as a database fails.
                    if let Ok(taken) = taken {
                        ids.extend(taken);
                    }
                }
                ids
            })
        })
        .collect();
    let mut all = HashSet::new();
    for thread in threads {
        for id in tokio::task::spawn_blocking(move || thread.join().unwrap())
            .await
            .unwrap()
        {
            assert!(all.insert(id), "duplicate {id}");
        }
    }
    stop.store(true, Ordering::SeqCst);
    flipper.await.unwrap();
    let granted = |source: &MemorySource, id: i64| {
        source
            .claims
            .lock()
            .iter()
            .any(|(_, s, e)| (s..e).contains(&&id))
    };
    for &id in &all {
        let source = if id % 2 == 0 { &even } else { &odd };
        assert!(granted(source, id), "{id} was not granted by its database");
    }
    assert!(even.claims.lock().len() > 10 && odd.claims.lock().len() > 10);
}
