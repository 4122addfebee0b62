//! Baidu's `RingBuffer`: a bounded ring of ready-made IDs, filled by one producer (the padding
//! thread) and drained lock-free by any number of consumers.
//!
//! Positions grow without bound; a position's slot is `position & mask`. `tail` is the last
//! position published by the producer, `cursor` the last position claimed by a consumer; both
//! start at -1, so `tail - cursor` IDs are ready. Each slot has a flag: `CAN_PUT` (empty, or read
//! and given back) or `CAN_TAKE` (holds an ID nobody has read yet). The flag, not the indices, is
//! what stops the producer from overwriting an ID that a slow consumer has claimed but not read.

use std::fmt;
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::error::{Result, UidError};
use crate::sync::{self, AtomicBool, AtomicI64, AtomicU8, AtomicU64, Mutex, Ordering};

/// The slot is free for the producer.
const CAN_PUT: u8 = 0;
/// The slot holds an ID for a consumer.
const CAN_TAKE: u8 = 1;

/// Called with the ring and the ID that did not fit when [`RingBuffer::put`] finds it full.
pub type RejectPut = Arc<dyn Fn(&RingBuffer, u64) + Send + Sync>;

/// Called when [`RingBuffer::take`] finds the ring empty; its result is what `take` returns.
pub type RejectTake = Arc<dyn Fn(&RingBuffer) -> Result<u64> + Send + Sync>;

/// Called (at most once per padding run) when the ring falls below its padding threshold.
pub type PaddingTrigger = Box<dyn Fn() + Send + Sync>;

/// A bounded ring of IDs: single producer, lock-free multiple consumers.
///
/// ```
/// use uidgen_core::RingBuffer;
/// let ring = RingBuffer::new(8, 50).unwrap();
/// assert_eq!(ring.put_batch(&mut [10, 11, 12].into_iter()), 3);
/// assert_eq!(ring.take().unwrap(), 10);
/// let mut rest = Vec::new();
/// assert_eq!(ring.take_batch(&mut rest, 5), 2);
/// assert_eq!(rest, [11, 12]);
/// assert!(ring.take().is_err()); // empty: the default reject-take policy is an error
/// ```
pub struct RingBuffer {
    /// The IDs; a slot's value is meaningful only while its flag says `CAN_TAKE`.
    slots: Box<[AtomicU64]>,
    /// One flag per slot. Not cache-padded, unlike Baidu's `PaddedAtomicLong[]`: with padding the
    /// flags of a 65,536-slot ring take 8 MiB and every take misses cache (see docs/BENCHMARKS.md).
    flags: Box<[AtomicU8]>,
    /// `slots.len() - 1`; the length is a power of two.
    mask: u64,
    /// Last position published by the producer.
    tail: CachePadded<AtomicI64>,
    /// Last position claimed by a consumer.
    cursor: CachePadded<AtomicI64>,
    /// Fewer ready IDs than this wakes the padding.
    padding_threshold: i64,
    /// Makes `put` single-producer, as Baidu's `synchronized put`; consumers never take it.
    producer: Mutex<()>,
    /// Set when padding has been asked for and has not started yet, so takes below the threshold
    /// wake the padding thread once, not once each.
    padding_requested: CachePadded<AtomicBool>,
    /// Set once when the producer can never put again; `take` on an empty ring then reports it.
    stopped: AtomicBool,
    /// Why the producer stopped: the error every take on the empty ring reports from then on
    /// (typed, so an exhausted time field stays `TimestampExhausted` for callers and alerts).
    stop_error: Mutex<Option<UidError>>,
    /// IDs refused by a full ring (through `put`).
    rejected_puts: AtomicU64,
    reject_put: Option<RejectPut>,
    reject_take: Option<RejectTake>,
    trigger: Option<PaddingTrigger>,
}

