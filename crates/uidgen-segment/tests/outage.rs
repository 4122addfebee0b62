//! Database outage: the service keeps serving what is buffered, then answers the typed error,
//! then recovers on its own, without a duplicate.
//!
//! MariaDB and PostgreSQL are reached through a TCP proxy the test cuts (the shared servers stay
//! up). SQLite has no server to lose; its outage is the database being locked by another
//! process (`BEGIN EXCLUSIVE`), which blocks every claim until released.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Proxy, TestDb, assert_unique, fresh, max_id, server_addr, with_addr};
use sqlx::Connection;
use uidgen_core::SystemClock;
use uidgen_segment::{SegmentError, SegmentOptions, SegmentService};
use uidgen_store::{Store, StoreOptions};

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

async fn serve_through_outage(
    db: TestDb,
    service: &Arc<SegmentService>,
    outage: &Outage<'_>,
) -> Vec<i64> {
    // Past 10% of the first segment, the second is claimed.
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(service.get_async("t").await.unwrap());
    }
    common::eventually("next segment", 10, || service.monitor()[0].next_ready).await;
    outage.begin().await;
    // Everything buffered (the rest of the current segment and all of the next) is served.
    let buffered = {
        let state = &service.monitor()[0];
        state.segments[state.pos].idle + state.segments[1 - state.pos].idle
    };
    assert_eq!(buffered, 2 * STEP - 20, "{db:?}");
    for _ in 0..buffered {
        ids.push(service.get_async("t").await.unwrap());
    }
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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match service.get_async("t").await {
            Ok(id) => {
                ids.push(id);
                break;
            }
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
    ids.extend(service.get_batch_async("t", 1_000).await.unwrap());
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_networked_database_outage_is_ridden_out_and_recovered_from() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        let (direct, url) = fresh(db).await;
        direct.upsert_tag("t", STEP, None).await.unwrap();
        let proxy = Proxy::start(server_addr(&url)).await;
        let store_options = StoreOptions {
            connect_timeout: Duration::from_secs(1),
            max_connections: 2,
            migrate: false,
        };
        let store = Store::connect_with(&with_addr(&url, proxy.addr), store_options)
            .await
            .unwrap();
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
