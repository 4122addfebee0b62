//! The ID buffer's refill task: batch calls kept in flight while the ring has room for them.
//!
//! One call at a time leaves the ring idle while a batch crosses the network, and leaves
//! every peer but one idle: with a pipeline, one server issues the next batch while the
//! client puts the last one in its ring, and with several peers the calls spread over them
//! (the peer set's rotation). Each call asks for at most the room the ring has left once the
//! calls already in flight come back, so batches fit as they arrive.
//!
//! Invariants:
//! - only this task puts into the ring (the ring's single producer); the calls in flight
//!   only fetch;
//! - batches are put in the order their calls were made.

use std::collections::VecDeque;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use uidgen_proto::CheckedBatch;

use crate::error::{ClientError, Result};
use crate::fallback::Fallback;
use crate::feed::{Feed, Refill};
use crate::peers::{Answer, PeerSet};

/// Calls in flight: one per peer, at least two (a pipeline on a single peer), at most four
/// (past that the ring's room, not the calls, limits the refill).
const MIN_IN_FLIGHT: usize = 2;
const MAX_IN_FLIGHT: usize = 4;

/// A batch call in flight: what it asked for, and the task making it.
struct Call {
    count: usize,
    task: JoinHandle<Result<Answer<CheckedBatch>>>,
}

/// The calls in flight, oldest first; aborted when the refill task ends.
#[derive(Default)]
struct Pipeline {
    calls: VecDeque<Call>,
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        for call in &self.calls {
            call.task.abort();
        }
    }
}

impl Pipeline {
    /// Start a call for `count` IDs on the peers.
    fn start(&mut self, peers: &Arc<PeerSet>, count: u32) {
        let peers = Arc::clone(peers);
        let task = tokio::spawn(async move {
            peers
                .call(move |connection| async move { connection.next_ids(count).await })
                .await
        });
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        self.calls.push_back(Call { count, task });
    }

    /// The IDs the calls in flight asked for (at most four calls: summed when needed).
    fn asked(&self) -> usize {
        self.calls.iter().map(|call| call.count).sum()
    }

    /// The oldest call's answer; `None` when no call is in flight.
    async fn next_answer(&mut self) -> Option<Result<Answer<CheckedBatch>>> {
        let call = self.calls.front_mut()?;
        let joined = (&mut call.task).await;
        self.calls.pop_front();
        Some(joined.unwrap_or_else(|error| {
            Err(ClientError::BadResponse {
                peer: "the refill task".to_owned(),
                reason: format!("a batch call ended without an answer: {error}"),
            })
        }))
    }
}

/// The ID buffer's refill task: waits for the low-water mark, then keeps batch calls in flight
/// until the ring (with what the calls will bring) is nearly full.
pub(crate) async fn feed_ids(
    peers: Arc<PeerSet>,
    feed: Arc<Feed>,
    fallback: Option<Arc<Fallback>>,
    batch_size: u32,
    probe: Duration,
) {
    let size = feed.ring.buffer_size();
    let refill = IdRefill {
        // Ask for at least an eighth of the ring, so a round is a few large calls, not many small.
        min_batch: (size / 8).max(1),
        lanes: peers.len().clamp(MIN_IN_FLIGHT, MAX_IN_FLIGHT),
        size,
        peers,
        fallback,
        batch_size,
        pipeline: Pipeline::default(),
    };
    feed.serve(probe, refill).await;
}

/// The ID feed's state between steps.
struct IdRefill {
    peers: Arc<PeerSet>,
    fallback: Option<Arc<Fallback>>,
    /// The ring's size.
    size: usize,
    /// The smallest call worth making.
    min_batch: usize,
    /// How many calls may be in flight.
    lanes: usize,
    /// The largest call.
    batch_size: u32,
    pipeline: Pipeline,
}

impl Refill for IdRefill {
    async fn step(&mut self, feed: &Feed) -> Result<ControlFlow<()>> {
        let pipeline = &mut self.pipeline;
        while pipeline.calls.len() < self.lanes {
            let room = self
                .size
                .saturating_sub(feed.ring.len())
                .saturating_sub(pipeline.asked());
            if room < self.min_batch {
                break;
            }
            let count = u32::try_from(room).unwrap_or(u32::MAX).min(self.batch_size);
            pipeline.start(&self.peers, count);
        }
        let Some(answer) = pipeline.next_answer().await else {
            return Ok(ControlFlow::Break(())); // nothing in flight: the ring is nearly full
        };
        let answer = answer?;
        check_answer(&self.peers, self.fallback.as_deref(), &answer).await;
        if answer.value.is_empty() {
            return Err(ClientError::BadResponse {
                peer: self.peers.peer(answer.peer).to_string(),
                reason: "an empty batch of IDs".to_owned(),
            });
        }
        // IDs that do not fit (a slot not yet given back) are dropped: skipped, never
        // repeated.
        feed.ring.put_batch(&mut answer.value.into_iter());
        Ok(ControlFlow::Continue(()))
    }
}

/// The fallback's checks on a peer that answered for the first time since it came up. A
/// clash disables the fallback (it is logged there); the peer's IDs stay good.
async fn check_answer(peers: &PeerSet, fallback: Option<&Fallback>, answer: &Answer<CheckedBatch>) {
    let Some(fallback) = fallback else { return };
    let peer = peers.peer(answer.peer).to_string();
    let _ = fallback.check_ids(&peer, &answer.value);
    if answer.unchecked {
        let _ = fallback.check_peer(peers, answer.peer, false).await;
    }
}
