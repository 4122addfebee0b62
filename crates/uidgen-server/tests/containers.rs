//! Issue 18 with the real binary: `uidgen serve` in emulated containers, each in its own pid,
//! mount and network namespace (`unshare --pid --net --fork --mount-proc`), with a Docker-style
//! MAC on its `eth0` and its own state directory, as containers started from one image are:
//! same pid (1), same hostname, same machine id, nothing local shared.
//!
//! - With a shared store (PostgreSQL, reached through its unix socket, a path the network
//!   namespaces share), the machine assigner gives the two containers distinct worker ids and
//!   their IDs never repeat; a static id configured twice is refused the second time, naming
//!   the holder, and two static ids issue disjoint IDs.
//! - Without one, both assigners refuse to start, naming the setting that would let them.
//!
//! The kernel here has no `dummy` driver, so `eth0` is one end of a veth pair (both ends get
//! fixed MACs: the machine part hashes every MAC it sees). IDs are fetched over HTTP from
//! inside the container's network namespace (`nsenter --net curl`). A machine where
//! namespaces cannot be made fails these tests, saying so: they do not skip.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{assert_unique, binary, fresh_cwd, ids_in, json};
use uidgen_core::Layout;
use uidgen_store::testing::{TestDb, fresh_url};
use uidgen_worker::{HostIdentity, MachinePart};

/// IDs fetched from each container.
const PER_CONTAINER: usize = 50_000;
/// Where PostgreSQL's unix socket lives (a directory), overridable for other machines.
const SOCKET_DIR_VAR: &str = "UIDGEN_TEST_POSTGRES_SOCKET_DIR";

/// What sets up the container's network and mounts, then becomes `uidgen serve` (pid 1).
/// Arguments: the binary, eth0's MAC, the peer's MAC.
const SETUP: &str = r#"set -e
ip link set lo up
ip link add eth0 type veth peer name veth0
ip link set eth0 address "$2"
ip link set veth0 address "$3"
ip link set eth0 up
mount -t sysfs sysfs /sys
exec "$1" serve --listen 127.0.0.1:8080
"#;

