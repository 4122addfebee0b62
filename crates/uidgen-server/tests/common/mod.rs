//! Runs the real `uidgen` binary for end-to-end tests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// The binary under test.
pub fn binary() -> &'static str {
    // `UIDGEN_TEST_BINARY`: another build of it (a release build, for figures).
    static BINARY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BINARY.get_or_init(|| {
        std::env::var("UIDGEN_TEST_BINARY").unwrap_or_else(|_| env!("CARGO_BIN_EXE_uidgen").into())
    })
}

/// A fresh, empty working directory for one run: files the binary creates by default (the
/// SQLite store, a static worker id's state file) stay out of the source tree and apart from
/// other tests running at the same time.
pub fn fresh_cwd() -> std::path::PathBuf {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir()
        .join("uidgen-e2e-cwd")
        .join(format!("{}-{run}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a working directory");
    dir
}

/// The state directory every `uidgen serve` of this test process runs with
/// (`UIDGEN_STATE_DIR`), unless a test gives its own: the binary's default is the real
/// per-host one (`/var/lib/uidgen` for root), which no test may write into. Every test file
/// of a binary shares it, and with it the default SQLite store of a server started without
/// `UIDGEN_STORE`: such a server keeps the default (disposable) assigner, since another
/// assigner's range would be refused there (or refuse the others'); a test of another
/// assigner gives its own store.
pub fn serve_state_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir()
            .join("uidgen-e2e-state")
            .join(std::process::id().to_string());
        std::fs::create_dir_all(&dir).expect("create a state directory");
        dir
    })
    .clone()
}

/// A fresh directory for one test's files (a SQLite store, screenshots).
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "uidgen-e2e-{name}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A SQLite store in a fresh directory.
pub fn sqlite_url(name: &str) -> String {
    format!("sqlite://{}", temp_dir(name).join("uidgen.db").display())
}

