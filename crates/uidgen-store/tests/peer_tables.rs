#![allow(clippy::unwrap_used)]
//! The peers' tables as their own code leaves them (Baidu's `WORKER_NODE`, Vesta's
//! `DB_MACHINE_ID_PROVIDER`, Tinyid's `tiny_id_info` and `tiny_id_token`), read and continued,
//! and the takeover decisions. Each peer's DDL and statements are written out as the peer
//! issues them (its MySQL script, and the same statements ported to PostgreSQL where a team
//! runs it there), values in place.

mod common;

use std::collections::HashSet;

use uidgen_store::testing::peers::{
    BAIDU_DDL_MYSQL, baidu_start, leaf_claim, leaf_ddl, leaf_insert, tinyid_claim, tinyid_ddl,
    tinyid_samples,
};
use uidgen_store::testing::{TestDb, fresh_store, peer_transaction, run_script};
use uidgen_store::{Store, StoreError, TakeoverRecord, WorkerNode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takeover_decisions_are_recorded_replaced_and_listed() {
    for db in uidgen_store::testing::all_dbs() {
        let (store, _) = fresh_store(db).await.unwrap();
        assert!(store.takeovers().await.unwrap().is_empty());
        let record = |decision: &str| TakeoverRecord {
            peer: "baidu".into(),
            decision: decision.into(),
            summary: "a report\nof two lines".into(),
            recorded_ms: 1_800_000_000_000,
        };
        store.record_takeover(&record("{\"a\":1}")).await.unwrap();
        store.record_takeover(&record("{\"a\":2}")).await.unwrap();
        let leaf = TakeoverRecord {
            peer: "leaf".into(),
            ..record("{}")
        };
        store.record_takeover(&leaf).await.unwrap();
        let all = store.takeovers().await.unwrap();
        assert_eq!(all, [record("{\"a\":2}"), leaf.clone()], "{db:?}");
        assert_eq!(store.takeover("leaf").await.unwrap(), Some(leaf));
        assert!(store.forget_takeover("leaf").await.unwrap());
        assert_eq!(store.takeover("leaf").await.unwrap(), None);
        let bad = TakeoverRecord {
            peer: "Leaf".into(),
            ..record("{}")
        };
        assert!(matches!(
            store.record_takeover(&bad).await,
            Err(StoreError::InvalidInput(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baidus_worker_node_table_on_mysql_becomes_the_one_counter_of_both() {
    let (store, _) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, BAIDU_DDL_MYSQL).await.unwrap();
    // Baidu's fleet started 5 times; an earlier uidgen on this database took 3 ids of its own
    // from its own worker_node, so the two counters overlap (1-3).
    for n in 1..=5 {
        assert_eq!(baidu_start(&store, n).await.unwrap(), u64::from(n));
    }
    let node = WorkerNode::from_lookup(|_| None);
    for expected in 1..=3 {
        assert_eq!(store.insert_worker_node(&node).await.unwrap(), expected);
    }
    let found = store.baidu_worker_nodes().await.unwrap();
    assert!(!found.one_counter() && !found.shared, "{found:?}");
    let legacy = found.legacy.as_ref().unwrap();
    assert_eq!(
        (legacy.name.as_str(), legacy.rows, legacy.max_id),
        ("WORKER_NODE", 5, Some(5))
    );
    assert_eq!((found.own.rows, found.max_id()), (3, Some(5)));

    assert_eq!(store.share_baidu_worker_node().await.unwrap(), Some(6));
    let shared = store.baidu_worker_nodes().await.unwrap();
    assert!(shared.one_counter() && shared.shared, "{shared:?}");
    assert_eq!(
        store.share_baidu_worker_node().await.unwrap(),
        None,
        "done once"
    );

    // Side by side: Baidu's apps and uidgen starting at once draw from one counter, above
    // every id either handed out before.
    let baidu = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut ids = Vec::new();
            for n in 10..40 {
                ids.push(i64::try_from(baidu_start(&store, n).await.unwrap()).unwrap());
            }
            ids
        })
    };
    let mut ours = Vec::new();
    for _ in 0..30 {
        ours.push(store.insert_worker_node(&node).await.unwrap());
    }
    let theirs = baidu.await.unwrap();
    let all: HashSet<i64> = ours
        .iter()
        .map(|&id| i64::try_from(id).unwrap())
        .chain(theirs.iter().copied())
        .collect();
    assert_eq!(
        all.len(),
        60,
        "one worker id twice: ours {ours:?}, Baidu's {theirs:?}"
    );
    assert!(all.iter().all(|&id| id >= 6), "{all:?}");
    assert_eq!(store.count_worker_nodes().await.unwrap(), 5 + 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baidus_table_is_uidgens_own_where_names_fold_to_lower_case() {
    for db in [TestDb::Postgres, TestDb::Sqlite] {
        let (store, _) = fresh_store(db).await.unwrap();
        // Baidu's insert, ported: the unquoted WORKER_NODE is worker_node.
        let now = if db == TestDb::Sqlite {
            "CURRENT_TIMESTAMP"
        } else {
            "NOW()"
        };
        let insert = format!(
            "INSERT INTO WORKER_NODE (HOST_NAME, PORT, TYPE, LAUNCH_DATE, MODIFIED, CREATED) \
             VALUES ('10.0.0.1', '1790000000000-1', 2, '2026-11-01', {now}, {now})"
        );
        peer_transaction(&store, &[&insert]).await.unwrap();
        let found = store.baidu_worker_nodes().await.unwrap();
        assert!(
            found.one_counter() && found.legacy.is_none(),
            "{db:?}: {found:?}"
        );
        assert_eq!((found.own.rows, found.own.max_id), (1, Some(1)));
        assert_eq!(store.share_baidu_worker_node().await.unwrap(), None);
        let node = WorkerNode::from_lookup(|_| None);
        assert_eq!(store.insert_worker_node(&node).await.unwrap(), 2, "{db:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vestas_machine_id_table_is_read_as_its_provider_leaves_it() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        let (store, _) = fresh_store(db).await.unwrap();
        assert_eq!(store.vesta_machine_rows().await.unwrap(), None);
        // Vesta's script (its procedure inserts ids 0-1023; four suffice here), then two hosts'
        // DbMachineIdProvider.init: `update ... set IP = ? where IP is null limit 1` (MySQL;
        // PostgreSQL has no LIMIT on UPDATE, so the port picks the row by id).
        let (ddl, take) = match db {
            TestDb::MySql => (
                "create table DB_MACHINE_ID_PROVIDER (ID bigint not null, IP varchar(64) \
                 default null, primary key (ID), unique key UK_IP(IP))",
                "update DB_MACHINE_ID_PROVIDER set IP = '{ip}' where IP is null limit 1",
            ),
            _ => (
                "create table DB_MACHINE_ID_PROVIDER (ID bigint not null primary key, IP \
                 varchar(64) default null unique)",
                "update DB_MACHINE_ID_PROVIDER set IP = '{ip}' where ID = (select min(ID) from \
                 DB_MACHINE_ID_PROVIDER where IP is null)",
            ),
        };
        run_script(&store, ddl).await.unwrap();
        for id in 0..4 {
            let insert = format!("insert into DB_MACHINE_ID_PROVIDER(ID) values({id})");
            peer_transaction(&store, &[&insert]).await.unwrap();
        }
        for ip in ["10.0.0.7", "10.0.0.8"] {
            peer_transaction(&store, &[&take.replace("{ip}", ip)])
                .await
                .unwrap();
        }
        let rows = store.vesta_machine_rows().await.unwrap().unwrap();
        let held: Vec<(i64, Option<&str>)> = rows.iter().map(|r| (r.id, r.ip.as_deref())).collect();
        assert_eq!(
            held,
            [
                (0, Some("10.0.0.7")),
                (1, Some("10.0.0.8")),
                (2, None),
                (3, None)
            ],
            "{db:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tinyids_biz_types_move_to_leaf_alloc_above_every_number_it_handed_out() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        let (store, _) = fresh_store(db).await.unwrap();
        run_script(&store, tinyid_ddl(db)).await.unwrap();
        tinyid_samples(&store).await.unwrap();
        // Tinyid served two segments of `test` and one of `test_odd`.
        assert_eq!(
            tinyid_claim(&store, "test").await.unwrap(),
            Some((1, 100_001))
        );
        assert_eq!(
            tinyid_claim(&store, "test").await.unwrap(),
            Some((100_001, 200_001))
        );
        assert_eq!(
            tinyid_claim(&store, "test_odd").await.unwrap(),
            Some((1, 100_001))
        );
        let infos = store.tinyid_infos().await.unwrap().unwrap();
        assert_eq!(infos.len(), 2);
        assert!(infos.iter().all(|i| i.refusal().is_none() && !i.fenced()));

        let adopted = store.adopt_tinyid().await.unwrap();
        let moved: Vec<(&str, i64, i64)> = adopted
            .iter()
            .map(|a| (a.tag.as_str(), a.tinyid_max_id, a.max_id))
            .collect();
        assert_eq!(
            moved,
            [("test", 200_001, 200_002), ("test_odd", 100_001, 100_002)]
        );
        assert!(store.adopt_tinyid().await.unwrap().is_empty(), "moved once");
        // A Tinyid server left running finds no such biz type: it claims nothing more.
        assert_eq!(tinyid_claim(&store, "test").await.unwrap(), None, "{db:?}");
        let fenced = store.tinyid_infos().await.unwrap().unwrap();
        assert!(fenced.iter().all(|i| i.fenced()), "{fenced:?}");
        // uidgen's segments start above Tinyid's last number, with its residue.
        let claim = store.claim_segment("test").await.unwrap();
        assert_eq!(claim.range(), 200_002..300_002);
        let odd = store.claim_segment("test_odd").await.unwrap();
        assert_eq!(
            (odd.range().start, odd.residue.delta, odd.residue.remainder),
            (100_002, 2, 1)
        );
        // Its clients keep their token: a caller token of that text, for those biz types.
        assert_eq!(store.import_tinyid_tokens().await.unwrap(), ["tinyid-1"]);
        assert!(
            store.import_tinyid_tokens().await.unwrap().is_empty(),
            "imported once"
        );
        let tokens = store.active_caller_token_hashes().await.unwrap();
        assert_eq!(tokens.len(), 1);
        assert_eq!(
            tokens[0].hash,
            uidgen_store::token_hash("0f673adf80504e2eaa552f5d791b644c")
        );
        assert_eq!(tokens[0].scopes.tags, ["test", "test_odd"]);
        assert_eq!(tokens[0].scopes.routes, ["segments"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tinyid_row_uidgen_cannot_continue_is_refused_and_nothing_moves() {
    let (store, _) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, tinyid_ddl(TestDb::MySql)).await.unwrap();
    peer_transaction(&store, &[
        "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step) VALUES ('good', 1, 500, 10)",
        "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step) VALUES ('no_step', 1, 1, 0)",
    ])
    .await
    .unwrap();
    let error = store.adopt_tinyid().await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("biz_type `no_step` has step Some(0)"),
        "{error}"
    );
    assert!(
        store.get_tag("good").await.unwrap().is_none(),
        "rolled back"
    );
    assert_eq!(
        tinyid_claim(&store, "good").await.unwrap(),
        Some((500, 510)),
        "not fenced"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_leaf_keeps_working_on_the_leaf_alloc_uidgen_migrated() {
    for db in [TestDb::MySql, TestDb::Postgres] {
        // Leaf's own table and sample row, as its README has them, before uidgen ever ran.
        let url = uidgen_store::testing::fresh_url(db).await.unwrap();
        let options = uidgen_store::StoreOptions {
            migrate: false,
            ..Default::default()
        };
        let bare = Store::connect_with(&url, options).await.unwrap();
        run_script(&bare, leaf_ddl(db)).await.unwrap();
        leaf_insert(&bare, "leaf-segment-test", 2000).await.unwrap();
        assert_eq!(
            leaf_claim(&bare, "leaf-segment-test").await.unwrap(),
            1..2001
        );
        bare.close().await;

        // uidgen migrates: leaf_alloc gains delta and remainder (migration 0006).
        let store = Store::connect(&url).await.unwrap();
        let tag = store.get_tag("leaf-segment-test").await.unwrap().unwrap();
        assert_eq!(
            (tag.max_id, tag.residue),
            (2001, uidgen_store::Residue::SINGLE)
        );
        // Every statement of Leaf's IDAllocMapper, as Leaf issues it, on the altered table.
        let all = peer_transaction(
            &store,
            &[
                "SELECT biz_tag, max_id, step, update_time FROM leaf_alloc",
                "SELECT biz_tag FROM leaf_alloc",
                "UPDATE leaf_alloc SET max_id = max_id + 500 WHERE biz_tag = 'leaf-segment-test'",
                "SELECT biz_tag, max_id, step FROM leaf_alloc WHERE biz_tag = 'leaf-segment-test'",
            ],
        )
        .await
        .unwrap();
        assert_eq!(
            all[3].as_ref().unwrap()[1],
            2501,
            "{db:?}: updateMaxIdByCustomStep"
        );
        // Leaf's insert of a new tag (its README's), which names no uidgen column.
        leaf_insert(&store, "orders", 100).await.unwrap();
        assert_eq!(
            store.get_tag("orders").await.unwrap().unwrap().residue,
            uidgen_store::Residue::SINGLE
        );

        // Side by side on one tag: Leaf's claims from another task while uidgen claims.
        let leaf = {
            let store = store.clone();
            tokio::spawn(async move {
                let mut ranges = Vec::new();
                for _ in 0..40 {
                    ranges.push(leaf_claim(&store, "orders").await.unwrap());
                }
                ranges
            })
        };
        let mut ranges = Vec::new();
        for _ in 0..40 {
            ranges.push(store.claim_segment("orders").await.unwrap().range());
        }
        ranges.extend(leaf.await.unwrap());
        // A tail uidgen hands back on a tag Leaf's own SQL created (no epoch row: epoch 0)
        // is taken back once, while Leaf goes on claiming above it.
        let claim = store.claim_segment("orders").await.unwrap();
        let tail = uidgen_store::ReturnedRange {
            biz_tag: "orders".into(),
            start: claim.max_id - 40,
            end: claim.max_id,
            residue: uidgen_store::Residue::SINGLE,
            epoch: claim.epoch,
        };
        assert_eq!(claim.epoch, 0, "{db:?}");
        assert_eq!(
            store
                .return_ranges(std::slice::from_ref(&tail))
                .await
                .unwrap()
                .len(),
            1
        );
        ranges.push(claim.max_id - claim.step..claim.max_id - 40);
        ranges.push(leaf_claim(&store, "orders").await.unwrap());
        let back = store.claim_returned_range("orders").await.unwrap().unwrap();
        assert_eq!(back, tail, "{db:?}");
        ranges.push(back.start..back.end);
        assert_eq!(store.claim_returned_range("orders").await.unwrap(), None);
        ranges.sort_by_key(|r| r.start);
        assert_eq!(ranges.first().map(|r| r.start), Some(1));
        for pair in ranges.windows(2) {
            assert_eq!(
                pair[0].end, pair[1].start,
                "{db:?}: a gap or an overlap: {ranges:?}"
            );
        }
    }
}
