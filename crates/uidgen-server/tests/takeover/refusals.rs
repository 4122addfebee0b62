//! The refusals the side-by-side tests do not meet on their way: each peer's state or
//! configuration that would let an ID repeat, refused with what to change.

use uidgen_store::AppSpec;
use uidgen_store::testing::peers::{BAIDU_DDL_MYSQL, baidu_start, tinyid_ddl};
use uidgen_store::testing::{TestDb, fresh_store, peer_transaction, run_script};

use super::common::temp_dir;
use super::{refused_start, takeover};

/// `uidgen takeover <args>` must fail, saying `why`.
fn refused(args: &[&str], env: &[(&str, &str)], why: &str) {
    let (ok, out) = takeover(args, env);
    assert!(
        !ok && out.contains(why),
        "{args:?} {env:?}: expected a refusal saying {why:?}:\n{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baidu_layouts_that_do_not_continue_baidus_are_refused() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, BAIDU_DDL_MYSQL).await.unwrap();
    baidu_start(&store, 1).await.unwrap();
    let run_refused = |layout: &str, epoch: &str, args: &[&str], why: &str| {
        let env = [
            ("UIDGEN_STORE", url.as_str()),
            ("UIDGEN_LAYOUT", layout),
            ("UIDGEN_LAYOUT_EPOCH", epoch),
        ];
        refused(args, &env, why);
    };
    // baidu_continued from another epoch than Baidu's.
    run_refused(
        "baidu_continued",
        "2017-01-01",
        &["baidu", "--check"],
        "baidu_continued must start from Baidu's epoch",
    );
    // Baidu's own epoch of 2022 still runs: baidu_continued would refuse every clock before 2030.
    run_refused(
        "baidu_continued",
        "2022-01-01",
        &["baidu", "--legacy-epoch", "2022-01-01", "--check"],
        "refuses every clock before it",
    );
    // Baidu's own layout after its time field ran out.
    run_refused(
        "baidu",
        "2016-05-20+08:00",
        &["baidu", "--check"],
        "Baidu's layout ran out on 2024-11-20T13:24:16.000Z",
    );
    // Widths the server cannot continue.
    run_refused(
        "baidu_continued",
        "2016-05-20+08:00",
        &["baidu", "--legacy-bits", "31,20,12", "--check"],
        "continues Baidu's default widths 28/22/13 only",
    );
    // A layout of another shape altogether.
    run_refused(
        "snowflake",
        "2016-05-20+08:00",
        &["baidu", "--check"],
        "is neither Baidu's",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_machine_assigner_cannot_keep_off_vestas_machine_ids() {
    let (_, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    let env = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "vesta_max_peak"),
        ("UIDGEN_WORKER_ASSIGNER", "machine"),
    ];
    refused(
        &["vesta", "--machines", "1023", "--check"],
        &env,
        "the machine assigner takes any",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_list_the_database_never_handed_out_and_rows_marked_later_are_refused() {
    let (store, url) = fresh_store(TestDb::Postgres).await.unwrap();
    let (redis_url, prefix, mut conn) = super::common::test_redis("refused").await;
    store
        .create_or_update_app(&AppSpec::new(3, "orders"))
        .await
        .unwrap();
    // A list from another database's service: indexes its row (max_id 0) never handed out.
    let _: u64 = redis::cmd("RPUSH")
        .arg(format!("{prefix}idList_3_5"))
        .arg(&[4001_u64, 4002])
        .query_async(&mut conn)
        .await
        .unwrap();
    let env = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_SHARDED_ENABLED", "true"),
        ("UIDGEN_REDIS_URL", redis_url.as_str()),
        ("UIDGEN_SHARDED_KEY_PREFIX", prefix.as_str()),
    ];
    refused(
        &["sharded", "--check"],
        &env,
        "holds index 4001, which its id_alloc row (max_id 0) never handed out",
    );
    let _: u64 = redis::cmd("DEL")
        .arg(format!("{prefix}idList_3_5"))
        .query_async(&mut conn)
        .await
        .unwrap();
    let (ok, out) = takeover(&["sharded"], &env);
    assert!(ok, "{out}");
    // Rows listed as an older uidgen's since (migration 0010 run again by hand).
    peer_transaction(
        &store,
        &["INSERT INTO id_alloc_exclusive (app_id, shard_id) VALUES (3, 0)"],
    )
    .await
    .unwrap();
    let log = refused_start(&env);
    assert!(
        log.contains("listed in id_alloc_exclusive since `uidgen takeover sharded`"),
        "{log}"
    );
    uidgen_sharded::testing::delete_prefix(&redis_url, &prefix).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tinyid_biz_type_whose_tag_holds_another_residue_is_refused() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, tinyid_ddl(TestDb::MySql)).await.unwrap();
    peer_transaction(
        &store,
        &[
            "INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step, delta, remainder) \
         VALUES ('orders', 1, 500, 100, 2, 0)",
        ],
    )
    .await
    .unwrap();
    store.upsert_tag("orders", 100, None).await.unwrap();
    let env = [("UIDGEN_STORE", url.as_str())];
    refused(
        &["tinyid", "--check"],
        &env,
        "exists in leaf_alloc with residue 0 mod 1",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_segment_group_holding_a_tag_java_leaf_serves_beside_uidgen_is_refused() {
    let (store, url) = fresh_store(TestDb::Sqlite).await.unwrap();
    store.upsert_tag("orders", 100, None).await.unwrap();
    let env = [("UIDGEN_STORE", url.as_str())];
    let (ok, out) = takeover(&["leaf", "--beside"], &env);
    assert!(ok, "{out}");
    // Later, the tag goes into a group of two databases.
    let config = temp_dir("leaf-group").join("uidgen.toml");
    let other = format!("{url}-other");
    std::fs::write(
        &config,
        format!(
            "[[segment.groups]]\nname = \"orders\"\nstores = [{url:?}, {other:?}]\ntags = [\"orders\"]\n"
        ),
    )
    .unwrap();
    let config = config.to_string_lossy().into_owned();
    let log = match super::common::Server::try_start(&["--config", &config], &env) {
        Ok(server) => panic!("started: {}", server.log()),
        Err(log) => log,
    };
    assert!(
        log.contains("are served from several databases (`[[segment.groups]]`)"),
        "{log}"
    );
}
