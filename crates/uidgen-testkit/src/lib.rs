//! Test support shared by uidgen's crates: the waits tests poll with, and the worker processes
//! that multi-process tests spawn.
//!
//! It is for tests only (a dev-dependency, `publish = false`): one copy of the helpers that
//! several crates' tests had written each for themselves, and the `uidgen-*-worker` binaries,
//! which lived as `[[bin]]`s of the library crates they drive (so those crates shipped test
//! binaries). A test finds one with [`worker_binary`]. It is not for anything a library
//! exposes: the `testing` modules of the publishable crates (`uidgen_store::testing`,
//! `uidgen_zk::testing`, `uidgen_sharded::testing`) keep their own, since a published crate
//! cannot depend on this one. For the same reason a free port for a test's server is
//! `uidgen_worker::testing::free_port`: the ZooKeeper, etcd and Redis that those modules
//! start need one too, and it is written once, where all of them can reach it.
//!
//! Every wait fails, naming what it waited for, after a bound given in seconds. The bound only
//! keeps a broken build from hanging the suite: no test asserts how long anything took.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! let polls = AtomicU32::new(0);
//! // Relaxed: a counter read by this thread only.
//! uidgen_testkit::eventually("the third poll", || polls.fetch_add(1, Ordering::Relaxed) >= 2);
//! assert_eq!(polls.load(Ordering::Relaxed), 3);
//! ```

pub mod history;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// How long [`eventually`] polls before it fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Poll `done` on this thread until it holds; fails (rather than hangs) after [`PATIENCE`].
/// Not a timing assertion: the bound only keeps a broken build from running forever.
///
/// # Panics
///
/// When `done` still does not hold after [`PATIENCE`], naming `what`.
pub fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Poll `done` from async code until it holds (the work it waits for runs as tasks, which this
/// yields to between polls), failing with `what` after `secs` seconds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// let ready = Arc::new(AtomicBool::new(false));
/// let flag = Arc::clone(&ready);
/// // SeqCst (both): a test flag, not a hot path.
/// tokio::spawn(async move { flag.store(true, Ordering::SeqCst) });
/// uidgen_testkit::eventually_within("the task", 5, || ready.load(Ordering::SeqCst)).await;
/// # }
/// ```
///
/// # Panics
///
/// When `done` still does not hold after `secs` seconds, naming `what`.
#[cfg(feature = "async")]
pub async fn eventually_within(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Poll the async `probe` (a request to a server, a look at a page) every 100 ms until it
/// gives a value, and return that; fail with `what` after `secs` seconds.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut polls = 0;
/// let third = uidgen_testkit::eventually_some("the third poll", 5, || {
///     polls += 1;
///     let seen = polls;
///     async move { (seen == 3).then_some(seen) }
/// })
/// .await;
/// assert_eq!(third, 3);
/// # }
/// ```
///
/// # Panics
///
/// When `probe` gave no value within `secs` seconds, naming `what`.
#[cfg(feature = "async")]
pub async fn eventually_some<T, F, Fut>(what: &str, secs: u64, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The path of this crate's worker binary `name` (`uidgen-store-worker`, `uidgen-zk-worker`,
/// `uidgen-segment-worker`), built first if need be, once per test process.
///
/// `env!("CARGO_BIN_EXE_…")` names only binaries of the test's own package, and cargo builds
/// another package's binaries for no test, so this runs `cargo build -p uidgen-testkit
/// --features workers --bin NAME` (a no-op when it is fresh) into the target directory and
/// profile of the running test binary, and takes the path cargo reports. Cargo does not hold
/// its build lock while tests run, so the nested build does not wait on the outer one.
///
/// # Panics
///
/// When the build fails or reports no executable (with cargo's output).
pub fn worker_binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<Vec<(String, PathBuf)>>> = OnceLock::new();
    // One build at a time: the tests of one process share what the first built.
    let mut built = BUILT.get_or_init(Mutex::default).lock();
    if let Some((_, path)) = built.iter().find(|(built, _)| built == name) {
        return path.clone();
    }
    let path = build_worker(name);
    built.push((name.to_owned(), path.clone()));
    path
}

fn build_worker(name: &str) -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.args([
        "build",
        "--package",
        "uidgen-testkit",
        "--features",
        "workers",
        "--bin",
        name,
        "--message-format",
        "json-render-diagnostics",
    ]);
    // The running test binary is `{target}/{profile}/deps/{test}`: build beside it, so that a
    // `--release` or `--target-dir` run is not built again in the default place.
    if let Some(profile_dir) = std::env::current_exe()
        .ok()
        .as_deref()
        .and_then(Path::parent)
        .and_then(Path::parent)
    {
        if let Some(target) = profile_dir
            .parent()
            .filter(|t| t.join("CACHEDIR.TAG").exists())
        {
            command.arg("--target-dir").arg(target);
        }
        if profile_dir.file_name().is_some_and(|p| p == "release") {
            command.arg("--release");
        }
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to build {name}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "building {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // One JSON message per line; the binary's artifact names its executable.
    let wanted = format!("\"name\":\"{name}\"");
    let executable = stdout
        .lines()
        .filter(|line| line.contains("\"reason\":\"compiler-artifact\"") && line.contains(&wanted))
        .find_map(|line| {
            let start = line.find("\"executable\":\"")? + "\"executable\":\"".len();
            let end = start + line[start..].find('"')?;
            Some(PathBuf::from(&line[start..end]))
        });
    executable.unwrap_or_else(|| panic!("cargo built {name} but named no executable:\n{stdout}"))
}
