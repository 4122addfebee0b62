//! Test support shared with other crates (feature `testing`): a unique name per test on a
//! shared service, a free port, what the multi-process tests' worker binaries share (their
//! command line, and issuing IDs to a file), and a range registry that records what it is
//! asked, and the process and probe of a coordinator a test runs alone ([`PrivateServer`],
//! [`ask`]: the ZooKeeper and etcd crates' private servers), so that a test can kill it, empty
//! its data or roll it back to a snapshot.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A name unique to this process and call: `{prefix}-{pid}-{n}-{nanos}`, for a test's own
/// namespace on a shared service (a ZooKeeper chroot, an etcd key prefix).
pub fn unique(prefix: &str) -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // Relaxed: only uniqueness within the process matters.
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{prefix}-{}-{n}-{nanos}", std::process::id())
}

/// A port nobody listens on right now (the OS's choice for an ephemeral bind, released again),
/// for a test's own server or one that must come back on the same address after a restart.
/// The one copy for every crate's tests and test support (the testkit cannot hold it: the
/// ZooKeeper, etcd and Redis test modules need it, and they are the testkit's dependencies).
///
/// ```
/// assert_ne!(uidgen_worker::testing::free_port(), 0);
/// ```
///
/// # Panics
/// When no port can be bound on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("cannot bind a port on 127.0.0.1 for a test: {e}"))
}

/// The worker processes of the multi-process tests (`uidgen-zk-worker`, `uidgen-etcd-worker`):
/// take IDs from `generator` for `secs` seconds (at most `max_count`), appending each batch to
/// `out` as little-endian u64s before taking the next, so a process killed midway leaves what it
/// issued. Runs off the runtime: the generator may sleep for the next time unit, and the
/// holder's reports must keep running meanwhile.
///
/// # Errors
/// The generator's refusal or the file's error, as text.
pub async fn issue_to_file(
    generator: std::sync::Arc<dyn uidgen_core::UidGenerator>,
    out: &std::path::Path,
    secs: f64,
    max_count: usize,
) -> std::result::Result<(), String> {
    use std::io::Write;
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let mut file = std::fs::File::create(out).map_err(|e| e.to_string())?;
    tokio::task::spawn_blocking(move || {
        let mut count = 0;
        while std::time::Instant::now() < until && count < max_count {
            let batch = generator.next_ids(1000).map_err(|e| e.to_string())?;
            count += batch.len();
            let bytes: Vec<u8> = batch.iter().flat_map(|id| id.to_le_bytes()).collect();
            // Unbuffered: written before the next batch is taken, so a kill loses none.
            file.write_all(&bytes).map_err(|e| e.to_string())?;
        }
        Ok(())
    })
    .await
    .map_err(|e| e.to_string())?
}

/// The command line of a test worker process: `--name value` pairs.
///
/// ```
/// use uidgen_worker::testing::WorkerArgs;
/// let args = WorkerArgs::new(["--out", "ids", "--ttl-ms", "2000"], "worker --out FILE");
/// assert_eq!(args.need("--out").as_deref(), Ok("ids"));
/// assert_eq!(args.millis("--ttl-ms"), Ok(Some(std::time::Duration::from_secs(2))));
/// assert_eq!(args.parsed("--secs", 2.0), Ok(2.0));
/// assert!(args.need("--prefix").is_err());
/// ```
#[derive(Debug, Clone)]
pub struct WorkerArgs {
    args: Vec<String>,
    usage: &'static str,
}

impl WorkerArgs {
    /// The arguments (without the program's name) and the usage line errors quote.
    pub fn new<S: Into<String>>(args: impl IntoIterator<Item = S>, usage: &'static str) -> Self {
        Self {
            args: args.into_iter().map(Into::into).collect(),
            usage,
        }
    }

    /// The value after `name`, if given.
    pub fn flag(&self, name: &str) -> Option<String> {
        self.args
            .iter()
            .position(|a| a == name)
            .and_then(|i| self.args.get(i + 1))
            .cloned()
    }

    /// The value after `name`, which must be given.
    ///
    /// # Errors
    /// When it is missing, naming it and quoting the usage.
    pub fn need(&self, name: &str) -> std::result::Result<String, String> {
        self.flag(name)
            .ok_or_else(|| format!("{name} is required; usage: {}", self.usage))
    }

    /// The value after `name` parsed, or `default` when not given.
    ///
    /// # Errors
    /// When it does not parse.
    pub fn parsed<T: std::str::FromStr>(
        &self,
        name: &str,
        default: T,
    ) -> std::result::Result<T, String> {
        self.flag(name).map_or(Ok(default), |text| {
            text.parse()
                .map_err(|_| format!("{name} {text:?} does not parse; usage: {}", self.usage))
        })
    }

