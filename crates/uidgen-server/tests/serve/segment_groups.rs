//! `[[segment.groups]]` end to end: the real binary serves a tag from PostgreSQL and MariaDB
//! (each behind a TCP proxy), creates the rows on both through the admin route, shows both in
//! `/v1/segments`, keeps serving with one cut off, and refuses to start on rows that disagree.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::HashSet;

use common::{Server, fetch, run, sqlite_url, temp_dir};
use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
use uidgen_store::testing::{TestDb, fresh_url};
use uidgen_store::{Residue, Store};

const TOKEN: &str = "an-admin-token-of-some-length";

/// A config file with `store` and one group `pair` of `stores` serving tag `g`.
fn config_file(name: &str, store: &str, stores: &[String]) -> std::path::PathBuf {
    let list: Vec<String> = stores.iter().map(|s| format!("{s:?}")).collect();
    let text = format!(
        "store = {store:?}\n\n[[segment.groups]]\nname = \"pair\"\nstores = [{}]\ntags = [\"g\"]\n",
        list.join(", ")
    );
    let file = temp_dir(name).join("uidgen.toml");
    std::fs::write(&file, text).unwrap();
    file
}

/// `count` IDs of `g` from `server`, or the error body.
async fn take(client: &reqwest::Client, server: &Server, count: usize) -> Result<Vec<i64>, String> {
    let (status, body) = fetch(
        client,
        &server.url(&format!("/v1/segments/g?count={count}")),
    )
    .await;
    if status != 200 {
        return Err(format!("{status}: {body}"));
    }
    let value: serde_json::Value = serde_json::from_str(&body).unwrap();
    Ok(value["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect())
}

/// The `databases` of tag `g` in `/v1/segments`.
async fn databases(client: &reqwest::Client, server: &Server) -> Vec<serde_json::Value> {
    let (status, body) = fetch(client, &server.url("/v1/segments")).await;
    assert_eq!(status, 200, "{body}");
    let tags: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
    let g = tags.iter().find(|t| t["tag"] == "g").unwrap();
    assert_eq!(g["group"], "pair", "{g}");
    g["databases"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_tag_is_created_on_both_databases_and_served_while_one_is_cut() {
    let pg_url = fresh_url(TestDb::Postgres).await.unwrap();
    let my_url = fresh_url(TestDb::MySql).await.unwrap();
    let pg_proxy = Proxy::start(server_addr(&pg_url)).await;
    let my_proxy = Proxy::start(server_addr(&my_url)).await;
    let stores = [
        with_addr(&pg_url, pg_proxy.addr),
        with_addr(&my_url, my_proxy.addr),
    ];
    let file = config_file("groups", &sqlite_url("groups"), &stores);
    let server = Server::start(
        &["--config", file.to_str().unwrap()],
        &[("UIDGEN_ADMIN_TOKEN", TOKEN)],
    );
    let client = reqwest::Client::new();
    let response = client
        .put(server.url("/v1/admin/segments/g"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(r#"{"step": 20}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let row: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        (row["delta"].as_i64(), row["remainder"].as_i64()),
        (Some(2), Some(0)),
        "{row}"
    );
    // Both rows, as the databases hold them.
    let my_direct = Store::connect(&my_url).await.unwrap();
    let my_row = my_direct.get_tag("g").await.unwrap().unwrap();
    assert_eq!(
        (my_row.residue, my_row.step),
        (Residue::new(2, 1).unwrap(), 20)
    );

    let mut seen = HashSet::new();
    let mut keep = |ids: Vec<i64>| {
        for id in ids {
            assert!(seen.insert(id), "duplicate {id}");
        }
    };
    keep(take(&client, &server, 100).await.unwrap());
    let dbs = databases(&client, &server).await;
    assert_eq!(dbs.len(), 2);
    assert_eq!(
        (dbs[0]["kind"].as_str(), dbs[0]["remainder"].as_i64()),
        (Some("postgres"), Some(0))
    );
    assert_eq!(
        (dbs[1]["kind"].as_str(), dbs[1]["remainder"].as_i64()),
        (Some("mysql"), Some(1))
    );
    assert!(
        dbs.iter()
            .all(|d| d["reachable"] == true && d["delta"] == 2),
        "{dbs:?}"
    );
    // No address in the monitor.
    assert!(!format!("{dbs:?}").contains("127.0.0.1"), "{dbs:?}");

    pg_proxy.cut();
    let mut odd = 0;
    for _ in 0..20 {
        let ids = take(&client, &server, 50).await.unwrap();
        odd += ids.iter().filter(|id| *id % 2 == 1).count();
        keep(ids);
    }
    assert!(odd > 0, "MariaDB took over");
    let dbs = databases(&client, &server).await;
    assert_eq!(
        (dbs[0]["reachable"].as_bool(), dbs[1]["preferred"].as_bool()),
        (Some(false), Some(true))
    );
    // A group tag is not leasable.
    let response = client
        .post(server.url("/v1/segments/g/lease?size=10"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("group_tag_not_leasable")
    );
    pg_proxy.restore();
    server.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_whose_rows_disagree_refuses_to_start_naming_the_problem() {
    let pg_url = fresh_url(TestDb::Postgres).await.unwrap();
    let my_url = fresh_url(TestDb::MySql).await.unwrap();
    let even = Residue::new(2, 0).unwrap();
    for url in [&pg_url, &my_url] {
        let store = Store::connect(url).await.unwrap();
        store.upsert_group_tag("g", 20, None, even).await.unwrap();
    }
    let file = config_file("groups-bad", &sqlite_url("groups-bad"), &[pg_url, my_url]);
    let (status, _, stderr) = run(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--config",
            file.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!status.success());
    assert!(
        stderr.contains("segment group `pair`, biz tag `g`")
            && stderr.contains("both hold remainder 0"),
        "{stderr}"
    );
}
