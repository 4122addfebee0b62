//! Taking IDs without stalling the async runtime.
//!
//! A generator may wait: Baidu's default generator sleeps until the next second when a
//! second's sequence runs out, and the cached generator's reject-take policy waits up to a
//! second for padding. On a worker thread of the runtime that wait would stall every other
//! request on that thread (on 2 cores, two such requests freeze `/healthz`). So the only work
//! done inline is taking IDs the ring already holds, which is one CAS; everything else runs on
//! tokio's blocking pool.

use std::sync::Arc;

use uidgen_core::{CachedUidGenerator, Clock, FieldKind, GenMethod, UidGenerator};
use uidgen_store::GuardedGenerator;

use super::{ApiError, AppState, RingSnapshot};

/// Batches up to this many IDs are taken inline when the ring holds them: copying a thousand
/// ready IDs is a few microseconds. Larger batches may have to wait for padding (a batch of
/// [`DEFAULT_BATCH_CAP`](super::DEFAULT_BATCH_CAP) IDs is more than the default 65,536-slot
/// ring), so they go to the blocking pool.
pub const INLINE_BATCH: usize = 1024;

/// What the HTTP layer needs from a generator with a ring buffer (the cached generator): IDs
/// that are ready now, never waiting, and the ring's state.
pub trait ReadyRing: Send + Sync {
    /// One ID if the ring holds one now; `Ok(None)` when it is empty (the caller then waits
    /// elsewhere). An error when the generator may not issue (a lost lease).
    fn take_one(&self) -> uidgen_core::Result<Option<u64>>;

    /// Move up to `max` IDs the ring holds now into `out`, never waiting; how many were moved.
    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> uidgen_core::Result<usize>;

    /// Fill level and padding counters, for metrics.
    fn snapshot(&self) -> RingSnapshot;

    /// Why the ring's producer stopped for good, if it did: no more IDs will be padded.
    fn stop_reason(&self) -> Option<String>;
}

fn snapshot_of<C: Clock + 'static>(cached: &CachedUidGenerator<C>) -> RingSnapshot {
    let ring = cached.ring();
    RingSnapshot {
        capacity: ring.buffer_size() as u64,
        available: ring.len() as u64,
        padding_runs: cached.padding_runs(),
        borrowed_units: cached.borrowed_units(),
    }
}

impl<C: Clock + 'static> ReadyRing for CachedUidGenerator<C> {
    #[inline]
    fn take_one(&self) -> uidgen_core::Result<Option<u64>> {
        Ok(self.ring().try_take())
    }

    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> uidgen_core::Result<usize> {
        Ok(self.ring().take_batch(out, max))
    }

    fn snapshot(&self) -> RingSnapshot {
        snapshot_of(self)
    }

    fn stop_reason(&self) -> Option<String> {
        self.ring().stop_reason()
    }
}

impl<C: Clock + 'static> ReadyRing for GuardedGenerator<CachedUidGenerator<C>> {
    #[inline]
    fn take_one(&self) -> uidgen_core::Result<Option<u64>> {
        let Some(id) = self.inner().ring().try_take() else {
            return Ok(None);
        };
        // The ring only holds IDs inside the lease (the generator is fenced by it); what is
        // left to check is that the lease has not ended since.
        self.check_issued()?;
        Ok(Some(id))
    }

    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> uidgen_core::Result<usize> {
        let before = out.len();
        let taken = self.inner().ring().take_batch(out, max);
        if let Err(refused) = self.check_issued() {
            // The lease ended: these IDs are dropped, as GuardedGenerator drops them.
            out.truncate(before);
            return Err(refused);
        }
        Ok(taken)
    }

    fn snapshot(&self) -> RingSnapshot {
        snapshot_of(self.inner())
    }

    fn stop_reason(&self) -> Option<String> {
        self.inner().ring().stop_reason()
    }
}

/// Run a generator call on the blocking pool.
async fn blocking<T: Send + 'static>(
    generator: &Arc<dyn UidGenerator>,
    call: impl FnOnce(&dyn UidGenerator) -> uidgen_core::Result<T> + Send + 'static,
) -> Result<T, ApiError> {
    let generator = Arc::clone(generator);
    tokio::task::spawn_blocking(move || call(generator.as_ref()))
        .await
        .map_err(|e| ApiError::internal(format!("ID generation task failed: {e}")))?
        .map_err(ApiError::generation)
}

/// One new ID for HTTP (genMethod 2, REST, on layouts with the field): see [`one_as`].
pub async fn one(state: &AppState) -> Result<u64, ApiError> {
    one_as(state, GenMethod::Rest).await
}

/// `n` new IDs for HTTP (genMethod 2, REST): see [`many_as`].
pub async fn many(state: &AppState, n: usize) -> Result<Vec<u64>, ApiError> {
    many_as(state, n, GenMethod::Rest).await
}

/// One new ID issued through `channel`: from the ring inline when it holds one, else on the
/// blocking pool. On a layout with a genMethod field the ID says which channel issued it
/// ([`Layout::with_method`](uidgen_core::Layout::with_method)); this and [`many_as`] are the
/// only places a served ID gets its method, whichever channel serves it.
pub async fn one_as(state: &AppState, channel: GenMethod) -> Result<u64, ApiError> {
    if let Some(ring) = &state.ring
        && let Some(id) = ring.take_one().map_err(ApiError::generation)?
    {
        return stamp(state, id, channel);
    }
    let id = blocking(&state.generator, |g| g.next_id()).await?;
    stamp(state, id, channel)
}

/// `n` new IDs issued through `channel` (`n` already checked against the batch cap): inline
/// when the ring holds them and the batch is small, the rest on the blocking pool.
pub async fn many_as(state: &AppState, n: usize, channel: GenMethod) -> Result<Vec<u64>, ApiError> {
    let mut ids = Vec::new();
    if n <= INLINE_BATCH
        && let Some(ring) = &state.ring
    {
        ring.take_ready(&mut ids, n).map_err(ApiError::generation)?;
    }
    if ids.len() < n {
        let rest = n - ids.len();
        let more = blocking(&state.generator, move |g| g.next_ids(rest)).await?;
        if ids.is_empty() {
            ids = more;
        } else {
            ids.extend(more);
        }
    }
    let layout = state.generator.layout();
    if layout.has(FieldKind::Method) {
        for id in &mut ids {
            *id = stamp(state, *id, channel)?;
        }
    }
    Ok(ids)
}

/// `id` with `channel` in its genMethod field, if the layout has one.
#[inline]
fn stamp(state: &AppState, id: u64, channel: GenMethod) -> Result<u64, ApiError> {
    state
        .generator
        .layout()
        .with_method(id, channel.value())
        // The field is at least 2 bits on every layout that has it; a 1-bit custom field
        // cannot hold REST's 2, and says so rather than issuing a wrong method.
        .map_err(|e| ApiError::internal(format!("cannot stamp genMethod: {e}")))
}
