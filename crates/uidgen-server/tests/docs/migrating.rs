//! Every command of docs/MIGRATING.md, run on the state each peer's own code leaves, and compared
//! with the answer the document shows (issue 31).
//!
//! The conventions are markdown.rs's, and two of the document's own, before a block's first
//! command (also written in docs/MIGRATING.md, "Examples in this document"):
//! - `# peer: NAME`: the block runs on the fixture NAME: a database (and a ZooKeeper path, a
//!   Redis prefix) seeded with the peer's own statements, once, when a block first names it.
//!   Blocks of one fixture run in the document's order on one state, so a `--check` sees what
//!   an earlier block recorded. The fixture's connection settings (`UIDGEN_STORE`,
//!   `UIDGEN_ZK_CONNECT`, `UIDGEN_REDIS_URL`, `UIDGEN_SHARDED_KEY_PREFIX`) are in the
//!   commands' environment; everything the switch is about is written in the commands.
//! - `# serve: NAME=VALUE ...`: a `uidgen serve` is started with the fixture's settings and these
//!   variables before the block's commands; its curl commands reach it at `localhost:8080`.
//!
//! A command's answer is its standard output and standard error together, so a refusal
//! (`error: ...`) is shown as an operator sees it; a command without a shown answer must
//! succeed.

use std::path::Path;
use std::process::Command;

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_store::testing::peers::{
    BAIDU_DDL_MYSQL, baidu_start, leaf_claim, leaf_insert, tinyid_claim, tinyid_ddl, tinyid_samples,
};
use uidgen_store::testing::{TestDb, fresh_store, peer_transaction, run_script};
use uidgen_zk::testing::{JavaLeaf, test_connect};

use super::common::{Server, binary, temp_dir};
use super::markdown::{Block, console_blocks, matches};
use super::{SHOWN_ADDRESSES, runtime, workspace};

/// A peer's state and the settings that reach it.
struct Fixture {
    env: Vec<(String, String)>,
    redis_prefix: Option<String>,
}

