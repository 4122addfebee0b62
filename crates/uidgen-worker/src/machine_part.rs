//! The `machine` assigner's 5-bit machine part: what identifies this host, hashed.
//!
//! The inputs are everything that tells hosts (and containers) apart without configuration:
//! the machine id (`/etc/machine-id`, else `/var/lib/dbus/machine-id`), every MAC address in
//! `/sys/class/net` but loopback and all-zero ones, and the hostname. They are written out in
//! a fixed order (MACs lowercase and sorted) and hashed with SHA-256; the machine part is the
//! top 5 bits of the digest.
//!
//! Why SHA-256: every output bit depends on every input bit, so inputs that differ only in
//! their last byte (Docker's `02:42:ac:11:00:xx`, VMware's `00:50:56:a1:10:xx`) land on
//! independent parts. The FNV-1a top bits used before did not mix the last bytes far enough:
//! containers of one bridge shared a part (issue 18). The digest is the same for every build,
//! process and platform (std's `RandomState` is seeded per process; `SipHasher` is deprecated),
//! and the crate already links `sha2` for migration checksums.
//!
//! Five bits are still only 32 values: two hosts share a part with probability 1/32. What keeps
//! them apart is the shared store (`MachineWorkerIdAssigner::registered_in`), not the hash.

use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Width of the machine part.
pub const MACHINE_BITS: u32 = 5;

/// The `IFF_LOOPBACK` bit of `/sys/class/net/*/flags` (linux/if.h).
const IFF_LOOPBACK: u64 = 0x8;

/// Written first into the digest, so that a future change of inputs can change the tag and
/// never be mistaken for this one.
const DIGEST_TAG: &[u8] = b"uidgen machine part v2\n";

/// What identifies a host: the inputs of its [`MachinePart`].
///
/// ```
/// use uidgen_worker::HostIdentity;
/// let host = HostIdentity::new(
///     Some("3d1219c7c4c5404aaa1f6d2a48adfda4"),
///     ["02:42:AC:11:00:02", "00:00:00:00:00:00", "not a mac"],
///     Some("web-1"),
/// );
/// assert_eq!(host.macs, ["02:42:ac:11:00:02"]); // normalised; loopback and junk dropped
/// assert!(!host.is_empty());
/// assert!(HostIdentity::new(None, [""; 0], Some("  ")).is_empty());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostIdentity {
    /// The machine id (systemd's `/etc/machine-id` or D-Bus's), trimmed; `None` when absent.
    pub machine_id: Option<String>,
    /// Every usable MAC address, lowercase `aa:bb:...`, sorted, without duplicates.
    pub macs: Vec<String>,
    /// The hostname; `None` when empty or unknown.
    pub hostname: Option<String>,
}

