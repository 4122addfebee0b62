//! Baidu uid-generator: its `WORKER_NODE` on MariaDB (a table apart from uidgen's `worker_node`,
//! as Baidu's script makes it on Linux), its IDs, and the two ways uidgen continues them.

use uidgen_core::{DefaultUidGenerator, Layout, SystemClock, UidGenerator};
use uidgen_store::testing::peers::{BAIDU_DDL_MYSQL, baidu_start};
use uidgen_store::testing::{TestDb, fresh_store, run_script};

use super::common::{Server, fetch, ids_in, json};
use super::{assert_no_equal, refused_start, takeover};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_baidu_preset_on_baidus_rows_is_refused_and_baidu_continued_sorts_above_them() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, BAIDU_DDL_MYSQL).await.unwrap();
    // Baidu's fleet (its default layout, epoch 2016-05-20) started three times and issued IDs up
    // to its layout's end, 2024-11-20.
    let legacy = Layout::baidu_legacy().unwrap();
    let mut legacy_ids = Vec::new();
    for n in 1..=3 {
        let worker = baidu_start(&store, n).await.unwrap();
        for back in 0..100 {
            let parts = legacy.parts(legacy.max_time() - back, worker, back % 7);
            legacy_ids.push(legacy.compose(&parts).unwrap());
        }
    }
    let highest_legacy = *legacy_ids.iter().max().unwrap();
    let env = [("UIDGEN_STORE", url.as_str())];

    // No decision yet: the default layout (`baidu`, the same bits from 2026) on a store whose
    // WORKER_NODE uidgen's counter does not see is refused, and says what to run.
    let log = refused_start(&env);
    assert!(log.contains("uidgen takeover baidu --check"), "{log}");
    // The check says why, and names baidu_continued.
    let (ok, out) = takeover(&["baidu", "--check"], &env);
    assert!(!ok, "{out}");
    assert!(out.contains("layout.preset = \"baidu_continued\""), "{out}");
    assert!(
        out.contains("WORKER_NODE: 3 rows, worker ids up to 3"),
        "{out}"
    );

    // With baidu_continued: checked, then recorded.
    let continued = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "baidu_continued"),
    ];
    let (ok, out) = takeover(&["baidu", "--check"], &continued);
    assert!(ok, "{out}");
    assert!(
        out.contains("every new ID at 2^63 or above") && out.contains("nothing recorded"),
        "{out}"
    );
    assert!(
        store.takeover("baidu").await.unwrap().is_none(),
        "--check records nothing"
    );
    let (ok, out) = takeover(&["baidu"], &continued);
    assert!(ok, "{out}");
    assert!(out.contains("recorded"), "{out}");

    // A start that contradicts the decision is refused, naming the layout to use.
    let log = refused_start(&env);
    assert!(
        log.contains("layout.preset = \\\"baidu_continued\\\"") || log.contains("baidu_continued"),
        "{log}"
    );
    assert!(log.contains("recorded by `uidgen takeover baidu`"), "{log}");

    // The decision's layout serves: every new ID above every Baidu ID, none equal.
    let server = Server::start(&[], &continued);
    let client = reqwest::Client::new();
    let mut ids = legacy_ids.clone();
    for _ in 0..5 {
        let (status, body) = fetch(&client, &server.url("/v1/ids?count=1000")).await;
        assert_eq!(status, 200, "{body}");
        let new = ids_in(&json(&body));
        assert!(
            new.iter().all(|&id| id > highest_legacy && id >= 1 << 63),
            "{new:?}"
        );
        ids.extend(new);
    }
    assert_no_equal(&ids, "Baidu's IDs and baidu_continued's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baidu_apps_and_uidgen_beside_them_draw_worker_ids_from_one_counter() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    run_script(&store, BAIDU_DDL_MYSQL).await.unwrap();
    // A fleet with its own epochStr, whose 28 bits of seconds last until 2030.
    let epoch = "2022-01-01";
    let layout = Layout::baidu(epoch).unwrap();
    let mut before = Vec::new();
    for n in 1..=2 {
        let worker = baidu_start(&store, n).await.unwrap();
        let generator = DefaultUidGenerator::new(layout.clone(), worker, SystemClock).unwrap();
        before.extend(generator.next_ids(2_000).unwrap());
    }
    let highest_before = *before.iter().max().unwrap();
    let env = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "baidu"),
        ("UIDGEN_LAYOUT_EPOCH", epoch),
    ];
    let legacy = ["baidu", "--legacy-epoch", epoch, "--beside"];
    let (ok, out) = takeover(&[&legacy[..], &["--check"]].concat(), &env);
    assert!(ok, "{out}");
    assert!(out.contains("Baidu's own, continued"), "{out}");
    assert!(
        out.contains("the takeover makes worker_node a view of WORKER_NODE"),
        "{out}"
    );
    let (ok, out) = takeover(&legacy, &env);
    assert!(ok, "{out}");
    assert!(
        out.contains("worker_node is a view of Baidu's WORKER_NODE now"),
        "{out}"
    );

    // Worker ids from anywhere but Baidu's counter are refused.
    let shifted = [&env[..], &[("UIDGEN_WORKER_RANGE", "1000-max")]].concat();
    let log = refused_start(&shifted);
    assert!(
        log.contains("must come from Baidu's WORKER_NODE counter"),
        "{log}"
    );

    // uidgen serves while Baidu's apps keep starting and issuing beside it.
    let server = Server::start(&[], &env);
    let ours_worker = server.worker_id();
    assert!(
        ours_worker > 2,
        "uidgen's worker id {ours_worker} is one Baidu had"
    );
    let baidu = {
        let (store, layout) = (store.clone(), layout.clone());
        tokio::spawn(async move {
            let (mut workers, mut ids) = (Vec::new(), Vec::new());
            for n in 3..8 {
                let worker = baidu_start(&store, n).await.unwrap();
                workers.push(worker);
                let generator =
                    DefaultUidGenerator::new(layout.clone(), worker, SystemClock).unwrap();
                ids.extend(generator.next_ids(3_000).unwrap());
            }
            (workers, ids)
        })
    };
    let client = reqwest::Client::new();
    let mut ours = Vec::new();
    for _ in 0..10 {
        let (status, body) = fetch(&client, &server.url("/v1/ids?count=1500")).await;
        assert_eq!(status, 200, "{body}");
        ours.extend(ids_in(&json(&body)));
    }
    let (workers, theirs) = baidu.await.unwrap();
    assert!(
        !workers.contains(&ours_worker),
        "{workers:?} and uidgen's {ours_worker}"
    );
    // Baidu's IDs from before the switch are ordered below every new one.
    assert!(
        ours.iter().all(|&id| id > highest_before),
        "an ID below Baidu's earlier ones"
    );
    let all: Vec<u64> = before.into_iter().chain(theirs).chain(ours).collect();
    assert_no_equal(&all, "Baidu's apps and uidgen beside them");
}
