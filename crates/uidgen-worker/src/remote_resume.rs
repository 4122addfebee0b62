//! A process restarted while no server answers continuing the fallback lease an earlier
//! process left in its state directory ([`RemoteLease::find_resumable`]): what the directory
//! offers ([`Resumable`]), and the wait for the clock to pass the file's mark
//! ([`PendingResume::start`]). The rules are `remote_lease.rs`'s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uidgen_core::{Clock, Layout};

use crate::cache::{CacheLock, read_cache};
use crate::error::{Result, WorkerError};
use crate::mark::MarkFence;
use crate::remote_lease::{FILE_PREFIX, FILE_SUFFIX, RemoteLease, check_worker, timing};

impl RemoteLease {
    /// What `dir` offers a process restarted while no server answers: the lease an earlier
    /// process left there, unexpired, whose file nobody holds, locked for this process
    /// ([`Resumable::Ready`]; continue it with [`PendingResume::start`], which waits for the
    /// clock to pass its mark); else the unexpired leases whose files another process holds
    /// ([`Resumable::Held`]: the previous process may still be exiting, or another process of
    /// the application uses them); else [`Resumable::Nothing`]. Among several, the lease running
    /// longest first. Only reads and locks files; waits for nothing.
    ///
    /// Files whose lease has passed are deleted: nothing can continue them any more (only the
    /// holder string they record could renew the lease), and the database's row guards the id
    /// until its expiry.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
    /// use std::sync::Arc;
    /// use uidgen_core::{Clock, Layout, SystemClock};
    /// use uidgen_worker::{LeaseGrant, RemoteLease, Resumable};
    /// let dir = tempfile::tempdir().map_err(|e| uidgen_worker::WorkerError::InvalidInput(e.to_string()))?;
    /// let (layout, clock) = (Layout::vesta_max_peak()?, Arc::new(SystemClock));
    /// assert!(matches!(RemoteLease::find_resumable(dir.path(), &layout, clock.clone())?, Resumable::Nothing));
    /// let now = SystemClock.now_millis();
    /// let grant = LeaseGrant {
    ///     worker_id: 17,
    ///     holder: "app/42#00ab34cd56ef7890".into(),
    ///     valid_until_ms: now + 60_000,
    ///     floor_ms: now - 1,
    /// };
    /// let running = RemoteLease::start(dir.path(), &layout, &grant, clock.clone()).await?;
    /// // The process holding the lease runs: its file is held, and said so.
    /// let Resumable::Held(held) = RemoteLease::find_resumable(dir.path(), &layout, clock.clone())? else {
    ///     panic!("the running lease's file is held");
    /// };
    /// assert_eq!((held[0].worker_id, held[0].valid_until_ms), (17, now + 60_000));
    /// drop(running); // the process exits
    /// let Resumable::Ready(pending) = RemoteLease::find_resumable(dir.path(), &layout, clock.clone())? else {
    ///     panic!("a lease to continue");
    /// };
    /// let lease = pending.start(&layout, clock).await?.expect("the lease has not passed");
    /// assert_eq!((lease.worker_id(), lease.is_confirmed()), (17, false));
    /// # Ok(()) }
    /// ```
    pub fn find_resumable(dir: &Path, layout: &Layout, clock: Arc<dyn Clock>) -> Result<Resumable> {
        let mut candidates = Vec::new();
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Resumable::Nothing);
            }
            Err(error) => {
                return Err(WorkerError::Cache {
                    path: dir.display().to_string(),
                    reason: format!("cannot list the fallback state directory: {error}"),
                });
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(worker_id) = name
                .to_str()
                .and_then(|n| n.strip_prefix(FILE_PREFIX))
                .and_then(|n| n.strip_suffix(FILE_SUFFIX))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if let Ok(cached) = read_cache(&entry.path())
                && let Some(expires) = cached.lease_expires_ms
            {
                candidates.push((expires, worker_id));
            }
        }
        // The lease with the most time left first.
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let mut held = Vec::new();
        for (valid_until_ms, worker_id) in candidates {
            match Self::lock_file(dir, layout, worker_id, clock.as_ref()) {
                Ok(Locked::Ready(pending)) => return Ok(Resumable::Ready(pending)),
                Ok(Locked::Held) => held.push(HeldLease {
                    worker_id,
                    valid_until_ms,
                    path: Self::state_file(dir, worker_id),
                }),
                Ok(Locked::Nothing) => {}
                Err(error) => tracing::warn!(worker_id, %error,
                    "cannot continue the fallback lease recorded in the state directory"),
            }
        }
        Ok(if held.is_empty() {
            Resumable::Nothing
        } else {
            Resumable::Held(held)
        })
    }

    /// [`find_resumable`](Self::find_resumable) for one file: lock it and read it again under
    /// the lock (the process we raced may have changed or deleted it); a lease that has passed
    /// is deleted.
    fn lock_file(dir: &Path, layout: &Layout, worker_id: u64, clock: &dyn Clock) -> Result<Locked> {
        let path = Self::state_file(dir, worker_id);
        let Some(cache) = CacheLock::try_acquire(&path)? else {
            return Ok(Locked::Held);
        };
        let Ok(cached) = read_cache(&path) else {
            return Ok(Locked::Nothing);
        };
        let (Some(holder), Some(valid_until_ms)) = (cached.holder, cached.lease_expires_ms) else {
            return Ok(Locked::Nothing);
        };
        check_worker(layout, worker_id)?;
        if clock.now_millis() >= valid_until_ms {
            cache.forget(worker_id)?;
            return Ok(Locked::Nothing);
        }
        Ok(Locked::Ready(PendingResume {
            cache,
            worker_id,
            holder,
            valid_until_ms,
            mark_ms: cached.until_ms,
        }))
    }
}

