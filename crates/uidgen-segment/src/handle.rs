//! [`TagHandle`]: one biz tag's buffer held by a caller, skipping the service's tag lookup.

use std::sync::Arc;

use crate::buffer::SegmentBuffer;
use crate::error::{Result, SegmentError};

/// A handle on one biz tag's buffer, for callers that take many IDs from one tag: it skips the
/// tag lookup of [`SegmentService::get`](crate::SegmentService::get).
///
/// A handle stays on the buffer it was made from: after the tag is deleted (and evicted by a
/// sync) it answers [`UnknownTag`](SegmentError::UnknownTag) even if the tag is created again,
/// and after [`shutdown`](crate::SegmentService::shutdown) it answers
/// [`Shutdown`](SegmentError::Shutdown). Take a new handle in either case.
///
/// ```no_run
/// # fn demo(service: &uidgen_segment::SegmentService) -> uidgen_segment::Result<()> {
/// let orders = service.tag("order")?;
/// let a = orders.get()?;
/// let b = orders.get()?;
/// assert!(b > a);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct TagHandle {
    buffer: Arc<SegmentBuffer>,
}

impl TagHandle {
    pub(crate) fn new(buffer: Arc<SegmentBuffer>) -> Self {
        Self { buffer }
    }

    /// The biz tag.
    pub fn tag(&self) -> &str {
        self.buffer.tag()
    }

    /// The next ID; blocks up to the wait timeout only when both segments are used up.
    #[inline]
    pub fn get(&self) -> Result<i64> {
        match self.buffer.try_take(1) {
            Ok(taken) => Ok(taken.first),
            Err(_) => self.buffer.next_id(),
        }
    }

    /// The next ID, awaiting instead of blocking when both segments are used up.
    pub async fn get_async(&self) -> Result<i64> {
        self.buffer.next_id_async().await
    }

    /// `n` IDs (1 to `max_batch`), possibly spanning a segment switch.
    pub fn get_batch(&self, n: usize) -> Result<Vec<i64>> {
        check_count(n, self.buffer_max_batch())?;
        self.buffer.next_batch(n)
    }

    /// [`get_batch`](Self::get_batch), awaiting instead of blocking.
    pub async fn get_batch_async(&self, n: usize) -> Result<Vec<i64>> {
        check_count(n, self.buffer_max_batch())?;
        self.buffer.next_batch_async(n).await
    }

    fn buffer_max_batch(&self) -> usize {
        self.buffer.max_batch()
    }
}

/// Check a batch size.
pub(crate) fn check_count(n: usize, max: usize) -> Result<()> {
    if n == 0 || n > max {
        return Err(SegmentError::InvalidCount { count: n, max });
    }
    Ok(())
}
