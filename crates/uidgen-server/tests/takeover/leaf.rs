//! Meituan Leaf: its segment servers on one `leaf_alloc`, and its snowflake servers on one
//! ZooKeeper path, each beside uidgen; Leaf's monitor routes on uidgen.

use std::time::Duration;

use uidgen_core::{Layout, SnowflakeGenerator, SystemClock, UidGenerator};
use uidgen_store::Store;
use uidgen_store::testing::peers::{leaf_claim, leaf_insert};
use uidgen_store::testing::{TestDb, fresh_url, run_script};
use uidgen_zk::testing::{JavaLeaf, test_connect};

use super::common::{Server, fetch, ids_in, json, sqlite_url, temp_dir};
use super::{assert_no_equal, refused_start, takeover};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn java_leaf_segment_servers_and_uidgen_serve_one_leaf_alloc_side_by_side() {
    // Leaf's own table, tags and first segments, before uidgen ever ran on the database.
    let (url, bare) = super::common::bare_leaf_alloc().await;
    leaf_insert(&bare, "orders", 100).await.unwrap();
    let mut numbers: Vec<i64> = Vec::new();
    for _ in 0..3 {
        numbers.extend(leaf_claim(&bare, "orders").await.unwrap());
    }
    let highest_before = *numbers.iter().max().unwrap();
    bare.close().await;

    let env = [("UIDGEN_STORE", url.as_str())];
    let (ok, out) = takeover(&["leaf", "--beside", "--check"], &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("leaf_alloc: 2 tags") && out.contains("invisible to Java Leaf"),
        "{out}"
    );
    let (ok, out) = takeover(&["leaf", "--beside"], &env);
    assert!(ok, "{out}");

    let server = Server::start(&[], &env);
    let store = Store::connect(&url).await.unwrap();
    // Leaf's servers keep claiming segments of the tag (and handing out their numbers) while
    // uidgen serves it.
    let leaf = {
        let store = store.clone();
        tokio::spawn(async move {
            let mut handed = Vec::new();
            for _ in 0..40 {
                handed.extend(leaf_claim(&store, "orders").await.unwrap());
            }
            handed
        })
    };
    let client = reqwest::Client::new();
    let mut ours = Vec::new();
    for _ in 0..20 {
        let (status, body) = fetch(&client, &server.url("/v1/segments/orders?count=300")).await;
        assert_eq!(status, 200, "{body}");
        let batch = json(&body);
        ours.extend(
            batch["ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_i64().unwrap()),
        );
    }
    let (status, one) = fetch(&client, &server.url("/api/segment/get/orders")).await;
    assert_eq!(status, 200, "{one}");
    ours.push(one.trim().parse().unwrap());
    assert!(
        ours.iter().all(|&n| n > highest_before),
        "a number below Leaf's earlier ones"
    );
    numbers.extend(leaf.await.unwrap());
    numbers.extend(&ours);
    let all: Vec<u64> = numbers.iter().map(|&n| u64::try_from(n).unwrap()).collect();
    assert_no_equal(&all, "Leaf's segment servers and uidgen");

    // Leaf's monitor pages, on uidgen.
    let (status, cache) = fetch(&client, &server.url("/cache")).await;
    assert_eq!(status, 200, "{cache}");
    assert!(
        cache.contains("<th>value0</th>") && cache.contains("<td>orders</td>"),
        "{cache}"
    );
    let (status, db) = fetch(&client, &server.url("/db")).await;
    assert_eq!(status, 200, "{db}");
    assert!(
        db.contains("<th>max</th>") && db.contains("<td>orders</td>"),
        "{db}"
    );
    let id = Layout::snowflake()
        .unwrap()
        .compose(&Layout::snowflake().unwrap().parts(5_000, 39, 3448))
        .unwrap();
    let (status, decoded) = fetch(
        &client,
        &server.url(&format!("/decodeSnowflakeId?snowflakeId={id}")),
    )
    .await;
    assert_eq!(status, 200, "{decoded}");
    assert_eq!(
        json(&decoded),
        serde_json::json!({"timestamp": "1288834979657(2010-11-04 01:42:59.657)",
            "workerId": "39", "sequenceId": "3448"})
    );
    let (_, bad) = fetch(&client, &server.url("/decodeSnowflakeId?snowflakeId=x")).await;
    assert!(json(&bad)["errorMsg"].is_string(), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_tag_of_several_databases_cannot_be_served_beside_java_leaf() {
    let url = fresh_url(TestDb::MySql).await.unwrap();
    let store = Store::connect(&url).await.unwrap();
    store.upsert_tag("orders", 100, None).await.unwrap();
    store
        .upsert_group_tag("odd", 100, None, uidgen_store::Residue::new(2, 1).unwrap())
        .await
        .unwrap();
    let env = [("UIDGEN_STORE", url.as_str())];
    let (ok, out) = takeover(&["leaf", "--beside", "--check"], &env);
    assert!(!ok, "{out}");
    assert!(
        out.contains("tags [\"odd\"] are served from several databases"),
        "{out}"
    );
    // Without Leaf beside it, uidgen takes the tags over.
    let (ok, out) = takeover(&["leaf"], &env);
    assert!(ok, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_tag_outside_the_tag_alphabet_is_named_before_the_switch_and_still_served() {
    let url = sqlite_url("leaf-alphabet");
    let store = Store::connect(&url).await.unwrap();
    store.upsert_tag("orders", 100, None).await.unwrap();
    // Java Leaf takes any varchar(128); uidgen's own calls refuse a space.
    run_script(
        &store,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('order items', 1, 100)",
    )
    .await
    .unwrap();
    store.close().await;
    let env = [("UIDGEN_STORE", url.as_str())];
    let (ok, out) = takeover(&["leaf", "--check"], &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("tags [\"order items\"] are outside uidgen's tag alphabet")
            && out.contains("cannot lease or change them"),
        "{out}"
    );
    // What the note says: served under its name, refused a lease.
    let server = Server::start(&[], &env);
    let client = reqwest::Client::new();
    let (status, one) = fetch(&client, &server.url("/api/segment/get/order%20items")).await;
    assert_eq!(status, 200, "{one}");
    assert!(one.trim().parse::<i64>().unwrap() >= 1, "{one}");
    let leased = client
        .post(server.url("/v1/segments/order%20items/lease?size=10"))
        .send()
        .await
        .unwrap();
    assert_eq!(leased.status(), 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn java_leaf_snowflake_servers_and_uidgen_share_one_zookeeper_path() {
    let connect = test_connect();
    // Three Leaf servers ran first: worker ids 0, 1, 2, and their caches on this host.
    let conf = temp_dir("leafconf");
    let mut before = Vec::new();
    for port in 7000..7003_u16 {
        let leaf = JavaLeaf::new(&connect, "orders", port).await;
        let id = leaf.init().await.unwrap();
        std::fs::create_dir_all(conf.join(port.to_string())).unwrap();
        // updateLocalWorkerID: `workerID=N` in {tmpdir}/{leaf.name}/leafconf/{port}/.
        std::fs::write(
            conf.join(format!("{port}/workerID.properties")),
            format!("workerID={id}"),
        )
        .unwrap();
        let generator = SnowflakeGenerator::new(Layout::leaf().unwrap(), id, SystemClock).unwrap();
        before.extend(generator.next_ids(2_000).unwrap());
    }
    let highest_before = *before.iter().max().unwrap();
    let store = sqlite_url("leaf-zk");
    let env = [
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
        ("UIDGEN_ZK_CONNECT", connect.as_str()),
        ("UIDGEN_ZK_NAME", "orders"),
        ("UIDGEN_LAYOUT", "leaf"),
        ("UIDGEN_GENERATOR", "snowflake"),
        // A Leaf namespace used ids from 0.
        ("UIDGEN_WORKER_RANGE", "0-1023"),
    ];
    let conf_arg = conf.to_string_lossy().into_owned();
    let check = ["leaf", "--beside", "--leaf-conf", &conf_arg, "--check"];

    // A cache whose id no Leaf node reserves: that Leaf would start on it with ZooKeeper down.
    std::fs::create_dir_all(conf.join("7100")).unwrap();
    std::fs::write(
        conf.join("7100/workerID.properties"),
        "#Leaf\nworkerID=40\n",
    )
    .unwrap();
    let (ok, out) = takeover(&check, &env);
    assert!(!ok, "{out}");
    assert!(
        out.contains("says workerID=40, but no Leaf node of port 7100"),
        "{out}"
    );
    std::fs::remove_dir_all(conf.join("7100")).unwrap();
    let (ok, out) = takeover(&check, &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("Leaf's forever nodes hold worker ids [0-2]"),
        "{out}"
    );
    let (ok, out) = takeover(&check[..4], &env);
    assert!(ok, "{out}");

    // Layouts and assigners that would not keep out of Leaf's worker ids are refused.
    let other_epoch = [&env[..], &[("UIDGEN_LAYOUT_EPOCH", "2020-01-01")]].concat();
    assert!(refused_start(&other_epoch).contains("is not Leaf's"));
    let leased = [
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ("UIDGEN_LAYOUT", "leaf"),
    ];
    let log = refused_start(&leased);
    assert!(
        log.contains("/snowflake/orders") && log.contains("zookeeper.name"),
        "{log}"
    );

    // uidgen serves while Leaf servers keep starting and issuing beside it.
    let server = Server::start(&[], &env);
    let ours_worker = server.worker_id();
    assert!(
        ours_worker > 2,
        "uidgen took Leaf's worker id {ours_worker}"
    );
    let leaf_side = {
        let connect = connect.clone();
        tokio::spawn(async move {
            let (mut workers, mut ids) = (Vec::new(), Vec::new());
            for port in 7003..7010_u16 {
                let leaf = JavaLeaf::new(&connect, "orders", port).await;
                let id = leaf.init().await.unwrap();
                workers.push(id);
                leaf.report(id).await;
                let generator =
                    SnowflakeGenerator::new(Layout::leaf().unwrap(), id, SystemClock).unwrap();
                ids.extend(generator.next_ids(3_000).unwrap());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (workers, ids)
        })
    };
    let client = reqwest::Client::new();
    let mut ours = Vec::new();
    for _ in 0..10 {
        let (status, body) = fetch(&client, &server.url("/v1/ids?count=2000")).await;
        assert_eq!(status, 200, "{body}");
        ours.extend(ids_in(&json(&body)));
    }
    let (workers, theirs) = leaf_side.await.unwrap();
    assert!(
        !workers.contains(&ours_worker),
        "Leaf {workers:?} took uidgen's {ours_worker}"
    );
    assert!(
        ours.iter().all(|&id| id > highest_before),
        "below Leaf's earlier IDs"
    );
    let all: Vec<u64> = before.into_iter().chain(theirs).chain(ours).collect();
    assert_no_equal(&all, "Leaf's snowflake servers and uidgen");
}
