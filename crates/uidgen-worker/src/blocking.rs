//! Blocking entry points for code that is not async.
//!
//! They run on one background tokio runtime owned by this crate (two worker threads, started on
//! first use and kept for the life of the process), so that tasks they start, such as a lease
//! heartbeat or a pool's connections, outlive the call.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{Result, WorkerError};

static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();

/// The background runtime.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("uidgen-worker")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| WorkerError::InvalidInput(format!("cannot start the background runtime: {e}")))
}

/// Run `future` to completion on the background runtime. Refuses to run inside a tokio
/// runtime, where blocking would stall its thread: `.await` the async API there instead.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(WorkerError::InvalidInput(
            "a blocking uidgen-worker call was made inside a tokio runtime; use the async API"
                .to_owned(),
        ));
    }
    Ok(runtime()?.block_on(future))
}

/// Flatten `block_on` of a fallible future whose error converts from [`WorkerError`].
pub fn block_on_result<T: Send, E: From<WorkerError> + Send>(
    future: impl Future<Output = std::result::Result<T, E>> + Send,
) -> std::result::Result<T, E> {
    block_on(future)?
}