impl fmt::Debug for RingBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RingBuffer")
            .field("buffer_size", &self.buffer_size())
            .field("tail", &self.tail())
            .field("cursor", &self.cursor())
            .field("padding_threshold", &self.padding_threshold)
            .finish_non_exhaustive()
    }
}

impl RingBuffer {
    /// The largest ring: 2^26 slots (512 MiB of IDs) is far past any useful boost.
    pub const MAX_SIZE: usize = 1 << 26;

    /// A ring of `buffer_size` slots (a power of two, at least 2) that asks for padding when
    /// fewer than `padding_factor`% (1 to 99) of them hold IDs.
    pub fn new(buffer_size: usize, padding_factor: u32) -> Result<Self> {
        if buffer_size < 2 || !buffer_size.is_power_of_two() || buffer_size > Self::MAX_SIZE {
            return Err(UidError::InvalidOption {
                name: "buffer_size",
                reason: format!(
                    "{buffer_size} must be a power of two from 2 to {}",
                    Self::MAX_SIZE
                ),
            });
        }
        if !(1..=99).contains(&padding_factor) {
            return Err(UidError::InvalidOption {
                name: "padding_factor",
                reason: format!("{padding_factor} must be a percentage from 1 to 99"),
            });
        }
        let size = u64::try_from(buffer_size).map_err(|_| UidError::InvalidOption {
            name: "buffer_size",
            reason: "does not fit 64 bits".into(),
        })?;
        let threshold = size * u64::from(padding_factor) / 100;
        Ok(Self {
            slots: (0..buffer_size).map(|_| AtomicU64::new(0)).collect(),
            flags: (0..buffer_size).map(|_| AtomicU8::new(CAN_PUT)).collect(),
            mask: size - 1,
            tail: CachePadded::new(AtomicI64::new(-1)),
            cursor: CachePadded::new(AtomicI64::new(-1)),
            // Both at most 2^26, so the conversion cannot fail.
            padding_threshold: i64::try_from(threshold).unwrap_or(i64::MAX),
            producer: Mutex::new(()),
            padding_requested: CachePadded::new(AtomicBool::new(false)),
            stopped: AtomicBool::new(false),
            stop_error: Mutex::new(None),
            rejected_puts: AtomicU64::new(0),
            reject_put: None,
            reject_take: None,
            trigger: None,
        })
    }

    /// Replace the reject-put policy (default: drop the ID, count it, log a warning).
    pub fn with_reject_put(mut self, handler: RejectPut) -> Self {
        self.reject_put = Some(handler);
        self
    }

    /// Replace the reject-take policy (default: [`UidError::RingEmpty`]).
    pub fn with_reject_take(mut self, handler: RejectTake) -> Self {
        self.reject_take = Some(handler);
        self
    }

    /// What to call when a take leaves fewer IDs than the padding threshold.
    pub fn with_padding_trigger(mut self, trigger: PaddingTrigger) -> Self {
        self.trigger = Some(trigger);
        self
    }

    /// Number of slots.
    pub fn buffer_size(&self) -> usize {
        self.slots.len()
    }

    /// Fewer ready IDs than this asks for padding.
    pub fn padding_threshold(&self) -> usize {
        // Built from a percentage of a usize ring size: non-negative and within usize.
        debug_assert!(self.padding_threshold >= 0);
        usize::try_from(self.padding_threshold).unwrap_or(usize::MAX)
    }

    /// Last position the producer published (-1 before the first).
    pub fn tail(&self) -> i64 {
        // Acquire: a reader of `tail` may go on to read the slots it covers.
        self.tail.load(Ordering::Acquire)
    }

    /// Last position a consumer claimed (-1 before the first).
    pub fn cursor(&self) -> i64 {
        // Acquire: pairs with the consumers' AcqRel claim, for an up-to-date count.
        self.cursor.load(Ordering::Acquire)
    }

