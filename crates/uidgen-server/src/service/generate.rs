//! Taking IDs without stalling the async runtime.
//!
//! A generator may wait: Baidu's default generator sleeps until the next second when a
//! second's sequence runs out, and the cached generator's ring may be empty until its padding
//! thread refills it (or, with borrowing bounded, until the clock reaches the next unit). On a
//! worker thread of the runtime a sleeping wait would stall every other request on that thread
//! (on 2 cores, two such requests freeze `/healthz`), and on the blocking pool it costs a thread
//! per waiting request (a load test grew the process from 5 to 414 threads). So a generator
//! with a ring is never waited for on a thread: a handler takes what the ring holds
//! ([`UidGenerator::take_ready`], which never waits), and while
//! it is empty awaits a [`Notify`](tokio::sync::Notify) the padding thread wakes
//! ([`PaddingSignal`]). Generators without a ring run on tokio's blocking pool.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use uidgen_core::{FieldKind, GenMethod, UidError, UidGenerator};

use axum::http::StatusCode;
use prometheus_client::metrics::counter::Counter;

use super::clock_watch::ClockWatch;
use super::error::ApiError;
use super::padding::PaddingSignal;
use super::state::{AppState, Space};
use crate::config::ring::EmptyRing;
// Every await below on the generator counts as a caller's wait (`uidgen_requests_waiting`): a
// ring that answers at once does not pend, so it costs the fast path nothing; a generator
// without a ring always pends on the blocking pool, so each of its requests counts.
use crate::metrics::waits::waited;

/// A waiter that has not been woken looks at the ring again after this long anyway: the
/// padding thread's signal is what wakes it, this only bounds the damage of a signal that
/// cannot be connected (a ring whose hook another state already holds).
const LOOK_AGAIN: Duration = Duration::from_millis(10);

/// Where a request takes its IDs: the default space's generator or a named space's, with what
/// its waiters await and the server's policy for an empty ring.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    /// The generator.
    pub generator: &'a Arc<dyn UidGenerator>,
    padded: &'a PaddingSignal,
    empty_ring: EmptyRing,
    /// A named space's counter; `None` for the default space (counted by route).
    issued: Option<&'a Counter>,
    /// Refuses every ID while this host's clock is fenced.
    clock: &'a ClockWatch,
}

impl<'a> Source<'a> {
    /// The named space `space`'s generator, under the server's `empty_ring` policy.
    pub fn of_space(space: &'a Space, empty_ring: EmptyRing) -> Self {
        Self {
            generator: &space.generator,
            padded: &space.padded,
            empty_ring,
            issued: Some(&space.issued),
            clock: &space.clock,
        }
    }

    fn counted<T>(&self, issued: Result<T, ApiError>, n: usize) -> Result<T, ApiError> {
        if let (Ok(_), Some(counter)) = (&issued, self.issued) {
            counter.inc_by(n as u64);
        }
        issued
    }
}

impl AppState {
    /// The default space's generator.
    pub fn source(&self) -> Source<'_> {
        Source {
            generator: &self.generator,
            padded: &self.padded,
            empty_ring: self.empty_ring,
            issued: None,
            clock: &self.clock,
        }
    }
}

