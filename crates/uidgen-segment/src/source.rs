//! Where segments come from: a small internal trait over the database, implemented for
//! [`uidgen_store::Store`]. Unit tests implement it in process to drive the buffer logic with a
//! [`ManualClock`](uidgen_core::ManualClock); every database behaviour is tested on the real
//! databases in `tests/`.

use std::future::Future;
use std::pin::Pin;

use uidgen_store::{LeafAlloc, Residue, ReturnedRange, Store};

use crate::error::{Result, from_store};

/// A tag to create or update: its step, and its description when `Some`. As one database of a
/// group, `residue` is what a new row gets; an existing row with another is refused.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TagUpsert<'a> {
    pub(crate) tag: &'a str,
    pub(crate) step: i64,
    pub(crate) description: Option<&'a str>,
    pub(crate) residue: Option<Residue>,
}

/// A boxed, sendable future: the trait must be object safe so the service is not generic.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A segment the database has committed: this process owns `[max_id - step, max_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Claimed {
    /// Exclusive end of the segment (`max_id` after the claim).
    pub(crate) max_id: i64,
    /// The segment's length.
    pub(crate) step: i64,
    /// The step stored in the table, read by the claim itself (the dynamic step never goes
    /// below it).
    pub(crate) table_step: i64,
    /// The row's residue: of the segment, only these numbers are this database's.
    pub(crate) residue: Residue,
    /// A range another process (or this one, earlier) handed back, not a new segment: its
    /// numbers lie below `max_id` and what was served, and are ours because the claim
    /// removed the range from the table (`leaf_alloc_returned`).
    pub(crate) returned: bool,
    /// The tag's life the numbers were claimed in (`leaf_alloc_epoch`): the segment's tail
    /// goes back only to that life (`uidgen_store::ReturnedRange::epoch`).
    pub(crate) epoch: i64,
}

impl Claimed {
    /// A returned range as a claim: `[start, end)`; the stored step is unknown (0, unused).
    pub(crate) fn from_returned(range: &ReturnedRange) -> Self {
        Self {
            max_id: range.end,
            step: range.end - range.start,
            table_step: 0,
            residue: range.residue,
            returned: true,
            epoch: range.epoch,
        }
    }
}

/// The database operations the segment service needs.
pub(crate) trait SegmentSource: Send + Sync + std::fmt::Debug + 'static {
    /// Claim the next segment of `tag`: with the stored step when `step` is `None`, else with
    /// `step`. Returns only after the new `max_id` is committed.
    fn claim<'a>(&'a self, tag: &'a str, step: Option<i64>) -> BoxFuture<'a, Result<Claimed>>;

    /// Every tag.
    fn list_tags(&self) -> BoxFuture<'_, Result<Vec<String>>>;

    /// Whether this source keeps segment tails handed back for `tag` (a group's tags are not:
    /// see `SegmentGroup`). Tails of other tags are skipped at shutdown, as without hand-back.
    fn takes_back(&self, _tag: &str) -> bool {
        false
    }

    /// Take the lowest range handed back for `tag`, if any, removed so no one else gets it.
    fn claim_returned<'a>(&'a self, _tag: &'a str) -> BoxFuture<'a, Result<Option<Claimed>>> {
        Box::pin(async { Ok(None) })
    }

    /// Hand `ranges` back in one transaction, never retried (a second write after a lost
    /// commit answer would hand numbers out twice); how many were written.
    fn return_ranges<'a>(
        &'a self,
        _ranges: &'a [ReturnedRange],
    ) -> BoxFuture<'a, Result<Vec<ReturnedRange>>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    /// Whether `tag` is served from a group of databases (its numbers are not contiguous, so it
    /// cannot be leased as a range).
    fn is_group_tag(&self, _tag: &str) -> bool {
        false
    }

    /// Create or update a tag.
    fn upsert<'a>(
        &'a self,
        tag: &'a str,
        step: i64,
        description: Option<&'a str>,
    ) -> BoxFuture<'a, Result<LeafAlloc>> {
        self.apply_upsert(TagUpsert {
            tag,
            step,
            description,
            residue: None,
        })
    }

    /// Create or update a tag as `upsert` says: alone, or as one database of a group.
    fn apply_upsert<'a>(&'a self, upsert: TagUpsert<'a>) -> BoxFuture<'a, Result<LeafAlloc>>;

    /// The row of `tag`, if any.
    fn row<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<LeafAlloc>>>;
}

