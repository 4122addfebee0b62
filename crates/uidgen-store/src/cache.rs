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

/// Exclusive use of a cache file by one lease, for as long as the lease lives: an advisory
/// lock (`flock`) on `<cache>.lock`, released when the lease is dropped or its process dies.
///
/// The lock sits on a side file because [`write_cache`] replaces the cache by renaming, which
/// would leave a lock on the cache itself behind on the old inode. The side file is never
/// deleted: deleting a lock file lets two processes lock two different files of one name.
#[derive(Debug)]
pub(crate) struct CacheLock {
    path: PathBuf,
    /// Held open for the lock; never read or written.
    _file: std::fs::File,
}

impl CacheLock {
    /// Lock the cache at `path`; `Ok(None)` when another lease (in this process or another)
    /// holds it.
    pub(crate) fn try_acquire(path: &Path) -> Result<Option<Self>> {
        let error = |reason: String| StoreError::Cache {
            path: path.display().to_string(),
            reason,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| error(e.to_string()))?;
        }
        let mut lock_path = path.as_os_str().to_owned();
        lock_path.push(".lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| error(format!("cannot open the lock file: {e}")))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self {
                path: path.to_owned(),
                _file: file,
            })),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(error(format!("cannot lock the lock file: {e}")))
            }
        }
    }

    /// The cache file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Record that `worker_id` is used until `until_ms`.
    pub(crate) fn write(&self, worker_id: u64, until_ms: u64) -> Result<()> {
        write_cache(
            &self.path,
            &CachedWorker {
                worker_id,
                until_ms,
            },
        )
    }

    /// Delete the cache if it names `worker_id` (or cannot be read): this host gave that id up,
    /// so a start without the database must not pick it again.
    pub(crate) fn forget(&self, worker_id: u64) -> Result<()> {
        let names_it = read_cache(&self.path).map_or(true, |c| c.worker_id == worker_id);
        if !names_it {
            return Ok(());
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Cache {
                path: self.path.display().to_string(),
                reason: format!("cannot delete it: {e}"),
            }),
        }
    }
}