impl HostIdentity {
    /// An identity from its parts: MACs are normalised (malformed, loopback and all-zero ones
    /// dropped), blank strings become `None`.
    pub fn new<S: AsRef<str>>(
        machine_id: Option<&str>,
        macs: impl IntoIterator<Item = S>,
        hostname: Option<&str>,
    ) -> Self {
        let mut macs: Vec<String> = macs
            .into_iter()
            .filter_map(|mac| normalise_mac(mac.as_ref()))
            .collect();
        macs.sort();
        macs.dedup();
        let text = |s: Option<&str>| {
            s.map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        Self {
            machine_id: text(machine_id),
            macs,
            hostname: text(hostname),
        }
    }

    /// This host's identity, read from `/`.
    pub fn detect() -> Self {
        let mut identity = Self::detect_in(Path::new("/"));
        if identity.hostname.is_none() {
            let env = std::env::var("HOSTNAME").or_else(|_| std::env::var("COMPUTERNAME"));
            identity.hostname = Self::new(None, [""; 0], env.ok().as_deref()).hostname;
        }
        identity
    }

    /// The identity of the file system under `root` (a directory laid out as `/`):
    /// `etc/machine-id` or `var/lib/dbus/machine-id`, the interfaces of `sys/class/net`, and
    /// `proc/sys/kernel/hostname` or `etc/hostname`. Anything missing is left out.
    pub fn detect_in(root: &Path) -> Self {
        let read = |path: &str| std::fs::read_to_string(root.join(path)).ok();
        let machine_id = read("etc/machine-id").or_else(|| read("var/lib/dbus/machine-id"));
        let hostname = read("proc/sys/kernel/hostname").or_else(|| read("etc/hostname"));
        Self::new(
            machine_id.as_deref(),
            macs_in(&root.join("sys/class/net")),
            hostname.as_deref(),
        )
    }

    /// Whether nothing identifies the host (no machine id, MAC or hostname).
    pub fn is_empty(&self) -> bool {
        self.machine_id.is_none() && self.macs.is_empty() && self.hostname.is_none()
    }

    /// SHA-256 of the inputs, each on a line of its own with its kind, in a fixed order.
    fn digest(&self) -> [u8; 32] {
        let mut hash = Sha256::new();
        hash.update(DIGEST_TAG);
        if let Some(id) = &self.machine_id {
            hash.update(format!("machine-id {id}\n"));
        }
        for mac in &self.macs {
            hash.update(format!("mac {mac}\n"));
        }
        if let Some(host) = &self.hostname {
            hash.update(format!("hostname {host}\n"));
        }
        hash.finalize().into()
    }
}

impl fmt::Display for HostIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let none = || "none".to_owned();
        write!(
            f,
            "machine id {}, MAC addresses {}, hostname {}",
            self.machine_id.clone().unwrap_or_else(none),
            if self.macs.is_empty() {
                none()
            } else {
                self.macs.join(", ")
            },
            self.hostname
                .as_ref()
                .map_or_else(none, |h| format!("{h:?}"))
        )
    }
}

/// Where a [`MachinePart`] came from, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineSource {
    /// A hash of this host's identity.
    Host(HostIdentity),
    /// Given by the caller (`MachineWorkerIdAssigner::with_machine_part`).
    Configured,
    /// Nothing identifies the host: 0.
    Nothing,
}

impl fmt::Display for MachineSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host(host) => write!(f, "SHA-256 of {host}"),
            Self::Configured => f.write_str("configuration"),
            Self::Nothing => f.write_str("nothing (no machine id, MAC address or hostname)"),
        }
    }
}

/// This host's 5-bit machine part and where it came from.
///
/// ```
/// use uidgen_worker::{HostIdentity, MachinePart, MachineSource};
/// // Order and case of the MACs do not matter; a different last byte gives an unrelated part.
/// let host = |macs: [&str; 2]| HostIdentity::new(None, macs, None);
/// let a = MachinePart::of(&host(["02:42:AC:11:00:02", "7e:b5:f2:d8:43:3f"]));
/// let b = MachinePart::of(&host(["7e:b5:f2:d8:43:3f", "02:42:ac:11:00:02"]));
/// assert_eq!(a, b);
/// assert!(a.value <= 31);
/// assert!(matches!(a.source, MachineSource::Host(_)));
/// assert_eq!(MachinePart::of(&HostIdentity::default()).source, MachineSource::Nothing);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachinePart {
    /// The part, 0 to 31.
    pub value: u64,
    /// Where it came from.
    pub source: MachineSource,
}

impl MachinePart {
    /// This host's machine part ([`HostIdentity::detect`]).
    pub fn detect() -> Self {
        Self::of(&HostIdentity::detect())
    }

    /// The machine part of `host`: the top 5 bits of its digest; 0 when nothing identifies it.
    pub fn of(host: &HostIdentity) -> Self {
        if host.is_empty() {
            return Self {
                value: 0,
                source: MachineSource::Nothing,
            };
        }
        let top = host.digest()[0] >> (8 - MACHINE_BITS);
        Self {
            value: u64::from(top),
            source: MachineSource::Host(host.clone()),
        }
    }
}

