//! Issue 22 with the real binary: worker ids from ZooKeeper and etcd, for `uidgen serve` in
//! emulated containers on emulated separate hosts (own pid, mount and network namespaces; see
//! `common/container.rs`). Each container reaches the coordinator only through a bridge, as
//! another host would reach it over the network; nothing else is shared (each has its own
//! state directory, so its own default store and ZooKeeper cache file).
//!
//! Docker gives the first container on each host's default bridge the same address and MAC
//! (172.17.0.2, 02:42:ac:11:00:02), so containers on two hosts can look identical:
//! - ZooKeeper (Leaf's design) keys a process's worker id by its ip:port. A second process
//!   with the same ip:port is refused while the first lives (its live node belongs to another
//!   session), and once the first is gone its successor takes the same id only after the
//!   first's reservation has passed: their IDs never meet.
//! - etcd claims the lowest usable id under a lease, whatever the address: identical
//!   containers get distinct ids, and a successor starts above its predecessor's mark.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::container;

use container::{
    Bridge, Container, Network, PER_CONTAINER, equal_between, ids_of_both, require_namespaces,
    workers_in,
};
use uidgen_core::Layout;

/// Docker's first address on a host's default bridge, and the MAC it derives from it.
const FIRST_IP: &str = "172.17.0.2";
const FIRST_MAC: u8 = 2;

/// How often a start refused because the predecessor's session has not ended yet is retried.
const LIVE_RETRIES: usize = 5;

/// Leaf's layout and generator, short reports and reservation (so successors wait seconds,
/// not minutes).
fn zk_env<'a>(connect: &'a str, name: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
        ("UIDGEN_ZK_CONNECT", connect),
        ("UIDGEN_ZK_NAME", name),
        ("UIDGEN_ZK_REPORT_INTERVAL_MS", "500"),
        ("UIDGEN_ZK_RESERVATION_SECS", "2"),
        ("UIDGEN_ZK_SESSION_TIMEOUT_MS", "4000"),
        ("UIDGEN_LAYOUT", "leaf"),
        ("UIDGEN_GENERATOR", "snowflake"),
    ]
}

/// The shared etcd as a container on another host reaches it: the bridge to it, its URL
/// inside the container, and a fresh key prefix declared new.
fn etcd_through_a_bridge() -> (Bridge, String, String) {
    let endpoint = uidgen_etcd::testing::test_endpoint();
    let host = endpoint.trim_start_matches("http://").trim_end_matches('/');
    let port: u16 = host.rsplit(':').next().unwrap().parse().unwrap();
    let bridge = Bridge::to(host, port);
    let prefix = uidgen_etcd::testing::test_namespace(&endpoint);
    (bridge, format!("http://127.0.0.1:{port}"), prefix)
}

/// etcd at `inside` under `prefix`, a 2 s lease, and `more`.
fn etcd_env<'a>(
    inside: &'a str,
    prefix: &'a str,
    more: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("UIDGEN_WORKER_ASSIGNER", "etcd"),
        ("UIDGEN_ETCD_ENDPOINTS", inside),
        ("UIDGEN_ETCD_PREFIX", prefix),
        ("UIDGEN_ETCD_LEASE_TTL_SECS", "2"),
    ];
    env.extend_from_slice(more);
    env
}