    /// IDs ready to take right now (a snapshot).
    pub fn len(&self) -> usize {
        let cursor = self.cursor();
        // The cursor is read first and only ever moves up to the tail it saw, so a snapshot can
        // be negative only if the tail is read stale; count that moment as empty, by name.
        let ready = self.tail() - cursor;
        usize::try_from(ready.max(0)).unwrap_or(usize::MAX)
    }

    /// True when no ID is ready.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when every slot holds an ID.
    pub fn is_full(&self) -> bool {
        self.len() >= self.buffer_size()
    }

    /// How many IDs `put` refused because the ring was full.
    pub fn rejected_puts(&self) -> u64 {
        // Relaxed: a monitoring counter; no other memory is read on the strength of it.
        self.rejected_puts.load(Ordering::Relaxed)
    }

    /// Put one ID. A full ring hands it to the reject-put policy and returns false.
    pub fn put(&self, uid: u64) -> bool {
        if self.put_batch(&mut std::iter::once(uid)) == 1 {
            return true;
        }
        // Relaxed: a monitoring counter; atomicity alone keeps concurrent counts exact.
        self.rejected_puts.fetch_add(1, Ordering::Relaxed);
        match &self.reject_put {
            Some(handler) => handler(self, uid),
            None => tracing::warn!(
                uid,
                tail = self.tail(),
                cursor = self.cursor(),
                "ring buffer is full; dropped the ID"
            ),
        }
        false
    }

    /// Put IDs from `uids` until it runs dry or the ring is full, then publish them all with one
    /// store to `tail`; returns how many were put. Never takes an ID from `uids` it cannot place,
    /// so a caller keeps the rest for the next run (Baidu discarded them, skipping seconds:
    /// [#96](https://github.com/baidu/uid-generator/issues/96)).
    pub fn put_batch(&self, uids: &mut impl Iterator<Item = u64>) -> usize {
        let _producer = sync::lock(&self.producer);
        // Relaxed: only the producer writes `tail`, and we hold the producer lock.
        let tail = self.tail.load(Ordering::Relaxed);
        // Acquire: pairs with the consumers' claim, though safety rests on the flags below.
        let cursor = self.cursor.load(Ordering::Acquire);
        let len = self.slots.len();
        // The cursor never passes the tail it saw, so 0 to `len` slots are free.
        let free = usize::try_from(tail - cursor)
            .ok()
            .and_then(|ready| len.checked_sub(ready))
            .unwrap_or(0);
        // The free slots are one run that wraps at most once: fill it as two slices, with no
        // bounds check per ID, and go on to the second only if the first was filled.
        let start = self.index(tail + 1);
        let head = free.min(len - start);
        let mut put = Self::put_run(
            &self.slots[start..start + head],
            &self.flags[start..start + head],
            uids,
        );
        if put == head {
            put += Self::put_run(&self.slots[..free - head], &self.flags[..free - head], uids);
        }
        if put > 0 {
            // At most the ring's size, 2^26, so it fits.
            let put = i64::try_from(put).unwrap_or(i64::MAX);
            // Release: a consumer that sees the new tail sees every flag set above.
            self.tail.store(tail + put, Ordering::Release);
        }
        put
    }

    /// Put IDs from `uids` into free `slots` in order, stopping at the first slot a consumer
    /// has claimed but not read yet or when `uids` runs dry; returns how many were put.
    #[inline]
    fn put_run(
        slots: &[AtomicU64],
        flags: &[AtomicU8],
        uids: &mut impl Iterator<Item = u64>,
    ) -> usize {
        let mut put = 0;
        for (slot, flag) in slots.iter().zip(flags) {
            // Acquire: pairs with the Release in `read_claimed`, so the consumer's read of the
            // old ID happens before we overwrite it.
            if flag.load(Ordering::Acquire) != CAN_PUT {
                break; // a consumer claimed this slot but has not read it yet
            }
            let Some(uid) = uids.next() else { break };
            // Relaxed: published by the Release store of the flag just below.
            slot.store(uid, Ordering::Relaxed);
            // Release: makes the slot's value visible to whoever Acquires this flag.
            flag.store(CAN_TAKE, Ordering::Release);
            put += 1;
        }
        put
    }

