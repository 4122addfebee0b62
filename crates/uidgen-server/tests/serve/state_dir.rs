//! The per-host state directory (issue 18, point 4), with the real binary: defaults that do
//! not depend on the working directory. Every run here starts from a directory of its own and
//! names one state directory, as two shells or two service units on one host would.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{Server, binary, fetch, fresh_cwd, ids_in, run, temp_dir};

/// IDs each `uidgen gen` run asks for.
const GEN_COUNT: usize = 50_000;

/// How many IDs of `b` are also in `a`.
fn equal_ids(a: &[u64], b: &[u64]) -> usize {
    let a: HashSet<u64> = a.iter().copied().collect();
    b.iter().filter(|id| a.contains(id)).count()
}

/// How `uidgen gen` is told to use static worker id 5.
#[derive(Debug, Clone, Copy)]
enum StaticId {
    /// `--worker 5`: no store, the state file alone.
    Flag,
    /// `UIDGEN_WORKER_ASSIGNER=static UIDGEN_WORKER_ID=5`: registered in the default store, with
    /// the state file named (an absolute path, as a container requires).
    Config,
}

/// `uidgen gen -n N` with static worker id 5, spawned from its own working directory on
/// `state_dir`.
fn spawn_gen(state_dir: &Path, how: StaticId) -> std::process::Child {
    let count = GEN_COUNT.to_string();
    let mut command = Command::new(binary());
    match how {
        StaticId::Flag => command.args(["gen", "-n", &count, "--worker", "5"]),
        // Spelled out as the default would be: the zero-config store is this host's own, so
        // inside a container (CI's) a static id runs only with an explicit, absolute state file.
        StaticId::Config => command
            .args(["gen", "-n", &count])
            .env("UIDGEN_WORKER_ASSIGNER", "static")
            .env("UIDGEN_WORKER_ID", "5")
            .env(
                "UIDGEN_WORKER_STATE_FILE",
                state_dir.join("uidgen-worker-5.state"),
            ),
    };
    command
        .current_dir(fresh_cwd())
        .env("UIDGEN_STATE_DIR", state_dir)
        .env_remove("UIDGEN_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Issue 18: with the state file relative to the working directory, two runs with worker id 5
/// from two directories both started at floor 0 (83,616 equal IDs). Now both find one state
/// file: the second is refused while the first holds it, or waits past its mark.
#[test]
fn a_static_id_from_two_working_directories_never_repeats_an_id() {
    for how in [StaticId::Flag, StaticId::Config] {
        two_static_runs_from_two_working_directories(how);
    }
}

fn two_static_runs_from_two_working_directories(how: StaticId) {
    let state_dir = temp_dir("static-two-cwds").join("state");
    let children = [spawn_gen(&state_dir, how), spawn_gen(&state_dir, how)];
    let mut issued: Vec<Vec<u64>> = Vec::new();
    let mut refusals = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        if out.status.success() {
            let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.parse().unwrap())
                .collect();
            assert_eq!(ids.len(), GEN_COUNT, "{stderr}");
            issued.push(ids);
        } else {
            // The only acceptable failure: the other run holds worker id 5 (its state file's
            // lock on this host, or a claim a store records).
            assert!(
                stderr.contains("another process on this host uses it")
                    || stderr.contains("worker id 5"),
                "refused for another reason: {stderr}"
            );
            refusals.push(stderr);
        }
    }
    assert!(!issued.is_empty(), "both runs were refused: {refusals:?}");
    let equal = match issued.as_slice() {
        [a, b] => equal_ids(a, b),
        _ => 0,
    };
    println!(
        "{how:?}: {} run(s) issued {GEN_COUNT} IDs each, {} refused; equal IDs: {equal}",
        issued.len(),
        refusals.len()
    );
    assert_eq!(equal, 0, "two runs of worker id 5 issued {equal} equal IDs");
    assert!(state_dir.join("uidgen-worker-5.state").exists());
}

/// Issue 18: two zero-config servers started in two directories each made their own
/// `./uidgen.db`, both took worker 1 and issued identical IDs. Now the store is the state
/// directory's, so they draw from one `worker_node` table.
#[tokio::test(flavor = "multi_thread")]
async fn two_zero_config_servers_from_two_working_directories_take_distinct_worker_ids() {
    let state_dir = temp_dir("serve-two-cwds").join("state");
    let state = state_dir.to_str().unwrap();
    // No UIDGEN_STORE: the default `sqlite://uidgen.db`, wherever that resolves.
    let env = [("UIDGEN_STATE_DIR", state)];
    let cwds = [fresh_cwd(), fresh_cwd()];
    let a = Server::start_in(&cwds[0], &[], &env);
    let b = Server::start_in(&cwds[1], &[], &env);
    assert_ne!(a.worker_id(), b.worker_id(), "both took one worker id");
    for server in [&a, &b] {
        let log = server.log();
        assert!(
            log.contains(&format!("state directory: {state}")),
            "no start-up line naming the state directory:\n{log}"
        );
    }
    assert!(state_dir.join("uidgen.db").exists());
    for cwd in &cwds {
        let left: Vec<_> = std::fs::read_dir(cwd).unwrap().collect();
        assert!(
            left.is_empty(),
            "serve wrote into its working directory: {left:?}"
        );
    }

    let client = reqwest::Client::new();
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        for (server, ids) in [(&a, &mut from_a), (&b, &mut from_b)] {
            let (status, body) = fetch(&client, &server.url("/v1/ids?count=5000")).await;
            assert_eq!(status, 200, "{body}");
            ids.extend(ids_in(&serde_json::from_str(&body).unwrap()));
        }
    }
    let equal = equal_ids(&from_a, &from_b);
    println!(
        "workers {} and {}: {} IDs each, equal IDs: {equal}",
        a.worker_id(),
        b.worker_id(),
        from_a.len()
    );
    assert_eq!(equal, 0);
}

#[test]
fn relative_paths_and_defaults_land_in_the_state_directory_made_private() {
    let state_dir = temp_dir("relative").join("made/on/demand");
    let state = state_dir.to_str().unwrap();
    let (status, _, err) = run(
        &["gen", "-n", "3", "--worker", "3"],
        &[
            ("UIDGEN_STATE_DIR", state),
            ("UIDGEN_WORKER_STATE_FILE", "marks/w3.state"),
        ],
    );
    assert!(status.success(), "{err}");
    assert!(state_dir.join("marks/w3.state").exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state_dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "the state directory is {mode:o}");
    }

    // The default state file and the default store: in the state directory, never the cwd.
    let (status, _, err) = run(
        &["gen", "-n", "3", "--worker", "4"],
        &[("UIDGEN_STATE_DIR", state)],
    );
    assert!(status.success(), "{err}");
    assert!(state_dir.join("uidgen-worker-4.state").exists());
    let (status, _, err) = run(&["gen", "-n", "3"], &[("UIDGEN_STATE_DIR", state)]);
    assert!(status.success(), "{err}");
    assert!(state_dir.join("uidgen.db").exists());
}

#[test]
fn a_relative_state_directory_is_refused_naming_the_key() {
    let (status, _, err) = run(
        &["gen", "-n", "1", "--worker", "1"],
        &[("UIDGEN_STATE_DIR", "state")],
    );
    assert!(!status.success());
    assert!(
        err.contains("invalid config key `state_dir`") && err.contains("absolute"),
        "{err}"
    );
}
