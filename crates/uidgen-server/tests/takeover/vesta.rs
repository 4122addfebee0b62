//! Vesta: machine ids held through its `DB_MACHINE_ID_PROVIDER` (MariaDB) and by property,
//! uidgen's ranges kept off them while Vesta's processes go on, and `uidgen gen` in Vesta's
//! embedded range.

use uidgen_core::{DefaultUidGenerator, GenMethod, Layout, SystemClock, UidGenerator};
use uidgen_store::testing::{TestDb, fresh_store};

use super::common::{Server, fetch, ids_in, json, run, vesta_machine_table};
use super::{assert_no_equal, refused_start, takeover};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uidgen_keeps_off_every_machine_id_vesta_holds_and_gen_takes_the_embedded_range() {
    let (store, url) = fresh_store(TestDb::MySql).await.unwrap();
    // Vesta's script: the table, and its procedure's 1,024 rows without an IP; two hosts'
    // DbMachineIdProvider.init took an id each (the lowest free, 0 and 1).
    vesta_machine_table(&store).await;
    // And two REST servers run with `vesta.machine=1023` and `1022`.
    let layout = Layout::vesta_max_peak().unwrap();
    let mut vesta_ids = Vec::new();
    for machine in [1023, 1022, 0, 1] {
        let generator = DefaultUidGenerator::new(layout.clone(), machine, SystemClock).unwrap();
        for id in generator.next_ids(3_000).unwrap() {
            vesta_ids.push(layout.with_method(id, GenMethod::Rest.value()).unwrap());
        }
    }

    // uidgen's defaults on Vesta's layout (servers 924-1023, clients 0-923) hold Vesta's ids.
    let defaults = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "vesta_max_peak"),
    ];
    let (ok, out) = takeover(&["vesta", "--machines", "1022-1023", "--check"], &defaults);
    assert!(!ok, "{out}");
    assert!(
        out.contains("`worker.range` 924-1023 holds Vesta's machine ids 1022-1023"),
        "{out}"
    );
    assert!(
        out.contains("`worker.fallback_range` 0-923 holds Vesta's machine ids 0-1"),
        "{out}"
    );
    let kept_off = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "vesta_max_peak"),
        ("UIDGEN_WORKER_RANGE", "924-1021"),
        ("UIDGEN_WORKER_FALLBACK_RANGE", "2-923"),
    ];
    let (ok, out) = takeover(&["vesta", "--machines", "1022-1023", "--beside"], &kept_off);
    assert!(ok, "{out}");
    assert!(out.contains("machine ids held by a host: [0-1]"), "{out}");

    // The defaults contradict the decision now; a layout Vesta's IDs could equal too.
    let log = refused_start(&defaults);
    assert!(log.contains("holds Vesta's machine ids 1022-1023"), "{log}");
    let snowflake = [
        ("UIDGEN_STORE", url.as_str()),
        ("UIDGEN_LAYOUT", "snowflake"),
    ];
    assert!(refused_start(&snowflake).contains("is not one of Vesta's"));

    // `uidgen gen`, Vesta's embedded mode: a machine id of the embedded range, none of Vesta's.
    let (status, out, err) = run(&["gen", "-n", "3"], &kept_off);
    assert!(status.success(), "{err}");
    for line in out.lines() {
        let machine = layout.decode(line.parse().unwrap()).unwrap().parts.worker;
        assert!(
            (2..=923).contains(&machine),
            "gen stamped machine id {machine}"
        );
    }

    // A server beside Vesta's processes: 0 equal IDs.
    let server = Server::start(&[], &kept_off);
    assert!((924..=1021).contains(&server.worker_id()));
    let client = reqwest::Client::new();
    let mut ours = Vec::new();
    for _ in 0..6 {
        let (status, body) = fetch(&client, &server.url("/v1/ids?count=2000")).await;
        assert_eq!(status, 200, "{body}");
        ours.extend(ids_in(&json(&body)));
    }
    let all: Vec<u64> = vesta_ids.into_iter().chain(ours).collect();
    assert_no_equal(&all, "Vesta's processes and uidgen");
}
