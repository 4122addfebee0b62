//! Handing segment tails back at a clean stop (issue 33, item 2): what a stopping service has
//! claimed and not handed out goes to `leaf_alloc_returned`, and every load, on any server,
//! serves from there before claiming a new segment.
//!
//! The order is what keeps a returned number unique:
//!
//! 1. Stop serving: each slot's cursor is raised to its segment's end (`Slot::fence`, under
//!    the buffer's control lock, after which no load installs). A taker's `fetch_add` came
//!    either before the fence, and reserved positions below the cursor's old value, or after
//!    it, and got nothing of the segment; so the untouched tail is from that old value (or the
//!    segment's start) to the end, and no concurrent taker holds any of it. The prefetched
//!    next segment is untouched, so it goes back whole.
//! 2. Wait (at most `load_timeout`) for loads in flight: a segment claimed after the stop is
//!    kept whole rather than skipped.
//! 3. Write every tail in one transaction, never retried (a retry after a lost commit answer
//!    could write a tail twice). If it fails, the tails are skipped, as after a crash.
//!
//! What a crash (or `kill -9`) loses is unchanged: whatever was buffered. Tags of a segment
//! group are not handed back (see [`SegmentGroup`](crate::SegmentGroup)).

use crate::error::Result;
use crate::service::SegmentService;

/// What [`SegmentService::shutdown_and_hand_back`] wrote back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandedBack {
    /// Ranges written to `leaf_alloc_returned`.
    pub ranges: usize,
    /// The IDs in them.
    pub ids: u64,
}

impl SegmentService {
    /// [`shutdown`](Self::shutdown), then hand the untouched tail of every buffered segment
    /// back to the store, so that the next load of the tag, by any server, serves it before a
    /// new segment. With [`hand_back_tails`](crate::SegmentOptions::hand_back_tails) off, only
    /// the shutdown. A second call hands back nothing.
    ///
    /// Waits at most [`load_timeout`](crate::SegmentOptions::load_timeout) for loads in
    /// flight, and as long again for the write. A failed write is an error; the tails are then
    /// skipped (never served by anyone), as without hand-back.
    ///
    /// Cancel safety: dropping the future after the shutdown skips the tails not yet written;
    /// a write whose commit was under way may or may not have landed, never twice.
    ///
    /// ```no_run
    /// # async fn demo(service: std::sync::Arc<uidgen_segment::SegmentService>) -> uidgen_segment::Result<()> {
    /// let back = service.shutdown_and_hand_back().await?;
    /// println!("handed back {} ids in {} ranges", back.ids, back.ranges);
    /// # Ok(()) }
    /// ```
    pub async fn shutdown_and_hand_back(&self) -> Result<HandedBack> {
        let buffers = self.stop_serving();
        let shared = &self.shared;
        if !shared.options.hand_back_tails {
            return Ok(HandedBack::default());
        }
        let deadline = tokio::time::Instant::now() + shared.options.load_timeout;
        for buffer in &buffers {
            buffer.loads_settled(deadline).await;
        }
        let ranges: Vec<_> = buffers
            .iter()
            .filter(|buffer| shared.source.takes_back(buffer.tag()))
            .flat_map(|buffer| buffer.take_untouched())
            .collect();
        if ranges.is_empty() {
            return Ok(HandedBack::default());
        }
        let write = shared.source.return_ranges(&ranges);
        let written = shared.timed("handing back segment tails", write).await?;
        let ids = written.iter().map(|r| r.numbers().unsigned_abs()).sum();
        // Left out by the store: ranges of a tag deleted or created again since their claim.
        let dropped = ranges.len().saturating_sub(written.len());
        tracing::info!(
            ranges = written.len(),
            ids,
            dropped,
            "handed back the untouched rest of the segments"
        );
        Ok(HandedBack {
            ranges: written.len(),
            ids,
        })
    }
}
