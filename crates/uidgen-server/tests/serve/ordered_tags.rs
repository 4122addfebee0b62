//! Ordered tags (issue 35), checked the way Jepsen checks databases: three `uidgen serve`
//! processes on one store, many clients calling any of them, every call's start, end, server
//! and answer recorded, and the history checked (`uidgen_testkit::history`): a call that
//! returned before another began got the smaller IDs, and no ID came twice. Under faults: a
//! `kill -9` of the leader, a SIGSTOP of the leader past its lease (then SIGCONT), a cut of the
//! leader's store connection (a TCP proxy per server), and a restart of all three.
//!
//! The run in the suite is short; `UIDGEN_TEST_ORDERED_LONG=1` runs each phase ten times as long
//! (docs/OPERATIONS.md, "Ordered tags", has its figures).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use uidgen_store::testing::proxy::{Proxy, server_addr, with_addr};
use uidgen_store::testing::{TestDb, fresh_url};
use uidgen_testkit::history::{Call, check};

use crate::common::{Server, fixed_port, json};

const TAG: &str = "orders";
const ADMIN: &str = "ordered-tags-admin-token-0123456789";
/// The leases of the test: 1.5 s, renewed every 0.5 s.
const LEASE_MS: u64 = 1_500;

/// How much longer every phase runs with `UIDGEN_TEST_ORDERED_LONG=1`.
fn stretch() -> u32 {
    if std::env::var("UIDGEN_TEST_ORDERED_LONG").is_ok_and(|v| v == "1") {
        10
    } else {
        1
    }
}

/// `url` with server `index`'s sessions named `uidgen-node-INDEX` on PostgreSQL (its
/// `application_name`), so a test can find them in `pg_stat_activity`.
fn named_session(url: &str, index: usize) -> String {
    if !url.starts_with("postgres") {
        return url.to_owned();
    }
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}application_name=uidgen-node-{index}")
}

/// One server: fixed ports, its own proxy in front of the store, its process while it runs.
struct Node {
    http: u16,
    grpc: u16,
    proxy: Proxy,
    server: Option<Server>,
}

struct Cluster {
    store: String,
    nodes: Vec<Node>,
    /// More arguments for every server's `serve`.
    args: Vec<String>,
    /// `ordered.lease_ms` of every server; `None`: the default (3 s).
    lease_ms: Option<u64>,
}

impl Cluster {
    async fn start(db: TestDb, count: usize) -> Cluster {
        Self::start_with(db, count, &[]).await
    }

    async fn start_with(db: TestDb, count: usize, args: &[&str]) -> Cluster {
        Self::start_leased(db, count, args, Some(LEASE_MS)).await
    }

    async fn start_leased(
        db: TestDb,
        count: usize,
        args: &[&str],
        lease_ms: Option<u64>,
    ) -> Cluster {
        let store = fresh_url(db).await.unwrap_or_else(|e| {
            panic!("{db:?} is needed (set UIDGEN_TEST_POSTGRES_URL or UIDGEN_TEST_MYSQL_URL): {e}")
        });
        let mut nodes = Vec::new();
        for _ in 0..count {
            nodes.push(Node {
                http: fixed_port(),
                grpc: fixed_port(),
                proxy: Proxy::start(server_addr(&store)).await,
                server: None,
            });
        }
        let args = args.iter().map(|a| (*a).to_owned()).collect();
        let mut cluster = Cluster {
            store,
            nodes,
            args,
            lease_ms,
        };
        for index in 0..count {
            cluster.restart(index).await;
        }
        cluster
    }

    async fn restart(&mut self, index: usize) {
        let node = &self.nodes[index];
        let listen = format!("127.0.0.1:{}", node.http);
        let mut envs: Vec<(String, String)> = vec![
            (
                "UIDGEN_STORE".into(),
                named_session(&with_addr(&self.store, node.proxy.addr), index),
            ),
            (
                "UIDGEN_GRPC_LISTEN".into(),
                format!("127.0.0.1:{}", node.grpc),
            ),
            ("UIDGEN_GENERATOR".into(), "default".into()),
            ("UIDGEN_ADMIN_TOKEN".into(), ADMIN.into()),
            ("UIDGEN_SEGMENT_SAMPLE_TAG".into(), String::new()),
            ("UIDGEN_ORDERED_WAIT_MS".into(), "3000".into()),
        ];
        if let Some(lease_ms) = self.lease_ms {
            envs.push(("UIDGEN_ORDERED_LEASE_MS".into(), lease_ms.to_string()));
        }
        let args = self.args.clone();
        let server = tokio::task::spawn_blocking(move || {
            let envs: Vec<(&str, &str)> =
                envs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Server::start_listening(&listen, &args, &envs)
        })
        .await
        .unwrap();
        self.nodes[index].server = Some(server);
    }

