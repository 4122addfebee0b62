//! Leased worker ids: [`LeasedWorkerIdAssigner`] and the [`LeaseGuard`] that keeps a lease.
//!
//! For narrow layouts (a 10-bit Snowflake) where a fresh id per start would run out. The rules
//! that keep IDs unique when a worker id changes hands:
//!
//! - A lease is claimed by one conditional statement (an `INSERT` for a never-used id, an
//!   `UPDATE ... WHERE expires_at_ms < now` for an expired one); the affected-row count picks
//!   exactly one winner among racing processes.
//! - A lease is of a worker id in one ID space ([`LeasedWorkerIdAssigner::in_space`]; the
//!   default space unless a server's `[spaces.<name>]`): IDs of two spaces may be equal, so
//!   every rule here holds per (space, worker id), and a worker id held in one space is free in
//!   the others.
//! - The holder's generator is fenced by the lease ([`uidgen_core::TimeFence`]): it stamps only
//!   time units that end by the lease's own expiry, `valid_until`. The database row's
//!   `expires_at_ms` is `valid_until + reserve` and never falls (renewal writes the greater of
//!   the two), so a successor, which takes over only once its clock is past the row's expiry,
//!   cannot stamp the same unit, whatever this holder's clock did meanwhile.
//! - The heartbeat records the generator's
//!   [`issued_until_ms`](uidgen_core::UidGenerator::issued_until_ms); a new holder waits until its
//!   clock has passed the recorded time (up to
//!   [`max_takeover_wait`](LeaseOptions::max_takeover_wait), else
//!   [`WorkerError::ClockBehindLastIssued`](uidgen_worker::WorkerError::ClockBehindLastIssued)). The holder's borrowing is bounded so that this
//!   wait covers it ([`LeaseOptions::max_borrow`]): a successor on the same clock is never
//!   refused for a burst.
//! - A lease that cannot be renewed stops being valid at its expiry; one taken over is lost at
//!   once. Either way [`LeaseGuard::check`] fails with [`StoreError::LeaseLost`].
//! - Every claim writes a holder string of its own (the configured name, `#`, a random token),
//!   so renewal and release, which match on it, never touch another claim's lease.
//! - The local cache (optional) is the worker id's state file: the holder string, the row's
//!   expiry as last accepted, and a reserved-until mark that is synced to disk before any ID
//!   past it is stamped. A restart on this host while the database answers continues the
//!   lease the file records if the row still names its holder: the row is handed to the
//!   restart's holder string in one statement matching the old one, and the restart starts
//!   above the mark (so a `kill -9` costs the wait for the clock to pass the mark, not the
//!   lease's expiry). While the database is unreachable, a restart on this host may run on
//!   the cached id only after its clock passed the mark and only until the recorded expiry,
//!   which is at most `reserve` past the crashed holder's `valid_until`: the window no other
//!   process can enter, because the row says the lease still holds. Its renewal matches the
//!   recorded holder string, so it succeeds only if nobody took the id over (which anyone
//!   could do only after that expiry); otherwise the lease is lost. Without a cache the
//!   reserve is zero. The file is deleted before a release, and locked while a lease uses it.

use std::sync::Arc;

use uidgen_core::clock::saturating_millis;
use uidgen_core::{Clock, Layout, SystemClock};

use uidgen_worker::{
    AssignmentKind, BoxFuture, CacheLock, LeaseOptions, LocalMark, WorkerAssignment, WorkerError,
    WorkerIdAssigner, WorkerIdRange, default_holder, mark_step_ms, read_cache, wait_for_clock,
};

use crate::error::{Result, StoreError, StoreFuture};
use crate::lease_claim::{ClaimedRow, claim_row, holder_with_token};
use crate::lease_guard::{LeaseGuard, NewLease};
use crate::store::Store;
use crate::worker_lease::{DEFAULT_SPACE, check_space};

/// Leases a worker id in `0..=layout.max_worker_id()` (or in [`LeaseOptions::range`]) from the
/// `worker_lease` table.
///
/// ```no_run
/// # async fn demo() -> uidgen_store::Result<()> {
/// use uidgen_core::{Layout, SystemClock};
/// use uidgen_store::{LeaseGuard, LeasedWorkerIdAssigner, Store};
/// use uidgen_worker::LeaseOptions;
/// let store = Store::connect("postgres://postgres@127.0.0.1/test").await?;
/// let assigner = LeasedWorkerIdAssigner::new(store, SystemClock, LeaseOptions::default());
/// let assignment = assigner.assign(&Layout::snowflake()?).await?;
/// let lease = LeaseGuard::of(&assignment).expect("a leased assignment carries its lease");
/// lease.check()?; // before issuing; the heartbeat keeps it valid
/// lease.release().await?; // on clean shutdown
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LeasedWorkerIdAssigner {
    pub(crate) store: Store,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) options: LeaseOptions,
    /// The ID space its leases are in ([`DEFAULT_SPACE`] unless [`in_space`](Self::in_space)).
    pub(crate) space: String,
}

