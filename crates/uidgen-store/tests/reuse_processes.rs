#![allow(clippy::unwrap_used)]
//! Issue #8, cases 1–3, as separate OS processes: each life of a reused worker id is its own
//! `uidgen-store-worker reuse` process on a clock the test sets (`--clock-ms`), and a crash is
//! a process that exits without releasing anything (`--crash`). What one life leaves behind (the
//! lease row, the local cache, the static state file) is all the next one has.
//!
//! The in-process versions of these scenarios are in tests/lease.rs.

mod common;

use std::path::Path;

use common::narrow_layout;
use uidgen_store::DEFAULT_SPACE;
use uidgen_store::testing::{TestDb, fresh_store};
use uidgen_worker::read_cache;

const T0: u64 = 1_800_000_000_000;

/// What one worker process did.
#[derive(Debug)]
struct Life {
    name: String,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    ids: Vec<u64>,
}

impl Life {
    /// Assert that it ran on `worker_id`, obtained as `kind` (`Leased`, `LocalCache`,
    /// `Static`), and issued IDs.
    #[track_caller]
    fn expect_ran(&self, worker_id: u64, kind: &str) {
        assert_eq!(self.code, Some(0), "{}: {}", self.name, self.stderr);
        assert_eq!(
            self.stdout.trim(),
            format!("{worker_id} {kind}"),
            "{}",
            self.name
        );
        assert!(!self.ids.is_empty(), "{} issued no IDs", self.name);
    }

    /// Assert that it was refused a worker id, saying `why`, and issued nothing.
    #[track_caller]
    fn expect_refused(&self, why: &str) {
        assert_eq!(
            self.code,
            Some(3),
            "{} was not refused: {self:?}",
            self.name
        );
        assert!(self.stderr.contains(why), "{}: {}", self.name, self.stderr);
        assert!(self.ids.is_empty(), "{} issued IDs", self.name);
    }
}

/// A directory of its own for one test's cache, state and ID files; removed when dropped.
fn test_dir() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix(&format!("uidgen-reuse-{}-", std::process::id()))
        .tempdir()
        .unwrap();
    // The flags below are split on whitespace.
    assert!(
        !dir.path()
            .display()
            .to_string()
            .contains(char::is_whitespace)
    );
    dir
}

/// Run `uidgen-store-worker reuse FLAGS --out DIR/NAME.ids` to the end and collect what it did.
/// FLAGS is split on whitespace.
async fn live(dir: &Path, name: &str, flags: &str) -> Life {
    let out = dir.join(format!("{name}.ids"));
    let output = tokio::process::Command::new(uidgen_testkit::worker_binary("uidgen-store-worker"))
        .arg("reuse")
        .args(flags.split_whitespace())
        .arg("--out")
        .arg(&out)
        .output()
        .await
        .unwrap();
    let ids = match std::fs::read(&out) {
        Ok(bytes) => {
            std::fs::remove_file(&out).unwrap();
            bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect()
        }
        Err(_) => Vec::new(),
    };
    Life {
        name: name.to_owned(),
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        ids,
    }
}

/// Assert that no ID was issued twice across `lives`.
#[track_caller]
fn assert_no_duplicates(lives: &[&Life]) {
    let mut ids: Vec<u64> = lives.iter().flat_map(|l| l.ids.iter().copied()).collect();
    let issued = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), issued, "an ID was issued twice across {lives:?}");
}

/// The time units (seconds since the layout's epoch) the IDs of `lives` were stamped in, as
/// (earliest, latest).
fn units(worker_bits: u32, lives: &[&Life]) -> (u64, u64) {
    let layout = narrow_layout(worker_bits);
    let times = lives
        .iter()
        .flat_map(|l| l.ids.iter())
        .map(|&id| layout.decompose(id).unwrap().time);
    let (min, max) = times.fold((u64::MAX, 0), |(lo, hi), t| (lo.min(t), hi.max(t)));
    assert!(min <= max, "no IDs in {lives:?}");
    (min, max)
}

