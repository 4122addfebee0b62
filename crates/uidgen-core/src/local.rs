//! An opt-in per-thread batch over a [`RingBuffer`]: one claim on the ring's shared `cursor`
//! for up to [`DEFAULT_LOCAL_BATCH`] IDs, handed out one by one from memory only this thread
//! touches.
//!
//! Why: every [`RingBuffer::take`] is a CAS on `cursor`, the one cache line every consumer
//! writes; on two threads that line moves between cores on nearly every ID (issue 23, "two
//! threads ≥ 0.7× the `fetch_add` floor"). A handle pays that CAS once per batch.
//!
//! What a handle keeps and what it gives up:
//! - **Unique**: every ID comes from a run of positions the handle's own claim moved the cursor
//!   past, so no other consumer (handle or plain take) can read it.
//! - **Monotonic per handle**: padding fills the ring in increasing ID order and each claim
//!   starts past every earlier one, so one handle's IDs increase (with the built-in reject-take
//!   policies; a custom policy's IDs are whatever it returns).
//! - **No global order**: a handle may hand out an ID older than one another thread already
//!   handed out, and by any number of IDs: what it holds is as old as the claim that took it,
//!   however many IDs other threads took since. Across threads, the order in which IDs are
//!   handed out is not their numeric order.
//! - **Gaps, never repeats**: IDs a handle holds when it is dropped are never issued by anyone.
//! - **A held batch ages**: its IDs carry the time unit they were padded for, as every ring ID
//!   does; a handle used rarely hands out IDs whose time lags the clock. They stay inside
//!   [`issued_until_ms`](crate::UidGenerator::issued_until_ms) and the generator's fence, so a
//!   successor on the worker id can never stamp them.
//! - **A stopped ring ends the handle at once**: each call checks the ring's stop flag (one load)
//!   before it hands out a held ID, and a stopped ring drops what the handle holds. A ring is
//!   stopped when its worker id was lost (a fence `Closed`: the lease is gone), its time field
//!   ran out, or its padding thread died. The generator's own `next_id` still drains what the
//!   ring holds after a stop; a handle is stricter because it may sit on its batch for as long
//!   as its thread likes, and the lease-loss guard that checks every ID a service lets out
//!   (`uidgen-worker`'s `GuardedGenerator`) cannot see inside a handle.

use crate::error::{Result, UidError};
use crate::ring::RingBuffer;

/// The batch a [`LocalIds`] claims at once unless told otherwise: one CAS for 64 IDs makes the
/// shared line's cost per ID small next to the take itself, while a dropped handle wastes at
/// most 63 IDs.
///
/// ```
/// assert_eq!(uidgen_core::local::DEFAULT_LOCAL_BATCH, 64);
/// ```
pub const DEFAULT_LOCAL_BATCH: usize = 64;

/// The largest batch a [`LocalIds`] may claim: past a few thousand the CAS is already a rounding
/// error per ID, and a larger batch only grows the gap a dropped handle leaves, the age of the
/// IDs it sits on and how far it drains the ring ahead of other consumers.
///
/// ```
/// assert_eq!(uidgen_core::local::MAX_LOCAL_BATCH, 4096);
/// ```
pub const MAX_LOCAL_BATCH: usize = 4096;

/// A handle one thread owns that hands out IDs from a private batch, refilled with one claim on
/// the ring (see the [module docs](self) for what it keeps and gives up).
///
/// Made by [`CachedUidGenerator::local`](crate::CachedUidGenerator::local) (or
/// [`LocalIds::new`] over a bare ring). It borrows the generator, so the generator outlives it.
///
/// ```
/// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock};
/// let generator =
///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
/// let mut ids = generator.local_with_batch(16)?;
/// let first = ids.next_id()?;
/// assert_eq!(ids.held(), 15); // one claim took 16; the rest wait in the handle
/// let second = ids.next_id()?;
/// assert!(first < second);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug)]
pub struct LocalIds<'a> {
    /// The ring the batches are claimed from.
    ring: &'a RingBuffer,
    /// The current batch, in claim (and so increasing) order; `held[next..]` are not handed out.
    held: Vec<u64>,
    /// Index of the next ID of `held` to hand out.
    next: usize,
    /// How many IDs one claim takes at most.
    batch: usize,
}