impl LeasedWorkerIdAssigner {
    /// The name its range is recorded under in `worker_id_range`.
    pub const REGISTRY_NAME: &'static str = "leased";

    /// The range it registers unless given one: `0-max`.
    ///
    /// ```
    /// assert_eq!(uidgen_store::LeasedWorkerIdAssigner::default_range().to_string(), "0-max");
    /// ```
    pub fn default_range() -> WorkerIdRange {
        WorkerIdRange::from_low(0)
    }

    /// Its assignments' kind: a lease in `worker_lease`, renewed by a heartbeat.
    pub const KIND: AssignmentKind = AssignmentKind::new("leased");

    /// The kind of an assignment from the local cache file, because the database was
    /// unreachable at start-up: a lease valid for one ttl that its renewals claim in the
    /// database once it answers (or end, if another holder had the id meanwhile).
    pub const LOCAL_CACHE_KIND: AssignmentKind = AssignmentKind::new("local_cache");

    /// An assigner over `store`, reading time from `clock`.
    pub fn new(store: Store, clock: impl Clock + 'static, options: LeaseOptions) -> Self {
        Self {
            store,
            clock: Arc::new(clock),
            options,
            space: DEFAULT_SPACE.to_owned(),
        }
    }

    /// An assigner on the system clock with default options.
    pub fn with_defaults(store: Store) -> Self {
        Self::new(store, SystemClock, LeaseOptions::default())
    }

    /// Lease worker ids from `range` only (sets [`LeaseOptions::range`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
    /// use uidgen_store::{LeasedWorkerIdAssigner, Store, StoreOptions};
    /// use uidgen_worker::WorkerIdRange;
    /// let store = Store::connect_lazy("sqlite://uidgen.db", StoreOptions::default())?;
    /// let range = WorkerIdRange::new(0, 511)?;
    /// let assigner = LeasedWorkerIdAssigner::with_defaults(store).with_range(range);
    /// assert_eq!(assigner.options().range, Some(range));
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn with_range(mut self, range: WorkerIdRange) -> Self {
        self.options.range = Some(range);
        self
    }

    /// Lease worker ids of the ID space `space` (1 to [`MAX_SPACE_LEN`](crate::MAX_SPACE_LEN)
    /// characters; checked by [`claim`](Self::claim)): a server's `[spaces.<name>]`. IDs of two
    /// spaces may be equal, so each space leases its worker ids apart: a worker id held in one
    /// space is free in every other. The range registered is the same for every space.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
    /// use uidgen_store::{DEFAULT_SPACE, LeasedWorkerIdAssigner, Store, StoreOptions};
    /// let store = Store::connect_lazy("sqlite://uidgen.db", StoreOptions::default())?;
    /// let assigner = LeasedWorkerIdAssigner::with_defaults(store.clone());
    /// assert_eq!(assigner.space(), DEFAULT_SPACE);
    /// let order = LeasedWorkerIdAssigner::with_defaults(store).in_space("order");
    /// assert_eq!(order.space(), "order");
    /// # Ok(()) }
    /// ```
    #[must_use]
    pub fn in_space(mut self, space: impl Into<String>) -> Self {
        self.space = space.into();
        self
    }

    /// The ID space its leases are in.
    pub fn space(&self) -> &str {
        &self.space
    }

    /// The options.
    pub fn options(&self) -> &LeaseOptions {
        &self.options
    }

    /// The range to register: the configured one, or [`Self::default_range`].
    pub(crate) fn registered_range(&self) -> WorkerIdRange {
        self.options.range.unwrap_or_else(Self::default_range)
    }

    /// How far past a holder's own expiry its row's expiry lies: the cache reserve, or zero
    /// without a cache (nothing can restart on the id from a file then).
    pub(crate) fn reserve_ms(&self) -> u64 {
        if self.options.cache_path.is_some() {
            saturating_millis(self.options.cache_reserve)
        } else {
            0
        }
    }

