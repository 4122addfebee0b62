//! Loading a segment: the one background task per tag that claims the next segment from the
//! database (bounded by `load_timeout`), checks it against what was served, installs it, and
//! records success or failure for the slow path and for monitoring.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::load_state::{LoadFailure, LoadKind};
use super::{Control, SegmentBuffer};
use crate::error::SegmentError;
use crate::slot::{Installed, Untouched};
use crate::source::Claimed;
use crate::step::next_step;

impl SegmentBuffer {
    /// Spawn the one load task (under the control lock).
    pub(super) fn start_load(self: &Arc<Self>, control: &mut Control, kind: LoadKind) {
        control.loading = true;
        // Relaxed: a hint for the hot path; the control lock is the truth.
        self.hot.next_pending.store(true, Ordering::Relaxed);
        // Relaxed: `current` only changes under the control lock, which we hold.
        let current = self.hot.current.load(Ordering::Relaxed);
        let target = match kind {
            LoadKind::Init => current,
            LoadKind::Next => 1 - current,
        };
        let buffer = Arc::clone(self);
        self.shared.runtime.spawn(async move {
            buffer.load(target, kind).await;
        });
    }

    /// Check a claim against what was served and place it at positions of slot `target`: its
    /// numbers of the claim's residue, from the first at or after `max_id - step`, at positions
    /// starting at or above the slot's previous end (positions never go down within a slot,
    /// whichever database the segment came from).
    fn position(
        &self,
        control: &Control,
        target: usize,
        claim: Claimed,
    ) -> Result<(Installed, Claimed), SegmentError> {
        let start = claim
            .max_id
            .checked_sub(claim.step)
            .filter(|_| claim.step > 0);
        let served_max = control.served_max.floor(claim.residue);
        let start = match start {
            // Also what keeps a re-created tag (max_id back at 1) from repeating IDs. A
            // returned range lies below what was served by design: it is ours because its
            // claim removed it from the table, not because it is above `max_id`.
            Some(start) if claim.returned || start >= served_max => start,
            _ => {
                return Err(SegmentError::MaxIdWentBackwards {
                    tag: self.tag.to_string(),
                    start: start.unwrap_or(i64::MIN),
                    end: claim.max_id,
                    served_max,
                });
            }
        };
        let residue = claim.residue;
        let count = residue.count_in(start..claim.max_id);
        let first = match residue.first_at_or_after(start) {
            Some(first) if count > 0 => first,
            _ => {
                return Err(SegmentError::EmptySegment {
                    tag: self.tag.to_string(),
                    start,
                    end: claim.max_id,
                    delta: residue.delta,
                    remainder: residue.remainder,
                });
            }
        };
        let slot = &self.slots[target];
        // Relaxed: the slot's bounds change only under the control lock, which we hold.
        let previous_end = slot.bounds.max.load(Ordering::Relaxed);
        // Relaxed: a hint. Takers that found the slot used up left its cursor a little past
        // the end; starting there keeps them from eating the first positions (a returned
        // range starts right at the previous end). A taker that moves it further before the
        // install costs a skipped number, never a repeat: any start at or above the previous
        // end is safe (module docs of `buffer`). A new segment starts above both anyway.
        let cursor = slot.cursor.load(Ordering::Relaxed);
        let position = first.max(previous_end).max(cursor);
        let Some(max) = position.checked_add(count) else {
            return Err(SegmentError::TagExhausted {
                tag: self.tag.to_string(),
                max_id: claim.max_id,
            });
        };
        let segment = Installed {
            start: position,
            max,
            first,
            delta: residue.delta,
            end: claim.max_id,
            step: claim.step,
            epoch: claim.epoch,
        };
        Ok((segment, claim))
    }

    /// The next segment's claim: the lowest range handed back for the tag when there is one
    /// (and hand-back is on), else a new segment of `step` (`None`: the stored step).
    ///
    /// Cancel safety: as [`load`](Self::load)'s claim; a returned range whose claim committed
    /// before the future was dropped is skipped, never repeated.
    async fn claim(&self, step: Option<i64>) -> Result<Claimed, SegmentError> {
        let source = &self.shared.source;
        if self.shared.options.hand_back_tails && source.takes_back(&self.tag) {
            match source.claim_returned(&self.tag).await {
                Ok(Some(claim)) => return Ok(claim),
                Ok(None) => {}
                // A new segment is as unique; a database that is down fails that claim too.
                Err(error) => tracing::warn!(tag = %self.tag, %error,
                    "claiming a returned range failed; claiming a new segment instead"),
            }
        }
        source.claim(&self.tag, step).await
    }

