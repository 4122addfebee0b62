//! Test support shared with other crates (feature `testing`): a unique name per test on a
//! shared service, a free port, what the multi-process tests' worker binaries share (their
//! command line, and issuing IDs to a file), and a range registry that records what it is
//! asked.

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
