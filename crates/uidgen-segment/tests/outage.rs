//! Database outage: the service keeps serving what is buffered, then answers the typed error,
//! then recovers on its own, without a duplicate.
//!
//! MariaDB and PostgreSQL are reached through a TCP proxy the test cuts, or turns into a black
//! hole that keeps connections open but forwards nothing (the shared servers stay up). SQLite has
//! no server to lose; its outage is the database being locked by another process
//! (`BEGIN EXCLUSIVE`), which blocks every claim until released.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Proxy, TestDb, assert_unique, fresh, max_id, server_addr};
use sqlx::Connection;
use uidgen_core::SystemClock;
use uidgen_segment::{SegmentError, SegmentOptions, SegmentService};

const STEP: i64 = 100;

fn options() -> SegmentOptions {
    SegmentOptions {
        dynamic_step: false,
        wait_timeout: Duration::from_millis(500),
        retry_backoff: Duration::from_millis(200),
        ..SegmentOptions::default()
    }
}

/// How a test takes the database away and gives it back.
enum Outage<'a> {
    /// Cut the proxy between the service and the server.
    Proxy(&'a Proxy),
    /// Hold SQLite's write lock from another connection.
    SqliteLock(tokio::sync::Mutex<sqlx::SqliteConnection>),
}

impl Outage<'_> {
    async fn begin(&self) {
        match self {
            Self::Proxy(proxy) => proxy.cut(),
            Self::SqliteLock(conn) => {
                let mut conn = conn.lock().await;
                sqlx::raw_sql("BEGIN EXCLUSIVE")
                    .execute(&mut *conn)
                    .await
                    .unwrap();
            }
        }
    }

    async fn end(&self) {
        match self {
            Self::Proxy(proxy) => proxy.restore(),
            Self::SqliteLock(conn) => {
                let mut conn = conn.lock().await;
                sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.unwrap();
            }
        }
    }
}

/// Take IDs until the next segment is claimed, and return them.
async fn fill_both_segments(service: &SegmentService) -> Vec<i64> {
    // Past 10% of the first segment, the second is claimed.
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(service.get_async("t").await.unwrap());
    }
    common::eventually("next segment", 10, || service.monitor()[0].next_ready).await;
    ids
}

/// Take everything buffered (the rest of the current segment and all of the next).
async fn drain_buffered(db: TestDb, service: &SegmentService, ids: &mut Vec<i64>) {
    let buffered = {
        let state = &service.monitor()[0];
        state.segments[state.pos].idle + state.segments[1 - state.pos].idle
    };
    assert_eq!(buffered, 2 * STEP - 20, "{db:?}");
    // As a caller that never waits when it need not: `try_get`, and `get_async` only at the
    // current segment's end, where the switch to the buffered next one is `get_async`'s.
    let mut switches = 0;
    for _ in 0..buffered {
        let id = match service.try_get("t").unwrap() {
            Some(id) => id,
            None => {
                switches += 1;
                service.get_async("t").await.unwrap()
            }
        };
        ids.push(id);
    }
    assert_eq!(switches, 1, "{db:?}");
    // Both segments are used up and no load can succeed: still "not now", not an error.
    assert_eq!(service.try_get("t").unwrap(), None, "{db:?}");
}

/// After an outage ended: callers get -3 until a load succeeds, then IDs again.
async fn recover(db: TestDb, service: &SegmentService, ids: &mut Vec<i64>) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    ids.push(until_ready(db, deadline, || service.get_async("t")).await);
    // The batch may need the next segment, whose load can still be under way on a busy
    // machine: it retries on "not ready" as the single get does.
    ids.extend(until_ready(db, deadline, || service.get_batch_async("t", 1_000)).await);
}

