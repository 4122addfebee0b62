//! Tinyid's multi-database segments on real servers: one tag served from PostgreSQL and MariaDB
//! (delta 2, remainders 0 and 1), each behind a TCP proxy the test cuts while eight threads take
//! IDs. The service keeps serving while one database lives, never repeats a number, and answers
//! a typed error once both are cut and its buffers are dry.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Proxy, TestDb, assert_unique, fresh, max_id, server_addr};
use parking_lot::Mutex;
use uidgen_core::SystemClock;
use uidgen_segment::{GroupProblem, SegmentError, SegmentGroup, SegmentOptions, SegmentService};
use uidgen_store::{Residue, Store};

const STEP: i64 = 40;
const THREADS: usize = 8;

fn options() -> SegmentOptions {
    SegmentOptions {
        dynamic_step: false,
        wait_timeout: Duration::from_millis(500),
        retry_backoff: Duration::from_millis(100),
        load_timeout: Duration::from_secs(2),
        ..SegmentOptions::default()
    }
}

/// A fresh database of `kind`, a proxy in front of it, and a store through the proxy.
async fn behind_proxy(kind: TestDb) -> (Store, Proxy, Store) {
    let (direct, url) = fresh(kind).await;
    let proxy = Proxy::start(server_addr(&url)).await;
    let through = common::proxied_store(&url, &proxy, Duration::from_millis(500)).await;
    (direct, proxy, through)
}