    /// The value after `name` as milliseconds, if given.
    ///
    /// # Errors
    /// When it is not a whole number.
    pub fn millis(&self, name: &str) -> std::result::Result<Option<std::time::Duration>, String> {
        self.flag(name)
            .map(|text| {
                text.parse()
                    .map(std::time::Duration::from_millis)
                    .map_err(|_| format!("{name} {text:?} is not milliseconds"))
            })
            .transpose()
    }
}

/// Copy the directory tree `from` to `to` (a private server's data directory, as a snapshot
/// a test rolls the server back to); panics on an I/O error.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the directory to copy") {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}

/// A [`RangeRegistry`](crate::RangeRegistry) for tests of an assigner's registration: it
/// records every range it is asked to register and refuses one overlapping `taken` (another
/// assigner's range), as the store's `worker_id_range` does. Clones share the record.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use uidgen_worker::testing::RecordingRegistry;
/// use uidgen_worker::{RangeRegistry, WorkerIdRange};
/// let registry = RecordingRegistry::taken(WorkerIdRange::new(0, 9)?);
/// assert!(registry.register_worker_range("a", WorkerIdRange::new(5, 20)?).await.is_err());
/// registry.register_worker_range("a", WorkerIdRange::new(10, 20)?).await?;
/// assert_eq!(registry.asked().len(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct RecordingRegistry {
    taken: Option<crate::range::WorkerIdRange>,
    asked: std::sync::Arc<std::sync::Mutex<Vec<(String, crate::range::WorkerIdRange)>>>,
}

impl RecordingRegistry {
    /// A registry in which another assigner holds `range`.
    pub fn taken(range: crate::range::WorkerIdRange) -> Self {
        Self {
            taken: Some(range),
            ..Self::default()
        }
    }

    /// What it was asked to register, in order: (assigner, range).
    pub fn asked(&self) -> Vec<(String, crate::range::WorkerIdRange)> {
        self.asked
            .lock()
            .map(|asked| asked.clone())
            .unwrap_or_default()
    }
}

impl crate::registry::RangeRegistry for RecordingRegistry {
    fn register_worker_range<'a>(
        &'a self,
        assigner: &'a str,
        range: crate::range::WorkerIdRange,
    ) -> crate::future::BoxFuture<'a, crate::error::Result<()>> {
        if let Ok(mut asked) = self.asked.lock() {
            asked.push((assigner.to_owned(), range));
        }
        let refused = self.taken.filter(|taken| taken.overlaps(range));
        Box::pin(async move {
            match refused {
                Some(taken) => Err(crate::error::WorkerError::InvalidInput(format!(
                    "the range {range} of {assigner} overlaps {taken}, another assigner's"
                ))),
                None => Ok(()),
            }
        })
    }
}

/// Send `request` to `address` (host:port) over a fresh TCP connection, with two-second
/// connect and read timeouts, and read the answer to its end; `None` when nothing answers.
/// The one probe behind the private servers' "does it answer" checks.
///
/// ```
/// assert_eq!(uidgen_worker::testing::ask("not an address", b"srvr"), None);
/// ```
pub fn ask(address: &str, request: &[u8]) -> Option<String> {
    let addr = address.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    stream.write_all(request).ok()?;
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply);
    Some(reply)
}

/// A server process of one test alone, on a port of its own, with its data in `dir/data` and
/// its output in a log file of `dir`. Killed, and its directory removed, when dropped.
///
/// ```no_run
/// use std::process::Command;
/// use uidgen_worker::testing::PrivateServer;
/// fn answers(_address: &str) -> bool { true }
/// let mut server = PrivateServer::new("my-server", "server.log", "127.0.0.1", answers);
/// let mut command = Command::new("my-server");
/// command.arg("--port").arg(server.port().to_string());
/// server.run(command, "install my-server");
/// let snapshot = server.snapshot();
/// server.replace_data(&snapshot);
/// ```
#[derive(Debug)]
pub struct PrivateServer {
    /// The server's name in messages (`"etcd"`, `"ZooKeeper"`).
    what: &'static str,
    port: u16,
    /// The address `answers` is asked at: `{host}:{port}`.
    address: String,
    dir: PathBuf,
    log: PathBuf,
    answers: fn(&str) -> bool,
    child: Option<Child>,
}