    /// A lease of `worker_id` on this assigner's terms (store, clock, space, ttl, reserve,
    /// borrowing bound), keeping `mark` if any, confirmed, and forgetting its cache when it
    /// ends. Its instants are zero, an already expired lease, until the caller sets them from
    /// what the claimed row or the cache says.
    pub(crate) fn lease_terms(
        &self,
        layout: &Layout,
        worker_id: u64,
        holder: String,
        mark: Option<LocalMark>,
    ) -> NewLease {
        NewLease {
            store: self.store.clone(),
            clock: Arc::clone(&self.clock),
            space: self.space.clone(),
            worker_id,
            holder,
            ttl_ms: saturating_millis(self.options.ttl),
            reserve_ms: self.reserve_ms(),
            valid_until_ms: 0,
            last_issued_ms: 0,
            mark,
            forget_mark_on_end: true,
            confirmed: true,
            floor_ms: 0,
            max_borrow_ms: saturating_millis(self.options.max_borrow(layout)),
        }
    }

    /// Claim a lease from the database (no fallback to the cache when it is unreachable),
    /// wait until the clock has passed the worker id's last issued time, and start the
    /// heartbeat if configured.
    ///
    /// With a [cache](LeaseOptions::cache_path) recording a lease that the database still
    /// shows under the recorded holder (this host's process died without releasing it), the
    /// claim continues that lease instead of waiting for it to expire: the row is handed to
    /// this claim and the start waits only for the clock to pass the cache's mark (at most
    /// [`max_takeover_wait`](LeaseOptions::max_takeover_wait)). The cache's lock keeps a live
    /// process's lease out of reach.
    ///
    /// Only ids of the [range](LeaseOptions::range) are considered; the range is registered
    /// in the store first ([`Store::register_worker_range`]).
    ///
    /// Errors: [`WorkerError::InvalidLeaseOptions`](uidgen_worker::WorkerError::InvalidLeaseOptions), [`WorkerError::WorkerRangeOutsideLayout`](uidgen_worker::WorkerError::WorkerRangeOutsideLayout),
    /// [`StoreError::WorkerRangeConflict`] and [`StoreError::WorkerRangeChanged`] from the
    /// registration, [`StoreError::NoFreeWorkerId`] when every id of the range is held by a
    /// live lease, [`StoreError::LeaseContention`] when free ids exist but other claimants won
    /// each of them 8 times running, [`WorkerError::ClockBehindLastIssued`](uidgen_worker::WorkerError::ClockBehindLastIssued),
    /// and database errors.
    ///
    /// Cancel safety: dropping the future before a claim statement commits leaves only the
    /// range registration behind, which a later claim repeats harmlessly. Dropped once a claim
    /// committed (its answer in flight, or while waiting out the previous holder's issued-until
    /// time), the row holds the id under a holder string no process keeps: nothing renews it
    /// and no ID was stamped under it, so the id stays blocked until the row's expiry (the ttl,
    /// plus the cache reserve with a cache) and is then taken over like a crashed holder's.
    /// With a cache, the state file may already record that claim; a restart on this host
    /// may continue it (from the database, or while it is unreachable from the file), which
    /// the row's expiry and the file's mark cover. Dropped after a continuation's hand-over,
    /// likewise: the row names a holder the file may or may not record yet, and the file's
    /// mark still covers every ID stamped under the id.
    pub fn claim<'a>(&'a self, layout: &'a Layout) -> StoreFuture<'a, LeaseGuard> {
        Box::pin(async move {
            self.options.validate()?;
            check_space(&self.space)?;
            let registered = self.registered_range();
            let range = registered.within(layout)?;
            // Before any id is taken. Unreachable here is unreachable for `assign` too, which then
            // falls back to the cache as for an unreachable claim.
            self.store
                .register_worker_range(Self::REGISTRY_NAME, registered)
                .await?;
            if let Some(continued) = self.continue_cached(layout, range).await? {
                return Ok(continued);
            }
            let holder = self.new_holder();
            let ttl_ms = saturating_millis(self.options.ttl);
            let claimed = claim_row(
                &self.store,
                self.clock.as_ref(),
                &self.space,
                range,
                &holder,
                ttl_ms,
                self.reserve_ms(),
            )
            .await?;
            let mark = self.open_mark_for_claim(layout, &claimed, &holder);
            self.keep(layout, holder, &claimed, mark).await
        })
    }

    /// The holder string of a new claim: the configured (or default) name and a random token
    /// of its own, so renewal and release only ever match this claim's row.
    pub(crate) fn new_holder(&self) -> String {
        match &self.options.holder {
            Some(name) => holder_with_token(name),
            None => holder_with_token(&default_holder()),
        }
    }