    /// Take one ID. An empty ring reports a stopped producer's reason, else defers to the
    /// reject-take policy.
    pub fn take(&self) -> Result<u64> {
        if let Some(uid) = self.try_take() {
            return Ok(uid);
        }
        if let Some(error) = self.stop_error() {
            return Err(error);
        }
        match &self.reject_take {
            Some(handler) => handler(self),
            None => Err(self.empty_error()),
        }
    }

    /// The default policy's error, built off the hot path.
    #[cold]
    fn empty_error(&self) -> UidError {
        UidError::RingEmpty(format!("tail {} cursor {}", self.tail(), self.cursor()))
    }

    /// Take one ID if one is ready, without calling any policy.
    #[inline]
    pub fn try_take(&self) -> Option<u64> {
        let (first, _) = self.claim(1)?;
        Some(self.read_slot(first))
    }

    /// Take up to `max` ready IDs into `out` with one claim; returns how many.
    pub fn take_batch(&self, out: &mut Vec<u64>, max: usize) -> usize {
        let Some((first, count)) = self.claim(max) else {
            return 0;
        };
        // A claim is at least one position and at most `max`, a usize.
        debug_assert!(count > 0);
        let taken = usize::try_from(count).unwrap_or(max);
        // The claimed positions are at most one ring long, so their slots are one run that wraps
        // at most once: read as two slices, with no bounds check or capacity check per ID.
        let start = self.index(first);
        let head = taken.min(self.slots.len() - start);
        out.reserve(taken);
        self.read_run(start..start + head, out);
        self.read_run(0..taken - head, out);
        taken
    }

    /// Read the claimed slots of `range`, in order, into `out` and give them back to the
    /// producer.
    #[inline]
    fn read_run(&self, range: std::ops::Range<usize>, out: &mut Vec<u64>) {
        let slots = &self.slots[range.clone()];
        let flags = &self.flags[range];
        out.extend(
            slots
                .iter()
                .zip(flags)
                .map(|(slot, flag)| Self::read_claimed(slot, flag)),
        );
    }