impl<'a> LocalIds<'a> {
    /// A handle over `ring` that claims up to `batch` IDs at once (1 to the smaller of
    /// [`MAX_LOCAL_BATCH`] and the ring's size). Claims nothing yet.
    ///
    /// ```
    /// use uidgen_core::{RingBuffer, UidError, local::LocalIds};
    /// let ring = RingBuffer::new(8, 50)?;
    /// ring.put_batch(&mut (10..18));
    /// let mut ids = LocalIds::new(&ring, 4)?;
    /// assert_eq!(ids.next_id()?, 10);
    /// assert_eq!(ring.len(), 4); // one claim of 4: three held, four left in the ring
    /// let refused = LocalIds::new(&ring, 0);
    /// assert!(matches!(refused, Err(UidError::InvalidOption { name: "batch", .. })));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn new(ring: &'a RingBuffer, batch: usize) -> Result<Self> {
        let max = Self::max_batch(ring);
        if !(1..=max).contains(&batch) {
            return Err(UidError::InvalidOption {
                name: "batch",
                reason: format!(
                    "{batch} must be from 1 to {max} (the smaller of {MAX_LOCAL_BATCH} and the \
                     ring's {} slots)",
                    ring.buffer_size()
                ),
            });
        }
        Ok(Self::checked(ring, batch))
    }

    /// A handle whose batch is `batch` brought within bounds: the generator's default, which
    /// a ring smaller than [`DEFAULT_LOCAL_BATCH`] (a short sequence field) must not refuse.
    pub(crate) fn clamped(ring: &'a RingBuffer, batch: usize) -> Self {
        Self::checked(ring, batch.clamp(1, Self::max_batch(ring)))
    }

    /// The largest batch over `ring`: a claim never takes more than the ring holds.
    fn max_batch(ring: &RingBuffer) -> usize {
        MAX_LOCAL_BATCH.min(ring.buffer_size())
    }

    /// A handle with a batch already known to be within bounds.
    fn checked(ring: &'a RingBuffer, batch: usize) -> Self {
        debug_assert!((1..=Self::max_batch(ring)).contains(&batch));
        Self {
            ring,
            held: Vec::with_capacity(batch),
            next: 0,
            batch,
        }
    }

    /// The next ID: from the held batch, else from a new claim of up to the batch size, else
    /// (the ring is empty) from the ring's reject-take policy, which fails or waits as the
    /// generator was configured. Once the ring is stopped, the stop's error, and the held IDs
    /// are dropped.
    ///
    /// ```
    /// use uidgen_core::{RingBuffer, UidError, local::LocalIds};
    /// let ring = RingBuffer::new(4, 50)?; // the default policy: an empty ring is an error
    /// ring.put_batch(&mut (1..4));
    /// let mut ids = LocalIds::new(&ring, 2)?;
    /// assert_eq!([ids.next_id()?, ids.next_id()?, ids.next_id()?], [1, 2, 3]);
    /// assert!(matches!(ids.next_id(), Err(UidError::RingEmpty(_))));
    /// ring.put(4);
    /// ring.stop("worker lease lost");
    /// assert_eq!(ids.next_id(), Err(UidError::GeneratorStopped("worker lease lost".into())));
    /// # Ok::<(), UidError>(())
    /// ```
    #[inline]
    pub fn next_id(&mut self) -> Result<u64> {
        if self.ring.is_stopped() {
            return Err(self.refuse());
        }
        if let Some(&uid) = self.held.get(self.next) {
            self.next += 1;
            return Ok(uid);
        }
        self.refill()
    }

    /// Claim a new batch and hand out its first ID; an empty ring goes to the policy.
    #[inline(never)]
    fn refill(&mut self) -> Result<u64> {
        self.held.clear();
        self.next = 0;
        if self.ring.take_batch(&mut self.held, self.batch) > 0
            && let Some(&uid) = self.held.first()
        {
            self.next = 1;
            return Ok(uid);
        }
        // Empty: the ring's own take reports a stop, or asks the reject-take policy, so a
        // handle fails or waits exactly as the generator's `next_id` does.
        self.ring.take()
    }

    /// The stop's error; what the handle held is dropped, never handed out.
    #[cold]
    fn refuse(&mut self) -> UidError {
        self.held.clear();
        self.next = 0;
        stop_error(self.ring)
    }

    /// How many IDs the handle holds and has not handed out (lost if it is dropped).
    pub fn held(&self) -> usize {
        self.held.len().saturating_sub(self.next)
    }

    /// The most IDs one claim takes.
    pub fn batch(&self) -> usize {
        self.batch
    }
}

/// What a [`UnitIds`] handle needs of its generator: the ring (for its stop flag and its
/// fallback) and the claim of a whole time unit, made under the lock the padding run takes.
pub(crate) trait UnitSource: Sync {
    /// The generator's ring.
    fn ring(&self) -> &RingBuffer;
    /// Claim the next time unit for the caller alone and return its sequence-0 ID; `None` while
    /// the borrowing bound or the fence holds the next unit back; an error (the ring stopped
    /// with it) when the time field ran out or the fence closed.
    fn claim_first_id(&self) -> Result<Option<u64>>;
    /// What to add to an ID for the next sequence, and the largest sequence.
    fn sequence_step(&self) -> (u64, u64);
}