    /// The local state file for a lease claimed from the database, recording its holder and
    /// expiry; `None` (logged) when none is configured, another lease uses it, or it cannot be
    /// written. A file left by this host for another worker id is replaced: that id's row in
    /// the database still guards it until its expiry.
    fn open_mark_for_claim(
        &self,
        layout: &Layout,
        claimed: &ClaimedRow,
        holder: &str,
    ) -> Option<LocalMark> {
        let path = self.options.cache_path.as_deref()?;
        let (worker_id, expires, floor) =
            (claimed.worker_id, claimed.expires_ms, claimed.floor_ms());
        let opened = (|| -> Result<Option<LocalMark>> {
            let Some(cache) = CacheLock::try_acquire(path)? else {
                tracing::warn!(
                    path = %path.display(),
                    "another lease uses the worker id cache; not caching this one"
                );
                return Ok(None);
            };
            if let Ok(previous) = read_cache(path)
                && previous.worker_id != worker_id
            {
                cache.forget(previous.worker_id)?;
            }
            let clock = Arc::clone(&self.clock);
            let (mark, _) = LocalMark::acquire(cache, worker_id, clock, mark_step_ms(layout))?;
            mark.begin_from(Some(holder), Some(expires), floor)?;
            mark.start_refresher()?;
            Ok(Some(mark))
        })();
        opened.unwrap_or_else(|error| {
            tracing::warn!(%error, "cannot keep the worker id cache; not caching");
            None
        })
    }

    /// We hold the claimed row's id until its `valid_until` (the row says `expires`), keeping
    /// `mark` (the cache, begun for this claim) if any: wait out the previous holder's last
    /// issued time, then hand out the guard.
    pub(crate) async fn keep(
        &self,
        layout: &Layout,
        holder: String,
        claimed: &ClaimedRow,
        mark: Option<LocalMark>,
    ) -> Result<LeaseGuard> {
        let ClaimedRow {
            worker_id,
            valid_until_ms: valid_until,
            last_issued_ms,
            ..
        } = *claimed;
        let floor = claimed.floor_ms();
        let guard = LeaseGuard::new(NewLease {
            valid_until_ms: valid_until,
            last_issued_ms,
            floor_ms: floor,
            ..self.lease_terms(layout, worker_id, holder, mark)
        });
        if let Err(error) = wait_for_clock(
            self.clock.as_ref(),
            worker_id,
            last_issued_ms,
            self.options.max_takeover_wait,
        )
        .await
        {
            // Hand the id back untouched so it does not stay blocked for a whole ttl (this also
            // forgets the state file: this host did not get it).
            let _ = guard.release_recording(last_issued_ms).await;
            return Err(error.into());
        }
        if last_issued_ms >= claimed.claimed_at_ms {
            // The wait (up to half the ttl by default) came out of the lease: renew now, so the
            // heartbeat starts from a whole ttl and one lost renewal still does not lose the
            // lease. Nothing is issued yet: record the predecessor's time, not our expiry.
            // Any other error leaves it valid until the claim's expiry; the heartbeat retries.
            if let Err(error @ StoreError::LeaseLost { .. }) =
                guard.renew_recording(last_issued_ms).await
            {
                return Err(error);
            }
        }
        if let Some(interval) = self.options.heartbeat_interval {
            guard.start_heartbeat(interval);
        }
        tracing::info!(space = %self.space, worker_id, holder = %guard.holder(), "leased a worker id");
        Ok(guard)
    }

    /// [`WorkerIdAssigner::assign`] with the store's own error: [`claim`](Self::claim) a
    /// lease, or, when the database is unreachable, restart on the local cache's lease (see
    /// [`LeaseOptions::cache_path`]).
    pub fn assign<'a>(&'a self, layout: &'a Layout) -> StoreFuture<'a, WorkerAssignment> {
        Box::pin(async move {
            match self.claim(layout).await {
                Ok(lease) => Ok(WorkerAssignment::kept(Arc::new(lease), Self::KIND)),
                Err(error) if error.is_unreachable() => self.assign_from_cache(layout, error).await,
                Err(error) => Err(error),
            }
        })
    }
}

impl LeasedWorkerIdAssigner {
    /// One more leased worker id for this process, beside the one it holds (issue 30):
    /// claimed from the database exactly as [`assign`](Self::assign)'s, with its own holder
    /// string, heartbeat, fence and release, but no cache file (the cache restarts one lease
    /// from one file; an extra lease is claimed again from the database after a restart).
    pub fn assign_extra<'a>(&'a self, layout: &'a Layout) -> StoreFuture<'a, WorkerAssignment> {
        Box::pin(async move {
            let extra = Self {
                options: LeaseOptions {
                    cache_path: None,
                    ..self.options.clone()
                },
                ..self.clone()
            };
            extra.assign(layout).await
        })
    }
}

crate::disposable::assign_through_store!(LeasedWorkerIdAssigner);