/// Docker's first container of a host (behind `bridges`): the same address and MAC on every
/// host.
fn first_host<'a>(bridges: &'a [&'a Bridge]) -> Network<'a> {
    Network {
        mac: FIRST_MAC,
        ip: Some(FIRST_IP),
        bridges,
    }
}

/// A's host dies: `a` is killed and an identical container starts on `host`. Its IDs (taken
/// by `fetch`), their worker ids, and how many of them equal one of `earlier`; the container
/// is returned to keep it running.
fn successor(
    a: Container,
    host: &Network<'_>,
    env: &[(&str, &str)],
    layout: &Layout,
    earlier: [&[u64]; 2],
    fetch: impl FnOnce(&Container) -> Vec<u64>,
) -> (Container, Vec<u64>, std::collections::HashSet<u64>, usize) {
    a.kill();
    let c = start(host, env);
    let ids = fetch(&c);
    let workers = workers_in(layout, &ids);
    let equal = earlier.iter().map(|e| equal_between(e, &ids)).sum();
    (c, ids, workers, equal)
}

/// Start a container that must start.
fn start(network: &Network<'_>, env: &[(&str, &str)]) -> Container {
    Container::start_on(network, env).unwrap_or_else(|log| panic!("{log}"))
}

/// Start a container that may find its predecessor's session still open: a refusal naming a
/// live holder is retried (the session ends within its timeout), any other refusal fails.
fn start_after_predecessor(network: &Network<'_>, env: &[(&str, &str)]) -> Container {
    for _ in 0..LIVE_RETRIES {
        match Container::start_on(network, env) {
            Ok(container) => return container,
            Err(log) if log.contains("held by a live process") => continue,
            Err(log) => panic!("{log}"),
        }
    }
    panic!("the predecessor's session never ended ({LIVE_RETRIES} starts refused)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_containers_on_separate_hosts_never_share_a_worker_id_at_once() {
    require_namespaces();
    let connect = uidgen_zk::testing::test_connect();
    let zk = connect.split('/').next().unwrap().to_owned();
    let port: u16 = zk.rsplit(':').next().unwrap().parse().unwrap();
    let bridge = Bridge::to(&zk, port);
    let name = uidgen_zk::testing::unique("ns");
    uidgen_zk::testing::init_namespace(&connect, &name)
        .await
        .unwrap();
    let env = zk_env(&connect, &name);
    let layout = Layout::leaf().unwrap();
    let bridges = [&bridge];
    let first_host = first_host(&bridges);

    let a = start(&first_host, &env);
    // The first container of another host: the same ip:port, so the same forever node, whose
    // live node A's session holds.
    let refused = Container::start_on(&first_host, &env)
        .err()
        .expect("a second process with A's ip:port while A lives");
    assert!(refused.contains("held by a live process"), "{refused}");
    // The second container of a host: another address, another id.
    let c = Container::start_on(
        &Network {
            mac: 3,
            ip: Some("172.17.0.3"),
            bridges: &[&bridge],
        },
        &env,
    )
    .unwrap_or_else(|log| panic!("{log}"));
    let (ids_a, ids_c, equal) = ids_of_both(&a, &c);
    let (worker_a, worker_c) = (workers_in(&layout, &ids_a), workers_in(&layout, &ids_c));
    eprintln!(
        "zookeeper: workers {worker_a:?} and {worker_c:?}, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!((worker_a.len(), worker_c.len()), (1, 1));
    assert_ne!(worker_a, worker_c);
    assert_eq!(equal, 0, "{equal} equal IDs");

    // A's host dies; a container with A's address starts on another host, without A's cache
    // file: it continues A's worker id, but only past A's reservation. (It may claim another
    // id only if it finds the forever node before the reservation ends, and it cannot: it
    // waits for A's live node, which lasts the 4 s session timeout, longer than the 2 s
    // reservation after A's last report.)
    a.kill();
    let d = start_after_predecessor(&first_host, &env);
    let ids_d = d.ids(PER_CONTAINER);
    let worker_d = workers_in(&layout, &ids_d);
    let equal = equal_between(&ids_a, &ids_d);
    eprintln!(
        "zookeeper successor: worker {worker_d:?} after {worker_a:?}, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!(
        worker_d, worker_a,
        "the same ip:port keeps its forever node"
    );
    assert_eq!(equal, 0, "{equal} IDs of A issued again by its successor");
    assert_eq!(equal_between(&ids_c, &ids_d), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_containers_identical_on_separate_hosts_get_distinct_worker_ids() {
    require_namespaces();
    let (bridge, inside, prefix) = etcd_through_a_bridge();
    let env = etcd_env(
        &inside,
        &prefix,
        &[
            ("UIDGEN_ETCD_RESERVATION_SECS", "3"),
            ("UIDGEN_LAYOUT", "leaf"),
            ("UIDGEN_GENERATOR", "snowflake"),
        ],
    );
    let layout = Layout::leaf().unwrap();
    // Two hosts' first containers: the same address, MAC, pid and hostname.
    let bridges = [&bridge];
    let host = first_host(&bridges);
    let a = start(&host, &env);
    let b = start(&host, &env);
    let (ids_a, ids_b, equal) = ids_of_both(&a, &b);
    let (worker_a, worker_b) = (workers_in(&layout, &ids_a), workers_in(&layout, &ids_b));
    eprintln!(
        "etcd: workers {worker_a:?} and {worker_b:?}, {} IDs, {equal} equal",
        2 * PER_CONTAINER
    );
    assert_eq!((worker_a.len(), worker_b.len()), (1, 1));
    assert_ne!(worker_a, worker_b, "identical containers, distinct ids");
    assert_eq!(equal, 0, "{equal} equal IDs");

    // A's host dies; an identical container starts: whichever id it claims, it starts above
    // that id's mark.
    let earlier = [&ids_a[..], &ids_b[..]];
    let (_c, _, worker_c, equal) =
        successor(a, &host, &env, &layout, earlier, |c| c.ids(PER_CONTAINER));
    eprintln!(
        "etcd successor: worker {worker_c:?}, {} IDs, {equal} equal with A's and B's",
        PER_CONTAINER
    );
    assert_eq!(worker_c.len(), 1);
    assert_ne!(worker_c, worker_b, "B still holds its id");
    assert_eq!(equal, 0, "{equal} equal IDs");
}

/// Fetch `count` IDs from `container` on `tasks` threads at once (enough demand to make a
/// server claim more worker ids), all together.
fn ids_from(container: &Container, tasks: usize, count: usize) -> Vec<u64> {
    std::thread::scope(|s| {
        let fetchers: Vec<_> = (0..tasks)
            .map(|_| s.spawn(|| container.ids(count / tasks)))
            .collect();
        fetchers
            .into_iter()
            .flat_map(|f| f.join().unwrap())
            .collect()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_containers_under_load_with_extra_worker_ids_repeat_nothing_across_a_kill() {
    require_namespaces();
    let (bridge, inside, prefix) = etcd_through_a_bridge();
    // The default layout and generator, borrowing bounded to 2 s: batches of 10,000 from four
    // threads are far above one worker id's 8,192 a second, so each server claims more.
    let env = etcd_env(
        &inside,
        &prefix,
        &[
            // Well past the borrowing bound: a reservation barely past it would hold padding
            // back whenever a keep-alive round is late (each id's cap is its last round +
            // reservation).
            ("UIDGEN_ETCD_RESERVATION_SECS", "10"),
            ("UIDGEN_RING_MAX_BORROW_SECONDS", "2"),
        ],
    );
    let layout = Layout::baidu_default().unwrap();
    let bridges = [&bridge];
    let host = first_host(&bridges);
    let a = start(&host, &env);
    let b = start(&host, &env);
    let (ids_a, ids_b) = std::thread::scope(|s| {
        let a = s.spawn(|| ids_from(&a, 4, 400_000));
        let b = s.spawn(|| ids_from(&b, 4, 400_000));
        (a.join().unwrap(), b.join().unwrap())
    });
    let (workers_a, workers_b) = (workers_in(&layout, &ids_a), workers_in(&layout, &ids_b));
    assert!(
        workers_a.len() > 1 && workers_b.len() > 1,
        "{workers_a:?} {workers_b:?}"
    );
    assert!(
        workers_a.is_disjoint(&workers_b),
        "{workers_a:?} {workers_b:?}"
    );
    assert_eq!(equal_between(&ids_a, &ids_b), 0);
    assert!(a.log().contains("claimed more worker ids"), "{}", a.log());
    // A's host dies holding several ids; an identical container starts and loads as hard:
    // whichever ids it claims, A's among them once their marks pass, it starts above them.
    let earlier = [&ids_a[..], &ids_b[..]];
    let (_c, ids_c, workers_c, equal) = successor(a, &host, &env, &layout, earlier, |c| {
        ids_from(c, 4, 400_000)
    });
    eprintln!(
        "etcd with extra ids: A {workers_a:?}, B {workers_b:?}, successor {workers_c:?}, \
         {} IDs, {equal} equal",
        ids_a.len() + ids_b.len() + ids_c.len()
    );
    assert!(workers_c.is_disjoint(&workers_b), "B still holds its ids");
    assert_eq!(equal, 0, "{equal} equal IDs");
}
