//! How time enters the generators.
//!
//! Generators never read the system time directly: they ask a [`Clock`]. Production uses
//! [`SystemClock`]; tests use [`ManualClock`] so clock-back, leap-forward and exhaustion are
//! exercised deterministically, without sleeps.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// A source of wall-clock time in milliseconds since the Unix epoch.
///
/// ```
/// use uidgen_core::{Clock, SystemClock};
/// assert!(SystemClock.now_millis() > 1_600_000_000_000);
/// ```
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    fn now_millis(&self) -> u64;

    /// Let about `ms` milliseconds pass. Generators call this when they must wait for the clock
    /// (sequence exhausted, small backward step); a test clock may move itself instead.
    fn sleep_millis(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_millis(&self) -> u64 {
        (**self).now_millis()
    }
    fn sleep_millis(&self, ms: u64) {
        (**self).sleep_millis(ms);
    }
}

impl<C: Clock + ?Sized> Clock for &C {
    fn now_millis(&self) -> u64 {
        (**self).now_millis()
    }
    fn sleep_millis(&self, ms: u64) {
        (**self).sleep_millis(ms);
    }
}

/// The operating system's wall clock.
///
/// ```
/// use uidgen_core::{Clock, SystemClock};
/// let a = SystemClock.now_millis();
/// assert!(SystemClock.now_millis() >= a - 1_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> u64 {
        // A clock before 1970 reads as 0; generators then report `ClockBeforeEpoch`.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, saturating_millis)
    }

    fn sleep_millis(&self, ms: u64) {
        // The OS oversleeps by tens of microseconds or more; waiting for the next millisecond
        // with `thread::sleep(1 ms)` loses a good part of it, which caps a Snowflake generator
        // well below its 4096 IDs per ms. So sleep the bulk and yield through the last stretch.
        let target = self.now_millis().saturating_add(ms);
        if ms > 2 {
            std::thread::sleep(Duration::from_millis(ms - 2));
        }
        while self.now_millis() < target {
            std::thread::yield_now();
        }
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// With `auto_advance` on, [`Clock::sleep_millis`] moves the clock forward by the requested
/// amount, as if the time had passed, so code that waits for the next tick finishes at once.
///
/// ```
/// use uidgen_core::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(500);
/// assert_eq!(clock.now_millis(), 1_500);
/// clock.rewind(200);
/// assert_eq!(clock.now_millis(), 1_300);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug, Default)]
struct ManualInner {
    now_ms: AtomicU64,
    auto_advance: AtomicBool,
}

impl ManualClock {
    /// A clock that reads `now_ms` until moved; sleeping does not move it.
    pub fn new(now_ms: u64) -> Self {
        let clock = Self::default();
        clock.set(now_ms);
        clock
    }

    /// A clock that reads `now_ms` and moves forward whenever a caller sleeps on it.
    pub fn auto_advancing(now_ms: u64) -> Self {
        let clock = Self::new(now_ms);
        clock.set_auto_advance(true);
        clock
    }

    /// Set the time.
    pub fn set(&self, now_ms: u64) {
        self.inner.now_ms.store(now_ms, Ordering::SeqCst);
    }

    /// Move the time forward.
    pub fn advance(&self, ms: u64) {
        self.inner.now_ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Move the time backward (saturating at zero).
    pub fn rewind(&self, ms: u64) {
        let _ = self
            .inner
            .now_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_sub(ms))
            });
    }

    /// Choose whether sleeping on this clock moves it forward.
    pub fn set_auto_advance(&self, on: bool) {
        self.inner.auto_advance.store(on, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.inner.now_ms.load(Ordering::SeqCst)
    }

    fn sleep_millis(&self, ms: u64) {
        if self.inner.auto_advance.load(Ordering::SeqCst) {
            self.advance(ms.max(1));
        } else {
            // Someone else moves this clock; give them the CPU instead of spinning hot.
            crate::sync::yield_now();
        }
    }
}

/// A duration in whole milliseconds, saturating at `u64::MAX` (585 million years) instead of
/// failing: the one conversion every option and deadline in uidgen uses.
///
/// ```
/// use std::time::Duration;
/// use uidgen_core::clock::saturating_millis;
/// assert_eq!(saturating_millis(Duration::from_micros(2_500)), 2);
/// assert_eq!(saturating_millis(Duration::MAX), u64::MAX);
/// ```
pub fn saturating_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
