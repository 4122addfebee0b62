//! Is this process in a container? Asked by the assigners whose worker ids are only unique
//! per host (`machine`, `static`): in a container, "this host" is the container, whose files
//! and pid numbers are shared with no one, so a local fence protects nothing across its
//! siblings. They refuse to start there without a shared coordinator unless told otherwise.
//!
//! The signs, any one of which is enough (what Docker, Podman, LXC, Kubernetes and
//! systemd-nspawn leave behind):
//!
//! - `/.dockerenv` (Docker) or `/run/.containerenv` (Podman);
//! - a `container` environment variable (systemd-nspawn, LXC, Podman set it for pid 1 and
//!   images often pass it on);
//! - `/proc/1/cgroup` or `/proc/self/cgroup` naming `docker`, `kubepods`, `containerd`,
//!   `libpod`, `podman` or `lxc` (cgroup v1, and v2 without a cgroup namespace);
//! - pid 1 is not an init system (`/proc/1/comm` is not `systemd`, `init`, ...): in a container
//!   pid 1 is the application, a shell, or a container init such as `tini`.
//!
//! None of them is certain (a container can hide every one, a host can look like one); the
//! probe errs towards "container", where the cost of a wrong answer is a refusal that names
//! its evidence and the setting that overrides it, not a repeated ID.

use std::fmt;
use std::path::{Path, PathBuf};

/// What cgroup paths of container runtimes contain.
const CGROUP_MARKERS: &[&str] = &[
    "docker",
    "kubepods",
    "containerd",
    "libpod",
    "podman",
    "lxc",
];

/// Process names of init systems that run as pid 1 on a host (or in a system container that
/// boots one, which then looks like a host).
const INITS: &[&str] = &[
    "systemd",
    "init",
    "upstart",
    "openrc-init",
    "runit",
    "s6-svscan",
    "launchd",
];

/// Why the probe believes this process runs in a container.
///
/// ```
/// use uidgen_worker::ContainerEvidence;
/// let evidence = ContainerEvidence::File("/.dockerenv".into());
/// assert_eq!(evidence.to_string(), "/.dockerenv exists");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ContainerEvidence {
    /// A file only container runtimes create.
    File(PathBuf),
    /// The `container` environment variable, with its value.
    EnvVar(String),
    /// A cgroup file naming a container runtime: the file and the line.
    Cgroup(PathBuf, String),
    /// Pid 1 is this program, not an init system.
    Pid1(String),
}

impl fmt::Display for ContainerEvidence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::File(path) => write!(f, "{} exists", path.display()),
            Self::EnvVar(value) => write!(f, "the environment has container={value:?}"),
            Self::Cgroup(path, line) => write!(f, "{} says {line:?}", path.display()),
            Self::Pid1(comm) => write!(f, "pid 1 is {comm:?}, not an init system"),
        }
    }
}

/// Looks for the signs of a container under a root directory and in one environment value, so
/// that tests can lay out a fake `/`.
///
/// ```
/// use uidgen_worker::{ContainerEvidence, ContainerProbe};
/// let root = tempfile::tempdir()?;
/// std::fs::create_dir_all(root.path().join("proc/1"))?;
/// std::fs::write(root.path().join("proc/1/comm"), "systemd\n")?;
/// std::fs::write(root.path().join("proc/1/cgroup"), "0::/init.scope\n")?;
/// let host = ContainerProbe::at(root.path(), None);
/// assert_eq!(host.detect(), None);
///
/// std::fs::write(root.path().join("proc/1/cgroup"), "0::/kubepods/besteffort/pod1\n")?;
/// assert!(matches!(host.detect(), Some(ContainerEvidence::Cgroup(..))));
/// let nspawn = ContainerProbe::at(root.path(), Some("systemd-nspawn".into()));
/// assert!(matches!(nspawn.detect(), Some(ContainerEvidence::EnvVar(_))));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerProbe {
    root: PathBuf,
    container_env: Option<String>,
}

