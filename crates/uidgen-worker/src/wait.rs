//! The one wait every assigner's start goes through: until its clock has passed where the
//! worker id's earlier holders stopped.

use std::time::Duration;

use uidgen_core::Clock;
use uidgen_core::clock::saturating_millis;

use crate::error::{Result, WorkerError};

/// Wait until `clock` reads past `until_ms`, polling (a test clock is moved by someone else);
/// refuse when that is further than `max_wait` away or does not happen within it.
///
/// Every assigner's start waits through this one function, so they share one rule.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use std::time::Duration;
/// use uidgen_core::ManualClock;
/// use uidgen_worker::{WorkerError, wait_for_clock};
/// let clock = ManualClock::new(1_000);
/// // Already past: no wait.
/// wait_for_clock(&clock, 7, 999, Duration::ZERO).await.unwrap();
/// // A minute ahead, with a second allowed: refused at once.
/// let error = wait_for_clock(&clock, 7, 61_000, Duration::from_secs(1)).await.unwrap_err();
/// assert!(matches!(error, WorkerError::ClockBehindLastIssued { worker_id: 7, .. }));
/// # }
/// ```
pub async fn wait_for_clock(
    clock: &dyn Clock,
    worker_id: u64,
    until_ms: u64,
    max_wait: Duration,
) -> Result<()> {
    let max_wait_ms = saturating_millis(max_wait);
    let deadline = tokio::time::Instant::now() + max_wait + Duration::from_millis(100);
    let now_ms = clock.now_millis();
    if now_ms <= until_ms && until_ms - now_ms < max_wait_ms {
        // Said once, before the wait: a start that seems to hang says what it waits for.
        tracing::info!(
            worker_id,
            until_ms,
            wait_ms = until_ms - now_ms + 1,
            "waiting {} ms for the clock to pass {until_ms} ms, where worker id {worker_id}'s \
             earlier holders stopped, before issuing with it",
            until_ms - now_ms + 1
        );
    }
    loop {
        let now_ms = clock.now_millis();
        if now_ms > until_ms {
            return Ok(());
        }
        let wait_ms = until_ms - now_ms + 1;
        if wait_ms > max_wait_ms || tokio::time::Instant::now() >= deadline {
            return Err(WorkerError::ClockBehindLastIssued {
                worker_id,
                until_ms,
                now_ms,
                wait_ms,
                max_wait_ms,
            });
        }
        tokio::time::sleep(Duration::from_millis(wait_ms.min(10))).await;
    }
}
