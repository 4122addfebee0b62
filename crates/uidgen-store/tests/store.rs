#![allow(clippy::unwrap_used)]
//! The store itself: connecting, migrations, errors.

mod common;

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use uidgen_store::testing::{
    TestDb, fresh_store, fresh_url, fresh_url_on, peer_transaction, run_script, text_column,
};
use uidgen_store::{Dialect, Store, StoreError, StoreOptions, migrations};

per_db! {
    async fn connect_migrates_and_pings(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        store.ping().await.unwrap();
        assert_eq!(store.dialect(), Dialect::from_url(&url).unwrap());
        // Idempotent: a second run and a second store record nothing new and fail nowhere.
        store.migrate().await.unwrap();
        let again = Store::connect(&url).await.unwrap();
        again.migrate().await.unwrap();
        assert!(again.list_tags().await.unwrap().is_empty());
        again.close().await;
        store.close().await;
    }
}

per_db! {
    async fn migration_files_also_run_by_hand(db: TestDb) {
        // A DBA runs the files first; uidgen's migrate then only records them.
        let url = fresh_url(db).await.unwrap();
        let options = StoreOptions { migrate: false, ..StoreOptions::default() };
        let store = Store::connect_with(&url, options).await.unwrap();
        for migration in migrations(store.dialect()) {
            // A file that adds columns says when it is not idempotent (SQLite and MySQL 8 have
            // no ADD COLUMN IF NOT EXISTS); those run once, the rest twice.
            let runs = if migration.sql.contains("Not idempotent") { 1 } else { 2 };
            for _ in 0..runs {
                run_script(&store, migration.sql).await.unwrap();
            }
        }
        // The files that cannot guard themselves are found in the catalogue and only recorded.
        let applied = store.migrate().await.unwrap();
        let in_place: Vec<i64> =
            applied.iter().filter(|a| a.found_in_place).map(|a| a.version).collect();
        assert_eq!(in_place, [6, 8, 10, 11]);
        store.upsert_tag("by-hand", 10, None).await.unwrap();
        assert_eq!(store.claim_segment("by-hand").await.unwrap().max_id, 11);
    }
}

per_db! {
    async fn a_landed_migration_edited_afterwards_is_refused_by_name(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        // As if 0003's file had been edited after this database applied it.
        record_checksum_ed17ed(&store, 3).await;
        let error = Store::connect(&url).await.unwrap_err();
        let message = error.to_string();
        assert!(matches!(error, StoreError::MigrationChanged { version: 3, .. }), "{error:?}");
        assert!(message.contains("migration 0003_leaf_alloc"), "{message}");
        assert!(message.contains("recorded checksum ed17ed"), "{message}");
        assert!(message.contains("never edited"), "{message}");
    }
}

per_db! {
    async fn a_schema_recorded_before_checksums_gains_them_on_the_next_start(db: TestDb) {
        // The migrations table as it was before checksums, with every migration recorded.
        let url = fresh_url(db).await.unwrap();
        let options = StoreOptions { migrate: false, ..StoreOptions::default() };
        let store = Store::connect_with(&url, options).await.unwrap();
        run_script(
            &store,
            "CREATE TABLE uidgen_schema_migrations (version BIGINT PRIMARY KEY, \
             description VARCHAR(128) NOT NULL)",
        )
        .await
        .unwrap();
        for migration in migrations(store.dialect()) {
            run_script(&store, migration.sql).await.unwrap();
            let record = format!(
                "INSERT INTO uidgen_schema_migrations (version, description) VALUES ({}, '{}')",
                migration.version, migration.description
            );
            run_script(&store, &record).await.unwrap();
        }
        store.migrate().await.unwrap();
        // Adopted with sqlx's checksums, so an edit from now on is caught.
        record_checksum_ed17ed(&store, 1).await;
        assert!(matches!(
            store.migrate().await,
            Err(StoreError::MigrationChanged { version: 1, .. })
        ));
    }
}

/// Overwrite the checksum `_sqlx_migrations` recorded for `version` with the bytes ed 17 ed, as
/// if the embedded file had been edited since.
async fn record_checksum_ed17ed(store: &Store, version: i64) {
    let bytes = match store.dialect() {
        Dialect::Postgres => "decode('ed17ed', 'hex')",
        Dialect::Sqlite | Dialect::MySql => "X'ed17ed'",
    };
    let edit = format!("UPDATE _sqlx_migrations SET checksum = {bytes} WHERE version = {version}");
    run_script(store, &edit).await.unwrap();
}

