//! [`RemoteLease`]: a worker id leased through a server (the store's `FallbackLeases`)
//! and held by a process that never talks to the database (the client's embedded fallback).
//! It is that process's generator fence.
//!
//! Invariants:
//! - `limit`: the lease's last *confirmed* `valid_until` (raised only after a server answered
//!   that the database accepted it), and the local state file's reserved-until mark (synced
//!   before any ID past it is stamped), whichever is lower; 0 once the lease ended.
//! - `floor`: the floor the server granted (past the expiry the claim replaced, at least the
//!   recorded issued-until time), and the state file's mark, whichever is higher. A start
//!   waits until its clock passes it.
//! - The mark rises only when an ID needs it (no thread keeps it ahead: a fallback is idle
//!   most of its life, and its file should not be written every second meanwhile).
//! - The state file (`{dir}/fallback-{worker_id}.state`) is locked from the claim (or the
//!   restart) until the process lets the lease go, so two processes never hold one lease's
//!   file; it records the holder string and the confirmed `valid_until`. A process restarted
//!   while no server answers may continue the lease from an unlocked file whose recorded
//!   `valid_until` has not passed, from above its mark, until that `valid_until`: the
//!   database's row says the lease holds until then, so nobody else can have the id.
//! - A lease that is lost (a renewal found it taken over) or released ends at once, and its
//!   file is deleted: no restart may pick it up again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use uidgen_core::{Clock, FenceRefusal, Layout, TimeFence};

use crate::cache::CacheLock;
use crate::error::{Result, WorkerError};
use crate::mark::{MarkFence, MarkTiming};
use crate::static_id::StaticWorkerIdAssigner;

/// The prefix and suffix of a lease's state file in its directory.
pub(crate) const FILE_PREFIX: &str = "fallback-";
pub(crate) const FILE_SUFFIX: &str = ".state";

/// The shortest fallback lease a client may ask for.
pub const MIN_FALLBACK_LEASE_TTL: Duration = Duration::from_secs(1);

/// A fallback lease as a server grants it to a client.
///
/// ```
/// use uidgen_worker::LeaseGrant;
/// let grant = LeaseGrant {
///     worker_id: 17,
///     holder: "api-1/4242#00ab34cd56ef7890".into(),
///     valid_until_ms: 1_800_000_030_000,
///     floor_ms: 1_800_000_000_000,
/// };
/// assert!(grant.floor_ms < grant.valid_until_ms);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The leased worker id.
    pub worker_id: u64,
    /// The holder string renewals and the release must name (the name, `#`, a random token).
    pub holder: String,
    /// The lease's expiry (ms since the Unix epoch): IDs may be stamped in units ending by it.
    pub valid_until_ms: u64,
    /// Where earlier holders of the id stopped: only units ending after it may be stamped.
    pub floor_ms: u64,
}

/// A worker id leased through a server, fenced by its lease and its local state file.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use std::sync::Arc;
/// use uidgen_core::{
///     Clock, DefaultUidGenerator, Layout, SystemClock, TimeFence, UidGenerator,
/// };
/// use uidgen_worker::{LeaseGrant, RemoteLease};
/// let dir = tempfile::tempdir().map_err(|e| uidgen_worker::WorkerError::InvalidInput(e.to_string()))?;
/// let layout = Layout::vesta_max_peak()?;
/// let now = SystemClock.now_millis();
/// // What a server's claim route answered.
/// let grant = LeaseGrant {
///     worker_id: 17,
///     holder: "app/42#00ab34cd56ef7890".into(),
///     valid_until_ms: now + 30_000,
///     floor_ms: now - 1,
/// };
/// let lease = Arc::new(
///     RemoteLease::start(dir.path(), &layout, &grant, Arc::new(SystemClock))
///         .await?
///         .expect("nobody else holds the state file"),
/// );
/// assert!(dir.path().join("fallback-17.state").exists());
/// let generator = DefaultUidGenerator::new(layout.clone(), 17, SystemClock)?
///     .fenced(Arc::clone(&lease) as Arc<dyn TimeFence>);
/// let id = generator.next_id()?;
/// assert_eq!(layout.decompose(id)?.worker, 17);
/// assert!(lease.limit_ms() <= grant.valid_until_ms);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RemoteLease {
    /// The state file's mark, the floor and the borrowing bound.
    fence: MarkFence,
    worker_id: u64,
    holder: String,
    /// The last `valid_until` a server confirmed: IDs end by it.
    valid_until_ms: AtomicU64,
    /// The highest issued-until time recorded by the caller.
    issued_until_ms: AtomicU64,
    /// Whether a server confirmed this life of the lease (false for a restart from the file
    /// until its first renewal).
    confirmed: AtomicBool,
    /// Set once the lease ended: read on every issued ID.
    ended_flag: AtomicBool,
    /// Why it ended.
    ended: Mutex<Option<String>>,
}

