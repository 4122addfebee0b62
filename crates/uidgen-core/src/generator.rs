//! The one trait every generator implements.

use std::time::Duration;

use std::sync::Arc;

use crate::error::{Result, UidError};
use crate::fence::TimeFence;
use crate::layout::Layout;
use crate::layout::decoded::DecodedUid;

/// Called by the padding thread after each run that put IDs into the ring, and once when the
/// padding stops for good: what a caller waiting for IDs without a thread of its own (an async
/// service) needs to be woken by. See
/// [`CachedUidGenerator::on_padded`](crate::CachedUidGenerator::on_padded).
pub type PaddedHook = Arc<dyn Fn() + Send + Sync>;

/// The most IDs one `next_ids` call hands out; larger batches would make one caller hold a huge
/// allocation and starve the others.
pub const MAX_BATCH: usize = 10_000_000;

/// Check a batch size: 1 to [`MAX_BATCH`].
///
/// ```
/// assert!(uidgen_core::check_count(0).is_err());
/// assert!(uidgen_core::check_count(1000).is_ok());
/// ```
pub fn check_count(n: usize) -> Result<()> {
    if n == 0 || n > MAX_BATCH {
        return Err(UidError::InvalidCount {
            requested: n,
            max: MAX_BATCH,
        });
    }
    Ok(())
}

/// A source of unique 64-bit IDs.
///
/// Object safe, so a service can hold an `Arc<dyn UidGenerator>` and switch kinds by
/// configuration.
///
/// ```
/// use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidGenerator};
/// let clock = ManualClock::auto_advancing(1_700_000_000_000);
/// let generator: Box<dyn UidGenerator> =
///     Box::new(SnowflakeGenerator::new(Layout::snowflake().unwrap(), 5, clock).unwrap());
/// let ids = generator.next_ids(10).unwrap();
/// assert!(ids.windows(2).all(|w| w[0] < w[1]));
/// assert_eq!(generator.parse(ids[0]).unwrap().parts.worker, 5);
/// ```
pub trait UidGenerator: Send + Sync {
    /// One new ID.
    fn next_id(&self) -> Result<u64>;

    /// `n` new IDs (1 to [`MAX_BATCH`]).
    fn next_ids(&self, n: usize) -> Result<Vec<u64>> {
        check_count(n)?;
        let mut ids = Vec::with_capacity(n);
        for _ in 0..n {
            ids.push(self.next_id()?);
        }
        Ok(ids)
    }

    /// The layout IDs are made with.
    fn layout(&self) -> &Layout;

    /// The wall-clock instant (ms since the Unix epoch) before which every ID this generator has
    /// issued, or holds ready to issue, was stamped; `None` before the first ID.
    ///
    /// A successor that reuses this worker id must not issue until its clock reaches this
    /// instant: that is how a leased worker id is handed over without a duplicate.
    fn issued_until_ms(&self) -> Option<u64>;

    /// Take an ID of this generator's layout apart.
    fn parse(&self, id: u64) -> Result<DecodedUid> {
        self.layout().decode(id)
    }

    /// The IDs this generator made ahead of demand (the cached generator's ring buffer), if it
    /// keeps any: `None` means every ID is made on the call, and [`next_id`](Self::next_id)
    /// may wait (a sequence run out waits for the next unit). A caller that must not wait,
    /// such as an async handler, takes with [`take_ready`](Self::take_ready) while this is
    /// `Some`, and runs the others on a thread that may block.
    fn stock(&self) -> Option<ReadyStock> {
        None
    }

    /// One ID the stock holds now, never waiting; `Ok(None)` when the stock is empty or there
    /// is none ([`stock`](Self::stock) tells which). An error when the generator may not issue
    /// (its worker id's keeper ended).
    #[inline]
    fn take_one_ready(&self) -> Result<Option<u64>> {
        Ok(None)
    }

    /// Move up to `max` IDs the stock holds now into `out`, never waiting; how many were
    /// moved (0 without a stock). On an error nothing was added to `out`.
    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> Result<usize> {
        let _ = (out, max);
        Ok(0)
    }

