//! Snowflake with Meituan Leaf's clock policy.

use crate::clock::{Clock, SystemClock};
use crate::error::Result;
use crate::layout::Layout;
use crate::layout::epochs::LEAF_RANDOM_START_BOUND;
use crate::sequencer::{BackwardPolicy, Sequencer};

/// Leaf: a backward step of at most this many milliseconds is waited out.
pub const DEFAULT_MAX_BACKWARD_MS: u64 = 5;

/// Snowflake IDs (usually millisecond unit) with Leaf's policy for a clock that moves back: a
/// step of at most [`DEFAULT_MAX_BACKWARD_MS`] is waited out (twice the gap, once) and retried;
/// anything larger, or a clock still behind after the wait, is
/// [`UidError::ClockMovedBackwards`](crate::UidError::ClockMovedBackwards).
///
/// Coarser units are accepted on purpose (the server offers this policy with Vesta's seconds and
/// Sonyflake's 10 ms): the step is still measured in milliseconds, from the start of the last
/// unit issued. A clock that moves back inside that unit is no step back at all (IDs go on in the
/// same unit, the sequence still rising); one that falls behind the unit's start by at most the
/// bound is waited out, which brings it back into the unit.
///
/// ```
/// use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidError, UidGenerator};
/// let clock = ManualClock::auto_advancing(1_700_000_000_000);
/// let generator =
///     SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, clock.clone()).unwrap();
/// let a = generator.next_id().unwrap();
/// clock.rewind(3); // small step: waited out, because sleeping moves this clock forward
/// assert!(generator.next_id().unwrap() > a);
/// clock.rewind(50); // large step: refused
/// assert!(matches!(generator.next_id(), Err(UidError::ClockMovedBackwards { .. })));
/// ```
#[derive(Debug)]
pub struct SnowflakeGenerator<C: Clock = SystemClock> {
    sequencer: Sequencer<C>,
}

impl<C: Clock> SnowflakeGenerator<C> {
    /// A generator for `worker_id` that waits out backward steps of up to
    /// [`DEFAULT_MAX_BACKWARD_MS`]; each new unit starts at the layout's
    /// [`random_start_bound`](Layout::random_start_bound) (a random sequence below 100 on
    /// `leaf`, 0 elsewhere) until [`random_sequence_start`](Self::random_sequence_start) says
    /// otherwise.
    pub fn new(layout: Layout, worker_id: u64, clock: C) -> Result<Self> {
        Self::with_max_backward_ms(layout, worker_id, clock, DEFAULT_MAX_BACKWARD_MS)
    }

    /// Like [`SnowflakeGenerator::new`] with a chosen bound for backward steps (0: refuse all).
    pub fn with_max_backward_ms(
        layout: Layout,
        worker_id: u64,
        clock: C,
        max_backward_ms: u64,
    ) -> Result<Self> {
        let policy = if max_backward_ms == 0 {
            BackwardPolicy::Refuse
        } else {
            BackwardPolicy::WaitUpTo(max_backward_ms)
        };
        Ok(Self {
            sequencer: Sequencer::new(layout, worker_id, clock, policy)?,
        })
    }

    /// Start each new time unit at a random sequence in `0..100` (Leaf), so that at low traffic
    /// IDs are not all multiples of the sequence width, which would skew `id % shards`; `false`
    /// starts at 0. Overrides the layout's default ([`Layout::with_random_start`]).
    ///
    /// ```
    /// use uidgen_core::{Layout, ManualClock, SnowflakeGenerator, UidGenerator};
    /// let clock = ManualClock::new(1_700_000_000_000);
    /// let zero = SnowflakeGenerator::new(Layout::leaf()?, 1, clock)?.random_sequence_start(false);
    /// assert_eq!(zero.parse(zero.next_id()?)?.parts.sequence, 0);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn random_sequence_start(mut self, on: bool) -> Self {
        let bound = if on { LEAF_RANDOM_START_BOUND } else { 0 };
        self.sequencer.set_random_start_below(bound);
        self
    }
}

crate::sequencer::sequencer_generator!(SnowflakeGenerator);