/// Fail (not skip) with what is missing when this machine cannot make namespaces.
fn require_namespaces() {
    let out = Command::new("unshare")
        .args(["--pid", "--net", "--fork", "--mount-proc", "sh", "-c"])
        .arg("ip link add eth0 type veth peer name veth0 && mount -t sysfs sysfs /sys")
        .output();
    match out {
        Ok(out) if out.status.success() => {}
        Ok(out) => panic!(
            "cannot emulate containers here: `unshare --pid --net --fork --mount-proc` with a \
             veth pair and a sysfs mount failed ({}): {}; these tests need root (or \
             CAP_SYS_ADMIN and CAP_NET_ADMIN), util-linux's unshare and iproute2",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(error) => panic!("cannot run `unshare` (util-linux): {error}"),
    }
}

/// A fresh PostgreSQL database as the containers reach it: through the unix socket.
async fn shared_postgres() -> String {
    let tcp = fresh_url(TestDb::Postgres).await.unwrap();
    let name = tcp.rsplit('/').next().unwrap().to_owned();
    let dir = std::env::var(SOCKET_DIR_VAR).unwrap_or_else(|_| "/var/run/postgresql".into());
    assert!(
        PathBuf::from(&dir).join(".s.PGSQL.5432").exists(),
        "PostgreSQL's unix socket is not in {dir} (set {SOCKET_DIR_VAR}): the containers have \
         network namespaces of their own and reach the database only through it"
    );
    format!("postgres://postgres@localhost/{name}?host={dir}")
}

/// One emulated container running `uidgen serve`; killed when dropped.
struct Container {
    /// The `unshare` process: it sits in the container's network namespace.
    child: Child,
    log: Arc<Mutex<String>>,
}

impl Container {
    /// Start a container with `eth0`'s last MAC byte `n` and `envs`: `Ok` once it serves,
    /// `Err(log)` when it exits first.
    fn start(n: u8, envs: &[(&str, &str)]) -> Result<Container, String> {
        let mut child = Command::new("unshare")
            .args(["--pid", "--net", "--fork", "--mount-proc", "--kill-child"])
            .args(["sh", "-c", SETUP, "sh"])
            .arg(binary())
            .arg(format!("02:42:ac:11:00:{n:02x}"))
            .arg(format!("02:42:ac:11:ff:{n:02x}"))
            .current_dir(fresh_cwd())
            .env_remove("UIDGEN_CONFIG")
            .env("UIDGEN_GRPC_LISTEN", "")
            .env("UIDGEN_SEGMENT_ENABLED", "false")
            // Each container's own volume: its default store, state files and machine locks.
            .env("UIDGEN_STATE_DIR", fresh_cwd().join("state"))
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .envs(envs.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn unshare");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                if line.contains("uidgen serving") {
                    let _ = tx.send(true);
                }
            }
            let _ = tx.send(false); // the container ended
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(true) => Ok(Container { child, log }),
            Ok(false) => {
                let status = child.wait().unwrap();
                assert!(!status.success(), "a refusal exits non-zero");
                Err(log.lock().unwrap().clone())
            }
            Err(_) => {
                let _ = child.kill();
                panic!("no `uidgen serving` within 60 s:\n{}", log.lock().unwrap());
            }
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `count` IDs from the container's server, in batches of 10,000, fetched from inside its
    /// network namespace.
    fn ids(&self, count: usize) -> Vec<u64> {
        let url = "http://127.0.0.1:8080/v1/ids?count=10000";
        let mut ids = Vec::with_capacity(count);
        while ids.len() < count {
            let out = Command::new("nsenter")
                .args(["--target", &self.child.id().to_string(), "--net"])
                .args(["curl", "-sS", "--max-time", "30", url])
                .output()
                .expect("run nsenter and curl");
            let body = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let batch = ids_in(&json(&body));
            assert_eq!(batch.len(), 10_000, "{body}");
            ids.extend(batch);
        }
        ids
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // `--kill-child`: unshare's death kills pid 1 of the namespace, and with it the rest.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The worker ids stamped in `ids` (keyworker layout).
fn workers(ids: &[u64]) -> HashSet<u64> {
    let layout = Layout::keyworker().unwrap();
    ids.iter()
        .map(|&id| layout.decompose(id).unwrap().worker)
        .collect()
}

/// Fetch from both containers at once, and count the equal IDs.
fn ids_of_both(a: &Container, b: &Container) -> (Vec<u64>, Vec<u64>, usize) {
    let (ids_a, ids_b) = std::thread::scope(|s| {
        let a = s.spawn(|| a.ids(PER_CONTAINER));
        let b = s.spawn(|| b.ids(PER_CONTAINER));
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut all: Vec<u64> = ids_a.iter().chain(&ids_b).copied().collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    (ids_a, ids_b, total - all.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_assigner_containers_sharing_a_store_get_distinct_workers() {
    require_namespaces();
    let store = shared_postgres().await;
    let env = [
        ("UIDGEN_WORKER_ASSIGNER", "machine"),
        ("UIDGEN_LAYOUT", "keyworker"),
        ("UIDGEN_STORE", store.as_str()),
    ];
    let a = Container::start(2, &env).unwrap_or_else(|log| panic!("{log}"));
    let b = Container::start(3, &env).unwrap_or_else(|log| panic!("{log}"));
    for c in [&a, &b] {
        let log = c.log();
        assert!(
            log.contains("02:42:ac:11:00:"),
            "the machine part saw eth0:\n{log}"
        );
        assert!(log.contains("leased in the shared store"), "{log}");
    }
    let (ids_a, ids_b, equal) = ids_of_both(&a, &b);
    let (workers_a, workers_b) = (workers(&ids_a), workers(&ids_b));
    assert_eq!((workers_a.len(), workers_b.len()), (1, 1));
    eprintln!(
        "machine: workers {workers_a:?} and {workers_b:?}, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_ne!(workers_a, workers_b, "one worker id each, distinct");
    // Both are pid 1: process value 1, unless the machine parts were equal and the second
    // moved on to the next free value.
    assert_eq!(
        equal,
        0,
        "{equal} equal IDs among {} fetched",
        2 * PER_CONTAINER
    );
    assert_eq!(
        assert_unique([ids_a, ids_b].concat()).len(),
        2 * PER_CONTAINER
    );
}

/// The machine part a container started with MAC byte `n` computes: this host's machine id
/// and hostname (the containers share both), and the two MACs of its veth pair.
fn machine_part_of(n: u8) -> u64 {
    let host = HostIdentity::detect();
    let macs = [
        format!("02:42:ac:11:00:{n:02x}"),
        format!("02:42:ac:11:ff:{n:02x}"),
    ];
    MachinePart::of(&HostIdentity::new(
        host.machine_id.as_deref(),
        macs,
        host.hostname.as_deref(),
    ))
    .value
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn machine_assigner_containers_whose_machine_parts_collide_take_the_next_value() {
    require_namespaces();
    // 32 machine parts, 33 candidates: two of them collide, whatever this host's identity.
    let mut seen = std::collections::HashMap::new();
    let (first, second, machine) = (2..=34u8)
        .find_map(|n| {
            let part = machine_part_of(n);
            seen.insert(part, n).map(|m| (m, n, part))
        })
        .unwrap();
    let store = shared_postgres().await;
    let env = [
        ("UIDGEN_WORKER_ASSIGNER", "machine"),
        ("UIDGEN_LAYOUT", "keyworker"),
        ("UIDGEN_STORE", store.as_str()),
    ];
    let a = Container::start(first, &env).unwrap_or_else(|log| panic!("{log}"));
    let b = Container::start(second, &env).unwrap_or_else(|log| panic!("{log}"));
    let (ids_a, ids_b, equal) = ids_of_both(&a, &b);
    // Both are pid 1 (process value 1): the second finds it leased and takes value 2.
    assert_eq!(
        workers(&ids_a),
        HashSet::from([(machine << 5) | 1]),
        "{}",
        a.log()
    );
    assert_eq!(
        workers(&ids_b),
        HashSet::from([(machine << 5) | 2]),
        "{}",
        b.log()
    );
    assert!(
        b.log()
            .contains("is leased by another process sharing the store"),
        "{}",
        b.log()
    );
    eprintln!(
        "colliding machine part {machine}: {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!(equal, 0, "{equal} equal IDs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_ids_in_containers_sharing_a_store_are_leased_or_refused() {
    require_namespaces();
    let store = shared_postgres().await;
    let with_id = |id: &'static str| {
        vec![
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", id),
            ("UIDGEN_LAYOUT", "keyworker"),
            ("UIDGEN_STORE", store.as_str()),
        ]
    };
    let five = Container::start(2, &with_id("5")).unwrap_or_else(|log| panic!("{log}"));
    // The same id in a second container: refused at start-up, naming the id and the holder.
    let refused = Container::start(3, &with_id("5"))
        .err()
        .expect("a second holder of 5");
    assert!(
        refused.contains("static worker id 5 is held by `") && refused.contains("worker.id"),
        "{refused}"
    );
    let six = Container::start(4, &with_id("6")).unwrap_or_else(|log| panic!("{log}"));
    let (ids_5, ids_6, equal) = ids_of_both(&five, &six);
    assert_eq!(workers(&ids_5), HashSet::from([5]));
    assert_eq!(workers(&ids_6), HashSet::from([6]));
    eprintln!(
        "static: workers 5 and 6, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!(equal, 0, "{equal} equal IDs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_pods_in_containers_sharing_a_store_are_leased_or_refused() {
    require_namespaces();
    let store = shared_postgres().await;
    let pod = |ordinal: &'static str| {
        vec![
            ("UIDGEN_WORKER_ASSIGNER", "statefulset"),
            ("UIDGEN_POD_ORDINAL", ordinal),
            ("UIDGEN_STATEFULSET_OFFSET", "100"),
            ("UIDGEN_LAYOUT", "keyworker"),
            ("UIDGEN_STORE", store.as_str()),
        ]
    };
    let two = Container::start(5, &pod("2")).unwrap_or_else(|log| panic!("{log}"));
    // A mis-set ordinal on another host: refused at start-up, naming the worker id.
    let refused = Container::start(6, &pod("2"))
        .err()
        .expect("a second pod with ordinal 2");
    assert!(refused.contains("102"), "{refused}");
    let three = Container::start(7, &pod("3")).unwrap_or_else(|log| panic!("{log}"));
    let (ids_2, ids_3, equal) = ids_of_both(&two, &three);
    assert_eq!(workers(&ids_2), HashSet::from([102]));
    assert_eq!(workers(&ids_3), HashSet::from([103]));
    eprintln!(
        "statefulset: workers 102 and 103, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!(equal, 0, "{equal} equal IDs");
}

#[test]
fn without_a_shared_store_containers_are_refused_naming_the_way_out() {
    require_namespaces();
    let machine = Container::start(
        2,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "machine"),
            ("UIDGEN_LAYOUT", "keyworker"),
        ],
    )
    .err()
    .expect("the machine assigner refuses a container without a shared store");
    assert!(
        machine.contains("refusing the machine assigner inside a container")
            && machine.contains("worker.machine.allow_uncoordinated"),
        "{machine}"
    );
    let fixed = Container::start(
        2,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", "5"),
        ],
    )
    .err()
    .expect("a static id without a state file of the operator's is refused");
    assert!(
        fixed.contains("refusing the static assigner inside a container")
            && fixed.contains("worker.state_file"),
        "{fixed}"
    );
    // The operator's statements let them start.
    let allowed = Container::start(
        3,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "machine"),
            ("UIDGEN_LAYOUT", "keyworker"),
            ("UIDGEN_WORKER_MACHINE_ALLOW_UNCOORDINATED", "true"),
        ],
    )
    .unwrap_or_else(|log| panic!("{log}"));
    assert_eq!(allowed.ids(10_000).len(), 10_000);
    let state = fresh_cwd().join("worker-5.state");
    let stated = Container::start(
        4,
        &[
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", "5"),
            ("UIDGEN_WORKER_STATE_FILE", state.to_str().unwrap()),
        ],
    )
    .unwrap_or_else(|log| panic!("{log}"));
    assert_eq!(stated.ids(10_000).len(), 10_000);
}