per_db! {
    /// A database an older uidgen migrated to any level (its own bookkeeping in
    /// `uidgen_schema_migrations`) is adopted by sqlx's migrator: nothing it recorded runs
    /// again, the rest is applied, its rows stay, and it ends as a fresh database does.
    async fn a_database_an_older_uidgen_migrated_to_each_level_ends_as_a_fresh_one(db: TestDb) {
        let (fresh, _) = fresh_store(db).await.unwrap();
        let expected = (catalogue(&fresh).await, bookkeeping(&fresh).await);
        let all = migrations(fresh.dialect());
        for level in 1..=all.len() {
            let (store, _) = older_uidgen_database(db, level).await;
            let applied = store.migrate().await.unwrap();
            let versions: Vec<i64> = applied.iter().map(|a| a.version).collect();
            let pending: Vec<i64> = all[level..].iter().map(|m| m.version).collect();
            assert_eq!(versions, pending, "level {level}");
            assert!(applied.iter().all(|a| !a.found_in_place), "level {level}: {applied:?}");
            assert_eq!(
                (catalogue(&store).await, bookkeeping(&store).await),
                expected,
                "level {level}"
            );
            assert!(store.migrate().await.unwrap().is_empty(), "level {level}");
            // The rows stay, and the older table is left as it was.
            let counts = peer_transaction(
                &store,
                &[
                    "SELECT COUNT(*) FROM worker_node",
                    "SELECT COUNT(*) FROM uidgen_schema_migrations",
                ],
            )
            .await
            .unwrap();
            let level_count = i64::try_from(level).unwrap();
            assert_eq!(counts, [Some(vec![1]), Some(vec![level_count])], "level {level}");
            if level >= 3 {
                assert_eq!(store.claim_segment("kept").await.unwrap().max_id, 510);
            }
            store.close().await;
        }
        fresh.close().await;
    }
}

/// A database an older uidgen (migrations to 0012) left after a clean stop: `kept`'s row at
/// `max_id` 500 and a tail of it, 495..500, waiting in `leaf_alloc_returned`; then migrated
/// to this version.
async fn older_uidgen_with_a_waiting_tail(db: TestDb) -> Store {
    let (store, _) = older_uidgen_database(db, 12).await;
    run_script(
        &store,
        "INSERT INTO leaf_alloc_returned (biz_tag, start_id, end_id, delta, remainder) \
         VALUES ('kept', 495, 500, 1, 0)",
    )
    .await
    .unwrap();
    store.migrate().await.unwrap();
    store
}

per_db! {
    /// The previous uidgen (migrations to 0012) stopped cleanly and left a tail of `kept` in
    /// `leaf_alloc_returned`, below the row's `max_id` (500). After migrations 0013 and 0014
    /// the tail is served once, under the tag's epoch 0 (no `leaf_alloc_epoch` row), can be
    /// handed back again under it, and the next new segment starts at 500: nothing repeats.
    async fn tails_an_older_uidgen_handed_back_are_served_once_after_the_upgrade(db: TestDb) {
        let store = older_uidgen_with_a_waiting_tail(db).await;
        let tail = store.claim_returned_range("kept").await.unwrap().unwrap();
        assert_eq!((tail.start, tail.end, tail.epoch), (495, 500, 0));
        assert_eq!(store.claim_returned_range("kept").await.unwrap(), None);
        let again = uidgen_store::ReturnedRange { start: 498, ..tail };
        assert_eq!(store.return_ranges(std::slice::from_ref(&again)).await.unwrap(), vec![again.clone()]);
        assert_eq!(store.claim_returned_range("kept").await.unwrap(), Some(again));
        assert_eq!(store.claim_segment("kept").await.unwrap().range(), 500..510);
        store.close().await;
    }
}

