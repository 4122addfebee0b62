//! A leased worker id restarted from its local cache (`worker.cache_file`): the state file
//! the lease keeps (`LocalMark`) records the holder string, the row's expiry as last
//! accepted and a reserved-until mark synced before any ID past it. A restart on this host
//! continues that lease, from the database when it answers (`continue_cached`), or from the
//! file alone while it is unreachable (`assign_from_cache`); the rules are `lease.rs`'s.

use std::sync::Arc;

use uidgen_core::Layout;
use uidgen_core::clock::saturating_millis;
use uidgen_worker::{
    CacheLock, CachedWorker, LocalMark, WorkerAssignment, WorkerIdRange, mark_step_ms, read_cache,
    wait_for_clock,
};

use crate::error::{Result, StoreError};
use crate::lease::LeasedWorkerIdAssigner;
use crate::lease_claim::ClaimedRow;
use crate::lease_guard::{LeaseGuard, NewLease};

impl LeasedWorkerIdAssigner {
    /// A restart while the database answers: continue the lease a crashed life of this host
    /// recorded in the cache, instead of waiting for it to expire (its ttl plus the reserve,
    /// 90 s by default). `Ok(None)` when there is nothing to continue: no cache, no lease in
    /// it, a cached id outside `range`, a cache a live lease holds (locked), or a row that no
    /// longer names the cached holder (taken over or released); the caller then claims.
    ///
    /// Why no ID repeats: the cache is locked, so no live process uses it, and its holder
    /// string is that claim's own (a random token), written only to this file; the row still
    /// naming it means nobody took the id over since. The hand-over moves the row to a holder
    /// string of this life in one statement that matches the old one, so of two restarts from
    /// copies of the file one wins. Every ID the crashed life stamped lies before the file's
    /// mark (synced before any ID past it) and its recorded issued-until time; this life's
    /// floor is both, and it waits for its clock to pass them (at most
    /// [`max_takeover_wait`](LeaseOptions::max_takeover_wait)), exactly as a start from the
    /// cache while the database is down does. The file records the new holder before any ID.
    pub(crate) async fn continue_cached(
        &self,
        layout: &Layout,
        range: WorkerIdRange,
    ) -> Result<Option<LeaseGuard>> {
        let Some(path) = self.options.cache_path.as_deref() else {
            return Ok(None);
        };
        let Ok(cached) = read_cache(path) else {
            return Ok(None);
        };
        let declined = |reason: &str| {
            tracing::info!(
                path = %path.display(),
                worker_id = cached.worker_id,
                "not continuing the cached worker lease: {reason}; claiming one"
            );
            Ok(None)
        };
        if cached.holder.is_none() || cached.lease_expires_ms.is_none() {
            return declined("the cache records no lease");
        }
        if cached.worker_id > layout.max_worker_id() || !range.contains(cached.worker_id) {
            return declined("its worker id is outside the configured range");
        }
        let Some(lock) = CacheLock::try_acquire(path)? else {
            return declined("a live lease (in this or another process) uses the cache");
        };
        let clock = Arc::clone(&self.clock);
        let (mark, previous) =
            match LocalMark::acquire(lock, cached.worker_id, clock, mark_step_ms(layout)) {
                Ok(acquired) => acquired,
                Err(error) => return declined(&error.to_string()),
            };
        // Read again under the lock: a holder we raced may have rewritten or deleted it.
        let Some(CachedWorker {
            worker_id,
            until_ms: mark_ms,
            holder: Some(crashed),
            ..
        }) = previous
        else {
            return declined("the cache changed while it was locked");
        };
        let row = self.store.lease_row(&self.space, worker_id).await?;
        let Some(row) = row.filter(|row| row.holder == crashed) else {
            return declined("the lease it records was taken over or released");
        };
        let holder = self.new_holder();
        let now = self.clock.now_millis();
        let claimed = ClaimedRow {
            worker_id,
            claimed_at_ms: now,
            valid_until_ms: now.saturating_add(saturating_millis(self.options.ttl)),
            expires_ms: now
                .saturating_add(saturating_millis(self.options.ttl))
                .saturating_add(self.reserve_ms()),
            // Where the crashed life stopped: its mark covers every ID it stamped.
            last_issued_ms: mark_ms.max(row.last_issued_ms),
        };
        if !self
            .store
            .hand_over_lease(
                &self.space,
                worker_id,
                &crashed,
                &holder,
                claimed.expires_ms,
                claimed.last_issued_ms,
            )
            .await?
        {
            return declined("the lease it records was taken over or released");
        }
        // A file still naming the crashed life's holder would let a start while the database
        // is down run on a lease that is now this life's: record ours before any ID. If that
        // fails, nothing was stamped and the row blocks the id until at least the expiry the
        // file records, so refusing the start is safe.
        mark.begin_from(Some(&holder), Some(claimed.expires_ms), claimed.floor_ms())
            .map_err(|error| StoreError::Cache {
                path: path.display().to_string(),
                reason: format!("cannot record the continued lease: {error}"),
            })?;
        mark.start_refresher()?;
        tracing::info!(
            worker_id,
            previous = %crashed,
            mark_ms,
            "continuing the worker lease an earlier life of this host recorded in its cache"
        );
        self.keep(layout, holder, &claimed, Some(mark))
            .await
            .map(Some)
    }

