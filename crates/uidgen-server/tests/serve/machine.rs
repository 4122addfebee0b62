//! Issue #9 with the real `uidgen` binary: the zero-config `machine` assigner across OS
//! processes on one host, the `keyworker` layout's decoded machine and process parts, and an
//! epoch configured for presets other than `baidu`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{Server, assert_unique, binary, fetch, fresh_cwd, ids_in, json, run};
use uidgen_core::Layout;
use uidgen_worker::{MachinePart, MachineWorkerIdAssigner, WorkerAssignment, WorkerIdAssigner};

/// A state directory of its own for one test.
fn state_dir(name: &str) -> PathBuf {
    fresh_cwd().join(format!("machine-{name}"))
}

/// The environment of a process using the machine assigner with `dir`.
fn machine_env<'a>(dir: &'a str, store: &'a str) -> Vec<(&'static str, &'a str)> {
    vec![
        ("UIDGEN_WORKER_ASSIGNER", "machine"),
        ("UIDGEN_WORKER_STATE_DIR", dir),
        ("UIDGEN_LAYOUT", "keyworker"),
        ("UIDGEN_STORE", store),
        ("UIDGEN_SEGMENT_ENABLED", "false"),
    ]
}

fn sqlite(dir: &Path, name: &str) -> String {
    format!("sqlite://{}", dir.join(format!("{name}.db")).display())
}

/// Hold every process value of this host's machine part in `dir` except `free`, as other
/// processes on the host would: the binaries started next can only take the values left.
async fn hold_all_but(dir: &Path, machine: u64, free: &[u64]) -> Vec<WorkerAssignment> {
    let layout = Layout::keyworker().unwrap();
    let mut held = Vec::new();
    for process in (0..32).filter(|p| !free.contains(p)) {
        let assignment = MachineWorkerIdAssigner::new(dir)
            .with_machine_part(machine)
            .with_process_id(u32::try_from(process).unwrap())
            .assign(&layout)
            .await
            .unwrap();
        assert_eq!(assignment.worker_id, (machine << 5) | process);
        held.push(assignment);
    }
    held
}

/// `count` IDs from `server`, in concurrent batches of 20,000.
async fn hammer(client: &reqwest::Client, server: &Server, count: usize) -> Vec<u64> {
    let mut batches = tokio::task::JoinSet::new();
    for _ in 0..count / 20_000 {
        let request = client.get(server.url("/v1/ids?count=20000")).send();
        batches.spawn(async move {
            let body = request.await.unwrap().text().await.unwrap();
            let ids = ids_in(&json(&body));
            assert_eq!(ids.len(), 20_000, "{body}");
            ids
        });
    }
    batches.join_all().await.into_iter().flatten().collect()
}

