//! Tinyid: its `tiny_id_info` biz types and `tiny_id_token` tokens on MariaDB, moved to uidgen,
//! and its clients' routes answered by uidgen with their own tokens.

use uidgen_store::testing::peers::{tinyid_claim, tinyid_ddl, tinyid_samples};
use uidgen_store::testing::{TestDb, fresh_store, peer_transaction, run_script};

use super::common::{Server, fetch, json};
use super::{assert_no_equal, refused_start, takeover};

const TOKEN: &str = "0f673adf80504e2eaa552f5d791b644c";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tinyids_clients_switch_to_uidgen_by_host_name_above_every_number_tinyid_handed_out() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, tinyid_ddl(TestDb::MySql)).await.unwrap();
    tinyid_samples(&store).await.unwrap();
    // Tinyid served: two segments of `test`, one of `test_odd` (its clients hold them). Each
    // biz type is a sequence of its own: numbers are compared within one.
    let (mut test, mut odd): (Vec<i64>, Vec<i64>) = (Vec::new(), Vec::new());
    for biz in ["test", "test", "test_odd"] {
        let (old, new) = tinyid_claim(&store, biz).await.unwrap().unwrap();
        if biz == "test_odd" {
            odd.extend((old + 1..=new).filter(|n| n % 2 == 1));
        } else {
            test.extend(old + 1..=new);
        }
    }
    let highest = (*test.iter().max().unwrap(), *odd.iter().max().unwrap());
    let env = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_AUTH_REQUIRED", "true"),
    ];

    let (ok, out) = takeover(&["tinyid", "--beside", "--check"], &env);
    assert!(!ok, "{out}");
    assert!(
        out.contains("Tinyid's servers cannot keep running beside uidgen"),
        "{out}"
    );
    let (ok, out) = takeover(&["tinyid", "--check"], &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("tag test from 200002") && out.contains("tag test_odd from 100002"),
        "{out}"
    );
    let (ok, out) = takeover(&["tinyid"], &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("caller token tinyid-1 holds one of Tinyid's tokens"),
        "{out}"
    );
    // A Tinyid server left running claims nothing more.
    assert_eq!(tinyid_claim(&store, "test").await.unwrap(), None);

    let off = [&env[..], &[("UIDGEN_SEGMENT_ENABLED", "false")]].concat();
    assert!(refused_start(&off).contains("segment.enabled = true"));

    let server = Server::start(&[], &env);
    let client = reqwest::Client::new();
    let simple = |query: &str| server.url(&format!("/tinyid/id/nextIdSimple?{query}"));
    let (status, text) = fetch(
        &client,
        &simple(&format!("bizType=test&batchSize=3&token={TOKEN}")),
    )
    .await;
    assert_eq!((status, text.as_str()), (200, "200002,200003,200004"));
    // Tinyid's answers to a refused token: nothing, or code 5.
    assert_eq!(
        fetch(&client, &simple("bizType=test&token=wrong")).await,
        (200, String::new())
    );
    let (_, body) = fetch(
        &client,
        &server.url("/tinyid/id/nextId?bizType=test&token=wrong"),
    )
    .await;
    assert_eq!(
        json(&body),
        serde_json::json!({"data": null, "code": 5, "message": "token is error"})
    );
    // What no Tinyid client sends is refused with 400, before any number is taken: no biz
    // type or one no tag can be, a batch size its `Integer` cannot hold or below 1, an empty
    // token.
    for query in [
        format!("batchSize=2&token={TOKEN}"),
        format!("bizType=%20test&token={TOKEN}"),
        format!("bizType=test&batchSize=0&token={TOKEN}"),
        format!("bizType=test&batchSize=2147483648&token={TOKEN}"),
        format!("bizType=test&batchSize=two&token={TOKEN}"),
        "bizType=test&token=".to_owned(),
    ] {
        let (status, body) = fetch(&client, &simple(&query)).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(json(&body)["code"], "invalid_parameter", "{query}: {body}");
    }
    let (_, body) = fetch(
        &client,
        &server.url(&format!(
            "/tinyid/id/nextId?bizType=test&batchSize=2&token={TOKEN}"
        )),
    )
    .await;
    let body = json(&body);
    assert_eq!(
        (body["code"].as_i64(), body["message"].as_str()),
        (Some(200), Some(""))
    );
    let mut ours: Vec<i64> = body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    ours.extend(text.split(',').map(|n| n.parse::<i64>().unwrap()));
    assert!(
        ours.iter().all(|&n| n > highest.0),
        "a number Tinyid may have handed out"
    );
    test.extend(&ours);
    // The client's call, a POST: a segment of test_odd, its numbers odd, above Tinyid's.
    let segment = super::common::text(client.post(server.url(&format!(
        "/tinyid/id/nextSegmentIdSimple?token={TOKEN}&bizType=test_odd"
    ))))
    .await;
    let fields: Vec<i64> = segment.split(',').map(|n| n.parse().unwrap()).collect();
    let [current, loading, max, delta, remainder] = fields[..] else {
        panic!("{segment}");
    };
    assert_eq!((delta, remainder), (2, 1), "{segment}");
    assert!(
        current >= 100_001 && loading > current && max > loading,
        "{segment}"
    );
    let ours_odd: Vec<i64> = (current + 1..=max)
        .filter(|n| n % delta == remainder)
        .collect();
    assert!(
        ours_odd.iter().all(|&n| n > highest.1),
        "a number Tinyid may have handed out"
    );
    odd.extend(ours_odd);
    let (_, body) = fetch(
        &client,
        &server.url(&format!(
            "/tinyid/id/nextSegmentId?token={TOKEN}&bizType=test"
        )),
    )
    .await;
    let data = &json(&body)["data"];
    assert!(data["currentId"].as_i64().unwrap() >= 200_004, "{body}");
    for (biz, numbers) in [("test", test), ("test_odd", odd)] {
        let numbers: Vec<u64> = numbers
            .into_iter()
            .map(|n| u64::try_from(n).unwrap())
            .collect();
        assert_no_equal(&numbers, biz);
    }
    drop(server);

    // A biz type Tinyid serves again under a moved tag's name contradicts the decision.
    peer_transaction(
        &store,
        &["INSERT INTO tiny_id_info (biz_type, begin_id, max_id, step) VALUES ('test', 1, 1, 100)"],
    )
    .await
    .unwrap();
    let log = refused_start(&env);
    assert!(
        log.contains("Tinyid and uidgen would both hand out their numbers"),
        "{log}"
    );
}