/// Call `get` until it stops answering "not ready" (code -3), failing past `deadline` or on
/// any other error.
async fn until_ready<T, F: std::future::Future<Output = uidgen_segment::Result<T>>>(
    db: TestDb,
    deadline: tokio::time::Instant,
    mut get: impl FnMut() -> F,
) -> T {
    loop {
        match get().await {
            Ok(value) => return value,
            Err(error) => {
                assert_eq!(error.code(), -3, "{db:?}: {error}");
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "{db:?}: no recovery: {error}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn serve_through_outage(
    db: TestDb,
    service: &Arc<SegmentService>,
    outage: &Outage<'_>,
) -> Vec<i64> {
    let mut ids = fill_both_segments(service).await;
    outage.begin().await;
    drain_buffered(db, service, &mut ids).await;
    // Then the typed error (Leaf's -3), naming the tag.
    let error = service.get_async("t").await.unwrap_err();
    assert!(
        matches!(error, SegmentError::BothSegmentsNotReady { ref tag, .. } if tag == "t"),
        "{db:?}: {error}"
    );
    assert_eq!(error.code(), -3);
    // The blocking API gives the same answer.
    let blocking = Arc::clone(service);
    let error = tokio::task::spawn_blocking(move || blocking.get("t"))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(error.code(), -3, "{db:?}: {error}");
    outage.end().await;
    // Recovery needs nothing but callers: the next load after the back-off succeeds.
    recover(db, service, &mut ids).await;
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_networked_database_outage_is_ridden_out_and_recovered_from() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        let (direct, url) = fresh(db).await;
        direct.upsert_tag("t", STEP, None).await.unwrap();
        let proxy = Proxy::start(server_addr(&url)).await;
        let store = common::proxied_store(&url, &proxy, Duration::from_secs(1)).await;
        let service = common::service(store, options(), SystemClock).await;
        let mut ids = serve_through_outage(db, &service, &Outage::Proxy(&proxy)).await;
        assert_unique(&mut ids, &format!("{db:?}"));
        assert!(*ids.last().unwrap() < max_id(&direct, "t").await);
        service.shutdown();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_sqlite_database_is_ridden_out_and_recovered_from() {
    let (store, url) = fresh(TestDb::Sqlite).await;
    store.upsert_tag("t", STEP, None).await.unwrap();
    let service = common::service(store.clone(), options(), SystemClock).await;
    let locker = sqlx::SqliteConnection::connect(&url).await.unwrap();
    let outage = Outage::SqliteLock(tokio::sync::Mutex::new(locker));
    let mut ids = serve_through_outage(TestDb::Sqlite, &service, &outage).await;
    assert_unique(&mut ids, "Sqlite");
    assert!(*ids.last().unwrap() < max_id(&store, "t").await);
}

/// A database that goes silent (paused, packets dropped) sends no error: without a bound on the
/// claim, the load would stay in flight and every caller would get -3 forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_database_times_out_the_load_then_recovers_without_a_duplicate() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        let (direct, url) = fresh(db).await;
        direct.upsert_tag("t", STEP, None).await.unwrap();
        let proxy = Proxy::start(server_addr(&url)).await;
        let store = common::proxied_store(&url, &proxy, Duration::from_secs(1)).await;
        // Shorter than the store's 1 s connect timeout, so the load timeout is what fires.
        let options = SegmentOptions {
            load_timeout: Duration::from_millis(500),
            wait_timeout: Duration::from_millis(200),
            ..options()
        };
        let service = common::service(store, options, SystemClock).await;
        let mut ids = fill_both_segments(&service).await;
        proxy.black_hole();
        drain_buffered(db, &service, &mut ids).await;
        let error = service.get_async("t").await.unwrap_err();
        assert_eq!(error.code(), -3, "{db:?}: {error}");
        // The load in flight is abandoned: a failed load, not one in flight for ever.
        common::eventually("the silent claim to time out", 30, || {
            let state = &service.monitor()[0];
            !state.loading && state.load_failures > 0
        })
        .await;
        let state = service.monitor().remove(0);
        let last_error = state.last_error.as_deref().unwrap_or_default();
        assert!(last_error.contains("did not answer"), "{db:?}: {state:?}");
        let error = service.get_async("t").await.unwrap_err();
        assert_eq!(error.code(), -3, "{db:?}: {error}");
        // Admin calls are bounded too, rather than holding the sync lock for ever.
        let error = service.upsert_tag("other", 10, None).await.unwrap_err();
        assert!(
            matches!(error, SegmentError::TimedOut { .. }),
            "{db:?}: {error}"
        );
        let error = service.sync_tags().await.unwrap_err();
        assert!(
            matches!(error, SegmentError::TimedOut { .. }),
            "{db:?}: {error}"
        );
        proxy.resume();
        recover(db, &service, &mut ids).await;
        assert_unique(&mut ids, &format!("{db:?}"));
        assert!(*ids.last().unwrap() < max_id(&direct, "t").await);
        assert!(service.monitor()[0].loads >= 3, "{db:?}");
        service.shutdown();
    }
}