/// The MAC addresses of the interfaces under `sys_class_net` (laid out as `/sys/class/net`),
/// loopback skipped. All of them: a container's only interface is a virtual one (veth), and
/// leaving virtual interfaces out would make every container of a host look alike.
fn macs_in(sys_class_net: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(sys_class_net) else {
        return Vec::new();
    };
    let mut macs = Vec::new();
    for dir in entries.flatten().map(|e| e.path()) {
        if is_loopback(&dir) {
            continue;
        }
        if let Ok(mac) = std::fs::read_to_string(dir.join("address")) {
            macs.push(mac);
        }
    }
    macs
}

fn is_loopback(interface: &Path) -> bool {
    std::fs::read_to_string(interface.join("flags"))
        .ok()
        .and_then(|f| u64::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok())
        .is_some_and(|f| f & IFF_LOOPBACK != 0)
}

/// A MAC address as lowercase `aa:bb:...`, or `None` if it is not hex bytes separated by `:`
/// or all its bytes are zero (loopback, and interfaces without a hardware address).
fn normalise_mac(text: &str) -> Option<String> {
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| b.len() == 2))
        .collect::<Option<_>>()?;
    if bytes.iter().all(|&b| b == 0) {
        return None;
    }
    Some(
        bytes
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn interface(root: &Path, name: &str, mac: &str, flags: &str) {
        let dir = root.join("sys/class/net").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("address"), format!("{mac}\n")).unwrap();
        std::fs::write(dir.join("flags"), format!("{flags}\n")).unwrap();
    }

    #[test]
    fn detection_reads_machine_id_every_mac_and_the_hostname() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path();
        interface(root, "lo", "00:00:00:00:00:00", "0x9");
        interface(root, "eth0", "02:42:AC:11:00:02", "0x1003");
        interface(root, "veth1", "7e:b5:f2:d8:43:3f", "0x1003");
        interface(root, "tun0", "", "0x1091");
        std::fs::create_dir_all(root.join("var/lib/dbus")).unwrap();
        std::fs::write(root.join("var/lib/dbus/machine-id"), "abc123\n").unwrap();
        std::fs::create_dir_all(root.join("etc")).unwrap();
        std::fs::write(root.join("etc/hostname"), "web-1\n").unwrap();
        let host = HostIdentity::detect_in(root);
        assert_eq!(
            host,
            HostIdentity::new(
                Some("abc123"),
                ["02:42:ac:11:00:02", "7e:b5:f2:d8:43:3f"],
                Some("web-1")
            )
        );
        // /etc/machine-id wins over D-Bus's copy.
        std::fs::write(root.join("etc/machine-id"), "def456").unwrap();
        assert_eq!(
            HostIdentity::detect_in(root).machine_id.as_deref(),
            Some("def456")
        );
        assert!(HostIdentity::detect_in(&root.join("none")).is_empty());
    }

    #[test]
    fn the_machine_part_is_the_top_of_a_pinned_sha256() {
        // Pinned: a change here moves every host's machine part on upgrade.
        let host = HostIdentity::new(Some("m"), ["02:42:ac:11:00:02"], Some("h"));
        let digest: [u8; 32] = Sha256::digest(
            b"uidgen machine part v2\nmachine-id m\nmac 02:42:ac:11:00:02\nhostname h\n",
        )
        .into();
        assert_eq!(host.digest(), digest);
        assert_eq!(MachinePart::of(&host).value, u64::from(digest[0] >> 3));
        for bad in ["", "zz:00:00:00:00:01", "2:fc:0:0:0:1", "02-fc-00-00-00-01"] {
            assert_eq!(normalise_mac(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn macs_differing_in_the_last_byte_spread_over_the_parts() {
        // Docker's bridge hands out 02:42:ac:11:00:02, :03, ...: with the old FNV top bits
        // they all shared one part. Over 256 such hosts a well-mixed hash fills every one of
        // the 32 parts (a fill that misses one has probability below 32 * (31/32)^256 < 1e-2
        // for a random function; this one is fixed, so the check is deterministic).
        let parts: std::collections::HashSet<u64> = (0..=255u8)
            .map(|last| {
                let mac = format!("02:42:ac:11:00:{last:02x}");
                MachinePart::of(&HostIdentity::new(Some("same-image"), [mac], Some("same"))).value
            })
            .collect();
        assert_eq!(parts.len(), 32, "{parts:?}");
    }
}