per_db! {
    /// The same older uidgen's database (a tail of `kept` waiting, the row as Leaf's SQL writes
    /// it, `max_id` 500), upgraded through migration 0015 and the tag marked ordered: the
    /// waiting tail is dropped, a plain claim is refused, and the first leader's first segment
    /// starts at 500, above every number the tag handed out before.
    async fn a_tag_an_older_uidgen_served_continues_above_its_numbers_once_ordered(db: TestDb) {
        let store = older_uidgen_with_a_waiting_tail(db).await;
        assert!(store.mark_ordered("kept").await.unwrap());
        assert_eq!(store.returned_ranges("kept").await.unwrap(), vec![]);
        assert!(matches!(
            store.claim_segment("kept").await,
            Err(uidgen_store::StoreError::TagOrdered(_))
        ));
        let lease = std::time::Duration::from_secs(5);
        let lead = store
            .lead_ordered("kept", "a", "http://a:1", lease, std::time::Duration::ZERO)
            .await
            .unwrap();
        let uidgen_store::Lead::Leading { tag, .. } = lead else {
            panic!("the first server to look leads: {lead:?}");
        };
        let first = store.claim_ordered_segment("kept", "a", tag.term, None).await.unwrap();
        assert_eq!(first.range(), 500..510);
        store.close().await;
    }
}

/// A new database an older uidgen migrated to `level` (migrations 0001 to `level`, recorded in
/// `uidgen_schema_migrations` as that uidgen created and wrote it), holding one `worker_node`
/// row and, from level 3, the tag `kept` at `max_id` 500, step 10; not yet migrated further.
async fn older_uidgen_database(db: TestDb, level: usize) -> (Store, String) {
    let url = fresh_url(db).await.unwrap();
    let options = StoreOptions {
        migrate: false,
        ..StoreOptions::default()
    };
    let store = Store::connect_with(&url, options).await.unwrap();
    run_script(&store, &legacy_table(store.dialect()))
        .await
        .unwrap();
    for migration in &migrations(store.dialect())[..level] {
        run_script(&store, migration.sql).await.unwrap();
        let checksum: String = Sha256::digest(migration.sql.as_bytes())
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        let record = format!(
            "INSERT INTO uidgen_schema_migrations (version, description, checksum) \
             VALUES ({}, '{}', '{checksum}')",
            migration.version, migration.description
        );
        run_script(&store, &record).await.unwrap();
    }
    run_script(
        &store,
        "INSERT INTO worker_node (host_name, port, type, launch_date) \
         VALUES ('older', '1', 2, '2024-01-01')",
    )
    .await
    .unwrap();
    if level >= 3 {
        run_script(
            &store,
            "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('kept', 500, 10)",
        )
        .await
        .unwrap();
    }
    (store, url)
}

per_db! {
    /// Several processes starting at once on a database an older uidgen migrated adopt it once
    /// and apply each missing migration once between them.
    async fn concurrent_migrators_adopt_an_older_database_once(db: TestDb) {
        let (fresh, _) = fresh_store(db).await.unwrap();
        let (older, url) = older_uidgen_database(db, 5).await;
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move {
                    let options = StoreOptions { migrate: false, ..StoreOptions::default() };
                    let store = Store::connect_with(&url, options).await?;
                    let applied = store.migrate().await;
                    store.close().await;
                    applied
                })
            })
            .collect();
        let mut versions = Vec::new();
        for task in tasks {
            versions.extend(task.await.unwrap().unwrap().iter().map(|a| a.version));
        }
        versions.sort_unstable();
        let last = uidgen_store::migrations(fresh.dialect()).last().unwrap().version;
        assert_eq!(versions, (6..=last).collect::<Vec<i64>>());
        assert_eq!(bookkeeping(&older).await, bookkeeping(&fresh).await);
    }
}

/// `uidgen_schema_migrations` as the runner before sqlx's created it.
fn legacy_table(dialect: Dialect) -> String {
    let (not_null, stamp, engine) = match dialect {
        Dialect::Sqlite => ("", "TIMESTAMP", ""),
        Dialect::MySql => (
            " NOT NULL",
            "TIMESTAMP",
            " ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
        ),
        Dialect::Postgres => ("", "TIMESTAMPTZ", ""),
    };
    format!(
        "CREATE TABLE IF NOT EXISTS uidgen_schema_migrations (version BIGINT{not_null} PRIMARY \
         KEY, description VARCHAR(128) NOT NULL, applied_at {stamp} NOT NULL DEFAULT \
         CURRENT_TIMESTAMP, checksum VARCHAR(64)){engine}"
    )
}