/// Run `uidgen <args>` to completion, in a fresh working directory that is also its state
/// directory (unless `envs` names another), so runs share no files: (exit status, stdout,
/// stderr).
pub fn run(args: &[&str], envs: &[(&str, &str)]) -> (ExitStatus, String, String) {
    let cwd = fresh_cwd();
    let out = Command::new(binary())
        .current_dir(&cwd)
        .env("UIDGEN_STATE_DIR", &cwd)
        .args(args)
        // gRPC on an ephemeral port unless a test says otherwise: the default 9090 would be
        // shared by every server of a parallel run.
        .env("UIDGEN_GRPC_LISTEN", "127.0.0.1:0")
        // This machine may look like a container (CI's has /.dockerenv): each run is the one
        // instance of its own state directory's store, as the tests of the refusal set apart.
        .env("UIDGEN_WORKER_SINGLE_INSTANCE", "true")
        .envs(envs.iter().copied())
        .env("NO_COLOR", "1")
        .env_remove("UIDGEN_CONFIG")
        .output()
        .expect("run uidgen");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `uidgen serve` process on an ephemeral port; killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// `http://127.0.0.1:PORT` of its gRPC server, `None` when gRPC is off.
    pub grpc: Option<String>,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Start `uidgen serve --listen 127.0.0.1:0 <args>` and wait for its "uidgen serving" line.
    pub fn start(args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::start_listening("127.0.0.1:0", args, envs)
    }

    /// [`start`](Self::start) on a given address, so that a restarted server comes back where
    /// its clients look for it.
    pub fn start_listening(listen: &str, args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::spawn_until(listen, args, envs, "uidgen serving")
    }

    /// [`start`](Self::start) from the working directory `cwd`.
    pub fn start_in(cwd: &std::path::Path, args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::spawn_in(Some(cwd), "127.0.0.1:0", args, envs, "uidgen serving")
    }

    /// Start `uidgen serve --listen 127.0.0.1:0 <args>` and return as soon as its ports are
    /// bound ("uidgen starting"), before it holds a worker id.
    pub fn start_answering(args: &[&str], envs: &[(&str, &str)]) -> Server {
        Self::spawn_until("127.0.0.1:0", args, envs, "uidgen starting")
    }

    /// Spawn the server and wait for a log line containing `line` that names its addresses.
    fn spawn_until(listen: &str, args: &[&str], envs: &[(&str, &str)], line: &str) -> Server {
        Self::spawn_in(None, listen, args, envs, line)
    }

    /// [`start`](Self::start), or `Err(its log)` when it exits (or logs no start within 60 s)
    /// instead of serving: for a start that may be refused.
    pub fn try_start(args: &[&str], envs: &[(&str, &str)]) -> Result<Server, String> {
        Self::try_spawn_in(None, "127.0.0.1:0", args, envs, "uidgen serving")
    }

    /// [`spawn_until`](Self::spawn_until), from `cwd` when given (else this process's).
    fn spawn_in(
        cwd: Option<&std::path::Path>,
        listen: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        line: &str,
    ) -> Server {
        Self::try_spawn_in(cwd, listen, args, envs, line).unwrap_or_else(|log| {
            panic!("uidgen serve logged no `{line}` within 60 s; its log:\n{log}")
        })
    }

    /// [`spawn_in`](Self::spawn_in), with the log of a server that did not start as the error.
    fn try_spawn_in(
        cwd: Option<&std::path::Path>,
        listen: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        line: &str,
    ) -> Result<Server, String> {
        let marker = line.to_owned();
        let mut command = Command::new(binary());
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .arg("serve")
            .args(["--listen", listen])
            .args(args)
            .env("UIDGEN_GRPC_LISTEN", "127.0.0.1:0")
            .env("UIDGEN_STATE_DIR", serve_state_dir())
            // As in `run`: one instance per state directory's store unless a test says not.
            .env("UIDGEN_WORKER_SINGLE_INSTANCE", "true")
            .envs(envs.iter().copied())
            .env("NO_COLOR", "1")
            .env_remove("UIDGEN_CONFIG")
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn uidgen serve");
        let stderr = child.stderr.take().expect("stderr piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                {
                    // Logged before announced, so `log()` after `start` holds the line.
                    let mut log = sink.lock().unwrap();
                    log.push_str(&line);
                    log.push('\n');
                }
                if line.contains(&marker) {
                    // A text line's `key=value` words, or a JSON line's (`--log-format json`)
                    // top-level fields.
                    let object = line
                        .starts_with('{')
                        .then(|| serde_json::from_str::<serde_json::Value>(&line).ok())
                        .flatten();
                    let field = |name: &str| match &object {
                        Some(object) => object[name].as_str().map(str::to_owned),
                        None => line
                            .split_whitespace()
                            .find_map(|w| w.strip_prefix(&format!("{name}=")))
                            .map(str::to_owned),
                    };
                    if let Some(addr) = field("listen") {
                        let _ = tx.send((addr, field("grpc_listen")));
                    }
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok((addr, grpc)) => Ok(Server {
                child,
                base: format!("http://{addr}"),
                grpc: grpc.filter(|g| g != "off").map(|g| format!("http://{g}")),
                log,
            }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(100));
                let log = log.lock().unwrap().clone();
                Err(log)
            }
        }
    }

    /// The worker id the server logged when it started serving.
    pub fn worker_id(&self) -> u64 {
        let log = self.log();
        let line = log.lines().find(|l| l.contains("uidgen serving")).unwrap();
        line.split_whitespace()
            .find_map(|w| w.strip_prefix("worker_id="))
            .unwrap()
            .parse()
            .unwrap()
    }

    /// Wait (up to `within`) for the server to log `line`; whether it did.
    pub fn wait_for_log(&self, line: &str, within: Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if self.log().contains(line) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.log().contains(line)
    }

    /// The server's process id (its threads are `/proc/{pid}/task/*`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server logged so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// `url` under this server.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Send SIGTERM and wait for the process to exit: (status, full log).
    pub fn terminate(mut self) -> (ExitStatus, String) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        let status = self.child.wait().expect("wait for uidgen");
        // Let the reader thread drain the last lines.
        std::thread::sleep(Duration::from_millis(200));
        (status, self.log())
    }
}

impl Server {
    /// `kill -9`: the process ends at once, with no shutdown of any kind.
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sorted copy with a duplicate check, naming the first duplicate.
pub fn assert_unique(mut ids: Vec<u64>) -> Vec<u64> {
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        panic!("duplicate ID {}", w[0]);
    }
    ids
}

