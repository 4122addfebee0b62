//! The per-host state directory: where every file that keeps worker ids apart lives by default
//! (the embedded SQLite store, static ids' marks, the machine assigner's locks, the ZooKeeper
//! cache, a client fallback's leases), so that no default depends on the working directory.
//!
//! Issue 18: with the defaults relative to the working directory, a restart from another
//! directory started with no mark and no store, and took the same worker id again (two
//! `uidgen gen --worker 5` runs in two directories shared 83,616 IDs; two `uidgen serve` took
//! worker 1 from two `./uidgen.db`). One directory per host, found the same way from anywhere,
//! closes that. It protects one host only: see docs/OPERATIONS.md, "Why IDs never repeat".
//!
//! Lives here, not in the server: the ZooKeeper crate and the client resolve their own
//! defaults with it, and both already depend on this crate (the client for its fallback's
//! leases), while neither may depend on the server.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::host_record::{HOST_RECORD, HostRecord};

/// The variable that names the state directory, over every default.
pub const ENV_STATE_DIR: &str = "UIDGEN_STATE_DIR";

/// Root's state directory, as a system service's (the FHS's place for state that outlives
/// reboots).
pub const SYSTEM_STATE_DIR: &str = "/var/lib/uidgen";

/// Why the state directory cannot be found or made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateDirError {
    /// The configured directory is relative: it would depend on the working directory, the
    /// very thing the state directory is for avoiding.
    #[error(
        "the state directory `{path}` ({source_name}) is relative; give an absolute path, so \
         that every start finds the same directory whatever its working directory"
    )]
    Relative {
        /// The path as given.
        path: PathBuf,
        /// Where it was given (`UIDGEN_STATE_DIR`, `state_dir`, `XDG_STATE_HOME`).
        source_name: &'static str,
    },
    /// Neither `UIDGEN_STATE_DIR`, `XDG_STATE_HOME` nor `HOME` is set, and this is not root.
    #[error(
        "no state directory: set UIDGEN_STATE_DIR (or the `state_dir` key) to an absolute path; \
         neither XDG_STATE_HOME nor HOME is set, and only root defaults to {SYSTEM_STATE_DIR}"
    )]
    NoHome,
    /// The directory records another host ([`HOST_RECORD`](crate::HOST_RECORD)): it was
    /// copied or moved from there, and its worker-id files are that host's.
    #[error(
        "the state directory {dir} belongs to another host: its {record} names {recorded}, but \
         this host is {current}. Its worker-id files (marks, lease and ZooKeeper caches, the \
         embedded store) were copied or moved from that host, and used on both they give both \
         the same worker ids. If that host is stopped for good and the directory moved here, \
         delete {dir}/{record} to adopt it; if that host may still run, give this host a state \
         directory of its own (UIDGEN_STATE_DIR or `state_dir`) or delete the copied files in \
         this one",
        record = HOST_RECORD
    )]
    OtherHost {
        /// The directory.
        dir: PathBuf,
        /// The host it records (boxed: the error stays small on the success path).
        recorded: Box<HostRecord>,
        /// This host.
        current: Box<HostRecord>,
    },
    /// The directory could not be created or is not a directory.
    #[error(
        "cannot use the state directory {path}: {source}; create it (mode 0700) or point \
         UIDGEN_STATE_DIR elsewhere"
    )]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Where the state directory's path came from, for the start-up log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StateDirSource {
    /// Given by the caller (the `state_dir` configuration key).
    Configured,
    /// `UIDGEN_STATE_DIR`.
    Env,
    /// `$XDG_STATE_HOME/uidgen`.
    XdgStateHome,
    /// `/var/lib/uidgen`, for root.
    System,
    /// `$HOME/.local/state/uidgen` (XDG's default state home).
    Home,
}

impl StateDirSource {
    /// How a log line names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Configured => "state_dir",
            Self::Env => ENV_STATE_DIR,
            Self::XdgStateHome => "XDG_STATE_HOME",
            Self::System => "root's default",
            Self::Home => "HOME",
        }
    }
}

