//! Time fences: how far ahead a generator may stamp IDs when its worker id can be reused.
//!
//! A worker id that another process (or this process's next life) may use again is only safe
//! if the two never stamp the same time unit. The owner of the reuse rule — a lease, which a
//! successor may take once it expires, or a static id's reserved-until mark, after which a
//! restart may begin — knows the instant up to which this process may stamp. A generator given
//! a [`TimeFence`] checks every time unit against it *before* stamping (the Default and
//! Snowflake generators) or padding (the cached generator), so no ID past the limit is ever
//! made: the ring buffer never holds IDs the limit would refuse, and waits for the limit to
//! rise instead of handing them out.
//!
//! `uidgen-core` does no I/O: the fences that write files or talk to a database live in
//! `uidgen-store` and implement this trait.

use std::fmt;

use crate::error::UidError;
use crate::layout::Layout;

/// Why a [`TimeFence`] did not let a time unit through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FenceRefusal {
    /// Not yet: the limit is below the unit's end, and may rise later (a lease's heartbeat
    /// renews it; a reserved-until mark is written ahead as the clock moves).
    NotYet {
        /// The limit in force (ms since the Unix epoch).
        limit_ms: u64,
        /// Why it is not higher, for the error message.
        reason: String,
    },
    /// Never again: the worker id is gone (a lost or released lease).
    Closed(String),
}

/// A bound on the time units a generator may stamp with its worker id.
///
/// Every ID's time unit must *end* at or before [`limit_ms`](Self::limit_ms): a successor
/// that starts once its clock has passed the limit can then never stamp the same unit.
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use uidgen_core::{
///     DefaultUidGenerator, FenceRefusal, Layout, ManualClock, TimeFence, UidError, UidGenerator,
/// };
///
/// /// A fixed limit that never rises.
/// #[derive(Debug)]
/// struct Until(AtomicU64);
/// impl TimeFence for Until {
///     fn limit_ms(&self) -> u64 {
///         self.0.load(Ordering::SeqCst)
///     }
///     fn extend(&self, _until_ms: u64) -> Result<u64, FenceRefusal> {
///         Err(FenceRefusal::NotYet { limit_ms: self.limit_ms(), reason: "fixed".into() })
///     }
/// }
///
/// let layout = Layout::baidu_default()?;
/// let start = layout.epoch_ms() + 10_000;
/// let clock = ManualClock::new(start);
/// let fence = Arc::new(Until(AtomicU64::new(start + 2_000)));
/// let generator = DefaultUidGenerator::new(layout, 1, clock.clone())?.fenced(fence);
/// assert!(generator.next_id().is_ok()); // the unit [start, start + 1 s) ends inside the limit
/// clock.advance(2_000);
/// assert!(matches!(generator.next_id(), Err(UidError::BeyondFence { .. })));
/// # Ok::<(), UidError>(())
/// ```
pub trait TimeFence: Send + Sync + fmt::Debug {
    /// The instant (ms since the Unix epoch) up to which IDs may be stamped now. Read on the
    /// hot path: one atomic load.
    fn limit_ms(&self) -> u64;

    /// Ask for the limit to reach at least `until_ms`, waiting for I/O if that is how it rises
    /// (a mark written and synced to disk). Returns the new limit, which is at least
    /// `until_ms`; otherwise says why not.
    fn extend(&self, until_ms: u64) -> Result<u64, FenceRefusal>;

    /// How far ahead of the clock a cached generator may pad under this fence (ms), if the
    /// fence wants a bound: a lease keeps borrowing well inside its ttl, so a burst waits for
    /// the clock instead of running into the lease's expiry; a reserved-until mark keeps a
    /// restart's wait short. `None` (the default) leaves the generator's own bound.
    fn max_borrow_ms(&self) -> Option<u64> {
        None
    }

    /// Where the worker id's earlier holders (or lives) stopped (ms since the Unix epoch):
    /// every unit they stamped ended at or before it, so every unit this holder stamps must end
    /// after it, whatever the clock reads. The IDs of the two then never share a unit, even if
    /// this host's clock steps back right after it took the id over. Default 0.
    fn floor_ms(&self) -> u64 {
        0
    }
}

/// The first time unit of `layout` that ends after `floor_ms`: the one containing it (0 for a
/// floor before the epoch).
pub(crate) fn first_unit_from(layout: &Layout, floor_ms: u64) -> u64 {
    floor_ms
        .checked_sub(layout.epoch_ms())
        .map_or(0, |after| after / layout.unit().millis())
}

/// Whether a unit ending at `unit_end_ms` may be stamped: the hot path reads the limit; only a
/// unit past it asks the fence to extend.
#[inline]
pub(crate) fn admit(fence: &dyn TimeFence, unit_end_ms: u64) -> Result<(), FenceRefusal> {
    if unit_end_ms <= fence.limit_ms() {
        return Ok(());
    }
    admit_slow(fence, unit_end_ms)
}

#[cold]
fn admit_slow(fence: &dyn TimeFence, unit_end_ms: u64) -> Result<(), FenceRefusal> {
    let limit_ms = fence.extend(unit_end_ms)?;
    if unit_end_ms <= limit_ms {
        Ok(())
    } else {
        Err(FenceRefusal::NotYet {
            limit_ms,
            reason: "the fence did not extend far enough".to_owned(),
        })
    }
}

impl FenceRefusal {
    /// The error a caller sees: [`UidError::BeyondFence`] while the limit may still rise,
    /// [`UidError::GeneratorStopped`] once it never will.
    #[cold]
    pub(crate) fn into_error(self, worker_id: u64, unit_end_ms: u64) -> UidError {
        match self {
            Self::NotYet { limit_ms, reason } => UidError::BeyondFence {
                worker_id,
                unit_end_ms,
                limit_ms,
                reason,
            },
            Self::Closed(reason) => UidError::GeneratorStopped(reason),
        }
    }
}