/// What a state directory offers a restarted process ([`RemoteLease::find_resumable`]).
#[derive(Debug)]
pub enum Resumable {
    /// No file records an unexpired lease.
    Nothing,
    /// Unexpired leases whose files another process holds, the longest running first: the
    /// previous process may still be exiting (its lock goes with it), or another process of
    /// the application runs on them.
    Held(Vec<HeldLease>),
    /// A lease this process locked, to continue once the clock passed its mark.
    Ready(PendingResume),
}

/// An unexpired lease in a state file another process holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldLease {
    /// The lease's worker id.
    pub worker_id: u64,
    /// Its recorded `valid_until` (ms since the Unix epoch).
    pub valid_until_ms: u64,
    /// The state file.
    pub path: PathBuf,
}

/// A lease an earlier process left, its state file locked by this process: what a restart
/// waits for before continuing it ([`start`](Self::start)). Dropping it unlocks the file.
#[derive(Debug)]
pub struct PendingResume {
    cache: CacheLock,
    worker_id: u64,
    holder: String,
    valid_until_ms: u64,
    mark_ms: u64,
}

impl PendingResume {
    /// The lease's worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// Its recorded `valid_until`: the continued lease runs until then unless a server renews it.
    pub fn valid_until_ms(&self) -> u64 {
        self.valid_until_ms
    }

    /// The file's mark: the earlier process stamped only before it, so the continuation starts
    /// once the clock has passed it.
    pub fn mark_ms(&self) -> u64 {
        self.mark_ms
    }

    /// The state file.
    pub fn path(&self) -> &Path {
        self.cache.path()
    }

    /// Continue the lease from above the file's mark (waiting until `clock` has passed it, at
    /// most 15 s) until its recorded `valid_until`; `Ok(None)` when that passed meanwhile (the
    /// file is then deleted). The lease is unconfirmed until a server renews it.
    ///
    /// Errors: [`WorkerError::ClockBehindLastIssued`] when the mark is further ahead of the
    /// clock than the wait allows; [`WorkerError::Cache`] when the file cannot be written.
    ///
    /// Cancel safety: cancelled while it waits, nothing is left behind but the file as it was.
    pub async fn start(
        self,
        layout: &Layout,
        clock: Arc<dyn Clock>,
    ) -> Result<Option<RemoteLease>> {
        let Self {
            cache,
            worker_id,
            holder,
            valid_until_ms,
            ..
        } = self;
        let fence = MarkFence::continue_above(
            cache,
            worker_id,
            layout,
            &timing(Arc::clone(&clock)),
            0,
            Some((&holder, valid_until_ms)),
            false,
        )
        .await?;
        let lease = RemoteLease::new(fence, worker_id, holder, valid_until_ms, false);
        if clock.now_millis() >= valid_until_ms {
            lease.lose("its recorded valid_until passed while waiting for the clock");
            return Ok(None);
        }
        tracing::warn!(
            worker_id,
            valid_until_ms,
            "no server answers: continuing the fallback lease an earlier process left in the state \
             directory, until its recorded expiry or a server's answer"
        );
        Ok(Some(lease))
    }
}

/// One state file, as [`RemoteLease::find_resumable`] found it.
enum Locked {
    Nothing,
    Held,
    Ready(PendingResume),
}