/// Seed the fixture `name` with exactly what the peer's code leaves.
async fn seed(name: &str) -> Fixture {
    let store_env = |url: &str| vec![("UIDGEN_STORE".to_owned(), url.to_owned())];
    match name {
        // Baidu's table on MariaDB (a table apart from uidgen's worker_node) and three starts of
        // its apps, on its default layout, whose seconds ran out on 2024-11-20.
        "baidu" => {
            let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
            run_script(&store, BAIDU_DDL_MYSQL).await.unwrap();
            for n in 1..=3 {
                baidu_start(&store, n).await.unwrap();
            }
            store.close().await;
            Fixture {
                env: store_env(&url),
                redis_prefix: None,
            }
        }
        // Leaf's own table on PostgreSQL (before uidgen ever migrated it): its sample tag and
        // `orders`, three segments of which its servers claimed.
        "leaf-segments" => {
            let (url, bare) = super::common::bare_leaf_alloc().await;
            leaf_insert(&bare, "orders", 1000).await.unwrap();
            for _ in 0..3 {
                leaf_claim(&bare, "orders").await.unwrap();
            }
            bare.close().await;
            Fixture {
                env: store_env(&url),
                redis_prefix: None,
            }
        }
        // Three Java Leaf servers' nodes under /snowflake/orders (ids 0, 1, 2), which issued IDs;
        // uidgen's own store is a SQLite file.
        "leaf-zookeeper" => {
            let connect = test_connect();
            for port in 7000..7003_u16 {
                let leaf = JavaLeaf::new(&connect, "orders", port).await;
                let id = leaf.init().await.unwrap();
                let generator =
                    SnowflakeGenerator::new(Layout::leaf().unwrap(), id, SystemClock).unwrap();
                generator.next_ids(1_000).unwrap();
            }
            let store = format!(
                "sqlite://{}",
                temp_dir("migrating-leaf").join("uidgen.db").display()
            );
            let mut env = store_env(&store);
            env.push(("UIDGEN_ZK_CONNECT".to_owned(), connect));
            Fixture {
                env,
                redis_prefix: None,
            }
        }
        // Vesta's table on MariaDB, as its script and two hosts' DbMachineIdProvider left it.
        "vesta" => {
            let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
            super::common::vesta_machine_table(&store).await;
            store.close().await;
            Fixture {
                env: store_env(&url),
                redis_prefix: None,
            }
        }
        // The original sharded service on PostgreSQL and Redis: app 7's 64 rows from its init
        // (max_id 0, step 1000), shards 0 and 1 refilled and partly served.
        "sharded" => {
            let (store, url) = fresh_store(TestDb::Postgres).await.unwrap();
            let (redis_url, prefix, mut conn) = super::common::test_redis("migrating").await;
            let rows: Vec<String> = (0..64)
                .map(|shard| {
                    format!(
                        "INSERT INTO id_alloc (app_id, app_name, max_id, shard_id, step, \
                         description, max_limit_id) VALUES (7, 'orders', 0, {shard}, 1000, '', 0)"
                    )
                })
                .collect();
            peer_transaction(&store, &rows.iter().map(String::as_str).collect::<Vec<_>>())
                .await
                .unwrap();
            for shard in 0..2 {
                let claim = [
                    format!(
                        "UPDATE id_alloc SET max_id = max_id + step WHERE app_id = 7 AND shard_id = {shard}"
                    ),
                    format!(
                        "SELECT max_id, step FROM id_alloc WHERE app_id = 7 AND shard_id = {shard}"
                    ),
                ];
                let claim: Vec<&str> = claim.iter().map(String::as_str).collect();
                let row = peer_transaction(&store, &claim).await.unwrap()[1]
                    .clone()
                    .unwrap();
                let list = format!("{prefix}idList_7_{shard}");
                let indexes: Vec<i64> = (row[0] - row[1] + 1..=row[0]).collect();
                let _: u64 = redis::cmd("RPUSH")
                    .arg(&list)
                    .arg(&indexes)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let _: Vec<String> = redis::cmd("LPOP")
                    .arg(&list)
                    .arg(400)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
            }
            store.close().await;
            let mut env = store_env(&url);
            env.push(("UIDGEN_REDIS_URL".to_owned(), redis_url));
            env.push(("UIDGEN_SHARDED_KEY_PREFIX".to_owned(), prefix.clone()));
            Fixture {
                env,
                redis_prefix: Some(prefix),
            }
        }
        // Tinyid's tables on MariaDB with db.sql's samples, two segments of `test` served.
        "tinyid" => {
            let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
            run_script(&store, tinyid_ddl(TestDb::MySql)).await.unwrap();
            tinyid_samples(&store).await.unwrap();
            tinyid_claim(&store, "test").await.unwrap();
            tinyid_claim(&store, "test").await.unwrap();
            store.close().await;
            Fixture {
                env: store_env(&url),
                redis_prefix: None,
            }
        }
        other => panic!("docs/MIGRATING.md names no fixture `{other}`"),
    }
}