/// `n` IDs from the generator's stock (its ring): what it holds now, then, while it is empty,
/// awaiting the padding's signal (no thread is held). Fails when the producer stopped, when the
/// worker id's keeper ended, or when nothing was padded for as long as [`AppState::empty_ring`]
/// allows: the stock's stall limit by default, a configured wait, or not at all
/// ([`EmptyRing::Fail`]: `ring_empty` as soon as the ring holds fewer than `n`).
///
/// Cancel safety: IDs taken before the future is dropped are lost, never reissued.
async fn from_ring(source: Source<'_>, n: usize) -> Result<Vec<u64>, ApiError> {
    let ring = source.generator.as_ref();
    let padded = source.padded.of(ring);
    // Failing fast, a batch the ring cannot hold now is refused before it takes anything:
    // IDs taken and dropped would be lost, and a ring bounded by the clock would fall behind.
    if source.empty_ring == EmptyRing::Fail
        && let Some(stock) = ring.stock().filter(|s| s.available < n as u64)
    {
        return Err(ApiError::generation(UidError::RingEmpty(format!(
            "{} of {n} IDs ready and ring.take_rejection is \"fail\"",
            stock.available
        ))));
    }
    let mut ids = Vec::new();
    let mut progress = Instant::now();
    loop {
        // Registered before looking, so a refill between the look and the await still wakes us.
        let notified = padded.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let wanted = n - ids.len();
        if ring
            .take_ready(&mut ids, wanted)
            .map_err(ApiError::generation)?
            > 0
        {
            progress = Instant::now();
        }
        if ids.len() == n {
            return Ok(ids);
        }
        let Some(stock) = ring.stock() else {
            return Err(ApiError::internal("the generator has no stock to wait for"));
        };
        if let Some(stopped) = stock.stopped {
            return Err(ApiError::generation(stopped));
        }
        let stalled = progress.elapsed();
        let limit = match source.empty_ring {
            EmptyRing::Fail => Duration::ZERO,
            EmptyRing::AwaitStallLimit => stock.stall_limit,
            EmptyRing::Await(wait) => wait,
        };
        if stalled >= limit {
            return Err(ApiError::generation(UidError::RingEmpty(format!(
                "no ID padded for {stalled:?} with {} of {n} taken",
                ids.len()
            ))));
        }
        // Whether woken or timed out, the loop looks again.
        let _ = tokio::time::timeout(LOOK_AGAIN.min(limit - stalled), notified).await;
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

/// One new ID issued through `channel`: from the ring (awaiting its padding when it is
/// empty), or from a generator without one on the blocking pool. On a layout with a genMethod
/// field the ID says which channel issued it
/// ([`Layout::with_method`](uidgen_core::Layout::with_method)); this and [`many_as`] are the
/// only places a served ID gets its method, whichever channel serves it.
pub async fn one_as(state: &AppState, channel: GenMethod) -> Result<u64, ApiError> {
    one_from(state.source(), channel).await
}

/// One new ID from `source` (the default space or a named one): see [`one_as`].
pub async fn one_from(source: Source<'_>, channel: GenMethod) -> Result<u64, ApiError> {
    source.clock.admit()?;
    if let Some(id) = one_ready(source, channel)? {
        return Ok(id);
    }
    let generator = source.generator;
    let id = if generator.stock().is_some() {
        // `from_ring` answers exactly the IDs asked for, or an error.
        waited(from_ring(source, 1))
            .await?
            .pop()
            .ok_or_else(|| ApiError::internal("the ring answered no ID"))?
    } else {
        waited(blocking(generator, |g| g.next_id())).await?
    };
    source.counted(stamp(generator.layout(), id, channel), 1)
}

/// [`one_from`] when its ring holds an ID now, never waiting: `Ok(None)` when the ring is empty
/// or there is none, so the caller awaits [`one_from`] instead. What lets a route answer
/// without a future of its own (the HTTP service's direct answers).
///
/// ```
/// use std::sync::Arc;
/// use uidgen_core::{CachedOptions, CachedUidGenerator, GenMethod, Layout, SystemClock};
/// use uidgen_server::service::{state::AppState, generate};
///
/// let ring = CachedUidGenerator::new(Layout::baidu_default()?, 1, SystemClock, CachedOptions::default())?;
/// let state = AppState::embedded(Arc::new(ring), 1);
/// // The ring was filled when it was made.
/// let ready = generate::one_ready(state.source(), GenMethod::Rest);
/// assert!(matches!(ready, Ok(Some(_))));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn one_ready(source: Source<'_>, channel: GenMethod) -> Result<Option<u64>, ApiError> {
    source.clock.admit()?;
    let generator = source.generator;
    match generator.take_one_ready().map_err(ApiError::generation)? {
        Some(id) => source
            .counted(stamp(generator.layout(), id, channel), 1)
            .map(Some),
        None => Ok(None),
    }
}

/// `n` new IDs issued through `channel` (`n` already checked against the batch cap): from the
/// ring (awaiting its padding as often as a batch larger than the ring needs), or from a
/// generator without one on the blocking pool.
pub async fn many_as(state: &AppState, n: usize, channel: GenMethod) -> Result<Vec<u64>, ApiError> {
    many_from(state.source(), n, channel).await
}

/// `n` new IDs from `source` (the default space or a named one): see [`many_as`].
pub async fn many_from(
    source: Source<'_>,
    n: usize,
    channel: GenMethod,
) -> Result<Vec<u64>, ApiError> {
    source.clock.admit()?;
    let mut ids = if source.generator.stock().is_some() {
        waited(from_ring(source, n)).await?
    } else {
        waited(blocking(source.generator, move |g| g.next_ids(n))).await?
    };
    let layout = source.generator.layout();
    if layout.has(FieldKind::Method) {
        for id in &mut ids {
            *id = stamp(layout, *id, channel)?;
        }
    }
    let count = ids.len();
    source.counted(Ok(ids), count)
}

/// `id` with `channel` in its genMethod field, if the layout has one.
#[inline]
fn stamp(layout: &uidgen_core::Layout, id: u64, channel: GenMethod) -> Result<u64, ApiError> {
    layout
        .with_method(id, channel.value())
        // The field is at least 2 bits on every layout that has it; a 1-bit custom field
        // cannot hold REST's 2, and says so rather than issuing a wrong method.
        .map_err(|e| ApiError::internal(format!("cannot stamp genMethod: {e}")))
}

/// `count` as a batch size, 1 to `cap` (HTTP's `count`, gRPC's `count`).
pub fn batch_count(count: u64, cap: usize) -> Result<usize, ApiError> {
    batch_size("count", count, cap)
}

/// The request field `name` as a batch size, 1 to `cap`, with a sentence naming that field
/// (gRPC's `StreamIds` asks for `batch_size`, not `count`).
pub fn batch_size(name: &str, value: u64, cap: usize) -> Result<usize, ApiError> {
    usize::try_from(value)
        .ok()
        .filter(|&n| (1..=cap).contains(&n))
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_count",
                format!("{name} {value} is out of range; ask for 1 to {cap} IDs"),
            )
        })
}