/// Send one request to a router without a socket: (status, body as text).
pub async fn call(
    router: &uidgen_server::http::observe::App,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (axum::http::StatusCode, String) {
    use http_body_util::BodyExt;
    use tower::ServiceExt;
    let mut request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(axum::body::Body::from(body.to_owned()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

/// `PUT /v1/admin/segments/{tag}` with `body`, and `auth` as the `Authorization` header.
pub async fn put_tag(
    router: &uidgen_server::http::observe::App,
    tag: &str,
    auth: Option<&str>,
    body: &str,
) -> (axum::http::StatusCode, String) {
    let uri = format!("/v1/admin/segments/{tag}");
    let headers: Vec<(&str, &str)> = auth.map(|a| ("authorization", a)).into_iter().collect();
    call(router, "PUT", &uri, &headers, body).await
}

/// `GET uri`.
pub async fn get(
    router: &uidgen_server::http::observe::App,
    uri: &str,
) -> (axum::http::StatusCode, String) {
    call(router, "GET", uri, &[], "").await
}

/// A body as JSON, failing with the body when it is not.
pub fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The `ids` array of a batch body, as numbers (panics, naming nothing else, if it is not one).
pub fn ids_in(batch: &serde_json::Value) -> Vec<u64> {
    batch["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect()
}

/// `GET url` over a real socket: (status, body as text).
/// The body of the answer to `request`, whatever its status.
pub async fn text(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

pub async fn fetch(client: &reqwest::Client, url: &str) -> (u16, String) {
    let response = client.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.text().await.unwrap())
}

/// IDs from `server` in batches of 50 (`/v1/ids?count=50`) until `stop` is set, and the
/// failed requests' status and body.
pub fn load(
    server: &Server,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<u64>, Vec<String>)> {
    load_batches(server, 50, stop)
}

/// [`load`] with batches of `count`.
pub fn load_batches(
    server: &Server,
    count: usize,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<(Vec<u64>, Vec<String>)> {
    let url = server.url(&format!("/v1/ids?count={count}"));
    tokio::spawn(async move {
        let client = reqwest::Client::new();
        let (mut ids, mut failures) = (Vec::new(), Vec::new());
        // SeqCst: a test flag.
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let (status, body) = fetch(&client, &url).await;
            if status == 200 {
                ids.extend(ids_in(&json(&body)));
            } else {
                failures.push(format!("{status} {body}"));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (ids, failures)
    })
}

/// The environment of a coordinated server: a SQLite store in `dir`, then `assigner`'s keys,
/// then Leaf's layout and generator with segments off.
pub fn leaf_env(dir: &std::path::Path, assigner: &[(&str, String)]) -> Vec<(String, String)> {
    let store = format!("sqlite://{}", dir.join("uidgen.db").display());
    let mut env = vec![("UIDGEN_STORE".to_owned(), store)];
    env.extend(assigner.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
    set_env(
        &mut env,
        &[
            ("UIDGEN_LAYOUT", "leaf"),
            ("UIDGEN_GENERATOR", "snowflake"),
            ("UIDGEN_SEGMENT_ENABLED", "false"),
        ],
    );
    env
}

/// Set each `(key, value)` of `pairs` in `env`, replacing a value it has.
pub fn set_env(env: &mut Vec<(String, String)>, pairs: &[(&str, &str)]) {
    for (key, value) in pairs {
        env.retain(|(k, _)| k != key);
        env.push(((*key).to_owned(), (*value).to_owned()));
    }
}

/// A server started with `env` (owned pairs, as the coordinated tests build them).
pub fn start_with(env: &[(String, String)]) -> Server {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    Server::start(&[], &env)
}

/// A first start on a coordinator namespace nothing was written to (`tool`: `etcd` or `zk`)
/// is refused naming `uidgen {tool} init`; the init lets it start; a second init has nothing
/// to do; `recover` records a loss, which a later init refuses to undo.
pub fn init_lets_a_fenced_start_through(tool: &str, env: &[(&str, &str)]) {
    let refused = Server::try_start(&[], env).map(drop).unwrap_err();
    let init = format!("uidgen {tool} init");
    for words in [init.as_str(), "never issued an ID", "s from now"] {
        assert!(refused.contains(words), "{words}: {refused}");
    }
    let (status, stdout, stderr) = run(&[tool, "init"], env);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("a new namespace"), "{stdout}");
    let server = Server::start(&[], env);
    let (status, log) = server.terminate();
    assert!(status.success(), "{log}");
    // Again: nothing to do.
    let (status, stdout, stderr) = run(&[tool, "init"], env);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("Init"), "{stdout}");
    let (status, stdout, stderr) = run(&[tool, "recover", "--why", "restored a snapshot"], env);
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("restored a snapshot"), "{stdout}");
    // A recorded loss is not undone by an init.
    let (status, _, stderr) = run(&[tool, "init"], env);
    assert!(!status.success());
    assert!(stderr.contains("not a new namespace"), "{stderr}");
}

/// Issue 36's hunt: servers A and B (started with `env`, `layout`) serve under load, `wipe`
/// empties their coordinator (`key`: `etcd` or `zookeeper`, as `/v1/status` and the CLI name
/// it), and server C starts meanwhile. C is refused (naming `uidgen {cli} init`) until every id
/// the coordinator forgot is past what its holder may have stamped; A and B take their ids up
/// again and never fail a request. Every ID of the run is counted: 0 equal.
pub async fn coordinator_wiped_under_three_servers(
    env: &[(String, String)],
    layout: &str,
    key: &str,
    wipe: impl FnOnce(),
) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let cli = if key == "zookeeper" { "zk" } else { key };
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (a, b) = (Server::start(&[], &env), Server::start(&[], &env));
    let stop = Arc::new(AtomicBool::new(false));
    let mut loads = vec![load(&a, Arc::clone(&stop)), load(&b, Arc::clone(&stop))];
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    wipe();
    let (mut refusals, deadline) = (0, std::time::Instant::now() + Duration::from_secs(90));
    let c = loop {
        match Server::try_start(&[], &env) {
            Ok(server) => break server,
            Err(log) => {
                assert!(log.contains(&format!("uidgen {cli} init")), "{log}");
                refusals += 1;
                assert!(
                    std::time::Instant::now() < deadline,
                    "C never started: {log}"
                );
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    assert!(refusals > 0, "C started inside the fence");
    loads.push(load(&c, Arc::clone(&stop)));
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // SeqCst: a test flag.
    stop.store(true, Ordering::SeqCst);
    let mut ids = Vec::new();
    for (load, server) in loads.into_iter().zip([&a, &b, &c]) {
        let (issued, failures) = load.await.unwrap();
        assert!(
            failures.is_empty(),
            "{} failed requests, the first: {}; the server's log:\n{}",
            failures.len(),
            failures[0],
            server.log()
        );
        assert!(!issued.is_empty());
        ids.extend(issued);
    }
    let parsed = uidgen_core::Layout::preset(layout).unwrap();
    let workers: std::collections::HashSet<u64> = ids
        .iter()
        .map(|id| parsed.decompose(*id).unwrap().worker)
        .collect();
    // Three servers, each with its first id and any it claimed under the load (issue 30).
    assert!(workers.len() >= 3, "{workers:?}");
    let total = ids.len();
    assert_eq!(assert_unique(ids).len(), total);
    let client = reqwest::Client::new();
    for server in [&a, &b] {
        let (_, status) = fetch(&client, &server.url("/v1/status")).await;
        let status = json(&status);
        assert!(
            status[key]["data_losses"].as_u64().unwrap() >= 1,
            "{status}"
        );
        // At least once: on a loaded machine a short lease can also lapse and be taken up
        // again on its own (seen at load 9), which counts too; the metric must say the same.
        let reestablished = status[key]["reestablished"].as_u64().unwrap();
        assert!(reestablished >= 1, "{status}");
        let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
        let prefix = if key == "zookeeper" { "zk" } else { key };
        let line = format!("uidgen_{prefix}_reestablished_total {reestablished}");
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }
    eprintln!(
        "{layout}: {total} IDs from 3 servers across an emptied {key}, C refused {refusals} \
         times, 0 equal"
    );
    for server in [a, b, c] {
        let (status, log) = server.terminate();
        assert!(status.success(), "{log}");
    }
}

/// The admin token of [`segment_router`].
pub const TOKEN: &str = "an-admin-token-of-some-length";

/// A router with segment mode on a fresh SQLite store and the admin API enabled.
pub async fn segment_router() -> (
    std::sync::Arc<uidgen_segment::SegmentService>,
    uidgen_server::http::observe::App,
) {
    let (store, _) = uidgen_store::testing::fresh_store(uidgen_store::testing::TestDb::Sqlite)
        .await
        .unwrap();
    let segments = uidgen_segment::SegmentService::start(
        store,
        uidgen_segment::SegmentOptions::default(),
        uidgen_core::SystemClock,
    )
    .await
    .unwrap();
    let generator = uidgen_core::SnowflakeGenerator::new(
        uidgen_core::Layout::snowflake().unwrap(),
        5,
        uidgen_core::ManualClock::auto_advancing(1_800_000_000_000),
    )
    .unwrap();
    let mut state =
        uidgen_server::service::state::AppState::embedded(std::sync::Arc::new(generator), 5);
    state.segments = Some(segments.clone());
    state.admin_token = Some(TOKEN.into());
    (
        segments,
        uidgen_server::http::app(std::sync::Arc::new(state)),
    )
}

/// Vesta's `DB_MACHINE_ID_PROVIDER` in `store` (MariaDB) as its script and two hosts'
/// `DbMachineIdProvider.init` left it: 1,024 rows, ids 0 and 1 taken by 10.2.0.1 and 10.2.0.2.
pub async fn vesta_machine_table(store: &uidgen_store::Store) {
    use uidgen_store::testing::{peer_transaction, run_script};
    run_script(
        store,
        "create table DB_MACHINE_ID_PROVIDER (ID bigint not null, IP varchar(64) default null, \
         primary key (ID), unique key UK_IP(IP))",
    )
    .await
    .unwrap();
    let inserts: Vec<String> = (0..1024)
        .map(|id| format!("insert into DB_MACHINE_ID_PROVIDER(ID) values({id})"))
        .collect();
    peer_transaction(
        store,
        &inserts.iter().map(String::as_str).collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    // The lowest free id each.
    for ip in ["10.2.0.1", "10.2.0.2"] {
        let take =
            format!("update DB_MACHINE_ID_PROVIDER set IP = '{ip}' where IP is null limit 1");
        peer_transaction(store, &[&take]).await.unwrap();
    }
}

/// A fresh PostgreSQL database with Leaf's own `leaf_alloc` and its sample tag
/// (`leaf-segment-test`, step 2000), before uidgen ever ran on it: its URL and a store that
/// does not migrate.
pub async fn bare_leaf_alloc() -> (String, uidgen_store::Store) {
    use uidgen_store::testing::peers::{leaf_ddl, leaf_insert};
    use uidgen_store::testing::{TestDb, fresh_url, run_script};
    let url = fresh_url(TestDb::Postgres).await.unwrap();
    let options = uidgen_store::StoreOptions {
        migrate: false,
        ..Default::default()
    };
    let bare = uidgen_store::Store::connect_with(&url, options)
        .await
        .unwrap();
    run_script(&bare, leaf_ddl(TestDb::Postgres)).await.unwrap();
    leaf_insert(&bare, "leaf-segment-test", 2000).await.unwrap();
    (url, bare)
}

/// The test Redis, checked to answer: its URL, a key prefix of this test's own (after
/// `name`), and a connection.
pub async fn test_redis(name: &str) -> (String, String, redis::aio::MultiplexedConnection) {
    let url = uidgen_sharded::testing::redis_url();
    uidgen_sharded::testing::check_redis(&url).await.unwrap();
    let prefix = uidgen_sharded::testing::unique_prefix(name);
    let conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    (url, prefix, conn)
}

/// A port for a node that must come back at the same address: free now, and below Linux's
/// ephemeral range (32768-60999), so that no outgoing connection of a parallel test (to a
/// database, say) takes it as its local port between this pick and the server's bind, as one
/// from [`uidgen_worker::testing::free_port`] may.
pub fn fixed_port() -> u16 {
    for _ in 0..200 {
        let port = fastrand::u16(20_000..32_000);
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    uidgen_worker::testing::free_port()
}

impl Server {
    /// `kill -9` it, from async code.
    pub async fn kill_from_async(self) {
        tokio::task::spawn_blocking(move || self.kill())
            .await
            .unwrap();
    }

    /// SIGTERM it from async code, wait for it to exit, and check that it exited cleanly.
    pub async fn terminate_cleanly(self) {
        let (status, log) = tokio::task::spawn_blocking(move || self.terminate())
            .await
            .unwrap();
        assert!(
            status.success(),
            "SIGTERM did not end the server cleanly:\n{log}"
        );
    }
}
