//! Issue 18 with the real binary: `uidgen serve` in emulated containers, each in its own pid,
//! mount and network namespace (`unshare --pid --net --fork --mount-proc`), with a Docker-style
//! MAC on its `eth0` and its own state directory, as containers started from one image are:
//! same pid (1), same hostname, same machine id, nothing local shared.
//!
//! - With a shared store (PostgreSQL, reached through its unix socket, a path the network
//!   namespaces share), the machine assigner gives the two containers distinct worker ids and
//!   their IDs never repeat; a static id configured twice is refused the second time, naming
//!   the holder, and two static ids issue disjoint IDs.
//! - Without one, both assigners refuse to start, naming the setting that would let them; so
//!   does the image's default (disposable on each container's own SQLite store) unless
//!   `worker.single_instance` states that it runs alone (issue 36, point 7).
//! - Issue 36, point 6, on emulated hosts (their own hostname, machine id and boot id): a
//!   state directory copied from another host is refused, and `gen --worker N` with a shared
//!   store leases its id, so a second host is refused while the first runs.
//!
//! How a container is emulated: `common/container.rs`. The coordinators' containers (ZooKeeper,
//! etcd) are in `containers_coordinated.rs`.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::{common, container};

use std::collections::HashSet;

use common::{assert_unique, fresh_cwd};
use container::{
    Container, Host, PER_CONTAINER, equal_between, ids_of_both, require_namespaces,
    shared_postgres, workers,
};
use uidgen_worker::{HostIdentity, MachinePart};

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

#[test]
fn default_settings_in_containers_are_refused_unless_single_instance_is_stated() {
    require_namespaces();
    // The image's defaults: disposable worker ids from the SQLite store in each container's
    // own state directory. Two such containers took worker 1 each and served equal IDs.
    for n in [2, 3] {
        let refused = Container::start(n, &[])
            .err()
            .expect("the default assigner refuses a container without a shared store");
        assert!(
            refused.contains("refusing the disposable assigner inside a container")
                && refused.contains("UIDGEN_STORE")
                && refused.contains("worker.single_instance"),
            "{refused}"
        );
    }
    let host = Host::new(9);
    let gen_refused = host.run(&["gen", "-n", "5"], &[]).unwrap_err();
    assert!(
        gen_refused.contains("worker.single_instance"),
        "{gen_refused}"
    );
    // Stated single: it serves.
    let single = Container::start(4, &[("UIDGEN_WORKER_SINGLE_INSTANCE", "true")])
        .unwrap_or_else(|log| panic!("{log}"));
    assert_unique(single.ids(10_000));
}

#[test]
fn a_state_directory_copied_to_another_host_is_refused_naming_what_to_do() {
    require_namespaces();
    let (first, second) = (Host::new(1), Host::new(2));
    let state = fresh_cwd().join("state");
    let copy = fresh_cwd().join("copied-state");
    let env = |dir: &std::path::Path| vec![("UIDGEN_STATE_DIR", dir.to_str().unwrap().to_owned())];
    let run = |host: &Host, dir: &std::path::Path| {
        let env = env(dir);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        host.run(&["gen", "-n", "20000", "--worker", "5"], &env)
    };
    let before_copy = run(&first, &state).unwrap();
    let copied = std::process::Command::new("cp")
        .args(["-a", state.to_str().unwrap(), copy.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(copied.success());
    let refused = run(&second, &copy).unwrap_err();
    assert!(
        refused.contains("belongs to another host")
            && refused.contains("uidgen-host")
            && refused.contains("UIDGEN_STATE_DIR")
            && refused.contains("host-1"),
        "{refused}"
    );
    // Its own host goes on using the original.
    assert_eq!(run(&first, &state).unwrap().len(), 20_000);
    // Adopted as the refusal says, had the first host stopped for good at the copy: the copied
    // mark carries on, so the second host's IDs follow what the first issued until then. (The
    // first's later run above continued from the same mark: exactly the repeat the refusal
    // keeps a copy from making while its original lives.)
    std::fs::remove_file(copy.join("uidgen-host")).unwrap();
    let adopted = run(&second, &copy).unwrap();
    assert_eq!(equal_between(&before_copy, &adopted), 0);
    assert_unique(before_copy);
}

#[test]
fn gen_worker_with_a_shared_store_is_leased_so_a_second_host_is_refused() {
    require_namespaces();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime.block_on(shared_postgres());
    let env = [("UIDGEN_STORE", url.as_str())];
    let args = ["gen", "-n", "300000", "--worker", "5"];
    let (first, second) = (Host::new(3), Host::new(4));
    // 300,000 IDs at worker 5's 8,192 a second (baidu) take the first host half a minute past
    // what it may borrow: the second starts while the first holds the lease.
    let running = first.command(&args, &env).spawn().unwrap();
    let store = runtime
        .block_on(uidgen_store::Store::connect(&url))
        .unwrap();
    let leased = (0..1200).any(|_| {
        let row = runtime
            .block_on(store.lease_row(uidgen_store::DEFAULT_SPACE, 5))
            .unwrap();
        row.is_some_and(|row| !row.holder.is_empty()) || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            false
        }
    });
    let refused = second.run(&args, &env);
    let out = running.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(leased && out.status.success(), "leased: {leased}\n{log}");
    let refused = refused.expect_err("a second host with --worker 5 is refused");
    assert!(refused.contains("static worker id 5 is held"), "{refused}");
    let ids: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ids.len(), 300_000);
    // Once the first has released it, the second may use it, above the first's IDs.
    let later = second
        .run(&["gen", "-n", "20000", "--worker", "5"], &env)
        .unwrap();
    assert_eq!(equal_between(&ids, &later), 0);
    assert_unique(ids);
}