    /// Claim up to `max` positions: one CAS loop from a single load, so a consumer owns exactly
    /// the positions its CAS moved past. (Baidu read the cursor, then `updateAndGet`, and could
    /// read another consumer's slot: their
    /// [#105](https://github.com/baidu/uid-generator/issues/105).) Returns the first position and
    /// the count.
    #[inline]
    fn claim(&self, max: usize) -> Option<(i64, i64)> {
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        if max == 0 {
            return None;
        }
        // Relaxed: only a starting guess; the CAS below validates it.
        let mut cursor = self.cursor.load(Ordering::Relaxed);
        loop {
            // Acquire: pairs with the producer's Release of `tail`, so the claimed slots' flags
            // and values are visible.
            let tail = self.tail.load(Ordering::Acquire);
            let ready = tail - cursor;
            if ready <= 0 {
                self.request_padding();
                return None;
            }
            let count = ready.min(max);
            // AcqRel on success: orders our claim with other consumers' claims; Relaxed on
            // failure: we only retry from the value we got.
            match self.cursor.compare_exchange_weak(
                cursor,
                cursor + count,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    if ready - count < self.padding_threshold {
                        self.request_padding();
                    }
                    return Some((cursor + 1, count));
                }
                Err(actual) => cursor = actual,
            }
        }
    }

    /// Read a claimed position's ID and give the slot back to the producer.
    #[inline]
    fn read_slot(&self, position: i64) -> u64 {
        let index = self.index(position);
        Self::read_claimed(&self.slots[index], &self.flags[index])
    }

    /// Read the ID of a slot this consumer claimed and give the slot back to the producer.
    ///
    /// No flag check before the read: the producer stores the value, then the flag, then
    /// Releases `tail`; the claim Acquired a `tail` at or past this position, so the value put
    /// happens before this read, and the producer cannot put into the slot again until the
    /// flag store below. (The loop on the flag this replaces never ran in the loom models; debug
    /// and loom builds still check the flag.)
    #[inline]
    fn read_claimed(slot: &AtomicU64, flag: &AtomicU8) -> u64 {
        // Relaxed: a check of the invariant above, ordered by the claim's Acquire of `tail`.
        #[cfg(any(debug_assertions, uidgen_loom))]
        assert_eq!(
            flag.load(Ordering::Relaxed),
            CAN_TAKE,
            "read of an unput slot"
        );
        // Relaxed: ordered after the put by the claim's Acquire of `tail` (see above).
        let uid = slot.load(Ordering::Relaxed);
        // Release: our read happens before the producer (Acquiring this flag) overwrites the slot.
        flag.store(CAN_PUT, Ordering::Release);
        uid
    }

    /// Ask for padding: cheap when it is already asked for (one load, no write).
    pub fn request_padding(&self) {
        // Relaxed: a hint; the swap below decides who calls the trigger.
        if self.padding_requested.load(Ordering::Relaxed) {
            return;
        }
        // AcqRel: exactly one caller sees `false` and wakes the padding, until it clears the flag.
        if !self.padding_requested.swap(true, Ordering::AcqRel)
            && let Some(trigger) = &self.trigger
        {
            trigger();
        }
    }

    /// True while padding has been asked for and has not started yet (for monitoring and tests:
    /// a take that leaves the ring below the threshold sets it before it returns).
    pub fn padding_requested(&self) -> bool {
        self.padding_requested.load(Ordering::SeqCst)
    }

    /// Called by the padding as it starts, so takes during and after it can ask again.
    pub fn padding_started(&self) {
        // SeqCst: a take that fills the ring below the threshold after this must see `false`.
        self.padding_requested.store(false, Ordering::SeqCst);
    }

    /// Mark the producer as stopped for good; takes on an empty ring then report
    /// [`UidError::GeneratorStopped`] with `reason`.
    pub fn stop(&self, reason: impl Into<String>) {
        self.stop_with(UidError::GeneratorStopped(reason.into()));
    }

    /// Mark the producer as stopped for good by `error`, which takes on an empty ring then
    /// report as it is (the first error sticks).
    pub fn stop_with(&self, error: UidError) {
        let mut slot = sync::lock(&self.stop_error);
        if slot.is_none() {
            *slot = Some(error);
        }
        self.stopped.store(true, Ordering::SeqCst);
    }

    /// True once the producer stopped for good: one load, for a hot path that refuses to hand
    /// out IDs after a stop ([`LocalIds`](crate::local::LocalIds) checks it on every call).
    ///
    /// ```
    /// use uidgen_core::RingBuffer;
    /// let ring = RingBuffer::new(4, 50)?;
    /// assert!(!ring.is_stopped());
    /// ring.stop("worker lease lost");
    /// assert!(ring.is_stopped());
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    #[inline]
    pub fn is_stopped(&self) -> bool {
        // Relaxed: the flag guards no data (the reason is read under its lock, in `stop_error`),
        // and a stop that happens before this call is seen under any ordering (coherence).
        self.stopped.load(Ordering::Relaxed)
    }

    /// The error takes report once the producer stopped, if it did.
    pub fn stop_error(&self) -> Option<UidError> {
        if !self.stopped.load(Ordering::SeqCst) {
            return None;
        }
        sync::lock(&self.stop_error).clone()
    }

    /// Why the producer stopped, if it did, as text.
    pub fn stop_reason(&self) -> Option<String> {
        self.stop_error().map(|error| match error {
            UidError::GeneratorStopped(reason) => reason,
            other => other.to_string(),
        })
    }

    #[inline]
    fn index(&self, position: i64) -> usize {
        // Positions start at 0 (tail and cursor start at -1 and only the next one is indexed),
        // and the mask keeps the index below the ring size, a usize.
        debug_assert!(position >= 0, "negative ring position {position}");
        let masked = position.cast_unsigned() & self.mask;
        debug_assert!(masked < self.mask + 1);
        usize::try_from(masked).unwrap_or(usize::MAX)
    }
}