per_db! {
    /// Issue #8, case 1: a holder that crashed restarts on its local cache while the database
    /// is down, and another host takes the id over from the database: the two never both run.
    /// A's lease row expires at its own expiry (30 s) plus the cache reserve (60 s); a restart
    /// on the cache runs only before that, a takeover only after it.
    ///
    /// Before this change a start from the cache ran one ttl after the cache's mark and a
    /// takeover came at the holder's own expiry, so B at T0 + 31 s would have taken the id from
    /// the database *and* A2 would have run on the cache at the same time, on the same worker
    /// id and the same seconds.
    async fn a_cache_restart_and_a_database_takeover_never_overlap_across_processes(db: TestDb) {
        let (_store, url) = fresh_store(db).await.unwrap();
        let dir = test_dir();
        let cache = dir.path().join("worker.cache");
        // One worker id (0 worker bits), so B and A always want the same one.
        let other_host = |clock_ms: u64| format!("--worker-bits 0 --url {url} --clock-ms {clock_ms}");
        let a_host = |clock_ms: u64| format!("{} --cache {}", other_host(clock_ms), cache.display());

        let a = live(dir.path(), "a", &format!("{} --crash", a_host(T0))).await;
        a.expect_ran(0, "Leased");
        let cached = read_cache(&cache).unwrap();
        assert_eq!(cached.lease_expires_ms, Some(T0 + 90_000), "{cached:?}");

        // Past A's own expiry but inside the reserve: the database still shows A's lease.
        let b = live(dir.path(), "b", &other_host(T0 + 31_000)).await;
        b.expect_refused("no free worker id");
        let a2 = live(dir.path(), "a2", &format!("{} --down --crash", a_host(T0 + 31_000))).await;
        a2.expect_ran(0, "LocalCache");

        // Past the reserve: B2 takes the id over; A restarting on its cache is refused now.
        let b2 = live(dir.path(), "b2", &other_host(T0 + 91_000)).await;
        b2.expect_ran(0, "Leased");
        let a3 = live(dir.path(), "a3", &format!("{} --down", a_host(T0 + 95_000))).await;
        a3.expect_refused("another process may hold");

        assert_no_duplicates(&[&a, &a2, &b2]);
        let (_, a_last) = units(0, &[&a, &a2]);
        let (b_first, _) = units(0, &[&b2]);
        assert!(a_last < b_first, "A stamped second {a_last}, B2 second {b_first}");
    }
}

per_db! {
    /// Issue #8, case 2: the holder's clock steps back 20 s and its heartbeat renews; the
    /// database keeps the higher expiry, so a successor on a correct clock still waits for it.
    /// (Had the renewal written "now + ttl", the row would say T0 + 10 s and B would take the id
    /// at T0 + 11 s while A, its clock caught up, may stamp until T0 + 30 s.)
    async fn a_renewal_after_a_clock_step_back_keeps_the_successor_waiting_across_processes(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let dir = test_dir();
        let leased = |clock_ms: u64| format!("--worker-bits 0 --url {url} --clock-ms {clock_ms}");

        let a = live(dir.path(), "a", &format!("{} --renew-at-ms {} --crash", leased(T0), T0 - 20_000)).await;
        a.expect_ran(0, "Leased");
        assert_eq!(store.lease_row(DEFAULT_SPACE, 0).await.unwrap().unwrap().expires_at_ms, T0 + 30_000);

        let b = live(dir.path(), "b", &leased(T0 + 11_000)).await;
        b.expect_refused("no free worker id");
        let b2 = live(dir.path(), "b2", &leased(T0 + 30_001)).await;
        b2.expect_ran(0, "Leased");

        assert_no_duplicates(&[&a, &b2]);
        let (_, a_last) = units(0, &[&a]);
        let (b_first, _) = units(0, &[&b2]);
        assert!(a_last < b_first, "A stamped second {a_last}, B2 second {b_first}");
    }
}

/// Issue #8, case 3: a static worker id restarted inside the second its previous life stamped.
/// Without the state file's mark, P2 at T0 + 800 ms would stamp that second again with its
/// sequence from 0: P1's IDs, again. It is refused; a life whose clock is past the mark runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_id_restarted_inside_its_last_second_waits_for_the_mark() {
    let dir = test_dir();
    let state = dir.path().join("worker-5.state");
    let static_5 = |clock_ms: u64| {
        format!(
            "--assigner static --worker-id 5 --worker-bits 10 --state {} --clock-ms {clock_ms}",
            state.display()
        )
    };

    let p1 = live(dir.path(), "p1", &format!("{} --crash", static_5(T0 + 200))).await;
    p1.expect_ran(5, "Static");
    let mark = read_cache(&state).unwrap().until_ms;
    assert!(
        mark >= T0 + 1_000,
        "the mark {mark} must cover the second P1 stamped"
    );

    let p2 = live(
        dir.path(),
        "p2",
        &format!("{} --max-wait-ms 0", static_5(T0 + 800)),
    )
    .await;
    p2.expect_refused(&format!("worker id 5 was used until {mark} ms"));

    let p3 = live(dir.path(), "p3", &static_5(mark + 1)).await;
    p3.expect_ran(5, "Static");

    assert_no_duplicates(&[&p1, &p3]);
    let (_, p1_last) = units(10, &[&p1]);
    let (p3_first, _) = units(10, &[&p3]);
    assert!(
        p1_last < p3_first,
        "P1 stamped second {p1_last}, P3 second {p3_first}"
    );
}

/// IDs P1 takes: five seconds' worth of 13-bit sequences, so its cached generator borrows
/// seconds ahead of the (system) clock.
const BORROWING_IDS: usize = 5 * 8_192;

