//! One door for every atomic, lock and thread primitive of uidgen-core: the ring buffer, the
//! sequencer behind the Default and Snowflake generators, and the manual test clock.
//!
//! Under `--cfg uidgen_loom` these are loom's model-checked types, otherwise std's, so the loom
//! models in `loom-tests/` exercise the real [`RingBuffer`](crate::RingBuffer) code rather than a
//! copy of it (the approach of tokio's `loom` module and concurrent-queue's `sync.rs`).

#[cfg(uidgen_loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
#[cfg(uidgen_loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

#[cfg(not(uidgen_loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
#[cfg(not(uidgen_loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Let another thread run (loom's scheduler under the model): for waits on a thread that
/// must act first, such as a test clock that only moves when told to.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(uidgen_loom)]
    loom::thread::yield_now();
    #[cfg(not(uidgen_loom))]
    std::thread::yield_now();
}

/// Try to lock a mutex without waiting: `None` when another thread holds it. A poisoned lock
/// is recovered, as [`lock`] does.
pub(crate) fn try_lock<T>(mutex: &Mutex<T>) -> Option<MutexGuard<'_, T>> {
    match mutex.try_lock() {
        Ok(guard) => Some(guard),
        Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// Lock a mutex, recovering the guard if a previous holder panicked: the state it protects is
/// only ever updated in whole steps, so a poisoned lock holds consistent data.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
