//! The local worker-id cache of a lease: which worker id this host last held and until when,
//! for starting while the database is unreachable.

use std::path::{Path, PathBuf};

use crate::error::{Result, StoreError};

/// The local cache: a worker id and the time (ms since the Unix epoch) it is used until.
///
/// The file is two `key=value` lines:
///
/// ```text
/// worker_id=5
/// until_ms=1767225600000
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachedWorker {
    /// The worker id.
    pub worker_id: u64,
    /// No ID stamped at or after this instant was issued with it.
    pub until_ms: u64,
}

/// Read a cache file written by a lease.
///
/// ```
/// use uidgen_store::{CachedWorker, read_cache, write_cache};
/// let path = std::env::temp_dir().join(format!("uidgen-cache-doc-{}", std::process::id()));
/// write_cache(&path, &CachedWorker { worker_id: 5, until_ms: 42 })?;
/// assert_eq!(read_cache(&path)?, CachedWorker { worker_id: 5, until_ms: 42 });
/// # Ok::<(), uidgen_store::StoreError>(())
/// ```
pub fn read_cache(path: &Path) -> Result<CachedWorker> {
    let error = |reason: String| StoreError::Cache {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    let (mut worker_id, mut until_ms) = (None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value: u64 = value
            .trim()
            .parse()
            .map_err(|e| error(format!("`{line}`: {e}")))?;
        match key.trim() {
            "worker_id" => worker_id = Some(value),
            "until_ms" => until_ms = Some(value),
            _ => {}
        }
    }
    match (worker_id, until_ms) {
        (Some(worker_id), Some(until_ms)) => Ok(CachedWorker {
            worker_id,
            until_ms,
        }),
        _ => Err(error("missing worker_id or until_ms".to_owned())),
    }
}

/// Write a cache file atomically (a temporary file renamed over it).
pub fn write_cache(path: &Path, cached: &CachedWorker) -> Result<()> {
    let error = |e: std::io::Error| StoreError::Cache {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    let text = format!(
        "# uidgen worker id cache: the worker id and the time (ms) it is used until\nworker_id={}\nuntil_ms={}\n",
        cached.worker_id, cached.until_ms
    );
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, text).map_err(error)?;
    std::fs::rename(&tmp, path).map_err(error)
}
