//! Helpers shared by the integration tests.

#![allow(dead_code)]

/// Define a test whose body runs once per database: `name::sqlite`, `name::mysql`,
/// `name::postgres`, each on its own fresh database.
#[macro_export]
macro_rules! per_db {
    ($(#[$meta:meta])* async fn $name:ident($db:ident: TestDb) $body:block) => {
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn body($db: TestDb) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                body(TestDb::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mysql() {
                body(TestDb::MySql).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                body(TestDb::Postgres).await;
            }
        }
    };
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