    async fn kill(&mut self, index: usize) {
        let server = self.nodes[index].server.take().unwrap();
        server.kill_from_async().await;
    }

    async fn terminate(&mut self, index: usize) {
        let server = self.nodes[index].server.take().unwrap();
        server.terminate_cleanly().await;
    }

    fn signal(&self, index: usize, signal: &str) {
        let pid = self.nodes[index].server.as_ref().unwrap().pid();
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    }

    /// Create the ordered tag (step 50) through server 0's admin API.
    async fn create_ordered_tag(&self, client: &reqwest::Client) {
        let created = client
            .put(format!("{}/v1/admin/segments/{TAG}", self.base(0)))
            .bearer_auth(ADMIN)
            .json(&serde_json::json!({"step": 50, "ordered": true}))
            .send()
            .await
            .unwrap();
        let status = created.status();
        let body = created.text().await.unwrap();
        let log = || self.nodes[0].server.as_ref().unwrap().log();
        assert!(status.is_success(), "{status}: {body}\n{}", log());
        assert_eq!(json(&body)["ordered"], true, "{body}");
    }

    /// Server `index`'s sessions that sit inside a transaction holding rows of the ordered
    /// tags' tables (`SELECT ... FOR UPDATE` and `UPDATE` lock the table in these modes and
    /// the row itself); PostgreSQL only.
    async fn idle_in_transaction(&self, watcher: &uidgen_store::Store, index: usize) -> usize {
        let query = format!(
            "SELECT count(DISTINCT a.pid)::text FROM pg_stat_activity a \
             JOIN pg_locks l ON l.pid = a.pid \
             WHERE a.application_name = 'uidgen-node-{index}' \
               AND a.state = 'idle in transaction' \
               AND l.relation IN ('leaf_alloc'::regclass, 'leaf_alloc_ordered'::regclass) \
               AND l.mode IN ('RowShareLock', 'RowExclusiveLock')"
        );
        let counts = uidgen_store::testing::text_column(watcher, &query)
            .await
            .unwrap();
        counts[0].parse().unwrap()
    }