impl ContainerProbe {
    /// The probe of this process: `/` and its `container` variable.
    pub fn system() -> Self {
        Self::at("/", std::env::var("container").ok())
    }

    /// A probe of the file system under `root`, with `container_env` as the value of the
    /// `container` variable.
    pub fn at(root: impl Into<PathBuf>, container_env: Option<String>) -> Self {
        Self {
            root: root.into(),
            container_env,
        }
    }

    /// The first sign of a container found, or `None` when there is none.
    pub fn detect(&self) -> Option<ContainerEvidence> {
        for marker in [".dockerenv", "run/.containerenv"] {
            let path = self.root.join(marker);
            if path.exists() {
                return Some(ContainerEvidence::File(Path::new("/").join(marker)));
            }
        }
        if let Some(value) = self.container_env.as_deref().map(str::trim)
            && !value.is_empty()
        {
            return Some(ContainerEvidence::EnvVar(value.to_owned()));
        }
        for file in ["proc/1/cgroup", "proc/self/cgroup"] {
            let Ok(text) = std::fs::read_to_string(self.root.join(file)) else {
                continue;
            };
            if let Some(line) = text
                .lines()
                .find(|line| CGROUP_MARKERS.iter().any(|m| line.contains(m)))
            {
                return Some(ContainerEvidence::Cgroup(
                    Path::new("/").join(file),
                    line.to_owned(),
                ));
            }
        }
        let comm = std::fs::read_to_string(self.root.join("proc/1/comm")).ok()?;
        let comm = comm.trim();
        (!comm.is_empty() && !INITS.contains(&comm))
            .then(|| ContainerEvidence::Pid1(comm.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = root.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        root
    }

    const HOST: &[(&str, &str)] = &[
        ("proc/1/comm", "systemd\n"),
        ("proc/1/cgroup", "0::/init.scope\n"),
        (
            "proc/self/cgroup",
            "0::/user.slice/user-1000.slice/session-2.scope\n",
        ),
    ];

    #[test]
    fn a_host_with_systemd_as_pid_1_is_no_container() {
        let root = root_with(HOST);
        assert_eq!(ContainerProbe::at(root.path(), None).detect(), None);
        assert_eq!(
            ContainerProbe::at(root.path(), Some(" ".into())).detect(),
            None
        );
        // Nothing readable at all says nothing either.
        assert_eq!(
            ContainerProbe::at(root.path().join("x"), None).detect(),
            None
        );
    }

    #[test]
    fn each_sign_alone_is_enough() {
        let cases: &[(&str, &str, &str)] = &[
            (".dockerenv", "", "/.dockerenv exists"),
            (
                "run/.containerenv",
                "engine=\"podman\"",
                "/run/.containerenv exists",
            ),
            (
                "proc/1/cgroup",
                "12:pids:/docker/4f3a\n0::/\n",
                "/proc/1/cgroup says \"12:pids:/docker/4f3a\"",
            ),
            (
                "proc/self/cgroup",
                "0::/system.slice/containerd.service/kubepods-pod1.slice\n",
                "/proc/self/cgroup says",
            ),
            (
                "proc/1/comm",
                "uidgen\n",
                "pid 1 is \"uidgen\", not an init system",
            ),
            ("proc/1/comm", "tini\n", "pid 1 is \"tini\""),
        ];
        for (path, text, expected) in cases {
            let mut files = HOST.to_vec();
            files.retain(|(p, _)| p != path);
            files.push((path, text));
            let root = root_with(&files);
            let evidence = ContainerProbe::at(root.path(), None).detect();
            let said = evidence.map(|e| e.to_string()).unwrap_or_default();
            assert!(said.contains(expected), "{path}: {said:?}");
        }
        let root = root_with(HOST);
        let lxc = ContainerProbe::at(root.path(), Some("lxc".into())).detect();
        assert_eq!(lxc, Some(ContainerEvidence::EnvVar("lxc".into())));
    }
}