/// The store's tables, columns and indexes as its catalogue describes them (the older
/// bookkeeping table aside).
async fn catalogue(store: &Store) -> Vec<String> {
    let queries: &[&str] = match store.dialect() {
        Dialect::Sqlite => &["SELECT type || ' ' || name || ' ' || COALESCE(sql, '') \
             FROM sqlite_master WHERE tbl_name <> 'uidgen_schema_migrations' ORDER BY type, name"],
        Dialect::MySql => &[
            "SELECT CONCAT_WS('|', table_name, column_name, column_type, is_nullable, \
             COALESCE(column_default, 'NULL'), column_key, extra) FROM information_schema.columns \
             WHERE table_schema = DATABASE() AND table_name <> 'uidgen_schema_migrations' \
             ORDER BY table_name, ordinal_position",
            "SELECT CONCAT_WS('|', table_name, index_name, column_name, seq_in_index, non_unique) \
             FROM information_schema.statistics WHERE table_schema = DATABASE() \
             AND table_name <> 'uidgen_schema_migrations' \
             ORDER BY table_name, index_name, seq_in_index",
        ],
        Dialect::Postgres => &[
            "SELECT concat_ws('|', table_name, column_name, data_type, is_nullable, \
             column_default)::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name <> 'uidgen_schema_migrations' \
             ORDER BY table_name, ordinal_position",
            "SELECT indexdef::text FROM pg_indexes WHERE schemaname = current_schema() \
             AND tablename <> 'uidgen_schema_migrations' ORDER BY indexname",
        ],
    };
    let mut rows = Vec::new();
    for query in queries {
        rows.extend(text_column(store, query).await.unwrap());
    }
    rows
}

/// What `_sqlx_migrations` says was applied (when and how long aside).
async fn bookkeeping(store: &Store) -> Vec<String> {
    let query = match store.dialect() {
        Dialect::Sqlite => {
            "SELECT version || '|' || description || '|' || success || '|' || hex(checksum) \
             FROM _sqlx_migrations ORDER BY version"
        }
        Dialect::MySql => {
            "SELECT CONCAT_WS('|', version, description, success, HEX(checksum)) \
             FROM _sqlx_migrations ORDER BY version"
        }
        Dialect::Postgres => {
            "SELECT concat_ws('|', version, description, success, encode(checksum, 'hex')) \
             FROM _sqlx_migrations ORDER BY version"
        }
    };
    text_column(store, query).await.unwrap()
}

per_db! {
    async fn concurrent_migrators_agree(db: TestDb) {
        let url = fresh_url(db).await.unwrap();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                tokio::spawn(async move { Store::connect(&url).await.map(|_| ()) })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
    }
}

#[tokio::test]
async fn unreachable_postgres_names_the_redacted_url() {
    let started = Instant::now();
    let error = Store::connect("postgres://app:s3cret@127.0.0.1:1/test")
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, StoreError::Unreachable { .. }), "{error:?}");
    assert!(
        message.starts_with(
            "cannot reach database at postgres://app:***@127.0.0.1:1/test: connection refused"
        ),
        "{message}"
    );
    assert!(!message.contains("s3cret"));
    assert!(started.elapsed() < Duration::from_secs(6));
}

#[tokio::test]
async fn unreachable_mysql_names_the_redacted_url() {
    let error = Store::connect("mariadb://root:pw@127.0.0.1:1/test")
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(error.is_unreachable(), "{error:?}");
    assert!(
        message.contains("mariadb://root:***@127.0.0.1:1/test"),
        "{message}"
    );
    assert!(message.contains("connection refused"), "{message}");
}

