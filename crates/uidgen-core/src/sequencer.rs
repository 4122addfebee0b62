//! The time + sequence state machine shared by [`DefaultUidGenerator`] and
//! [`SnowflakeGenerator`]: one atomic word, advanced by compare-and-swap, so issuing an ID takes
//! no lock. Its atomic comes through [`crate::sync`], so the loom model in
//! `loom-tests/tests/sequencer.rs` checks this code itself.
//!
//! [`DefaultUidGenerator`]: crate::DefaultUidGenerator
//! [`SnowflakeGenerator`]: crate::SnowflakeGenerator

use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use crate::clock::Clock;
use crate::error::{Result, UidError};
use crate::fence::{TimeFence, admit, first_unit_from};
use crate::fields::FieldKind;
use crate::layout::Layout;
use crate::sync::{AtomicU64, Ordering};

/// No ID issued yet. Never a packed state: time and sequence use at most 63 bits together.
const NONE: u64 = u64::MAX;

/// What to do when the clock reads earlier than the last issued time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BackwardPolicy {
    /// Baidu: fail at once.
    Refuse,
    /// Leaf: a step of at most this many ms is waited out (twice the gap) once, then retried.
    WaitUpTo(u64),
}

#[derive(Debug)]
pub(crate) struct Sequencer<C> {
    layout: Layout,
    worker_id: u64,
    clock: C,
    seq_bits: u32,
    /// `(time << seq_bits) | sequence` of the last issued ID, or [`NONE`].
    state: AtomicU64,
    policy: BackwardPolicy,
    /// Leaf: start each new time unit at a random sequence below this bound (0 = always 0), so
    /// low-traffic services do not hand out only even IDs, which skews `id % n` sharding.
    random_start_below: u64,
    random: RandomState,
    /// Every unit is checked against it before an ID of it is stamped (reused worker ids).
    fence: Option<Arc<dyn TimeFence>>,
}

impl<C: Clock> Sequencer<C> {
    pub(crate) fn new(
        layout: Layout,
        worker_id: u64,
        clock: C,
        policy: BackwardPolicy,
    ) -> Result<Self> {
        layout.check_worker_id(worker_id)?;
        Ok(Self {
            seq_bits: layout.bits(FieldKind::Sequence),
            // The layout's default (Leaf's 100 on `leaf`); `set_random_start_below` overrides.
            random_start_below: layout.random_start_bound(),
            layout,
            worker_id,
            clock,
            state: AtomicU64::new(NONE),
            policy,
            random: RandomState::new(),
            fence: None,
        })
    }

    pub(crate) fn set_random_start_below(&mut self, bound: u64) {
        self.random_start_below = bound.min(self.layout.max_sequence() + 1);
    }