/// Threads taking IDs of `tag` until stopped; every ID and every error kept.
struct Takers {
    stop: Arc<AtomicBool>,
    taken: Arc<AtomicUsize>,
    ids: Arc<Mutex<Vec<i64>>>,
    errors: Arc<Mutex<Vec<String>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Takers {
    fn start(service: &Arc<SegmentService>, tag: &'static str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let taken = Arc::new(AtomicUsize::new(0));
        let ids = Arc::new(Mutex::new(Vec::new()));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let threads = (0..THREADS)
            .map(|_| {
                let (service, stop, taken) = (service.clone(), stop.clone(), taken.clone());
                let (ids, errors) = (ids.clone(), errors.clone());
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        match service.get(tag) {
                            Ok(id) => {
                                mine.push(id);
                                taken.fetch_add(1, Ordering::SeqCst);
                            }
                            Err(error) => {
                                errors.lock().push(error.to_string());
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                    ids.lock().extend(mine);
                })
            })
            .collect();
        Self {
            stop,
            taken,
            ids,
            errors,
            threads,
        }
    }

    /// Wait until `more` IDs beyond the current count were taken (the service serves).
    async fn take(&self, more: usize, what: &str) {
        let target = self.taken.load(Ordering::SeqCst) + more;
        common::eventually(what, 60, || self.taken.load(Ordering::SeqCst) >= target).await;
    }

    fn finish(self) -> (Vec<i64>, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads {
            thread.join().unwrap();
        }
        let ids = std::mem::take(&mut *self.ids.lock());
        let errors = std::mem::take(&mut *self.errors.lock());
        (ids, errors)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_on_postgres_and_mariadb_serves_while_one_lives_and_never_repeats() {
    let (pg_direct, pg_proxy, pg) = behind_proxy(TestDb::Postgres).await;
    let (my_direct, my_proxy, my) = behind_proxy(TestDb::MySql).await;
    let (main, _) = fresh(TestDb::Sqlite).await;
    let group = SegmentGroup::new("pair", vec![pg, my], vec!["g".into()]).unwrap();
    let service = SegmentService::start_with_groups(main, vec![group], options(), SystemClock)
        .await
        .unwrap();
    // Created on both, consistently.
    service.upsert_tag("g", STEP, None).await.unwrap();
    let pg_row = pg_direct.get_tag("g").await.unwrap().unwrap();
    let my_row = my_direct.get_tag("g").await.unwrap().unwrap();
    assert_eq!(
        (pg_row.residue, pg_row.step),
        (Residue::new(2, 0).unwrap(), STEP)
    );
    assert_eq!(
        (my_row.residue, my_row.step),
        (Residue::new(2, 1).unwrap(), STEP)
    );

    let takers = Takers::start(&service, "g");
    takers.take(2_000, "IDs with both databases up").await;
    pg_proxy.cut();
    takers.take(2_000, "IDs with PostgreSQL cut").await;
    pg_proxy.restore();
    my_proxy.cut();
    takers.take(2_000, "IDs with MariaDB cut").await;
    let cut_errors = takers.errors.lock().len();
    // Silence instead of a refusal: PostgreSQL (preferred again) holds every packet; each claim
    // gives up on it after its share of load_timeout and takes the segment from MariaDB.
    my_proxy.restore();
    pg_proxy.black_hole();
    takers.take(2_000, "IDs with PostgreSQL silent").await;
    pg_proxy.resume();
    let silent_errors = takers.errors.lock().len() - cut_errors;
    my_proxy.cut();
    // Both cut: the buffers run dry, then every call fails.
    pg_proxy.cut();
    let errors_before = takers.errors.lock().len();
    common::eventually("errors once both are cut", 60, || {
        takers.errors.lock().len() > errors_before + 2 * THREADS
    })
    .await;
    let (mut ids, errors) = takers.finish();
    let last_error = errors.last().unwrap();
    assert!(
        last_error.contains("both segments of biz tag `g` are not ready")
            && last_error.contains("segment group `pair`"),
        "{last_error}"
    );

    // Every number belongs to the database whose remainder it has, below its max_id.
    let (pg_max, my_max) = (max_id(&pg_direct, "g").await, max_id(&my_direct, "g").await);
    let even = ids.iter().filter(|id| *id % 2 == 0).count();
    let odd = ids.len() - even;
    assert!(
        even > 0 && odd > 0,
        "both databases served: {even} even, {odd} odd"
    );
    for &id in &ids {
        let below = if id % 2 == 0 { pg_max } else { my_max };
        assert!(
            id >= 1 && id < below,
            "{id} outside what its database granted"
        );
    }
    assert_unique(&mut ids, "two databases, two cuts");
    eprintln!(
        "{} IDs ({even} from PostgreSQL, {odd} from MariaDB), 0 duplicates; errors: {cut_errors} \
         while one database was cut, {silent_errors} while PostgreSQL was silent, {} in all; \
         max_id {pg_max} and {my_max}",
        ids.len(),
        errors.len()
    );

    // Restored, it serves again, from either database, still never repeating.
    pg_proxy.restore();
    my_proxy.restore();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let next = loop {
        match service.get_async("g").await {
            Ok(id) => break id,
            Err(error) => {
                assert_eq!(error.code(), -3, "{error}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "no recovery: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert!(
        ids.binary_search(&next).is_err(),
        "{next} repeated after recovery"
    );
    service.shutdown();
}

/// Why a service with group `pair` of `pg` and `my` serving `tag` refuses to start.
async fn refusal(main: &Store, pg: &Store, my: &Store, tag: &str) -> SegmentError {
    let group =
        SegmentGroup::new("pair", vec![pg.clone(), my.clone()], vec![tag.to_owned()]).unwrap();
    SegmentService::start_with_groups(main.clone(), vec![group], options(), SystemClock)
        .await
        .unwrap_err()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_databases_disagree_is_refused_at_start() {
    let (pg, _) = fresh(TestDb::Postgres).await;
    let (my, _) = fresh(TestDb::MySql).await;
    // Both hold remainder 0: they would hand out the same even numbers.
    pg.upsert_group_tag("g", 10, None, Residue::new(2, 0).unwrap())
        .await
        .unwrap();
    my.upsert_group_tag("g", 10, None, Residue::new(2, 0).unwrap())
        .await
        .unwrap();
    let (main, _) = fresh(TestDb::Sqlite).await;
    let error = refusal(&main, &pg, &my, "g").await;
    assert!(
        matches!(
            &error,
            SegmentError::GroupInconsistent {
                problem: GroupProblem::DuplicateRemainder { remainder: 0, .. },
                ..
            }
        ),
        "{error}"
    );
    assert!(
        error.to_string().contains("both hold remainder 0"),
        "{error}"
    );
    // A plain single-database row in a group of two: delta 1 is not 2.
    pg.upsert_tag("plain", 10, None).await.unwrap();
    let error = refusal(&main, &pg, &my, "plain").await;
    assert!(
        matches!(
            &error,
            SegmentError::GroupInconsistent {
                problem: GroupProblem::WrongDelta {
                    delta: 1,
                    expected: 2,
                    ..
                },
                ..
            }
        ),
        "{error}"
    );
}