/// The per-host state directory, found but not yet created ([`create`](Self::create) makes it).
///
/// Found in this order: the configured path, `$UIDGEN_STATE_DIR`, `$XDG_STATE_HOME/uidgen`,
/// `/var/lib/uidgen` for root, `$HOME/.local/state/uidgen`. Relative paths given in
/// configuration are resolved against it ([`resolve`](Self::resolve)).
///
/// ```
/// use std::path::Path;
/// use uidgen_worker::StateDir;
/// let dir = StateDir::at("/var/lib/uidgen")?;
/// assert_eq!(dir.resolve(Path::new("uidgen.db")), Path::new("/var/lib/uidgen/uidgen.db"));
/// assert_eq!(dir.resolve(Path::new("/data/w.state")), Path::new("/data/w.state"));
/// assert_eq!(
///     dir.resolve_store_url("sqlite://uidgen.db"),
///     "sqlite:///var/lib/uidgen/uidgen.db"
/// );
/// assert!(StateDir::at("relative/dir").is_err());
/// # Ok::<(), uidgen_worker::StateDirError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
    source: StateDirSource,
}

impl StateDir {
    /// The state directory for this process: `configured` if given, else the environment's
    /// (see the type's doc).
    pub fn find(configured: Option<&Path>) -> Result<Self, StateDirError> {
        Self::find_with(configured, |name| std::env::var_os(name), is_root())
    }

    /// [`find`](Self::find) with the environment and the user given, for tests.
    pub fn find_with(
        configured: Option<&Path>,
        env: impl Fn(&str) -> Option<OsString>,
        root: bool,
    ) -> Result<Self, StateDirError> {
        // An empty variable counts as unset, as XDG says of XDG_STATE_HOME.
        let var = |name: &str| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let (path, source) = if let Some(path) = configured.filter(|p| !p.as_os_str().is_empty()) {
            (path.to_owned(), StateDirSource::Configured)
        } else if let Some(path) = var(ENV_STATE_DIR) {
            (path, StateDirSource::Env)
        } else if let Some(home) = var("XDG_STATE_HOME") {
            (home.join("uidgen"), StateDirSource::XdgStateHome)
        } else if root {
            (PathBuf::from(SYSTEM_STATE_DIR), StateDirSource::System)
        } else if let Some(home) = var("HOME") {
            (home.join(".local/state/uidgen"), StateDirSource::Home)
        } else {
            return Err(StateDirError::NoHome);
        };
        if !path.is_absolute() {
            return Err(StateDirError::Relative {
                path,
                source_name: source.name(),
            });
        }
        Ok(Self { path, source })
    }

    /// A state directory at `path` (absolute), as if configured.
    pub fn at(path: impl Into<PathBuf>) -> Result<Self, StateDirError> {
        let path = path.into();
        Self::find_with(Some(&path), |_| None, false)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where its path came from.
    pub fn source(&self) -> StateDirSource {
        self.source
    }

    /// Create the directory (and its parents) if missing; a new one is made 0700, since its
    /// files say which worker ids this host holds and until when. An existing one is left as
    /// its owner set it. The directory is this host's from then on: one that records another
    /// host (copied or moved from there) is refused with [`StateDirError::OtherHost`]; see
    /// [`HostRecord`](crate::HostRecord).
    pub fn create(&self) -> Result<&Path, StateDirError> {
        let failed = |source| StateDirError::Create {
            path: self.path.clone(),
            source,
        };
        if !self.path.is_dir() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(&self.path).map_err(failed)?;
        }
        if !self.path.is_dir() {
            return Err(failed(std::io::Error::other("it is not a directory")));
        }
        claim_dir(&self.path)?;
        Ok(&self.path)
    }