/// A handle one thread owns that claims a whole time unit at a time from its generator, under
/// the lock its padding run takes, and hands out the unit's IDs from two integers only its
/// thread touches. Made by
/// [`CachedUidGenerator::local_units`](crate::CachedUidGenerator::local_units).
///
/// Why: a [`LocalIds`] batch still goes through the ring, whose slots the padding thread writes
/// on one core and the taker reads on another; with the padding thread sharing two cores with
/// two takers, that traffic, not the cursor, is what two threads pay (issue 23, measured in
/// docs/BENCHMARKS.md). A unit claimed here is never in the ring.
///
/// What it keeps and what it gives up:
/// - **Unique**: units are claimed one at a time under the generator's padding lock, the padding
///   run's included, each past the last one claimed (`last_second`), so no unit goes to two
///   claimants; a handle alone hands out its unit's sequences.
/// - **The generator's guards hold**: a claim passes the same borrowing bound, time-field check
///   and fence the padding run does (one function does both), and raises `last_second`, so
///   [`issued_until_ms`](crate::UidGenerator::issued_until_ms) covers every ID a handle holds
///   and a successor on a reused worker id waits them out.
/// - **Increasing per handle, with one exception**: each claim is later than the last. When the
///   next unit is held back (the borrowing bound or a fence not yet risen), the handle takes
///   from the ring instead, through its reject-take policy, and the ring's IDs are older.
/// - **No global order**: it hands out IDs a whole unit ahead of the ring's.
/// - **Whole units, borrowed**: every claim uses a time unit up, so a handle borrows units
///   ahead of the clock as fast as its thread takes IDs (Baidu's layout: one unit per 8,192
///   IDs), and a dropped handle leaves the rest of its unit unused (a gap, never a repeat).
/// - **A stopped ring ends it at once**, as it ends a [`LocalIds`].
///
/// ```
/// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidError};
/// let generator =
///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
/// let mut ids = generator.local_units();
/// let first = ids.next_id()?;
/// assert_eq!(ids.held(), 8_191); // the rest of the unit
/// generator.ring().stop("worker lease lost");
/// assert_eq!(ids.next_id(), Err(UidError::GeneratorStopped("worker lease lost".into())));
/// assert_eq!(ids.held(), 0);
/// # let _ = first;
/// # Ok::<(), UidError>(())
/// ```
pub struct UnitIds<'a> {
    /// The generator the units are claimed from.
    source: &'a dyn UnitSource,
    /// The next ID to hand out, while `left > 0`.
    next: u64,
    /// How many IDs of the claimed unit are left.
    left: u64,
    /// What one sequence adds to an ID.
    step: u64,
    /// IDs per unit.
    per_unit: u64,
}

impl std::fmt::Debug for UnitIds<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitIds")
            .field("next", &self.next)
            .field("left", &self.left)
            .field("per_unit", &self.per_unit)
            .finish_non_exhaustive()
    }
}

impl<'a> UnitIds<'a> {
    /// A handle over `source` that has claimed nothing yet.
    pub(crate) fn new(source: &'a dyn UnitSource) -> Self {
        let (step, max_sequence) = source.sequence_step();
        Self {
            source,
            next: 0,
            left: 0,
            step,
            per_unit: max_sequence.saturating_add(1),
        }
    }

    /// The next ID: from the claimed unit, else from a new claim, else (the next unit is held
    /// back) from the ring, through its reject-take policy. Once the ring is stopped, the stop's
    /// error, and the rest of the unit is dropped.
    ///
    /// ```
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// let mut ids = generator.local_units();
    /// let first = generator.parse(ids.next_id()?)?;
    /// assert_eq!((first.parts.worker, first.parts.sequence), (7, 0));
    /// assert!(generator.issued_until_ms() >= Some(first.timestamp_ms)); // the fence covers it
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    #[inline]
    pub fn next_id(&mut self) -> Result<u64> {
        if self.source.ring().is_stopped() {
            return Err(self.refuse());
        }
        if self.left > 0 {
            self.left -= 1;
            let uid = self.next;
            // Wrapping: past the unit's last ID the value is never handed out (`left` is 0).
            self.next = uid.wrapping_add(self.step);
            return Ok(uid);
        }
        self.refill()
    }

    /// Claim a new unit and hand out its first ID; a unit held back goes to the ring.
    #[inline(never)]
    fn refill(&mut self) -> Result<u64> {
        match self.source.claim_first_id()? {
            Some(first) => {
                self.left = self.per_unit - 1;
                self.next = first.wrapping_add(self.step);
                Ok(first)
            }
            None => self.source.ring().take(),
        }
    }

    /// The stop's error; the rest of the unit is dropped, never handed out.
    #[cold]
    fn refuse(&mut self) -> UidError {
        self.left = 0;
        stop_error(self.source.ring())
    }

    /// How many IDs of the claimed unit are left (lost if the handle is dropped).
    pub fn held(&self) -> u64 {
        self.left
    }
}

/// The error of a stopped ring (`stop_with` stores the reason before the flag, under the lock
/// `stop_error` takes, so a stopped ring has one).
fn stop_error(ring: &RingBuffer) -> UidError {
    ring.stop_error().unwrap_or_else(|| {
        debug_assert!(false, "a stopped ring without a reason");
        UidError::GeneratorStopped("the ring buffer stopped".to_owned())
    })
}