impl PrivateServer {
    /// A server named `what` (in messages), with a fresh directory and a free port on `host`;
    /// `answers` tells, given `host:port`, whether it is up. Nothing runs until
    /// [`run`](Self::run).
    ///
    /// # Panics
    /// When the directory cannot be made.
    pub fn new(what: &'static str, log: &str, host: &str, answers: fn(&str) -> bool) -> Self {
        let dir = std::env::temp_dir().join(unique(&format!("uidgen-{what}-server")));
        std::fs::create_dir_all(&dir).expect("create a private server's directory");
        let port = free_port();
        Self {
            what,
            port,
            address: format!("{host}:{port}"),
            log: dir.join(log),
            dir,
            answers,
            child: None,
        }
    }

    /// Its client port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host:port`, as `answers` is asked.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Its directory (data, configuration and log).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Its data directory, `dir/data`.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// Kill it if it runs, start `command` with its output appended to the log, and wait
    /// until it answers.
    ///
    /// # Panics
    /// When `command` cannot run (naming it, with `install` saying what to do), or the server
    /// does not answer within 60 s (naming its log).
    pub fn run(&mut self, mut command: Command, install: &str) {
        self.kill();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("open a private server's log");
        let program = command.get_program().to_string_lossy().into_owned();
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone a log file handle"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run `{program}` for a private {} ({e}); {install}",
                    self.what
                )
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(self.answers)(&self.address) {
            assert!(
                Instant::now() < deadline,
                "the private {} on port {} did not answer within 60 s; see {}",
                self.what,
                self.port,
                self.log.display()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kill the server process (SIGKILL: no goodbye to its clients) and wait, up to 10 s,
    /// until it no longer answers.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while (self.answers)(&self.address) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kill the server and remove its data directory (a disk lost, a container without a
    /// volume); the caller starts it again.
    pub fn empty_data(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(self.data_dir());
    }

    /// Kill the server and copy its data directory aside: a snapshot that
    /// [`replace_data`](Self::replace_data) rolls the server back to.
    pub fn snapshot(&mut self) -> PathBuf {
        self.kill();
        let to = self.dir.join(unique("snapshot"));
        copy_dir(&self.data_dir(), &to);
        to
    }

    /// Kill the server and replace its data with `snapshot`'s (a restore from an older
    /// snapshot); the caller starts it again.
    pub fn replace_data(&mut self, snapshot: &Path) {
        self.kill();
        let _ = std::fs::remove_dir_all(self.data_dir());
        copy_dir(snapshot, &self.data_dir());
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The contract every [`OrderMarks`](crate::OrderMarks) keeper is held to, checked on its
/// real service (`marks` must hold no mark of `default` or `a/b` yet): eight servers' raises
/// of `default` at once, each of its own rising values interleaved with the others', leave
/// the highest; every raise returns at least its value and every read after it sees at least
/// that; a lower raise changes nothing; and spaces (even ones with `/` in the name) keep marks
/// of their own.
///
/// # Panics
/// When the keeper breaks the contract or does not answer.
pub async fn check_order_marks_only_rise(marks: std::sync::Arc<dyn crate::OrderMarks>) {
    use crate::MarkRaise;
    const T0: u64 = 1_793_491_200_000;
    let read = |space| {
        let marks = std::sync::Arc::clone(&marks);
        async move { marks.read_mark(space).await.expect("read the mark") }
    };
    assert_eq!(read("default").await, None);
    let mut tasks = Vec::new();
    for server in 0..8u64 {
        let marks = std::sync::Arc::clone(&marks);
        tasks.push(tokio::spawn(async move {
            let holder = format!("server {server}");
            let mut seen = 0;
            for step in 0..6u64 {
                // Servers' values interleave: each raise races others both above and below.
                let value = T0 + step * 1_000 + (server * 5 % 8) * 100;
                let left = marks
                    .raise_mark(MarkRaise::new("default", &holder, value, T0))
                    .await
                    .expect("raise the mark");
                assert!(left >= value, "raise to {value} left {left}");
                let read = marks.read_mark("default").await.expect("read the mark");
                let read = read.expect("a mark after a raise");
                assert!(
                    read >= value && read >= seen,
                    "{read} after {value}, {seen}"
                );
                seen = read;
            }
        }));
    }
    for task in tasks {
        task.await.expect("a raising task");
    }
    let highest = T0 + 5 * 1_000 + 7 * 100;
    assert_eq!(read("default").await, Some(highest));
    let late = marks.raise_mark(MarkRaise::new("default", "late", T0, T0));
    assert_eq!(late.await.expect("a lower raise"), highest);
    assert_eq!(read("default").await, Some(highest));
    assert_eq!(read("a/b").await, None);
    let other = marks.raise_mark(MarkRaise::new("a/b", "other", T0, T0));
    other.await.expect("raise another space's mark");
    assert_eq!(read("a/b").await, Some(T0));
    assert_eq!(read("default").await, Some(highest));
}