/// What `/v1/ids/{id}` says an ID's machine and process parts are.
async fn parts_of(client: &reqwest::Client, server: &Server, id: u64) -> (u64, u64, u64) {
    let (_, body) = fetch(client, &server.url(&format!("/v1/ids/{id}"))).await;
    let decoded = json(&body);
    assert_eq!(decoded["layout"], "keyworker", "{body}");
    let field = |name: &str| {
        decoded[name]
            .as_u64()
            .unwrap_or_else(|| panic!("{name}: {body}"))
    };
    (field("worker"), field("machine"), field("process"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_one_host_take_the_free_process_values_and_never_collide() {
    let dir = state_dir("free-values");
    let dir_text = dir.display().to_string();
    let machine = MachinePart::detect().value;
    // 30 of the 32 values are held: two servers must take exactly 7 and 20, whatever their
    // pids, and a third process finds none left.
    let mut held = hold_all_but(&dir, machine, &[7, 20]).await;

    let cwd = fresh_cwd();
    let (store_a, store_b) = (sqlite(&cwd, "a"), sqlite(&cwd, "b"));
    let a = Server::start(&[], &machine_env(&dir_text, &store_a));
    let b = Server::start(&[], &machine_env(&dir_text, &store_b));
    assert!(a.log().contains("machine+process worker id"), "{}", a.log());

    let client = reqwest::Client::new();
    let (ids_a, ids_b) = tokio::join!(hammer(&client, &a, 200_000), hammer(&client, &b, 200_000));
    let (worker_a, machine_a, process_a) = parts_of(&client, &a, ids_a[0]).await;
    let (worker_b, machine_b, process_b) = parts_of(&client, &b, ids_b[0]).await;
    assert_eq!(
        (machine_a, machine_b),
        (machine, machine),
        "one host, one machine part"
    );
    let mut processes = [process_a, process_b];
    processes.sort_unstable();
    assert_eq!(processes, [7, 20], "the two free values, one each");
    assert_eq!(worker_a, (machine << 5) | process_a);
    assert_eq!(worker_b, (machine << 5) | process_b);

    // Vesta's explain shows both parts too.
    let (_, body) = fetch(&client, &a.url(&format!("/expid?id={}", ids_a[0]))).await;
    let explained = json(&body);
    assert_eq!(
        (explained["machine"].as_u64(), explained["process"].as_u64()),
        (Some(machine), Some(process_a)),
        "{body}"
    );
    // ... and Vesta's make takes them back: machine and process, as explain names them.
    let makeid = format!(
        "/makeid?time={}&seq={}&machine={machine}&process={process_a}",
        explained["time"], explained["seq"]
    );
    let remade = client.get(a.url(&makeid)).send().await.unwrap();
    assert_eq!(remade.text().await.unwrap(), ids_a[0].to_string());
    let without_process = format!("/makeid?time=1&seq=0&machine={machine}");
    let refused = client.get(a.url(&without_process)).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 400);

    // All 32 held: a third process is refused with the typed error, in one line.
    let env = machine_env(&dir_text, &store_a);
    let (status, _, err) = run(&["gen", "-n", "5"], &env);
    assert!(!status.success());
    assert!(
        err.contains(&format!(
            "all 32 process values of machine part {machine} are in use"
        )),
        "{err}"
    );

    // One value freed (its holder stopped): the next process takes exactly that one.
    held.retain(|assignment| assignment.worker_id != (machine << 5) | 3);
    let (status, out, err) = run(&["gen", "-n", "50000"], &env);
    assert!(status.success(), "{err}");
    let ids_c: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids_c.len(), 50_000);
    let layout = Layout::keyworker().unwrap();
    let workers: HashSet<u64> = ids_c
        .iter()
        .map(|&id| layout.decompose(id).unwrap().worker)
        .collect();
    assert_eq!(workers, HashSet::from([(machine << 5) | 3]));

    let (status, out, err) = run(
        &["decode", "--layout", "keyworker", &ids_c[0].to_string()],
        &[],
    );
    assert!(status.success(), "{err}");
    assert!(
        out.contains(&format!(
            " worker={} machine={machine} process=3 sequence=",
            (machine << 5) | 3
        )),
        "{out}"
    );

    let mut all = ids_a;
    all.extend(ids_b);
    all.extend(ids_c);
    let total = all.len();
    assert_eq!(assert_unique(all).len(), total);
    drop(held);
}

/// Two `uidgen gen` processes started together on one state directory: if they run at the same
/// time they hold different values; if one ends first, the other may take its value again, but
/// only past its mark. Either way no ID repeats.
#[test]
fn two_gen_processes_started_together_never_collide() {
    let dir = state_dir("gen-pair");
    let dir_text = dir.display().to_string();
    let children: Vec<_> = (0..2)
        .map(|_| {
            let cwd = fresh_cwd();
            Command::new(binary())
                .current_dir(&cwd)
                .env("UIDGEN_STATE_DIR", &cwd)
                .args(["gen", "-n", "300000"])
                .envs(machine_env(&dir_text, &sqlite(&cwd, "store")))
                .env_remove("UIDGEN_CONFIG")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut all = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        assert_eq!(ids.len(), 300_000);
        all.extend(ids);
    }
    assert_eq!(assert_unique(all).len(), 600_000);
}

#[test]
fn a_custom_epoch_on_leaf_and_snowflake_round_trips_through_config_and_decode() {
    // A Leaf deployment whose twepoch was 2020-01-01 continues its ID space.
    for preset in ["leaf", "snowflake"] {
        let env = [
            ("UIDGEN_LAYOUT", preset),
            ("UIDGEN_LAYOUT_EPOCH", "2020-01-01"),
        ];
        let (status, out, err) = run(&["gen", "-n", "3", "--worker", "3"], &env);
        assert!(status.success(), "{preset}: {err}");
        let id = out.lines().next().unwrap().to_owned();
        let layout = Layout::preset_with_epoch(preset, Some("2020-01-01")).unwrap();
        let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
        let decoded = layout.decode_str(&id).unwrap();
        assert!(
            now.abs_diff(decoded.timestamp_ms) < 60_000,
            "{preset}: {decoded:?}"
        );

        // `decode` with the same configuration gives back the time it was made at.
        let (status, out, err) = run(&["decode", &id], &env);
        assert!(status.success(), "{err}");
        let expected = format!("time={} worker=3 ", decoded.timestamp_iso8601());
        assert!(out.contains(&expected), "{preset}: {out}");
        // The same flags on the command line agree; the scheme's own epoch reads another time.
        let (_, flags, _) = run(
            &["decode", "--layout", preset, "--epoch", "2020-01-01", &id],
            &[],
        );
        assert_eq!(flags, out);
        let (_, own_epoch, _) = run(&["decode", "--layout", preset, &id], &[]);
        assert!(!own_epoch.contains(&expected), "{own_epoch}");
    }
}

#[test]
fn a_bad_epoch_names_the_key() {
    for (preset, epoch, reason) in [
        ("leaf", "2999-01-01", "lies in the future"),
        ("snowflake", "sometime", "cannot parse epoch"),
        ("baidu_legacy", "2020-01-01", "use the baidu preset"),
    ] {
        let env = [("UIDGEN_LAYOUT", preset), ("UIDGEN_LAYOUT_EPOCH", epoch)];
        let (status, _, err) = run(&["decode", "1"], &env);
        assert!(!status.success(), "{preset} {epoch}");
        assert!(
            err.contains("invalid config key `layout.epoch`") && err.contains(reason),
            "{preset} {epoch}: {err}"
        );
    }
}
