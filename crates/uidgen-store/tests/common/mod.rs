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