/// Ready-made reject-take policies, to pass to [`RingBuffer::with_reject_take`] or
/// [`CachedOptions`](crate::CachedOptions).
pub mod policy {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::{RejectTake, RingBuffer};
    use crate::error::UidError;

    /// Baidu's default: an empty ring is an error ([`UidError::RingEmpty`]).
    ///
    /// ```
    /// use uidgen_core::{RingBuffer, ring::policy};
    /// let ring = RingBuffer::new(4, 50)?.with_reject_take(policy::fail());
    /// assert!(ring.put(7));
    /// assert_eq!(ring.take()?, 7);
    /// assert_eq!(
    ///     ring.take().unwrap_err().to_string(),
    ///     "ring buffer is empty: padding has not caught up (tail 0 cursor 0); retry or use the \
    ///      waiting reject-take policy"
    /// );
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn fail() -> RejectTake {
        Arc::new(|ring: &RingBuffer| Err(ring.empty_error()))
    }

    /// Wait for padding instead of failing: spin briefly, then yield, and past a millisecond
    /// sleep 100 µs between looks, for up to `timeout`; then [`UidError::RingEmpty`]. A producer that stopped ends the wait at once with its reason.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use uidgen_core::{RingBuffer, UidError, ring::policy};
    /// let wait = policy::wait(Duration::from_secs(10));
    /// let ring = Arc::new(RingBuffer::new(4, 50)?.with_reject_take(wait));
    /// // A producer that shows up while the take waits is waited for.
    /// let producer = {
    ///     let ring = Arc::clone(&ring);
    ///     std::thread::spawn(move || ring.put(7))
    /// };
    /// assert_eq!(ring.take()?, 7);
    /// assert!(producer.join().unwrap());
    /// // A producer that stopped ends the wait at once, with its reason.
    /// ring.stop("worker lease lost");
    /// assert_eq!(ring.take(), Err(UidError::GeneratorStopped("worker lease lost".into())));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn wait(timeout: Duration) -> RejectTake {
        /// How long a waiter yields before it sleeps between looks.
        const YIELD_FOR: Duration = Duration::from_millis(1);
        /// A long waiter's pause between looks.
        const SLEEP_BETWEEN_LOOKS: Duration = Duration::from_micros(100);
        Arc::new(move |ring: &RingBuffer| {
            let start = Instant::now();
            // Not modelled by loom (the models use the fail policy), so crossbeam's backoff:
            // spin briefly, then yield (and, for a long wait, sleep).
            let backoff = crossbeam_utils::Backoff::new();
            loop {
                if let Some(uid) = ring.try_take() {
                    return Ok(uid);
                }
                if let Some(error) = ring.stop_error() {
                    return Err(error);
                }
                if !backoff.is_completed() {
                    backoff.snooze();
                } else {
                    if start.elapsed() >= timeout {
                        return Err(UidError::RingEmpty(format!(
                            "waited {} ms for padding",
                            timeout.as_millis()
                        )));
                    }
                    // Yield through a short wait (the padding thread is busy refilling), sleep
                    // through a long one: a caller waiting for the clock (borrowing bounded by a
                    // lease) may wait for seconds, and a loop of yields would take a core from
                    // the padding thread, the heartbeat and the database it needs meanwhile.
                    if start.elapsed() < YIELD_FOR {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(SLEEP_BETWEEN_LOOKS);
                    }
                }
            }
        })
    }
}