    pub(crate) fn set_fence(&mut self, fence: Arc<dyn TimeFence>) {
        let first = first_unit_from(&self.layout, fence.floor_ms());
        if first > 0 {
            // As if the unit before the floor had been used up: a clock below the floor then
            // reads as a clock behind the last issued unit (refused, or waited out), and a
            // clock in that unit waits for the next one.
            let last = (first - 1).min(self.layout.max_time());
            self.state = AtomicU64::new((last << self.seq_bits) | self.layout.max_sequence());
        }
        self.fence = Some(fence);
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    pub(crate) fn worker_id(&self) -> u64 {
        self.worker_id
    }

    pub(crate) fn clock(&self) -> &C {
        &self.clock
    }

    fn start_sequence(&self, time: u64) -> u64 {
        if self.random_start_below <= 1 {
            return 0;
        }
        // A keyed hash of the time unit: random-looking, different per process (random key),
        // no dependency, and only computed once per time unit.
        self.random.hash_one(time) % self.random_start_below
    }

    pub(crate) fn issued_until_ms(&self) -> Option<u64> {
        // Relaxed: a monotonic snapshot for heartbeats; no other memory depends on it.
        let current = self.state.load(Ordering::Relaxed);
        (current != NONE).then(|| self.layout.millis_of((current >> self.seq_bits) + 1))
    }

    pub(crate) fn next_id(&self) -> Result<u64> {
        let max_seq = self.layout.max_sequence();
        let mut waited_backwards = false;
        loop {
            // Load the state before reading the clock: a clock read taken first could be older
            // than a state another thread stored meanwhile, and would look like a clock that
            // moved backwards. Acquire pairs with the Release of the compare-exchange below, so
            // the winner's clock reading happens before ours.
            let current = self.state.load(Ordering::Acquire);
            let now_ms = self.clock.now_millis();
            let now = self.layout.time_at(now_ms)?;
            let (time, sequence) = if current == NONE || now > current >> self.seq_bits {
                (now, self.start_sequence(now))
            } else {
                let last = current >> self.seq_bits;
                let sequence = current & max_seq;
                if now == last {
                    if sequence == max_seq {
                        // Sequence used up in this unit: wait for the next one (Baidu).
                        let next_ms = self.layout.millis_of(last + 1);
                        self.clock
                            .sleep_millis(next_ms.saturating_sub(now_ms).max(1));
                        continue;
                    }
                    (last, sequence + 1)
                } else {
                    let by_ms = self.layout.millis_of(last).saturating_sub(now_ms).max(1);
                    match self.policy {
                        BackwardPolicy::WaitUpTo(max) if by_ms <= max && !waited_backwards => {
                            waited_backwards = true;
                            self.clock.sleep_millis(by_ms * 2);
                            continue;
                        }
                        _ => return Err(UidError::ClockMovedBackwards { by_ms }),
                    }
                }
            };
            if let Some(fence) = &self.fence {
                // Checked before the compare-exchange: an ID is only made once its unit passed.
                let unit_end = self.layout.millis_of(time + 1);
                admit(fence.as_ref(), unit_end)
                    .map_err(|refusal| refusal.into_error(self.worker_id, unit_end))?;
            }
            let next = (time << self.seq_bits) | sequence;
            // Uniqueness comes from the atomicity of this compare-exchange alone. Release
            // publishes our clock reading to the next loader (see above); on failure we start
            // over with a fresh Acquire load, so the failure ordering can be Relaxed.
            if self
                .state
                .compare_exchange_weak(current, next, Ordering::Release, Ordering::Relaxed)
                .is_ok()
            {
                return Ok(self
                    .layout
                    .compose_unchecked(time, self.worker_id, sequence));
            }
        }
    }
}

/// The part of every generator that is a clock policy over one [`Sequencer`] (a field named
/// `sequencer`): fencing, the worker id and issuing. One home, so the generators cannot drift
/// apart in how they fence or issue.
macro_rules! sequencer_generator {
    ($generator:ident) => {
        impl<C: $crate::clock::Clock> $generator<C> {
            /// Stamp only time units that end within `fence` (a lease or a reserved-until mark):
            /// how a reused worker id keeps its IDs apart from its other holders'. A unit past the
            /// limit is [`UidError::BeyondFence`](crate::UidError::BeyondFence), or
            /// [`UidError::GeneratorStopped`](crate::UidError::GeneratorStopped) once the fence is
            /// closed for good.
            #[must_use]
            pub fn fenced(mut self, fence: std::sync::Arc<dyn $crate::fence::TimeFence>) -> Self {
                self.sequencer.set_fence(fence);
                self
            }

            /// The worker id this generator stamps into IDs.
            pub fn worker_id(&self) -> u64 {
                self.sequencer.worker_id()
            }
        }

        impl<C: $crate::clock::Clock> $crate::generator::UidGenerator for $generator<C> {
            fn next_id(&self) -> $crate::error::Result<u64> {
                self.sequencer.next_id()
            }

            fn layout(&self) -> &$crate::layout::Layout {
                self.sequencer.layout()
            }

            fn issued_until_ms(&self) -> Option<u64> {
                self.sequencer.issued_until_ms()
            }
        }
    };
}
pub(crate) use sequencer_generator;