    /// SIGSTOP server `index` at a moment when one of its store sessions is inside a
    /// transaction that holds the ordered tags' rows (a renewal or a segment claim), trying
    /// again (SIGCONT, a short pause) until one is caught; the server is left stopped. Panics
    /// after 30 s without a catch.
    async fn stop_inside_transaction(&self, watcher: &uidgen_store::Store, index: usize) -> u32 {
        let started = Instant::now();
        let mut tries = 0;
        while started.elapsed() < Duration::from_secs(30) {
            tries += 1;
            self.signal(index, "-STOP");
            // A statement on the wire when the signal came is still answered; a COMMIT that
            // was is answered too, and the session is then no longer in a transaction. So the
            // catch counts once the session has sat in its transaction for a while.
            if self.idle_in_transaction(watcher, index).await > 0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if self.idle_in_transaction(watcher, index).await > 0 {
                    return tries;
                }
            }
            self.signal(index, "-CONT");
            tokio::time::sleep(Duration::from_millis(fastrand::u64(1..20))).await;
        }
        panic!("server {index} was never caught inside a transaction in {tries} tries");
    }

    fn base(&self, index: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[index].http)
    }

    /// The server that says it leads the tag (its metrics), waiting up to 15 s.
    async fn leader(&self, client: &reqwest::Client) -> usize {
        let line = format!("uidgen_ordered_leading{{tag=\"{TAG}\"}} 1");
        for _ in 0..150 {
            for index in 0..self.nodes.len() {
                if self.nodes[index].server.is_none() {
                    continue;
                }
                let url = format!("{}/metrics", self.base(index));
                let Ok(response) = client.get(url).send().await else {
                    continue;
                };
                let text = response.text().await.unwrap_or_default();
                if text.lines().any(|l| l == line) {
                    return index;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let logs: Vec<String> = self
            .nodes
            .iter()
            .filter_map(|node| node.server.as_ref().map(Server::log))
            .collect();
        panic!(
            "no server leads the ordered tag after 15 s; their logs:\n{}",
            logs.join("\n---\n")
        );
    }
}

/// The `ids` of a segment batch's body.
fn ids_of(body: &str) -> Vec<i64> {
    json(body)["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

/// What the clients record.
#[derive(Default)]
struct Recorded {
    calls: Vec<Call>,
    failures: usize,
    /// When a call last succeeded, and the longest time between two successes in each phase
    /// (by the phase running when the later one came).
    last_success: Option<Instant>,
    phase: &'static str,
    longest_gaps: Vec<(&'static str, Duration)>,
}

impl Recorded {
    fn gap(&mut self, end: Instant) {
        if let Some(last) = self.last_success {
            let gap = end.saturating_duration_since(last);
            let phase = self.phase;
            match self.longest_gaps.iter_mut().find(|(p, _)| *p == phase) {
                Some((_, longest)) => *longest = (*longest).max(gap),
                None => self.longest_gaps.push((phase, gap)),
            }
        }
        self.last_success = Some(end);
    }
}

/// `clients` tasks calling random servers for 1 to 5 IDs until `stop`.
fn run_clients(
    cluster_bases: Vec<String>,
    clients: usize,
    recorded: Arc<Mutex<Recorded>>,
    stop: Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..clients)
        .map(|_| {
            let bases = cluster_bases.clone();
            let recorded = Arc::clone(&recorded);
            let stop = Arc::clone(&stop);
            tokio::spawn(async move {
                // A client gives up on a server after 1 s and tries another, as a client of a
                // cluster does: a stopped or cut-off server must not hold every client.
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(1))
                    .build()
                    .unwrap();
                while !stop.load(Ordering::SeqCst) {
                    let server = fastrand::usize(..bases.len());
                    let count = fastrand::usize(1..=5);
                    let url = format!("{}/v1/segments/{TAG}?count={count}", bases[server]);
                    let start = Instant::now();
                    let answer = client.get(&url).send().await;
                    let body = match answer {
                        Ok(response) if response.status().is_success() => {
                            response.text().await.ok()
                        }
                        _ => None,
                    };
                    let end = Instant::now();
                    let failed = {
                        let mut recorded = recorded.lock();
                        match body {
                            Some(body) => {
                                let ids = ids_of(&body);
                                assert_eq!(ids.len(), count, "{body}");
                                recorded.gap(end);
                                recorded.calls.push(Call {
                                    start,
                                    end,
                                    server,
                                    ids,
                                });
                                false
                            }
                            None => {
                                recorded.failures += 1;
                                true
                            }
                        }
                    };
                    if failed {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            })
        })
        .collect()
}

/// Stop the clients of [`run_clients`] and wait for them.
async fn stop_clients(stop: &AtomicBool, tasks: Vec<tokio::task::JoinHandle<()>>) {
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
}

/// Successful calls so far.
fn successes(recorded: &Mutex<Recorded>) -> usize {
    recorded.lock().calls.len()
}

/// Wait `phase`, then check that calls succeeded during it.
async fn serve_for(recorded: &Mutex<Recorded>, phase: Duration, what: &'static str) {
    recorded.lock().phase = what;
    let before = successes(recorded);
    tokio::time::sleep(phase).await;
    let after = successes(recorded);
    assert!(after > before, "no call succeeded {what}");
}

async fn ordered_under_faults(db: TestDb) {
    let x = stretch();
    let mut cluster = Cluster::start(db, 3).await;
    let client = reqwest::Client::new();
    cluster.create_ordered_tag(&client).await;
    // Leased ranges would be handed out later, out of order: refused for an ordered tag.
    let leased = client
        .post(format!(
            "{}/v1/segments/{TAG}/lease?size=10",
            cluster.base(1)
        ))
        .send()
        .await
        .unwrap();
    let status = leased.status().as_u16();
    let body = leased.text().await.unwrap();
    assert!(
        body.contains("ordered_tag_not_leasable"),
        "{status}: {body}"
    );

    let bases: Vec<String> = (0..3).map(|i| cluster.base(i)).collect();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = run_clients(bases, 6, Arc::clone(&recorded), Arc::clone(&stop));
    let phase = Duration::from_millis(1_500) * x;
    let lease = Duration::from_millis(LEASE_MS);
    serve_for(&recorded, phase, "before any fault").await;

    // 1. kill -9 of the leader; it comes back after the failover.
    let leader = cluster.leader(&client).await;
    recorded.lock().phase = "after the leader was killed";
    cluster.kill(leader).await;
    serve_for(&recorded, lease * 2 + phase, "after the leader was killed").await;
    cluster.restart(leader).await;
    serve_for(&recorded, phase, "after the killed leader came back").await;

    // 2. SIGSTOP of the leader past its lease, then SIGCONT: it must not issue on waking.
    let leader = cluster.leader(&client).await;
    recorded.lock().phase = "while the leader was stopped";
    cluster.signal(leader, "-STOP");
    serve_for(&recorded, lease * 2 + phase, "while the leader was stopped").await;
    cluster.signal(leader, "-CONT");
    serve_for(&recorded, phase, "after the stopped leader woke").await;

    // 3. The leader's store connection cut: it stops issuing before a successor begins.
    let leader = cluster.leader(&client).await;
    recorded.lock().phase = "while the leader's store was cut";
    cluster.nodes[leader].proxy.cut();
    serve_for(
        &recorded,
        lease * 2 + phase,
        "while the leader's store was cut",
    )
    .await;
    cluster.nodes[leader].proxy.restore();
    serve_for(&recorded, phase, "after the leader's store came back").await;

    // 4. All three restarted (a clean stop hands each lease back).
    recorded.lock().phase = "after every server restarted";
    for index in 0..3 {
        cluster.terminate(index).await;
    }
    for index in 0..3 {
        cluster.restart(index).await;
    }
    serve_for(&recorded, phase, "after every server restarted").await;

    stop_clients(&stop, tasks).await;
    let recorded = recorded.lock();
    let report = check(&recorded.calls);
    println!(
        "ordered tag on {db:?}: {} calls, {} IDs, {} failed calls; longest time without an \
         answer, by phase: {:?}; {} order violations, {} repeats",
        report.calls,
        report.ids,
        recorded.failures,
        recorded.longest_gaps,
        report.violations.len(),
        report.repeats.len()
    );
    assert!(
        report.violations.is_empty(),
        "order violations: {:?}",
        &report.violations[..report.violations.len().min(5)]
    );
    assert!(
        report.repeats.is_empty(),
        "repeated IDs: {:?}",
        report.repeats
    );
    assert!(
        report.unsorted_batches.is_empty(),
        "{:?}",
        report.unsorted_batches
    );
    // Every server answered: the calls to followers were forwarded.
    for server in 0..3 {
        assert!(
            recorded.calls.iter().any(|c| c.server == server),
            "server {server} answered no call"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ordered_tag_strictly_increases_under_faults_on_postgres() {
    ordered_under_faults(TestDb::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ordered_tag_strictly_increases_under_faults_on_mariadb() {
    ordered_under_faults(TestDb::MySql).await;
}

/// A SIGSTOP that lands while the leader is inside a store transaction, holding the lease
/// row's or the tag's row lock: the database ends the frozen session after
/// `StoreOptions::idle_transaction_timeout` (2 s), which frees the locks, and a successor
/// begins while the leader still sleeps. Without that timeout PostgreSQL lets the others wait
/// for the lock until the leader wakes (docs/OPERATIONS.md, "A server frozen in a
/// transaction"). The leader's segments are kept at the tag's step of 50
/// (`segment.max_step`), so it claims often and a stop soon lands inside a claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leader_stopped_inside_a_transaction_is_succeeded_on_postgres() {
    let config = crate::common::temp_dir("ordered-frozen").join("uidgen.toml");
    std::fs::write(&config, "[segment]\nmax_step = 50\n").unwrap();
    let config = config.to_string_lossy().into_owned();
    let cluster = Cluster::start_with(TestDb::Postgres, 3, &["--config", &config]).await;
    let client = reqwest::Client::new();
    cluster.create_ordered_tag(&client).await;
    let options = uidgen_store::StoreOptions {
        migrate: false,
        max_connections: 1,
        ..uidgen_store::StoreOptions::default()
    };
    let watcher = uidgen_store::Store::connect_with(&cluster.store, options)
        .await
        .unwrap();

    let bases: Vec<String> = (0..3).map(|i| cluster.base(i)).collect();
    let recorded = Arc::new(Mutex::new(Recorded::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = run_clients(bases, 6, Arc::clone(&recorded), Arc::clone(&stop));
    let phase = Duration::from_millis(1_500);
    let lease = Duration::from_millis(LEASE_MS);
    serve_for(&recorded, phase, "before any fault").await;

    let leader = cluster.leader(&client).await;
    recorded.lock().phase = "while the leader was stopped inside a transaction";
    let tries = cluster.stop_inside_transaction(&watcher, leader).await;
    serve_for(
        &recorded,
        lease * 2 + phase,
        "while the leader was stopped inside a transaction",
    )
    .await;
    let frozen = cluster.idle_in_transaction(&watcher, leader).await;
    cluster.signal(leader, "-CONT");
    serve_for(&recorded, phase, "after the stopped leader woke").await;
    stop_clients(&stop, tasks).await;
    let recorded = recorded.lock();
    let report = check(&recorded.calls);
    println!(
        "leader stopped inside a transaction (caught after {tries} tries): {} calls, {} IDs, \
         {} failed calls; longest time without an answer, by phase: {:?}",
        report.calls, report.ids, recorded.failures, recorded.longest_gaps
    );
    assert_eq!(frozen, 0, "the stopped leader's transaction is still open");
    assert!(report.violations.is_empty(), "{:?}", report.violations);
    assert!(report.repeats.is_empty(), "{:?}", report.repeats);
}

/// Throughput through followers: 16 clients ask the two followers only for batches of 100,
/// for 2 s (20 s with `UIDGEN_TEST_ORDERED_LONG=1`, `UIDGEN_TEST_ORDERED_SECS` seconds when
/// set), and the rate is printed (never asserted); the history is checked as above. The
/// servers run with the default settings (the 3-s lease) but for the tag, which the
/// configuration lists. `UIDGEN_TEST_BINARY=target/release/uidgen` measures a release build
/// (docs/OPERATIONS.md, "Ordered tags", has the figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ordered_tag_through_followers_in_batches() {
    // The tag comes from the configuration: created and marked at start.
    let config = crate::common::temp_dir("ordered-config").join("uidgen.toml");
    std::fs::write(&config, format!("[ordered]\ntags = [\"{TAG}\"]\n")).unwrap();
    let config = config.to_string_lossy().into_owned();
    let cluster = Cluster::start_leased(TestDb::Postgres, 3, &["--config", &config], None).await;
    let client = reqwest::Client::new();
    let leader = cluster.leader(&client).await;
    let followers: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..16)
        .map(|n| {
            let base = cluster.base(followers[n % followers.len()]);
            let server = followers[n % followers.len()];
            let (calls, stop) = (Arc::clone(&calls), Arc::clone(&stop));
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let url = format!("{base}/v1/segments/{TAG}?count=100");
                let mut mine = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    let start = Instant::now();
                    let response = client.get(&url).send().await.unwrap();
                    assert!(response.status().is_success(), "{}", response.status());
                    let body = response.text().await.unwrap();
                    let end = Instant::now();
                    let ids = ids_of(&body);
                    mine.push(Call {
                        start,
                        end,
                        server,
                        ids,
                    });
                }
                calls.lock().extend(mine);
            })
        })
        .collect();
    let run = match std::env::var("UIDGEN_TEST_ORDERED_SECS") {
        Ok(secs) => Duration::from_secs(secs.parse().unwrap()),
        Err(_) => Duration::from_secs(2) * stretch(),
    };
    let started = Instant::now();
    tokio::time::sleep(run).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let report = check(&calls.lock());
    #[allow(clippy::cast_precision_loss)] // a rate to print
    let rate = report.ids as f64 / elapsed.as_secs_f64();
    let metrics = client
        .get(format!("{}/metrics", cluster.base(followers[0])))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let batches: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("uidgen_ordered_forward"))
        .collect();
    println!(
        "ordered tag through followers: {} IDs in {} calls of 100 in {elapsed:?}: {rate:.0} IDs/s; \
         {} order violations, {} repeats; follower {}: {batches:?}",
        report.ids,
        report.calls,
        report.violations.len(),
        report.repeats.len(),
        followers[0]
    );
    assert!(
        report.violations.is_empty(),
        "{:?}",
        &report.violations[..report.violations.len().min(5)]
    );
    assert!(report.repeats.is_empty());
    assert!(report.calls > 0);
}