impl SegmentSource for Store {
    fn claim<'a>(&'a self, tag: &'a str, step: Option<i64>) -> BoxFuture<'a, Result<Claimed>> {
        Box::pin(async move {
            let claim = match step {
                None => self.claim_segment(tag).await,
                Some(step) => self.claim_segment_with_step(tag, step).await,
            }
            .map_err(|e| from_store(tag, e))?;
            Ok(Claimed {
                max_id: claim.max_id,
                step: claim.step,
                table_step: claim.stored_step,
                residue: claim.residue,
                returned: false,
                epoch: claim.epoch,
            })
        })
    }

    fn list_tags(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(async move { Ok(Store::list_tags(self).await?) })
    }

    fn takes_back(&self, _tag: &str) -> bool {
        true
    }

    fn claim_returned<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<Claimed>>> {
        Box::pin(async move {
            let range = self
                .claim_returned_range(tag)
                .await
                .map_err(|e| from_store(tag, e))?;
            Ok(range.as_ref().map(Claimed::from_returned))
        })
    }

    fn return_ranges<'a>(
        &'a self,
        ranges: &'a [ReturnedRange],
    ) -> BoxFuture<'a, Result<Vec<ReturnedRange>>> {
        Box::pin(async move { Ok(Store::return_ranges(self, ranges).await?) })
    }

    fn apply_upsert<'a>(&'a self, upsert: TagUpsert<'a>) -> BoxFuture<'a, Result<LeafAlloc>> {
        let TagUpsert { tag, step, .. } = upsert;
        Box::pin(async move {
            match upsert.residue {
                None => self.upsert_tag(tag, step, upsert.description).await,
                Some(residue) => {
                    self.upsert_group_tag(tag, step, upsert.description, residue)
                        .await
                }
            }
            .map_err(|e| from_store(tag, e))
        })
    }

    fn row<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<LeafAlloc>>> {
        Box::pin(async move { self.get_tag(tag).await.map_err(|e| from_store(tag, e)) })
    }
}

/// An in-process `leaf_alloc` for unit tests of the buffer logic (switching, prefetch, dynamic
/// step). The database tests in `tests/` never use it.
#[cfg(test)]
pub(crate) mod memory {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use parking_lot::Mutex;
    use tokio::sync::Semaphore;
    use uidgen_store::{LeafAlloc, Residue, ReturnedRange, StoreError};

    use super::{BoxFuture, Claimed, SegmentSource, TagUpsert};
    use crate::error::{Result, SegmentError};

    /// Rows keyed by tag, plus switches to fail or stall claims.
    #[derive(Debug, Default)]
    pub(crate) struct MemorySource {
        rows: Mutex<BTreeMap<String, (i64, i64)>>,
        /// Residues of tags that have one other than `Residue::SINGLE`.
        pub(crate) residues: Mutex<BTreeMap<String, Residue>>,
        /// Every claim, in order: (tag, start, end).
        pub(crate) claims: Mutex<Vec<(String, i64, i64)>>,
        pub(crate) fail: AtomicBool,
        pub(crate) claim_count: AtomicUsize,
        /// When set, claims wait for a permit (tests release them one by one).
        pub(crate) gate: Mutex<Option<Arc<Semaphore>>>,
        /// When set, listing and upserting tags never answer (a database that went silent).
        pub(crate) silent_admin: AtomicBool,
        /// Ranges handed back and not yet claimed (`leaf_alloc_returned`).
        pub(crate) returned: Mutex<Vec<ReturnedRange>>,
    }

    impl MemorySource {
        pub(crate) fn with_tag(tag: &str, step: i64) -> Arc<Self> {
            let source = Arc::new(Self::default());
            source.rows.lock().insert(tag.to_owned(), (1, step));
            source
        }

        pub(crate) fn remove(&self, tag: &str) {
            self.rows.lock().remove(tag);
        }

        pub(crate) fn upsert_direct(&self, tag: &str, step: i64) {
            self.rows
                .lock()
                .entry(tag.to_owned())
                .or_insert((1, step))
                .1 = step;
        }

        /// Delete and re-create `tag`: a new row at `max_id` 1, as `upsert_tag` after
        /// `delete_tag` makes it.
        pub(crate) fn recreate(&self, tag: &str, step: i64) {
            self.rows.lock().insert(tag.to_owned(), (1, step));
        }

        /// The row of `tag` as the store would return it.
        fn leaf_alloc(
            &self,
            tag: &str,
            max_id: i64,
            step: i64,
            description: Option<&str>,
        ) -> LeafAlloc {
            LeafAlloc {
                biz_tag: tag.to_owned(),
                max_id,
                step,
                description: description.map(str::to_owned),
                update_time_ms: None,
                residue: self.residues.lock().get(tag).copied().unwrap_or_default(),
            }
        }

