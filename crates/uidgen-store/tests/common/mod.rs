//! Helpers shared by the integration tests.

#![allow(dead_code)]

pub mod leases;

/// [`uidgen_store::per_db`]: a test whose body runs once per database.
#[macro_export]
macro_rules! per_db {
    ($($test:tt)*) => { uidgen_store::per_db! { $($test)* } };
}

/// A layout with `worker_bits` worker bits (seconds, Baidu-like), for exhaustion and leases.
pub fn narrow_layout(worker_bits: u32) -> uidgen_core::Layout {
    use uidgen_core::FieldKind::{Sequence, Sign, Time, Worker};
    uidgen_core::Layout::new(
        "narrow",
        &[
            (Sign, 1),
            (Time, 30),
            (Worker, worker_bits),
            (Sequence, 33 - worker_bits),
        ],
        uidgen_core::TimeUnit::Seconds,
        "2026-01-01",
    )
    .unwrap()
}

/// Claims cancelled at every point (a timeout of 0 to 2.5 ms around each, as the segment
/// crate's `load_timeout_ms` does) never leave a pooled connection inside a transaction, and
/// claims afterwards still work and never repeat a segment (issue 36, point 5: PostgreSQL
/// logged "there is already a transaction in progress" after cancelled claims).
pub async fn cancelled_claims_leave_no_session_in_a_transaction<F, Fut>(
    store: &uidgen_store::Store,
    mut claim: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = uidgen_store::Result<std::ops::Range<i64>>>,
{
    use std::time::Duration;
    let mut ranges = Vec::new();
    let mut cancelled = 0;
    for round in 0..250_u64 {
        let budget = Duration::from_micros((round * 97) % 2_500);
        match tokio::time::timeout(budget, claim()).await {
            Ok(range) => ranges.push(range.unwrap()),
            Err(_) => cancelled += 1,
        }
        let open = uidgen_store::testing::pooled_sessions_in_transaction(store)
            .await
            .unwrap();
        assert_eq!(
            open, 0,
            "round {round}: a claim cancelled after {budget:?} left {open} \
                             pooled connection(s) inside a transaction"
        );
        if round % 10 == 0 {
            ranges.push(claim().await.unwrap());
        }
    }
    assert!(
        cancelled > 0,
        "no claim was cancelled: the test exercised nothing"
    );
    for _ in 0..20 {
        ranges.push(claim().await.unwrap());
    }
    ranges.sort_by_key(|r| r.start);
    for pair in ranges.windows(2) {
        assert!(pair[0].end <= pair[1].start, "a segment repeated: {pair:?}");
    }
}