    /// Have `hook` called whenever the stock was refilled or its producer stopped, so a
    /// caller waiting for IDs without a thread can be woken
    /// ([`CachedUidGenerator::on_padded`](crate::CachedUidGenerator::on_padded)). `false`
    /// if a hook was already set, or there is no stock to refill.
    fn on_padded(&self, hook: PaddedHook) -> bool {
        let _ = hook;
        false
    }

    /// The generator's worker ids, when it can stamp with several at once (the cached
    /// generator): what a service that claims more worker ids under load drives. `None`: one
    /// worker id, one unit's worth of IDs per time unit.
    fn lanes(&self) -> Option<&dyn WorkerLanes> {
        None
    }
}

/// A generator that stamps with several worker ids at once, each time unit yielding one
/// unit's worth of IDs per worker id ([`CachedUidGenerator`](crate::CachedUidGenerator)): a
/// service adds worker ids when demand outruns the ones it holds, and retires them when it
/// falls (issue 30). Every worker id given must be held for this process as the first one is.
///
/// ```
/// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
/// let cached =
///     CachedUidGenerator::new(Layout::baidu_default()?, 1, SystemClock, CachedOptions::default())?;
/// let lanes = cached.lanes().expect("the cached generator has lanes");
/// lanes.add_worker(2, None)?;
/// assert_eq!(lanes.workers(), vec![1, 2]);
/// lanes.retire_worker(2)?;
/// assert_eq!(lanes.workers(), vec![1]);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub trait WorkerLanes: Send + Sync {
    /// Stamp with `worker_id` too, from the next time unit on, under `fence` (see
    /// [`CachedUidGenerator::add_worker`](crate::CachedUidGenerator::add_worker)).
    fn add_worker(&self, worker_id: u64, fence: Option<Arc<dyn TimeFence>>) -> Result<()>;

    /// Stop stamping with `worker_id`; how far its IDs may run (ms since the Unix epoch), for
    /// its keeper (see
    /// [`CachedUidGenerator::retire_worker`](crate::CachedUidGenerator::retire_worker)).
    fn retire_worker(&self, worker_id: u64) -> Result<u64>;

    /// The worker ids stamped with, lowest first.
    fn workers(&self) -> Vec<u64>;
}

/// A point-in-time view of a generator's stock of IDs made ahead ([`UidGenerator::stock`]):
/// for readiness, status and metrics, and for how long a taker waits on an empty one.
///
/// ```
/// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
/// let cached =
///     CachedUidGenerator::new(Layout::baidu_default()?, 1, SystemClock, CachedOptions::default())?;
/// let stock = cached.stock().expect("a ring buffer");
/// assert!(stock.capacity > 0 && stock.stop_reason().is_none());
/// let mut ids = Vec::new();
/// cached.take_ready(&mut ids, 2)?;
/// assert!(ids.len() <= 2);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyStock {
    /// Slots.
    pub capacity: u64,
    /// IDs ready to take.
    pub available: u64,
    /// Padding runs since start.
    pub padding_runs: u64,
    /// Time units ahead of the clock.
    pub borrowed_units: u64,
    /// Why the producer stopped for good, if it did: no more IDs will come. An exhausted time
    /// field stays [`UidError::TimestampExhausted`], so callers can say `exhausted`.
    pub stopped: Option<UidError>,
    /// How long a taker waits for padding that delivers nothing before it gives up
    /// ([`CachedUidGenerator::stall_limit`](crate::CachedUidGenerator::stall_limit)).
    pub stall_limit: Duration,
    /// IDs taken from the stock since start: its rate is the demand a service measures.
    pub taken: u64,
    /// The worker ids the stock is filled from ([`WorkerLanes`]).
    pub workers: u64,
    /// The most time units the stock may run ahead of the clock, if bounded (the options' bound,
    /// tightened by the worker ids' fences).
    pub max_borrow_units: Option<u64>,
}

impl ReadyStock {
    /// Why the producer stopped, as a sentence ([`RingBuffer::stop_reason`]'s wording).
    ///
    /// [`RingBuffer::stop_reason`]: crate::RingBuffer::stop_reason
    pub fn stop_reason(&self) -> Option<String> {
        self.stopped.clone().map(|error| match error {
            UidError::GeneratorStopped(reason) => reason,
            other => other.to_string(),
        })
    }
}
