//! Which host a directory of worker-id state belongs to: the record that makes a state
//! directory copied or moved to another host refuse to start there.
//!
//! Issue 36, point 6: a ZooKeeper state directory copied to a second host, with ZooKeeper
//! down, let both hosts run as worker 924 from the same cache file (18,696 of 60,000 IDs
//! equal). Every fence kept in local files (a static id's mark, a lease's or ZooKeeper's cache,
//! the machine assigner's locks, the embedded store) protects the one host whose file locks
//! and clock wrote it; a copy on another host is a second life of the same worker ids that
//! nothing there can see.
//!
//! So the first use of a directory records the host in it ([`HOST_RECORD`]), and every later
//! use compares: [`StateDir::create`](crate::StateDir::create) and [`CacheLock::try_acquire`]
//! (every claim of a state file) record and check, [`read_cache`] (the starts that read a cache
//! without locking it, such as ZooKeeper's offline start) checks. A directory recorded by
//! another host is refused with [`StateDirError::OtherHost`], which says what to do.
//!
//! What identifies a host, and survives its reboot: its machine id (systemd's
//! `/etc/machine-id`), together with either its hostname or its boot id
//! (`/proc/sys/kernel/random/boot_id`). The same host is the same machine id and, either, the
//! same boot (a container recreated on the same volume and host: a new hostname, the same
//! kernel, whose file locks still keep two containers apart) or the same hostname (the host
//! after a reboot, a restarted container, a StatefulSet pod whose volume followed it). Another
//! host differs in its machine id, or, where the machine id is an image's (containers from one
//! image on several hosts), in both its boot and its hostname. An accepted start records the
//! current values, so a reboot and then a renaming are each followed. A container recreated
//! after its host rebooted has a new hostname and boot: it is refused, and a stable hostname
//! (`docker run --hostname`, compose's `hostname:`) avoids that.
//!
//! Not caught: a copy to another directory of the same host (its flock-based locks are on
//! other files), and clones that share machine id, hostname and boot (only a VM snapshot
//! restored twice). A file lock cannot help across hosts; only a shared store or coordinator
//! can, so those remain the way to run one worker id space on several hosts.
//!
//! [`CacheLock::try_acquire`]: crate::CacheLock::try_acquire
//! [`read_cache`]: crate::read_cache
//! [`StateDirError::OtherHost`]: crate::StateDirError::OtherHost

use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

use crate::machine_part::HostIdentity;

/// The file in a state directory that names the host it belongs to.
pub const HOST_RECORD: &str = "uidgen-host";

/// A host as a state directory records it: what identifies it and survives its reboot (the
/// machine id, the hostname) and what tells two boots apart (the boot id).
///
/// ```
/// use uidgen_worker::HostRecord;
/// let host = |m: &str, h: &str, b: &str| HostRecord::new(Some(m), Some(h), Some(b));
/// let here = host("m1", "web-1", "boot-a");
/// assert!(here.same_host_as(&host("m1", "web-1", "boot-b"))); // rebooted
/// assert!(here.same_host_as(&host("m1", "3f2a9c", "boot-a"))); // container recreated
/// assert!(!here.same_host_as(&host("m2", "web-1", "boot-a"))); // another machine
/// assert!(!here.same_host_as(&host("m1", "3f2a9c", "boot-c"))); // same image, another host
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostRecord {
    /// The machine id (`/etc/machine-id` or D-Bus's), `None` where there is none.
    pub machine_id: Option<String>,
    /// The hostname.
    pub hostname: Option<String>,
    /// The kernel's boot id, new at every boot.
    pub boot_id: Option<String>,
}

impl HostRecord {
    /// A record from its parts; blank strings become `None`.
    pub fn new(machine_id: Option<&str>, hostname: Option<&str>, boot_id: Option<&str>) -> Self {
        Self {
            machine_id: text(machine_id),
            hostname: text(hostname),
            boot_id: text(boot_id),
        }
    }

    /// This host, read once per process.
    pub fn current() -> &'static Self {
        static CURRENT: OnceLock<HostRecord> = OnceLock::new();
        CURRENT.get_or_init(|| Self::of_root(Path::new("/")))
    }

    /// The host whose file system is under `root` (laid out as `/`): the machine id and
    /// hostname as [`HostIdentity::detect_in`] reads them, and `proc/sys/kernel/random/boot_id`.
    pub fn of_root(root: &Path) -> Self {
        let identity = HostIdentity::detect_in(root);
        let boot_id = std::fs::read_to_string(root.join("proc/sys/kernel/random/boot_id")).ok();
        Self::new(
            identity.machine_id.as_deref(),
            identity.hostname.as_deref(),
            boot_id.as_deref(),
        )
    }

    /// Whether `recorded` is this host: the same machine id, and the same boot or the same
    /// hostname (see the module's doc).
    pub fn same_host_as(&self, recorded: &Self) -> bool {
        let same_boot = self.boot_id.is_some() && self.boot_id == recorded.boot_id;
        self.machine_id == recorded.machine_id && (same_boot || self.hostname == recorded.hostname)
    }

    pub(crate) fn parse(file: &str) -> Self {
        let mut record = Self::default();
        for line in file.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = text(Some(value));
            match key.trim() {
                "machine_id" => record.machine_id = value,
                "hostname" => record.hostname = value,
                "boot_id" => record.boot_id = value,
                _ => {}
            }
        }
        record
    }

    pub(crate) fn render(&self) -> String {
        let field = |v: &Option<String>| v.clone().unwrap_or_default();
        format!(
            "# uidgen: the host this state directory belongs to. Its worker-id files are only \
             valid here;\n# see docs/OPERATIONS.md, \"State directory\", before deleting this \
             file.\nmachine_id={}\nhostname={}\nboot_id={}\n",
            field(&self.machine_id),
            field(&self.hostname),
            field(&self.boot_id)
        )
    }
}

impl fmt::Display for HostRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "none".to_owned());
        write!(
            f,
            "machine id {}, hostname {}, boot {}",
            shown(&self.machine_id),
            shown(&self.hostname),
            shown(&self.boot_id)
        )
    }
}

/// `s` trimmed, `None` when blank.
fn text(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_without_machine_id_or_boot_id_compares_hostnames() {
        let bare = |name| HostRecord::new(None, Some(name), None);
        assert!(bare("a").same_host_as(&bare("a")));
        assert!(!bare("a").same_host_as(&bare("b")));
    }
}
