//! Segment tails handed back at a clean stop, on SQLite, MariaDB and PostgreSQL: services that
//! stop and start while others take IDs never repeat one, and throw (almost) nothing away.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use common::{all_dbs, fresh, max_id};
use uidgen_core::SystemClock;
use uidgen_segment::{SegmentOptions, SegmentService};
use uidgen_store::{Residue, ReturnedRange, Store};

const TAG: &str = "restarts";

fn small_steps() -> SegmentOptions {
    SegmentOptions {
        dynamic_step: false,
        wait_timeout: Duration::from_secs(10),
        ..SegmentOptions::default()
    }
}

/// A service on its own pool (as a server of its own would have), with two threads taking
/// IDs until it stops.
struct Running {
    service: Arc<SegmentService>,
    takers: Vec<JoinHandle<Vec<i64>>>,
}

/// Every number waiting in the returned table for [`TAG`].
async fn handed_back(store: &Store) -> Vec<i64> {
    store
        .returned_ranges(TAG)
        .await
        .unwrap()
        .iter()
        .flat_map(|r| r.start..r.end)
        .collect()
}

async fn start(url: &str) -> Running {
    let store = Store::connect(url).await.unwrap();
    let service = SegmentService::start(store, small_steps(), SystemClock)
        .await
        .unwrap();
    let takers = (0..2)
        .map(|_| {
            let service = service.clone();
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                while let Ok(id) = service.get(TAG) {
                    ids.push(id);
                }
                ids
            })
        })
        .collect();
    Running { service, takers }
}

impl Running {
    /// Stop with hand-back; the IDs its takers got and the IDs it loaded from returned ranges.
    async fn stop(self) -> (Vec<i64>, u64) {
        let reused = self.service.monitor().first().map_or(0, |s| s.reused_ids);
        self.service.shutdown_and_hand_back().await.unwrap();
        let ids = self
            .takers
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        (ids, reused)
    }
}

/// Three services take IDs; one at a time is stopped and replaced, twelve times. No ID is
/// taken twice, none is both taken and left in the table, and every claimed number is one or
/// the other but for the few that racing takers skip (Leaf's rule: skip, never repeat).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_restarting_under_load_hand_back_their_tails_and_never_repeat() {
    for db in all_dbs() {
        let (store, url) = fresh(db).await;
        store.upsert_tag(TAG, 300, None).await.unwrap();
        let mut running = Vec::new();
        for _ in 0..3 {
            running.push(start(&url).await);
        }
        let mut taken: Vec<i64> = Vec::new();
        let mut reused = 0;
        for round in 0..12 {
            tokio::time::sleep(Duration::from_millis(40)).await;
            let (ids, loaded_back) = running.remove(round % running.len()).stop().await;
            taken.extend(ids);
            reused += loaded_back;
            running.push(start(&url).await);
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
        for service in running {
            let (ids, loaded_back) = service.stop().await;
            taken.extend(ids);
            reused += loaded_back;
        }
        let mut seen = HashSet::with_capacity(taken.len());
        for id in &taken {
            assert!(seen.insert(*id), "{db:?}: {id} taken twice");
        }
        let left = handed_back(&store).await;
        for id in &left {
            assert!(
                !seen.contains(id),
                "{db:?}: {id} taken and still handed back"
            );
        }
        let claimed = max_id(&store, TAG).await - 1;
        let skipped = claimed - i64::try_from(taken.len() + left.len()).unwrap();
        // 15 services, two takers each: a race may skip a position per taker per load.
        let loads = claimed / 300 + 1;
        assert!(
            (0..=2 * loads).contains(&skipped),
            "{db:?}: {skipped} of {claimed} claimed numbers neither taken nor handed back"
        );
        assert!(reused > 0, "{db:?}: no service served a returned range");
        eprintln!(
            "{db:?}: {} taken, {} handed back and left, {skipped} skipped, {reused} reused",
            taken.len(),
            left.len()
        );
    }
}

/// Forty ranges handed back, six services loading the tag at once: each range is served by
/// one of them, each number once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn services_loading_at_once_share_the_returned_ranges_without_a_repeat() {
    for db in all_dbs() {
        let (store, url) = fresh(db).await;
        store.upsert_tag(TAG, 1000, None).await.unwrap();
        // What a stopped server would have claimed and handed back: [1, 1001) minus a few.
        let claim = store.claim_segment(TAG).await.unwrap();
        let ranges: Vec<ReturnedRange> = (0..40)
            .map(|k| ReturnedRange {
                biz_tag: TAG.into(),
                start: k * 25 + 1,
                end: k * 25 + 21,
                residue: Residue::SINGLE,
                epoch: claim.epoch,
            })
            .collect();
        store.return_ranges(&ranges).await.unwrap();
        let mut services = Vec::new();
        for _ in 0..6 {
            let store = Store::connect(&url).await.unwrap();
            services.push(
                SegmentService::start(store, small_steps(), SystemClock)
                    .await
                    .unwrap(),
            );
        }
        let tasks: Vec<_> = services
            .iter()
            .map(|service| {
                let service = service.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for _ in 0..200 {
                        ids.push(service.get_async(TAG).await.unwrap());
                    }
                    ids
                })
            })
            .collect();
        let mut seen = HashSet::new();
        for task in tasks {
            for id in task.await.unwrap() {
                assert!(seen.insert(id), "{db:?}: {id} served twice");
            }
        }
        let reused: u64 = services.iter().map(|s| s.monitor()[0].reused_ids).sum();
        assert_eq!(reused, 800, "{db:?}: every returned range loaded once");
        // What is still buffered goes back to the table: each returned number was served or
        // is there again, never both.
        for service in services {
            service.shutdown_and_hand_back().await.unwrap();
        }
        let left: HashSet<i64> = handed_back(&store).await.into_iter().collect();
        assert!(
            seen.is_disjoint(&left),
            "{db:?}: a number served and handed back again"
        );
        for id in ranges.iter().flat_map(|r| r.start..r.end) {
            assert!(
                seen.contains(&id) || left.contains(&id),
                "{db:?}: returned {id} lost"
            );
        }
    }
}

/// A server buffers the tag's segments when the tag is deleted and created again, and the new
/// life claims past the old segments (its own `[1, 2001)` issues the old numbers again, as any
/// re-created tag does). The old server's clean stop must hand nothing back: the tails belong
/// to a life that ended, and the new life would issue them a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_after_the_tag_was_deleted_and_created_again_hands_nothing_back() {
    for db in all_dbs() {
        let (store, url) = fresh(db).await;
        store.upsert_tag(TAG, 1000, None).await.unwrap();
        let old = SegmentService::start(
            Store::connect(&url).await.unwrap(),
            small_steps(),
            SystemClock,
        )
        .await
        .unwrap();
        let first = old.get_async(TAG).await.unwrap();
        assert!(store.delete_tag(TAG).await.unwrap());
        store.upsert_tag(TAG, 1000, None).await.unwrap();
        let mut new_life = Vec::new();
        for _ in 0..3 {
            new_life.push(store.claim_segment(TAG).await.unwrap().range());
        }
        let back = old.shutdown_and_hand_back().await.unwrap();
        assert_eq!(
            back.ranges, 0,
            "{db:?}: tails of the old life went back: {back:?}"
        );
        assert!(handed_back(&store).await.is_empty(), "{db:?}");
        // And the table offers the new life nothing it already owns.
        assert_eq!(
            store.claim_returned_range(TAG).await.unwrap(),
            None,
            "{db:?}"
        );
        assert!(
            new_life[0].contains(&first),
            "{db:?}: the new life re-issues {first}"
        );
    }
}