        /// Never answer until `silent_admin` is cleared (checked every millisecond).
        async fn stall_if_silent(&self) {
            while self.silent_admin.load(Ordering::SeqCst) {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
        }

        /// Move `max_id` by hand, as a careless admin might.
        pub(crate) fn set_max_id(&self, tag: &str, max_id: i64) {
            if let Some(row) = self.rows.lock().get_mut(tag) {
                row.0 = max_id;
            }
        }
    }

    fn outage() -> SegmentError {
        SegmentError::Store(StoreError::InvalidInput("simulated outage".to_owned()))
    }

    impl SegmentSource for MemorySource {
        fn claim<'a>(&'a self, tag: &'a str, step: Option<i64>) -> BoxFuture<'a, Result<Claimed>> {
            Box::pin(async move {
                let gate = self.gate.lock().clone();
                if let Some(gate) = gate {
                    gate.acquire().await.map_err(|_| outage())?.forget();
                }
                self.claim_count.fetch_add(1, Ordering::SeqCst);
                if self.fail.load(Ordering::SeqCst) {
                    return Err(outage());
                }
                let mut rows = self.rows.lock();
                let row = rows
                    .get_mut(tag)
                    .ok_or_else(|| SegmentError::UnknownTag(tag.to_owned()))?;
                let used = step.unwrap_or(row.1);
                row.0 = row.0.checked_add(used).ok_or(SegmentError::TagExhausted {
                    tag: tag.to_owned(),
                    max_id: row.0,
                })?;
                self.claims
                    .lock()
                    .push((tag.to_owned(), row.0 - used, row.0));
                Ok(Claimed {
                    max_id: row.0,
                    step: used,
                    table_step: row.1,
                    residue: self.residues.lock().get(tag).copied().unwrap_or_default(),
                    returned: false,
                    epoch: 0,
                })
            })
        }

        fn takes_back(&self, _tag: &str) -> bool {
            true
        }

        /// The lowest returned range of `tag`, as the store picks it.
        fn claim_returned<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<Claimed>>> {
            Box::pin(async move {
                if self.fail.load(Ordering::SeqCst) {
                    return Err(outage());
                }
                let mut returned = self.returned.lock();
                let lowest = returned
                    .iter()
                    .enumerate()
                    .filter(|(_, range)| range.biz_tag == tag)
                    .min_by_key(|(_, range)| range.start)
                    .map(|(i, _)| i);
                Ok(lowest.map(|i| Claimed::from_returned(&returned.remove(i))))
            })
        }

        fn return_ranges<'a>(
            &'a self,
            ranges: &'a [ReturnedRange],
        ) -> BoxFuture<'a, Result<Vec<ReturnedRange>>> {
            Box::pin(async move {
                if self.fail.load(Ordering::SeqCst) {
                    return Err(outage());
                }
                let kept: Vec<ReturnedRange> =
                    ranges.iter().filter(|r| r.numbers() > 0).cloned().collect();
                self.returned.lock().extend(kept.iter().cloned());
                Ok(kept)
            })
        }

        fn list_tags(&self) -> BoxFuture<'_, Result<Vec<String>>> {
            Box::pin(async move {
                self.stall_if_silent().await;
                if self.fail.load(Ordering::SeqCst) {
                    return Err(outage());
                }
                Ok(self.rows.lock().keys().cloned().collect())
            })
        }

        fn row<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<LeafAlloc>>> {
            Box::pin(async move {
                if self.fail.load(Ordering::SeqCst) {
                    return Err(outage());
                }
                let row = self.rows.lock().get(tag).copied();
                Ok(row.map(|(max_id, step)| self.leaf_alloc(tag, max_id, step, None)))
            })
        }

        fn apply_upsert<'a>(&'a self, upsert: TagUpsert<'a>) -> BoxFuture<'a, Result<LeafAlloc>> {
            let TagUpsert { tag, step, .. } = upsert;
            Box::pin(async move {
                if let Some(residue) = upsert.residue {
                    if self.fail.load(Ordering::SeqCst) {
                        return Err(outage());
                    }
                    if !self.rows.lock().contains_key(tag) {
                        self.residues.lock().insert(tag.to_owned(), residue);
                    }
                }
                self.stall_if_silent().await;
                let mut rows = self.rows.lock();
                let row = rows.entry(tag.to_owned()).or_insert((1, step));
                row.1 = step;
                Ok(self.leaf_alloc(tag, row.0, step, upsert.description))
            })
        }
    }
}