    /// The database was unreachable: restart on the cached worker id, as the lease the cache
    /// records, if the clock is past the cache's mark and the lease's recorded expiry has not
    /// passed. Until that expiry nobody else can have taken the id over; renewal (the
    /// heartbeat) continues that very lease once the database answers, or ends with
    /// [`StoreError::LeaseLost`] if it was taken over or released meanwhile.
    pub(crate) async fn assign_from_cache(
        &self,
        layout: &Layout,
        unreachable: StoreError,
    ) -> Result<WorkerAssignment> {
        let Some(path) = &self.options.cache_path else {
            return Err(unreachable);
        };
        let cache_error = |reason: String| StoreError::Cache {
            path: path.display().to_string(),
            reason: format!("{unreachable}; {reason}"),
        };
        let cached = match read_cache(path) {
            Ok(cached) => cached,
            Err(error) => {
                tracing::warn!(%error, "no usable worker id cache");
                return Err(unreachable);
            }
        };
        // Two processes sharing the file must not both start on its id.
        let Some(cache) = CacheLock::try_acquire(path)? else {
            return Err(cache_error(
                "another lease (in this or another process) is using the cache, so its worker id \
                 may be live"
                    .to_owned(),
            ));
        };
        // Read again under the lock: the holder we waited out may have rewritten it.
        let clock = Arc::clone(&self.clock);
        let (mark, previous) =
            LocalMark::acquire(cache, cached.worker_id, clock, mark_step_ms(layout))
                .map_err(|e| cache_error(e.to_string()))?;
        let Some(previous) = previous else {
            return Err(cache_error("the file is gone".to_owned()));
        };
        let (Some(holder), Some(expires)) = (previous.holder.clone(), previous.lease_expires_ms)
        else {
            return Err(cache_error(
                "it records no lease (holder and lease_expires_ms), so nothing says the worker id \
                 is still this host's"
                    .to_owned(),
            ));
        };
        let worker_id = previous.worker_id;
        let max = layout.max_worker_id();
        if worker_id > max {
            return Err(cache_error(format!(
                "the cached worker id {worker_id} exceeds the layout's maximum {max}"
            )));
        }
        // The range cannot be registered now; at least keep to the configured one.
        let range = self.registered_range().within(layout)?;
        if !range.contains(worker_id) {
            return Err(cache_error(format!(
                "the cached worker id {worker_id} is outside the configured range {range}"
            )));
        }
        let expired = |now: u64| {
            cache_error(format!(
                "the lease it records on worker id {worker_id} expired at {expires} ms, reserve \
                 included, and the clock reads {now} ms: another process may hold the id by now"
            ))
        };
        let now = self.clock.now_millis();
        if now >= expires {
            return Err(expired(now));
        }
        // What the crashed process stamped lies before the mark.
        wait_for_clock(
            self.clock.as_ref(),
            worker_id,
            previous.until_ms,
            self.options.max_takeover_wait,
        )
        .await
        .map_err(|e| cache_error(e.to_string()))?;
        let now = self.clock.now_millis();
        if now >= expires {
            return Err(expired(now));
        }
        let guard = LeaseGuard::new(NewLease {
            valid_until_ms: expires,
            last_issued_ms: previous.until_ms,
            confirmed: false,
            // The crashed life stamped only before its mark.
            floor_ms: previous.until_ms,
            ..self.lease_terms(layout, worker_id, holder, Some(mark.clone()))
        });
        mark.start_refresher()?;
        if let Some(interval) = self.options.heartbeat_interval {
            guard.start_heartbeat(interval);
        }
        tracing::warn!(
            worker_id,
            valid_until_ms = expires,
            %unreachable,
            "database unreachable; running on the cached worker lease until the database answers \
             or the lease expires"
        );
        Ok(WorkerAssignment::kept(
            Arc::new(guard),
            Self::LOCAL_CACHE_KIND,
        ))
    }
}
