//! Baidu's `DefaultUidGenerator`: time + sequence computed on every call.

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::layout::Layout;
use crate::sequencer::{BackwardPolicy, Sequencer};

/// Baidu semantics: within one time unit the sequence counts up; when it is used up the call
/// waits for the next unit; a clock that moved backwards is refused with
/// [`UidError::ClockMovedBackwards`](crate::UidError::ClockMovedBackwards); a time field with no
/// room left gives [`UidError::TimestampExhausted`](crate::UidError::TimestampExhausted).
///
/// Unlike Baidu's `synchronized` method, issuing takes no lock: the last (time, sequence) pair
/// lives in one atomic word advanced by compare-and-swap.
///
/// ```
/// use uidgen_core::{DefaultUidGenerator, Layout, ManualClock, UidError, UidGenerator};
/// let clock = ManualClock::new(Layout::baidu_default().unwrap().epoch_ms() + 5_000);
/// let generator =
///     DefaultUidGenerator::new(Layout::baidu_default().unwrap(), 42, clock.clone()).unwrap();
/// let first = generator.parse(generator.next_id().unwrap()).unwrap();
/// assert_eq!((first.parts.time, first.parts.worker, first.parts.sequence), (5, 42, 0));
/// clock.rewind(2_000);
/// assert_eq!(generator.next_id(), Err(UidError::ClockMovedBackwards { by_ms: 2_000 }));
/// ```
#[derive(Debug)]
pub struct DefaultUidGenerator<C: Clock = SystemClock> {
    sequencer: Sequencer<C>,
}

impl<C: Clock> DefaultUidGenerator<C> {
    /// A generator for `worker_id`; fails if the id does not fit the layout's worker field.
    pub fn new(layout: Layout, worker_id: u64, clock: C) -> Result<Self> {
        Ok(Self {
            sequencer: Sequencer::new(layout, worker_id, clock, BackwardPolicy::Refuse)?,
        })
    }

    /// The clock it reads.
    pub fn clock(&self) -> &C {
        self.sequencer.clock()
    }
}

crate::sequencer::sequencer_generator!(DefaultUidGenerator);