/// `# peer:` and `# serve:` of a block: read from the document's lines after the fence.
fn block_settings(lines: &[&str], block: &Block) -> (Option<String>, Vec<(String, String)>) {
    let (mut peer, mut serve) = (None, Vec::new());
    for line in lines.iter().skip(block.line) {
        if line.starts_with("$ ") || line.starts_with("```") {
            break;
        }
        if let Some(name) = line.strip_prefix("# peer:") {
            peer = Some(name.trim().to_owned());
        }
        if let Some(vars) = line.strip_prefix("# serve:") {
            for pair in vars.split_whitespace() {
                let (name, value) = pair.split_once('=').unwrap();
                serve.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    (peer, serve)
}

/// Run one command in bash with the fixture's settings: stdout and stderr, and success.
fn run(
    command: &str,
    env: &[(String, String)],
    cwd: &Path,
    server: Option<&Server>,
) -> (bool, String) {
    let mut command = command.to_owned();
    if let Some(server) = server {
        for shown in SHOWN_ADDRESSES {
            command = command.replace(shown, server.base.trim_start_matches("http://"));
        }
    }
    let bin_dir = Path::new(binary()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .args(["-c", &command])
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", cwd)
        .env("UIDGEN_STATE_DIR", cwd)
        .env("NO_COLOR", "1")
        .env("UIDGEN_GRPC_LISTEN", "")
        // A `uidgen serve` the document shows refused must not meet another's port first.
        .env("UIDGEN_LISTEN", "127.0.0.1:0")
        .env_remove("UIDGEN_CONFIG")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn every_command_of_migrating_md_gives_the_answer_it_shows_on_the_peers_state() {
    let text = std::fs::read_to_string(workspace().join("docs/MIGRATING.md")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let blocks = console_blocks(&text).unwrap();
    let rt = runtime();
    let mut fixtures: Vec<(String, Fixture)> = Vec::new();
    let mut failures = Vec::new();
    let mut ran = 0;
    let show = std::env::var_os("UIDGEN_TEST_SHOW_ANSWERS").is_some();
    for block in &blocks {
        assert!(
            block.not_run.is_none(),
            "MIGRATING.md:{}: every block runs",
            block.line
        );
        let (peer, serve) = block_settings(&lines, block);
        let peer = peer
            .unwrap_or_else(|| panic!("MIGRATING.md:{}: a block names its `# peer:`", block.line));
        if !fixtures.iter().any(|(name, _)| *name == peer) {
            let fixture = rt.block_on(seed(&peer));
            fixtures.push((peer.clone(), fixture));
        }
        let fixture = &fixtures.iter().find(|(name, _)| *name == peer).unwrap().1;
        let server = (!serve.is_empty()).then(|| {
            let env: Vec<(&str, &str)> = fixture
                .env
                .iter()
                .chain(&serve)
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            Server::start(&[], &env)
        });
        let cwd = temp_dir("migrating-cwd");
        let mut given: Vec<(String, String)> = Vec::new();
        for step in &block.steps {
            let mut command = step.command.clone();
            for (shown, actual) in &given {
                command = command.replace(shown.as_str(), actual);
            }
            let (ok, answer) = run(&command, &fixture.env, &cwd, server.as_ref());
            ran += 1;
            if show {
                println!("MIGRATING.md:{}: $ {}\n{answer}", step.line, step.command);
            }
            if step.expected.is_empty() {
                if !ok {
                    failures.push(format!(
                        "MIGRATING.md:{}: $ {}\nshows no answer, so it must succeed:\n{answer}",
                        step.line, step.command
                    ));
                }
                continue;
            }
            match matches(&step.expected, &block.varies, &answer) {
                Some(found) => given.extend(found),
                None => failures.push(format!(
                    "MIGRATING.md:{}: $ {}\nthe document shows\n{}\nit answered\n{answer}",
                    step.line,
                    step.command,
                    step.expected.join("\n")
                )),
            }
        }
    }
    for (_, fixture) in &fixtures {
        if let Some(prefix) = &fixture.redis_prefix {
            rt.block_on(uidgen_sharded::testing::delete_prefix(
                &uidgen_sharded::testing::redis_url(),
                prefix,
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} commands of docs/MIGRATING.md differ from what they answer:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(ran >= 20, "only {ran} commands of docs/MIGRATING.md ran");
    let peers: Vec<&str> = fixtures.iter().map(|(name, _)| name.as_str()).collect();
    for section in [
        "baidu",
        "leaf-segments",
        "leaf-zookeeper",
        "vesta",
        "sharded",
        "tinyid",
    ] {
        assert!(peers.contains(&section), "no example runs on `{section}`");
    }
}
