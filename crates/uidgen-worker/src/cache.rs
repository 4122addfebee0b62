//! The local worker-id state file: which worker id this host uses, the instant before which
//! every ID it stamped lies (its reserved-until mark), and, for a lease, the holder string and
//! the expiry the database was last told. A static worker id restarts after the mark; a leased
//! one may restart from it while the database is unreachable (see `lease.rs`).

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, WorkerError};

/// The local state of a worker id.
///
/// The file is `key=value` lines; `holder` and `lease_expires_ms` only for a lease:
///
/// ```text
/// worker_id=5
/// until_ms=1767225600000
/// holder=api-1/4242#00ab34cd56ef7890
/// lease_expires_ms=1767225660000
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedWorker {
    /// The worker id.
    pub worker_id: u64,
    /// The reserved-until mark: no ID stamped at or after this instant was issued with it.
    pub until_ms: u64,
    /// For a lease: the holder string of the claim in `worker_lease`.
    pub holder: Option<String>,
    /// For a lease: an expiry the database recorded for that claim (it only ever rises), so
    /// nobody else can have taken the id before this instant.
    pub lease_expires_ms: Option<u64>,
}

impl CachedWorker {
    /// A worker id's state with no lease.
    pub fn new(worker_id: u64, until_ms: u64) -> Self {
        Self {
            worker_id,
            until_ms,
            holder: None,
            lease_expires_ms: None,
        }
    }
}

/// Read a state file. One in a directory that records another host
/// ([`HostRecord`](crate::HostRecord)) is refused.
///
/// ```
/// use uidgen_worker::{CachedWorker, read_cache, write_cache};
/// let path = std::env::temp_dir().join(format!("uidgen-cache-doc-{}", std::process::id()));
/// write_cache(&path, &CachedWorker::new(5, 42))?;
/// assert_eq!(read_cache(&path)?, CachedWorker::new(5, 42));
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), uidgen_worker::WorkerError>(())
/// ```
pub fn read_cache(path: &Path) -> Result<CachedWorker> {
    let error = |reason: String| WorkerError::Cache {
        path: path.display().to_string(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    // A cache copied from another host names that host's worker id: refuse it here, so that a
    // start that only reads it (ZooKeeper's offline start) is refused too.
    host_dir(path, crate::state_dir::check_dir).map_err(error)?;
    let (mut worker_id, mut until_ms, mut holder, mut lease_expires_ms) = (None, None, None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.starts_with('#')) {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let value = value.trim();
        let number =
            || -> Result<u64> { value.parse().map_err(|e| error(format!("`{line}`: {e}"))) };
        match key.trim() {
            "worker_id" => worker_id = Some(number()?),
            "until_ms" => until_ms = Some(number()?),
            "holder" => holder = Some(value.to_owned()),
            "lease_expires_ms" => lease_expires_ms = Some(number()?),
            _ => {}
        }
    }
    match (worker_id, until_ms) {
        (Some(worker_id), Some(until_ms)) => Ok(CachedWorker {
            worker_id,
            until_ms,
            holder,
            lease_expires_ms,
        }),
        _ => Err(error("missing worker_id or until_ms".to_owned())),
    }
}

/// Write a state file durably: a temporary file, synced, renamed over it, and the directory
/// synced, so that after a crash or power loss the file holds either the old or the new state,
/// and the new one once this returns. A restart trusts it to know what was issued.
pub fn write_cache(path: &Path, cached: &CachedWorker) -> Result<()> {
    let error = |e: std::io::Error| WorkerError::Cache {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if let Some(parent) = parent {
        std::fs::create_dir_all(parent).map_err(error)?;
    }
    let mut text = format!(
        "# uidgen worker id state: the worker id, the instant (ms) before which all its IDs \
         lie,\n# and for a lease its holder and an expiry the database \
         recorded\nworker_id={}\nuntil_ms={}\n",
        cached.worker_id, cached.until_ms
    );
    if let Some(holder) = &cached.holder {
        text.push_str(&format!("holder={holder}\n"));
    }
    if let Some(expires) = cached.lease_expires_ms {
        text.push_str(&format!("lease_expires_ms={expires}\n"));
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let mut file = std::fs::File::create(&tmp).map_err(error)?;
    file.write_all(text.as_bytes()).map_err(error)?;
    file.sync_all().map_err(error)?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(error)?;
    // The rename is only durable once the directory entry is.
    let dir = parent.unwrap_or(Path::new("."));
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(error)
}

/// Run `check` ([`claim_dir`](crate::state_dir::claim_dir) or `check_dir`) on the directory
/// of the state file at `path`: its host record says whose the file is.
fn host_dir(
    path: &Path,
    check: fn(&Path) -> std::result::Result<(), crate::state_dir::StateDirError>,
) -> std::result::Result<(), String> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
    check(dir.unwrap_or(Path::new("."))).map_err(|e| e.to_string())
}

/// Exclusive use of a cache file by one lease, for as long as the lease lives: an advisory
/// lock (`flock`) on `<cache>.lock`, released when the lease is dropped or its process dies.
///
/// The lock sits on a side file because [`write_cache`] replaces the cache by renaming, which
/// would leave a lock on the cache itself behind on the old inode. The side file is never
/// deleted: deleting a lock file lets two processes lock two different files of one name.
#[derive(Debug)]
pub struct CacheLock {
    path: PathBuf,
    /// Held open for the lock; never read or written.
    _file: std::fs::File,
}

impl CacheLock {
    /// Lock the cache at `path`; `Ok(None)` when another lease (in this process or another)
    /// holds it. Its directory becomes this host's ([`HostRecord`](crate::HostRecord)); one
    /// that records another host is refused.
    pub fn try_acquire(path: &Path) -> Result<Option<Self>> {
        let error = |reason: String| WorkerError::Cache {
            path: path.display().to_string(),
            reason,
        };
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent).map_err(|e| error(e.to_string()))?;
        }
        host_dir(path, crate::state_dir::claim_dir).map_err(error)?;
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
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Record `state` durably.
    pub fn write(&self, state: &CachedWorker) -> Result<()> {
        write_cache(&self.path, state)
    }

    /// Delete the cache if it names `worker_id` (or cannot be read): this host gave that id up,
    /// so a start without the database must not pick it again.
    pub fn forget(&self, worker_id: u64) -> Result<()> {
        let names_it = read_cache(&self.path).map_or(true, |c| c.worker_id == worker_id);
        if !names_it {
            return Ok(());
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(WorkerError::Cache {
                path: self.path.display().to_string(),
                reason: format!("cannot delete it: {e}"),
            }),
        }
    }
}
