//! A ring of ready numbers fed by a background task: the local buffer behind
//! [`Client::next_id`](crate::Client::next_id) and behind each segment tag.
//!
//! The hot path is [`RingBuffer::try_take`], the same lock-free claim the in-process
//! `CachedUidGenerator` uses: no lock and no network per call. A take that leaves the ring
//! below its low-water mark (`padding_factor`) wakes the feeding task, which refills it from
//! the peers while callers keep taking what is left.
//!
//! Invariants:
//! - only the feeding task puts into the ring (the ring's single producer);
//! - `failure` is `Some` only while the last fill round ended without reaching any peer;
//!   callers that find the ring empty then get that error (or the fallback), instead of
//!   waiting for a round that is known to fail.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use uidgen_core::RingBuffer;

use crate::error::{ClientError, Result};

/// What a feeding task does in one step of a fill round; [`Feed::serve`] runs the rounds.
pub(crate) trait Refill: Send {
    /// Bring the ring more numbers: `Continue` to step again, `Break` when the ring has what
    /// it can take for now. The future is `Send` so the task can be spawned.
    fn step(&mut self, feed: &Feed) -> impl Future<Output = Result<ControlFlow<()>>> + Send;
}

/// A ring, the task feeding it, and what the task last saw.
#[derive(Debug)]
pub(crate) struct Feed {
    /// The ready numbers.
    pub ring: RingBuffer,
    /// Woken by the ring's padding trigger and by callers that found it empty.
    wake: Arc<Notify>,
    /// Notified after every fill round, successful or not.
    round: Notify,
    /// The last round's failure, while it stands.
    failure: Mutex<Option<ClientError>>,
    /// Mirrors `failure.is_some()` so the slow path can read it without the lock.
    failing: AtomicBool,
    /// Set on shutdown: the task ends and empty takes report [`ClientError::Closed`].
    closed: AtomicBool,
}

impl Feed {
    /// A ring of `size` slots (a power of two) refilled below `low_water_percent`.
    pub(crate) fn new(size: usize, low_water_percent: u32) -> Result<Arc<Self>> {
        let wake = Arc::new(Notify::new());
        let trigger = Arc::clone(&wake);
        let ring = RingBuffer::new(size, low_water_percent)
            .map_err(|e| crate::error::invalid("buffer_size", e.to_string()))?
            .with_padding_trigger(Box::new(move || trigger.notify_one()));
        Ok(Arc::new(Self {
            ring,
            wake,
            round: Notify::new(),
            failure: Mutex::new(None),
            failing: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }))
    }

    /// Wait until the ring asks for numbers (or `probe` passes while failing, to re-probe).
    async fn wait_for_demand(&self, probe: Duration) {
        if self.is_failing() {
            let _ = tokio::time::timeout(probe, self.wake.notified()).await;
        } else {
            self.wake.notified().await;
        }
        self.ring.padding_started();
    }

    /// The feeding task's life, until [`close`](Self::close): wait for demand, then step
    /// `refill` until it ends the round (`Break`) or fails, and record the round. One loop for
    /// the ID feed and the segment feeds, so both wake, stop and report failures alike.
    pub(crate) async fn serve(&self, probe: Duration, mut refill: impl Refill) {
        while !self.is_closed() {
            self.wait_for_demand(probe).await;
            let outcome = loop {
                if self.is_closed() {
                    break Ok(());
                }
                match refill.step(self).await {
                    Ok(ControlFlow::Continue(())) => {}
                    Ok(ControlFlow::Break(())) => break Ok(()),
                    Err(error) => break Err(error),
                }
            };
            self.finish_round(outcome);
        }
    }

    /// Record the end of a fill round.
    fn finish_round(&self, outcome: Result<()>) {
        let failed = outcome.is_err();
        *self.failure.lock() = outcome.err();
        self.failing.store(failed, Ordering::SeqCst);
        self.round.notify_waiters();
    }

    pub(crate) fn is_failing(&self) -> bool {
        self.failing.load(Ordering::SeqCst)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Stop the feeding task and wake everyone waiting.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        self.round.notify_waiters();
    }

    /// The standing failure, as a fresh error for this caller.
    fn failure(&self) -> Option<ClientError> {
        self.failure.lock().as_ref().map(ClientError::replay)
    }

    /// The slow path of a take: wake the feeding task and wait until a number is ready or
    /// a round fails (its error), for at most `wait` ([`ClientError::Starved`] then).
    ///
    /// While the rounds are failing, `fresh` decides: `true` waits for one more round (a
    /// server may be back), `false` returns the standing failure at once (the caller has a
    /// fallback and should not wait on a probe).
    ///
    /// Cancel safety: it only waits; cancelling it takes nothing from the ring.
    pub(crate) async fn take_slow(&self, wait: Duration, fresh: bool) -> Result<u64> {
        let deadline = tokio::time::Instant::now() + wait;
        let mut rounds = 0u32;
        loop {
            let round = self.round.notified();
            tokio::pin!(round);
            // Registered before the checks below, so a round ending in between still wakes us.
            round.as_mut().enable();
            if let Some(id) = self.ring.try_take() {
                return Ok(id);
            }
            if self.is_closed() {
                return Err(ClientError::Closed);
            }
            if self.is_failing()
                && (rounds > 0 || !fresh)
                && let Some(error) = self.failure()
            {
                return Err(error);
            }
            self.wake.notify_one();
            if tokio::time::timeout_at(deadline, round).await.is_err() {
                return match self.ring.try_take() {
                    Some(id) => Ok(id),
                    None => Err(self.failure().unwrap_or(ClientError::Starved {
                        waited_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                    })),
                };
            }
            rounds = rounds.saturating_add(1);
        }
    }
}
