//! Blocking entry points for code that is not async.
//!
//! They run on one background tokio runtime owned by this crate (two worker threads, started on
//! first use and kept for the life of the process), so that tasks they start, such as a lease
//! heartbeat or a pool's connections, outlive the call.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{Result, StoreError};
use crate::store::{Store, StoreOptions};

static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> = OnceLock::new();

/// The background runtime.
pub fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("uidgen-store")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| StoreError::InvalidInput(format!("cannot start the background runtime: {e}")))
}

/// Run `future` to completion on the background runtime. Refuses to run inside a tokio
/// runtime, where blocking would stall its thread: `.await` the async API there instead.
pub fn block_on<F>(future: F) -> Result<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_ok() {
        return Err(StoreError::InvalidInput(
            "a blocking uidgen-store call was made inside a tokio runtime; use the async API"
                .to_owned(),
        ));
    }
    Ok(runtime()?.block_on(future))
}

/// Flatten `block_on` of a fallible future.
pub(crate) fn block_on_result<T: Send>(
    future: impl Future<Output = Result<T>> + Send,
) -> Result<T> {
    block_on(future)?
}

impl Store {
    /// [`Store::connect_with`] for code that is not async.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("uidgen-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap(); // the file is created, its folder is not
    /// let url = format!("sqlite://{}/blocking.db", dir.display());
    /// let store = uidgen_store::Store::connect_blocking(&url, Default::default())?;
    /// assert_eq!(store.dialect(), uidgen_store::Dialect::Sqlite);
    /// # Ok::<(), uidgen_store::StoreError>(())
    /// ```
    pub fn connect_blocking(url: &str, options: StoreOptions) -> Result<Store> {
        block_on_result(Store::connect_with(url, options))
    }
}