    /// `path` if absolute, else `path` inside the state directory.
    pub fn resolve(&self, path: &Path) -> PathBuf {
        self.path.join(path)
    }

    /// A store URL with a relative SQLite file (`sqlite://uidgen.db`, `sqlite:data/x.db`)
    /// made absolute inside the state directory; any other URL (an absolute file, `:memory:`,
    /// a server) unchanged.
    pub fn resolve_store_url(&self, url: &str) -> String {
        let Some((scheme, rest)) = url.split_once(':') else {
            return url.to_owned();
        };
        if !scheme.eq_ignore_ascii_case("sqlite") {
            return url.to_owned();
        }
        let file = rest.strip_prefix("//").unwrap_or(rest);
        let (file_path, query) = file.split_at(file.find('?').unwrap_or(file.len()));
        if file_path.is_empty() || file_path.starts_with(':') || Path::new(file_path).is_absolute()
        {
            return url.to_owned();
        }
        format!(
            "sqlite://{}{query}",
            self.resolve(Path::new(file_path)).display()
        )
    }
}

impl std::fmt::Display for StateDir {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.path.display().fmt(f)
    }
}

/// Whether this process runs as root: the owner of `/proc/self` is the effective user (no
/// libc needed). Elsewhere, not root: the per-user default is the safe guess.
fn is_root() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Check that `dir` belongs to this host, recording this host in it when it records none (or
/// another boot or hostname of this host). A directory that does not exist yet is left alone.
pub(crate) fn claim_dir(dir: &Path) -> Result<(), StateDirError> {
    claim_dir_as(dir, HostRecord::current(), true)
}

/// Check that `dir` belongs to this host without writing anything.
pub(crate) fn check_dir(dir: &Path) -> Result<(), StateDirError> {
    claim_dir_as(dir, HostRecord::current(), false)
}

/// [`claim_dir`] (`record`) or [`check_dir`] as host `current`.
pub(crate) fn claim_dir_as(
    dir: &Path,
    current: &HostRecord,
    record: bool,
) -> Result<(), StateDirError> {
    let path = dir.join(HOST_RECORD);
    let failed = |source| StateDirError::Create {
        path: dir.to_owned(),
        source,
    };
    let recorded = match std::fs::read_to_string(&path) {
        Ok(text) => Some(HostRecord::parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(failed(e)),
    };
    if let Some(recorded) = &recorded {
        if !current.same_host_as(recorded) {
            return Err(StateDirError::OtherHost {
                dir: dir.to_owned(),
                recorded: Box::new(recorded.clone()),
                current: Box::new(current.clone()),
            });
        }
        if recorded == current {
            return Ok(());
        }
    }
    if !record || !dir.is_dir() {
        return Ok(());
    }
    // A temporary file renamed over the record: a reader sees the old record or the new one.
    let tmp = dir.join(format!("{HOST_RECORD}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, current.render()).map_err(failed)?;
    std::fs::rename(&tmp, &path).map_err(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
        move |name| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    fn found(configured: Option<&str>, vars: &[(&str, &str)], root: bool) -> StateDir {
        StateDir::find_with(configured.map(Path::new), env(vars), root).unwrap()
    }

    #[test]
    fn the_configured_path_wins_over_every_variable() {
        let dir = found(Some("/c"), &[(ENV_STATE_DIR, "/e"), ("HOME", "/h")], true);
        assert_eq!(
            (dir.path(), dir.source()),
            (Path::new("/c"), StateDirSource::Configured)
        );
    }

    #[test]
    fn uidgen_state_dir_wins_over_xdg_root_and_home() {
        let vars = [
            (ENV_STATE_DIR, "/e"),
            ("XDG_STATE_HOME", "/x"),
            ("HOME", "/h"),
        ];
        assert_eq!(found(None, &vars, true).path(), Path::new("/e"));
    }

    #[test]
    fn xdg_state_home_then_root_then_home() {
        let xdg = [("XDG_STATE_HOME", "/x"), ("HOME", "/h")];
        assert_eq!(found(None, &xdg, true).path(), Path::new("/x/uidgen"));
        let home = [("XDG_STATE_HOME", ""), ("HOME", "/h")];
        assert_eq!(found(None, &home, true).path(), Path::new(SYSTEM_STATE_DIR));
        assert_eq!(
            found(None, &home, false).path(),
            Path::new("/h/.local/state/uidgen")
        );
    }

    #[test]
    fn a_relative_directory_or_no_home_is_refused() {
        let relative = StateDir::find_with(None, env(&[(ENV_STATE_DIR, "state")]), false);
        assert!(matches!(relative, Err(StateDirError::Relative { .. })));
        let none = StateDir::find_with(None, env(&[]), false);
        assert!(matches!(none, Err(StateDirError::NoHome)));
    }

    #[test]
    fn relative_sqlite_files_move_into_the_state_dir_and_nothing_else_does() {
        let dir = StateDir::at("/s").unwrap();
        for (url, resolved) in [
            ("sqlite://uidgen.db", "sqlite:///s/uidgen.db"),
            (
                "sqlite:data/u.db?mode=rwc",
                "sqlite:///s/data/u.db?mode=rwc",
            ),
            ("sqlite:///abs/u.db", "sqlite:///abs/u.db"),
            ("sqlite::memory:", "sqlite::memory:"),
            ("postgres://db/uid", "postgres://db/uid"),
        ] {
            assert_eq!(dir.resolve_store_url(url), resolved, "{url}");
        }
    }

    #[test]
    fn create_makes_a_private_directory() {
        let parent = tempfile::tempdir().unwrap();
        let dir = StateDir::at(parent.path().join("a/b")).unwrap();
        dir.create().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        dir.create().unwrap(); // again: already there
    }

    fn host(machine: &str, name: &str, boot: &str) -> HostRecord {
        HostRecord::new(Some(machine), Some(name), Some(boot))
    }

    #[test]
    fn the_first_use_records_the_host_and_a_reboot_updates_it() {
        let dir = tempfile::tempdir().unwrap();
        claim_dir_as(dir.path(), &host("m1", "web-1", "b1"), true).unwrap();
        let on_disk = |dir: &Path| {
            HostRecord::parse(&std::fs::read_to_string(dir.join(HOST_RECORD)).unwrap())
        };
        assert_eq!(on_disk(dir.path()), host("m1", "web-1", "b1"));
        claim_dir_as(dir.path(), &host("m1", "web-1", "b2"), true).unwrap();
        assert_eq!(on_disk(dir.path()), host("m1", "web-1", "b2"));
        // Renamed after the reboot: the same boot still says it is this host.
        claim_dir_as(dir.path(), &host("m1", "web-2", "b2"), true).unwrap();
        assert_eq!(on_disk(dir.path()), host("m1", "web-2", "b2"));
    }

    #[test]
    fn another_host_is_refused_naming_both_and_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        claim_dir_as(dir.path(), &host("m1", "web-1", "b1"), true).unwrap();
        for other in [host("m2", "web-1", "b1"), host("m1", "web-9", "b9")] {
            for record in [true, false] {
                let refused = claim_dir_as(dir.path(), &other, record).unwrap_err();
                let text = refused.to_string();
                assert!(matches!(refused, StateDirError::OtherHost { .. }), "{text}");
                assert!(text.contains("machine id m1, hostname web-1"), "{text}");
                assert!(
                    text.contains(HOST_RECORD) && text.contains("UIDGEN_STATE_DIR"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn checking_writes_nothing_and_a_missing_directory_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        claim_dir_as(dir.path(), &host("m1", "a", "b"), false).unwrap();
        assert!(!dir.path().join(HOST_RECORD).exists());
        claim_dir_as(&dir.path().join("absent"), &host("m1", "a", "b"), true).unwrap();
        assert!(!dir.path().join("absent").exists());
    }
}
