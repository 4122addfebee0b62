//! Test support shared by uidgen's crates: the waits tests poll with, and a free port.
//!
//! It is for tests only (a dev-dependency, `publish = false`): one copy of the helpers that
//! several crates' tests had written each for themselves. It is not for anything a library
//! exposes: the `testing` modules of the publishable crates (`uidgen_store::testing`,
//! `uidgen_zk::testing`, `uidgen_sharded::testing`) keep their own, since a published crate
//! cannot depend on this one.
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
//! assert_ne!(uidgen_testkit::free_port(), 0);
//! ```

use std::time::{Duration, Instant};

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

/// A port nobody listens on right now (the OS's choice for an ephemeral bind, released again),
/// for a test's own server or one that must come back on the same address after a restart.
///
/// # Panics
///
/// When 127.0.0.1 cannot be bound at all.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|e| panic!("cannot find a free port on 127.0.0.1: {e}"))
}