#[tokio::test]
async fn a_wrong_password_is_an_authentication_failure_said_once() {
    // The MariaDB test server's URL with a password its user does not have.
    let server = uidgen_store::testing::server_url(TestDb::MySql).unwrap();
    let (scheme, rest) = server.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    let url = format!("{scheme}://{user}:not-the-password@{host}");
    let error = Store::connect(&url).await.unwrap_err();
    assert!(
        matches!(error, StoreError::AuthenticationFailed { .. }),
        "{error:?} (is the MariaDB server of {} up?)",
        uidgen_store::testing::MYSQL_URL_VAR
    );
    assert!(!error.is_unreachable(), "a refusal is not an outage");
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "authentication failed for user '{user}' at {scheme}://{user}:***@{host}: "
        )),
        "{message}"
    );
    assert!(message.ends_with("check the user name and password in the store URL"));
    assert_eq!(message.matches("Access denied").count(), 1, "{message}");
    assert!(!message.contains("not-the-password"), "{message}");
    assert!(
        std::error::Error::source(&error).is_none(),
        "said once: {message}"
    );
}

#[tokio::test]
async fn a_sqlite_url_in_a_missing_folder_is_refused_and_nothing_is_created() {
    let parent = std::env::temp_dir().join(format!("uidgen-missing-{:x}", fastrand::u64(..)));
    let url = format!("sqlite://{}/dir/x.db", parent.display());
    let error = Store::connect(&url).await.unwrap_err();
    assert!(
        error.to_string().contains(&format!(
            "the folder {}/dir does not exist; create it first",
            parent.display()
        )),
        "{error}"
    );
    assert!(!parent.exists(), "no directory tree is created");
}

#[tokio::test]
async fn unreachable_sqlite_path_is_a_clear_error() {
    let error = Store::connect("sqlite:///proc/uidgen-cannot-live-here/x.db")
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("/proc/uidgen-cannot-live-here"),
        "{error}"
    );
}

#[tokio::test]
async fn unreachable_connect_respects_the_timeout() {
    // 10.255.255.1 is not routed here: the connect hangs until our timeout.
    let options = StoreOptions {
        connect_timeout: Duration::from_millis(300),
        ..StoreOptions::default()
    };
    let started = Instant::now();
    let error = Store::connect_with("postgres://postgres@10.255.255.1:5432/test", options)
        .await
        .unwrap_err();
    assert!(error.is_unreachable(), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn unsupported_scheme_is_rejected() {
    let error = Store::connect("redis://:pw@127.0.0.1/0").await.unwrap_err();
    assert!(
        matches!(error, StoreError::UnsupportedUrl { .. }),
        "{error:?}"
    );
    assert!(!error.to_string().contains("pw@"));
}

#[test]
fn fresh_store_names_service_and_variable_when_unreachable() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = "postgres://postgres@127.0.0.1:1/test";
    let error = runtime
        .block_on(fresh_url_on(TestDb::Postgres, url))
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.contains("PostgreSQL not reachable at postgres://postgres@127.0.0.1:1/test"),
        "{message}"
    );
    assert!(message.contains("UIDGEN_TEST_POSTGRES_URL"), "{message}");
}

/// A server frozen inside a transaction (SIGSTOP, a VM pause) holds its row locks until the
/// database ends its session: each store session carries an idle-in-transaction timeout
/// (`StoreOptions::idle_transaction_timeout`), so the others' claims of those rows go through
/// once it runs out, not when (or if) the frozen process wakes. Without it PostgreSQL waits
/// for the lock for ever and MariaDB for `innodb_lock_wait_timeout` (50 s), then fails.
async fn a_session_frozen_in_a_transaction_is_ended(db: TestDb) {
    let (frozen_store, url) = fresh_store(db).await.unwrap();
    frozen_store.upsert_tag("frozen", 10, None).await.unwrap();
    frozen_store.claim_segment("frozen").await.unwrap();
    let mut frozen = uidgen_store::testing::freeze_in_transaction(
        &frozen_store,
        &["UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 'frozen'"],
    )
    .await
    .unwrap();
    let other = Store::connect(&url).await.unwrap();
    let claim = tokio::time::timeout(Duration::from_secs(30), other.claim_segment("frozen"))
        .await
        .expect("the other store's claim still waits for the frozen session's lock after 30 s")
        .unwrap();
    // The frozen session's own claim never committed: the other's follows the first one.
    assert_eq!(claim.max_id, 21);
    assert!(frozen.ended().await, "the frozen session is still open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_frozen_in_a_transaction_is_ended_on_postgres() {
    a_session_frozen_in_a_transaction_is_ended(TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_frozen_in_a_transaction_is_ended_on_mariadb() {
    a_session_frozen_in_a_transaction_is_ended(TestDb::MySql).await;
}