    /// Claim a segment and install it in slot `target`.
    ///
    /// The claim is bounded by [`load_timeout`](crate::SegmentOptions::load_timeout): a database
    /// that stops answering without closing the connection would otherwise leave the load in
    /// flight, and every caller waiting, forever. A timeout counts as a failed load; that is
    /// safe because nothing of that claim is served (if it did commit, its IDs are skipped).
    ///
    /// Cancel safety: it runs as a task of its own ([`start_load`](Self::start_load)), so a
    /// caller that stops waiting for it cancels nothing. Should the task itself be dropped
    /// mid-claim (its runtime shutting down), a claim the database committed is lost: those
    /// numbers are never served, never repeated. `loading` then stays set, so this buffer
    /// starts no other load and a caller who finds both segments used up gets
    /// [`BothSegmentsNotReady`](SegmentError::BothSegmentsNotReady) after the wait timeout.
    async fn load(self: Arc<Self>, target: usize, kind: LoadKind) {
        let now = self.shared.clock.now_millis();
        let options = &self.shared.options;
        let step = {
            let control = self.control.lock();
            match (kind, control.update_timestamp) {
                // Leaf: the first two loads use the table's step; the second starts the clock.
                (LoadKind::Init, _) | (LoadKind::Next, None) => None,
                (LoadKind::Next, Some(_)) if !options.dynamic_step => None,
                (LoadKind::Next, Some(previous)) => Some(next_step(
                    control.step,
                    control.min_step,
                    options.max_step,
                    now.saturating_sub(previous),
                    options.segment_duration_ms(),
                )),
            }
        };
        let claimed = self
            .shared
            .timed("claiming a segment", self.claim(step))
            .await;
        let mut control = self.control.lock();
        // Relaxed: stored before `evict` takes the control lock, which we hold.
        if self.hot.evicted.load(Ordering::Relaxed) || self.shared.is_shut_down() {
            // The tag is gone or the service is stopping: the segment is not served (`evict`
            // fenced both slots; installing now would reopen one). At a stop it is kept whole
            // for the hand-back, if it passes the checks a served one would.
            if self.shared.is_shut_down()
                && let Ok((segment, _)) =
                    claimed.and_then(|claim| self.position(&control, target, claim))
            {
                control.untouched.push(Untouched::whole(&segment));
            }
            control.loading = false;
            drop(control);
            self.wake_waiters();
            return;
        }
        let outcome = claimed.and_then(|claim| self.position(&control, target, claim));
        match outcome {
            Ok((segment, claim)) => {
                let start = segment.first;
                self.slots[target].install(segment, options.prefetch_ratio);
                control.served_max.record(claim.residue, claim.max_id);
                if claim.returned {
                    // A returned range's length says nothing of demand: the dynamic step
                    // (step, stored step, when the last new segment came) is left alone.
                    control.reused_ranges += 1;
                    control.reused_ids += segment.max.abs_diff(segment.start);
                } else {
                    control.step = claim.step;
                    control.min_step = claim.table_step;
                }
                match kind {
                    LoadKind::Init => {
                        control.init = true;
                        // Relaxed: see `start_load`; the next segment is not on its way.
                        self.hot.next_pending.store(false, Ordering::Relaxed);
                    }
                    LoadKind::Next => {
                        control.next_ready = true;
                        if !claim.returned {
                            control.update_timestamp = Some(now);
                        }
                    }
                }
                control.loads += 1;
                control.failure = None;
                // Relaxed: read as a hint by `prefetch`; the lock orders it for the slow path.
                self.hot.retry_at_ms.store(0, Ordering::Relaxed);
                tracing::debug!(tag = %self.tag, start, end = claim.max_id, step = claim.step,
                    returned = claim.returned, "loaded segment");
            }
            Err(error) => {
                tracing::warn!(tag = %self.tag, %error, "loading a segment failed");
                control.load_failures += 1;
                control.failure = Some(LoadFailure::new(&error));
                let retry_at = self
                    .shared
                    .clock
                    .now_millis()
                    .saturating_add(options.retry_backoff_ms());
                // Relaxed: see the success arm.
                self.hot.retry_at_ms.store(retry_at, Ordering::Relaxed);
                // Relaxed: see `start_load`; lets the hot path trigger a retry later.
                self.hot.next_pending.store(false, Ordering::Relaxed);
            }
        }
        control.loading = false;
        drop(control);
        self.wake_waiters();
    }
}