impl RemoteLease {
    /// The state file of `worker_id`'s lease in `dir`.
    ///
    /// ```
    /// let path = uidgen_worker::RemoteLease::state_file("/var/lib/app/uidgen".as_ref(), 17);
    /// assert_eq!(path.to_str(), Some("/var/lib/app/uidgen/fallback-17.state"));
    /// ```
    pub fn state_file(dir: &Path, worker_id: u64) -> PathBuf {
        dir.join(format!("{FILE_PREFIX}{worker_id}{FILE_SUFFIX}"))
    }

    /// Keep the lease a server just granted: lock its state file in `dir`, raise the floor to
    /// the file's mark (an earlier lease of this host on the id), wait until `clock` has passed
    /// the floor (at most 15 s), and record the lease in the file. `Ok(None)` when another
    /// process holds the file.
    ///
    /// Errors: [`WorkerError::ClockBehindLastIssued`] when the clock is further behind the
    /// floor; [`WorkerError::Cache`] when the file cannot be written;
    /// [`WorkerError::WorkerIdOutOfRange`] for an id the layout cannot hold.
    pub async fn start(
        dir: &Path,
        layout: &Layout,
        grant: &LeaseGrant,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<Self>> {
        check_worker(layout, grant.worker_id)?;
        let path = Self::state_file(dir, grant.worker_id);
        let Some(cache) = CacheLock::try_acquire(&path)? else {
            return Ok(None);
        };
        let fence = MarkFence::continue_above(
            cache,
            grant.worker_id,
            layout,
            &timing(clock),
            grant.floor_ms,
            Some((&grant.holder, grant.valid_until_ms)),
            false,
        )
        .await?;
        Ok(Some(Self::new(
            fence,
            grant.worker_id,
            grant.holder.clone(),
            grant.valid_until_ms,
            true,
        )))
    }

    pub(crate) fn new(
        fence: MarkFence,
        worker_id: u64,
        holder: String,
        valid_until_ms: u64,
        confirmed: bool,
    ) -> Self {
        Self {
            fence,
            worker_id,
            holder,
            valid_until_ms: AtomicU64::new(valid_until_ms),
            issued_until_ms: AtomicU64::new(0),
            confirmed: AtomicBool::new(confirmed),
            ended_flag: AtomicBool::new(false),
            ended: Mutex::new(None),
        }
    }

    /// The leased worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// The holder string renewals and the release name.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The last `valid_until` a server confirmed (or the state file recorded).
    pub fn valid_until_ms(&self) -> u64 {
        // SeqCst: raised only after a server confirmed it; stamping under it must not be
        // ordered before that.
        self.valid_until_ms.load(Ordering::SeqCst)
    }

    /// Whether a server has confirmed this life of the lease (a restart from the state file
    /// is unconfirmed until its first renewal).
    pub fn is_confirmed(&self) -> bool {
        self.confirmed.load(Ordering::SeqCst)
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        self.fence.mark.path()
    }

    /// A server renewed the lease to `valid_until_ms`: record it in the state file, then raise
    /// the limit (never lowered). Ignored once the lease ended.
    pub fn confirm(&self, valid_until_ms: u64) {
        if self.is_ended() {
            return;
        }
        if let Err(error) = self.fence.mark.record_claim(&self.holder, valid_until_ms) {
            // Only shortens how long a restart may run from the file.
            tracing::warn!(%error, "cannot record the fallback lease's expiry in its state file");
        }
        // SeqCst: see valid_until_ms().
        self.valid_until_ms
            .fetch_max(valid_until_ms, Ordering::SeqCst);
        self.confirmed.store(true, Ordering::SeqCst);
    }

    /// Record that IDs were issued up to `ms`.
    pub fn record_issued_until(&self, ms: u64) {
        // Relaxed: a monotonic maximum read by the same process's renewals and release, which
        // end the lease (SeqCst) before the read that matters.
        self.issued_until_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// What to tell the database this lease issued up to: the recorded time, and at least the
    /// floor (an earlier life of the lease may have issued up to there).
    pub fn issued_until_ms(&self) -> u64 {
        // Relaxed: see record_issued_until().
        self.issued_until_ms
            .load(Ordering::Relaxed)
            .max(self.fence.floor_ms)
    }

    /// Whether the lease ended (lost or let go): no ID may be let out after this.
    pub fn is_ended(&self) -> bool {
        // SeqCst: pairs with the store in `end`; a caller checks after stamping an ID.
        self.ended_flag.load(Ordering::SeqCst)
    }

    /// Why the lease ended, once it did.
    pub fn ended_reason(&self) -> Option<String> {
        self.ended.lock().clone()
    }

    /// End the lease (the first reason sticks): the limit drops to 0.
    pub fn end(&self, reason: &str) {
        let mut ended = self.ended.lock();
        if ended.is_none() {
            *ended = Some(reason.to_owned());
        }
        // SeqCst: see is_ended().
        self.ended_flag.store(true, Ordering::SeqCst);
    }

    /// The lease is gone for good (a renewal found it taken over or released): end it and
    /// delete its state file, so that no restart continues it.
    pub fn lose(&self, reason: &str) {
        self.end(reason);
        if let Err(error) = self.fence.mark.forget() {
            // Harmless: the file's valid_until lies before any new holder's claim.
            tracing::warn!(%error, "cannot delete the fallback lease's state file");
        }
    }

    /// Let the lease go: end it, then read how far it issued (the caller stamps only while
    /// [`is_ended`](Self::is_ended) is false and checks it again after each ID, so with the
    /// SeqCst fences on both sides an ID either is refused or counted here), and delete the
    /// state file. Returns the issued-until time to record in the release.
    ///
    /// # Errors
    /// [`WorkerError::Cache`] when the file cannot be deleted: then do not release in the
    /// database, since a restart could still continue the lease from the file; let it expire.
    pub fn let_go(&self, issued_until_ms: impl FnOnce() -> Option<u64>) -> Result<u64> {
        self.end("released");
        std::sync::atomic::fence(Ordering::SeqCst);
        if let Some(ms) = issued_until_ms() {
            self.record_issued_until(ms);
        }
        self.fence.mark.forget()?;
        Ok(self.issued_until_ms())
    }
}

/// The lease is its fallback generator's fence: IDs only up to its confirmed expiry and under
/// its state file's mark, above its floor, nothing once it ended.
impl TimeFence for RemoteLease {
    fn limit_ms(&self) -> u64 {
        if self.is_ended() {
            return 0;
        }
        self.valid_until_ms().min(self.fence.limit_ms())
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        if self.is_ended() {
            let reason = self.ended_reason().unwrap_or_default();
            return Err(FenceRefusal::Closed(format!(
                "the fallback lease on worker id {} ended: {reason}",
                self.worker_id
            )));
        }
        let valid_until = self.valid_until_ms();
        if until_ms > valid_until {
            return Err(FenceRefusal::NotYet {
                limit_ms: self.limit_ms(),
                reason: format!(
                    "the fallback lease on worker id {} runs until {valid_until} ms and no server \
                     has renewed it since",
                    self.worker_id
                ),
            });
        }
        self.fence.extend(until_ms)?;
        Ok(self.limit_ms())
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        self.fence.max_borrow_ms()
    }

    fn floor_ms(&self) -> u64 {
        self.fence.floor_ms()
    }
}

/// The static assigner's bounds: a start waits up to 15 s for its clock, a cached generator
/// borrows up to 10 s.
pub(crate) fn timing(clock: Arc<dyn Clock>) -> MarkTiming {
    MarkTiming {
        clock,
        max_start_wait: StaticWorkerIdAssigner::DEFAULT_MAX_START_WAIT,
        max_borrow: StaticWorkerIdAssigner::DEFAULT_MAX_BORROW,
    }
}

pub(crate) fn check_worker(layout: &Layout, worker_id: u64) -> Result<()> {
    let max = layout.max_worker_id();
    if worker_id > max {
        return Err(WorkerError::WorkerIdOutOfRange { id: worker_id, max });
    }
    Ok(())
}
