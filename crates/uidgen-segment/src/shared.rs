//! What every buffer of a service shares, apart from the service that owns them.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use uidgen_core::Clock;

use crate::error::{Result, SegmentError};
use crate::options::SegmentOptions;
use crate::source::SegmentSource;

/// What every buffer of a service shares: the database, the clock, the options, the runtime
/// that runs the loads.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) source: Arc<dyn SegmentSource>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) options: SegmentOptions,
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) shut_down: AtomicBool,
}

impl Shared {
    pub(crate) fn is_shut_down(&self) -> bool {
        // Relaxed: a flag checked on the slow path; a late view serves at most one more
        // already-claimed segment.
        self.shut_down.load(Ordering::Relaxed)
    }

    /// Run one database call, abandoning it after
    /// [`load_timeout`](SegmentOptions::load_timeout) (dropping the future rolls back its
    /// transaction, or leaves a commit whose result nobody uses).
    pub(crate) async fn timed<T>(
        &self,
        action: &'static str,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.options.load_timeout, call).await {
            Ok(result) => result,
            Err(_) => Err(SegmentError::TimedOut {
                action,
                waited_ms: self.options.load_timeout_ms(),
            }),
        }
    }
}