/// Issue #8, case 3 with a cached generator on the system clock: the previous life borrowed
/// seconds ahead, and a restart must wait for them (the mark covers every padded second),
/// however soon it comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_id_restart_waits_out_the_seconds_its_cached_generator_borrowed() {
    let dir = test_dir();
    let state = dir.path().join("worker-5.state");
    // 20 worker bits leave 13 of sequence (8,192 IDs a second); a ring of one second's IDs
    // (boost power 0), so borrowing follows demand rather than the ring's size.
    let static_5 = format!(
        "--assigner static --worker-id 5 --worker-bits 20 --state {} --generator cached --boost-power 0",
        state.display()
    );

    let p1 = live(
        dir.path(),
        "p1",
        &format!("{static_5} --count {BORROWING_IDS} --crash"),
    )
    .await;
    p1.expect_ran(5, "Static");
    assert_eq!(p1.ids.len(), BORROWING_IDS);
    let mark = read_cache(&state).unwrap().until_ms;

    let p2 = live(dir.path(), "p2", &format!("{static_5} --max-wait-ms 0")).await;
    p2.expect_refused("worker id 5 was used until");

    // The default start wait (15 s) outlasts what P1 borrowed and the mark's step.
    let started = std::time::Instant::now();
    let p3 = live(dir.path(), "p3", &format!("{static_5} --count 8192")).await;
    p3.expect_ran(5, "Static");
    eprintln!(
        "P1's mark was {mark} ms; P3 started after {:?}",
        started.elapsed()
    );

    assert_no_duplicates(&[&p1, &p3]);
    let (_, p1_last) = units(20, &[&p1]);
    let (p3_first, _) = units(20, &[&p3]);
    assert!(
        p1_last < p3_first,
        "P1 stamped second {p1_last}, P3 second {p3_first}"
    );
}

/// A burst of IDs far past what a second holds: 100,000 on a 13-bit sequence (8,192 a second)
/// is twelve seconds of IDs, so the cached generator borrows as far as the lease lets it.
const BURST: usize = 100_000;

/// Flags of a leased life on a range of one worker id (5-5 of a 20-bit worker field, leaving 13
/// bits of sequence), with the cached generator on the system clock and the library's default
/// lease options.
fn one_id_burst(url: &str) -> String {
    format!("--url {url} --worker-bits 20 --range 5-5 --generator cached")
}

per_db! {
    /// Issue 18: a leased holder bursts and releases; its successor starts at once on the only
    /// id of the range. The holder borrowed as far as the lease let it (a third of the ttl);
    /// the successor's wait covers that bound, so it is served, not refused for its clock,
    /// and stamps only seconds after the burst's.
    ///
    /// Before the fix the holder borrowed 10 s while a successor waited 5 s at most.
    async fn a_restart_right_after_a_burst_on_a_range_of_one_id_is_served(db: TestDb) {
        let (store, url) = fresh_store(db).await.unwrap();
        let dir = test_dir();
        let flags = one_id_burst(&url);

        let a = live(dir.path(), "a", &format!("{flags} --count {BURST}")).await;
        a.expect_ran(5, "Leased");
        assert_eq!(a.ids.len(), BURST);
        let recorded = store.lease_row(DEFAULT_SPACE, 5).await.unwrap().unwrap().last_issued_ms;
        let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
        eprintln!("A released worker id 5 issued until {recorded} ms, {} ms ahead of the clock", recorded.saturating_sub(now));

        let b = live(dir.path(), "b", &format!("{flags} --count 8192")).await;
        b.expect_ran(5, "Leased");

        assert_no_duplicates(&[&a, &b]);
        let (_, a_last) = units(20, &[&a]);
        let (b_first, _) = units(20, &[&b]);
        assert!(a_last < b_first, "A stamped second {a_last}, B second {b_first}");
    }
}

per_db! {
    /// Issue 18, with the local cache: the holder bursts and crashes; a restart on the same
    /// host while the database is unreachable waits for the cache's mark, which lies past
    /// every borrowed second (and a step more), and is served within its wait.
    async fn a_cache_restart_right_after_a_burst_on_a_range_of_one_id_is_served(db: TestDb) {
        let (_store, url) = fresh_store(db).await.unwrap();
        let dir = test_dir();
        let cache = dir.path().join("worker-5.cache");
        let flags = format!("{} --cache {}", one_id_burst(&url), cache.display());

        let a = live(dir.path(), "a", &format!("{flags} --count {BURST} --crash")).await;
        a.expect_ran(5, "Leased");
        let mark = read_cache(&cache).unwrap().until_ms;
        let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
        eprintln!("A crashed with its mark at {mark} ms, {} ms ahead of the clock", mark.saturating_sub(now));

        // Crashes too: a release needs the database.
        let a2 = live(dir.path(), "a2", &format!("{flags} --down --count 8192 --crash")).await;
        a2.expect_ran(5, "LocalCache");

        assert_no_duplicates(&[&a, &a2]);
        let (_, a_last) = units(20, &[&a]);
        let (a2_first, _) = units(20, &[&a2]);
        assert!(a_last < a2_first, "A stamped second {a_last}, A2 second {a2_first}");
    }
}
