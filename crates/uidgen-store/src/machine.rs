//! The zero-config `machine` assigner (the Snowflake-variant write-up): the worker id is a
//! 5-bit machine part, hashed from the host's MAC addresses, above a 5-bit process part, from
//! the process id.
//!
//! Nothing is coordinated between hosts, so uniqueness across hosts is only probable: with N
//! processes spread over the 1,024 worker ids, two share one with probability about
//! `1 - exp(-N(N-1)/2048)` (docs/OPERATIONS.md, "The machine assigner's odds"). What it does
//! guarantee, for the processes of one host that share its state directory:
//!
//! - **No two live processes hold one worker id.** Each worker id has a lock file in the state
//!   directory (`worker-{id}.state.lock`, an advisory `flock` released when the process dies);
//!   a process starts at `pid % 32` and takes the first process value whose lock it gets,
//!   wrapping within the 32 values of its machine part. All 32 held is
//!   [`StoreError::MachineProcessValuesTaken`].
//! - **No two lives of one worker id stamp the same time unit.** A later process that takes a
//!   value again continues its reserved-until mark exactly as a static worker id does
//!   ([`LocalMark`](crate::LocalMark), a state file synced before any ID past it): it waits
//!   until its clock has passed the previous holder's mark, which becomes its fence's floor,
//!   and its own mark is its fence's limit.
//!
//! The machine part comes from the MAC addresses in `/sys/class/net/*/address` (Linux),
//! skipping loopback and all-zero ones and preferring interfaces backed by a device (a
//! container's veth or a bridge gets a new random MAC when it is recreated), sorted and hashed
//! with FNV-1a, whose output does not change between builds or runs (std's `RandomState` is
//! seeded per process). Without any usable MAC it hashes the hostname, and says so in the log.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Clock, FieldKind, Layout};

use crate::assigner::{AssignmentKind, BoxFuture, WorkerAssignment, WorkerIdAssigner};
use crate::cache::CacheLock;
use crate::error::{Result, StoreError};
use crate::mark::{MarkFence, MarkTiming};
use crate::store::Store;
use crate::worker_range::WorkerIdRange;

/// Width of the machine part.
pub const MACHINE_BITS: u32 = 5;
/// Width of the process part.
pub const PROCESS_BITS: u32 = 5;
/// How many process values one machine part has (32).
const PROCESS_VALUES: u64 = 1 << PROCESS_BITS;
/// The largest machine part (31).
const MAX_MACHINE: u64 = (1 << MACHINE_BITS) - 1;
/// The largest worker id the assigner hands out (1023).
const MAX_WORKER: u64 = (1 << (MACHINE_BITS + PROCESS_BITS)) - 1;

/// The `IFF_LOOPBACK` bit of `/sys/class/net/*/flags` (linux/if.h).
const IFF_LOOPBACK: u64 = 0x8;

/// Where a [`MachinePart`] came from, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineSource {
    /// A hash of these MAC addresses (lowercase, sorted).
    Macs(Vec<String>),
    /// No usable MAC address: a hash of this hostname.
    Hostname(String),
    /// Given by the caller ([`MachineWorkerIdAssigner::with_machine_part`]).
    Configured,
    /// Neither a MAC address nor a hostname: 0.
    Nothing,
}

impl fmt::Display for MachineSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Macs(macs) => write!(f, "MAC addresses {}", macs.join(", ")),
            Self::Hostname(host) => write!(f, "hostname {host:?} (no usable MAC address)"),
            Self::Configured => f.write_str("configuration"),
            Self::Nothing => f.write_str("nothing (no MAC address, no hostname)"),
        }
    }
}

/// This host's 5-bit machine part and where it came from.
///
/// ```
/// use uidgen_store::{MachinePart, MachineSource};
/// // Loopback and all-zero addresses are skipped; order does not matter.
/// let a = MachinePart::from_macs(["02:FC:00:00:00:01", "00:00:00:00:00:00", "7e:b5:f2:d8:43:3f"]);
/// let b = MachinePart::from_macs(["7e:b5:f2:d8:43:3f", "02:fc:00:00:00:01"]);
/// assert_eq!(a, b);
/// assert!(a.as_ref().is_some_and(|m| m.value <= 31));
/// assert_eq!(MachinePart::from_macs(["00:00:00:00:00:00"]), None);
/// let host = MachinePart::from_hostname("db-7");
/// assert!(matches!(host.source, MachineSource::Hostname(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachinePart {
    /// The part, 0 to 31.
    pub value: u64,
    /// Where it came from.
    pub source: MachineSource,
}

impl MachinePart {
    /// This host's machine part: from its network interfaces (`/sys/class/net`), else from its
    /// hostname, else 0.
    pub fn detect() -> Self {
        Self::detect_in(Path::new("/sys/class/net")).unwrap_or_else(|| {
            hostname().map_or(
                Self {
                    value: 0,
                    source: MachineSource::Nothing,
                },
                |host| Self::from_hostname(&host),
            )
        })
    }

    /// The machine part from the interfaces under `sys_class_net` (a directory laid out as
    /// `/sys/class/net`), or `None` when none has a usable MAC address. Interfaces backed by a
    /// device (`<iface>/device` exists) are preferred: a virtual interface's MAC may change when
    /// it is recreated, and with it the machine part.
    pub fn detect_in(sys_class_net: &Path) -> Option<Self> {
        let mut physical = Vec::new();
        let mut virtual_ = Vec::new();
        for entry in std::fs::read_dir(sys_class_net).ok()?.flatten() {
            let dir = entry.path();
            let flags = std::fs::read_to_string(dir.join("flags"))
                .ok()
                .and_then(|f| u64::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok());
            if flags.is_some_and(|f| f & IFF_LOOPBACK != 0) {
                continue;
            }
            let Ok(mac) = std::fs::read_to_string(dir.join("address")) else {
                continue;
            };
            if dir.join("device").exists() {
                physical.push(mac);
            } else {
                virtual_.push(mac);
            }
        }
        Self::from_macs(physical).or_else(|| Self::from_macs(virtual_))
    }

    /// The machine part hashed from MAC addresses (`aa:bb:...`, any case), skipping malformed
    /// and all-zero ones; `None` when none is left.
    pub fn from_macs<S: AsRef<str>>(macs: impl IntoIterator<Item = S>) -> Option<Self> {
        let mut usable: Vec<String> = macs
            .into_iter()
            .filter_map(|mac| normalise_mac(mac.as_ref()))
            .collect();
        usable.sort();
        usable.dedup();
        if usable.is_empty() {
            return None;
        }
        Some(Self {
            value: fold_to_machine(fnv1a_64(usable.join("\n").as_bytes())),
            source: MachineSource::Macs(usable),
        })
    }

    /// The machine part hashed from a hostname.
    pub fn from_hostname(host: &str) -> Self {
        Self {
            value: fold_to_machine(fnv1a_64(host.as_bytes())),
            source: MachineSource::Hostname(host.to_owned()),
        }
    }
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

/// 64-bit FNV-1a (Fowler–Noll–Vo, <http://www.isthe.com/chongo/tech/comp/fnv/>): written out
/// because the machine part must be the same for every process and every build on a host.
///
/// ```
/// // The reference test vectors.
/// assert_eq!(uidgen_store::fnv1a_64(b""), 0xcbf2_9ce4_8422_2325);
/// assert_eq!(uidgen_store::fnv1a_64(b"a"), 0xaf63_dc4c_8601_ec8c);
/// ```
pub fn fnv1a_64(bytes: &[u8]) -> u64 {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    bytes.iter().fold(OFFSET_BASIS, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(PRIME)
    })
}

/// The top 5 bits of a hash: FNV-1a's low bits depend only on the low bits of each input
/// byte (a multiplication carries upwards only), so two MACs differing in high nibbles would
/// share low bits far more often than chance; the top bits depend on every input bit.
fn fold_to_machine(hash: u64) -> u64 {
    hash >> (64 - MACHINE_BITS)
}

/// The hostname, from the kernel (Linux) or the environment; `None` when empty or unknown.
fn hostname() -> Option<String> {
    let from_file = |path: &str| std::fs::read_to_string(path).ok();
    from_file("/proc/sys/kernel/hostname")
        .or_else(|| from_file("/etc/hostname"))
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// The zero-config assigner: worker id `machine << 5 | process`, where the machine part is
/// [`MachinePart::detect`] and the process part starts at `pid % 32` and moves to the next free
/// value among the processes sharing the state directory.
///
/// What it guarantees: among the processes of one host that share its state directory, no two
/// live ones hold one worker id (a lock file per value), and no two holders of a value, one
/// after the other, stamp the same time unit (the value's reserved-until mark). What it cannot:
/// uniqueness across hosts, which is only probable (with N processes over 1,024 values, some
/// two collide with probability about `1 - exp(-N(N-1)/2048)`; docs/OPERATIONS.md has the
/// table and what makes it worse).
///
/// Its assignment carries a fence as a static id's does: a restart on a value waits until its
/// clock has passed the value's previous mark (up to
/// [`max_start_wait`](Self::max_start_wait), else [`StoreError::ClockBehindLastIssued`]), and
/// a cached generator borrows at most [`max_borrow`](Self::max_borrow) ahead.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_store::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_store::{MachineWorkerIdAssigner, StoreError, WorkerIdAssigner};
/// let dir = tempfile::tempdir().map_err(|e| StoreError::InvalidInput(e.to_string()))?;
/// let layout = Layout::keyworker()?;
/// let process = |pid| {
///     MachineWorkerIdAssigner::new(dir.path())
///         .with_machine_part(3)
///         .with_process_id(pid)
/// };
/// let first = process(40).assign(&layout).await?; // 40 % 32 = 8
/// assert_eq!(first.worker_id, (3 << 5) | 8);
/// // Another live process with the same pid % 32 moves on to the next free value.
/// let second = process(72).assign(&layout).await?;
/// assert_eq!(second.worker_id, (3 << 5) | 9);
/// assert!(first.fence.is_some() && second.fence.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MachineWorkerIdAssigner {
    state_dir: PathBuf,
    machine: Option<u64>,
    process_id: u32,
    timing: MarkTiming,
    store: Option<Store>,
}

impl MachineWorkerIdAssigner {
    /// The longest a start waits for its clock to pass the previous holder's mark, by default
    /// (as for a static id).
    pub const DEFAULT_MAX_START_WAIT: Duration = Duration::from_secs(15);
    /// How far ahead of the clock a cached generator may borrow, by default (as for a static
    /// id: it is also about the longest a restart on the value waits).
    pub const DEFAULT_MAX_BORROW: Duration = Duration::from_secs(10);
    /// The name its range (always `0-1023`) is recorded under in `worker_id_range`.
    pub const REGISTRY_NAME: &'static str = "machine";

    /// Keep lock and state files in `state_dir` (created if missing); every process on the
    /// host must use the same directory for the guarantee to hold.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        Self {
            state_dir: state_dir.into(),
            machine: None,
            process_id: std::process::id(),
            timing: MarkTiming::new(Self::DEFAULT_MAX_START_WAIT, Self::DEFAULT_MAX_BORROW),
            store: None,
        }
    }

    /// The state directory every process on a host shares by default: `uidgen-machine` in the
    /// system's temporary directory.
    pub fn default_state_dir() -> PathBuf {
        std::env::temp_dir().join("uidgen-machine")
    }

    /// Use this machine part (0 to 31) instead of detecting one.
    #[must_use]
    pub fn with_machine_part(mut self, machine: u64) -> Self {
        self.machine = Some(machine);
        self
    }

    /// Start from this process id's value instead of this process's (for tests that play
    /// several processes in one).
    #[must_use]
    pub fn with_process_id(mut self, process_id: u32) -> Self {
        self.process_id = process_id;
        self
    }

    crate::mark::mark_fence_setters!();

    /// Record the range `0-1023` in `store` at every assignment, so that a disposable, leased
    /// or static assigner sharing the store is refused if its range overlaps it.
    #[must_use]
    pub fn registered_in(mut self, store: Store) -> Self {
        self.store = Some(store);
        self
    }

    /// The state file of `worker_id` (its lock file is this path plus `.lock`).
    pub fn state_path(&self, worker_id: u64) -> PathBuf {
        self.state_dir.join(format!("worker-{worker_id}.state"))
    }

    /// Whether the assigner can serve `layout`: its worker field must hold worker ids up to
    /// 1023 and, if it splits the field, split it as 5 machine bits over 5 process bits, so
    /// that decoding shows the parts assigned. [`assign`](WorkerIdAssigner::assign) checks
    /// this first; a configuration can check it before anything starts.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_store::{MachineWorkerIdAssigner, StoreError};
    /// assert!(MachineWorkerIdAssigner::check_layout(&Layout::keyworker()?).is_ok());
    /// assert!(MachineWorkerIdAssigner::check_layout(&Layout::leaf()?).is_ok());
    /// let narrow = Layout::baidu_bits(31, 9, 23, "2026-01-01")?;
    /// assert!(matches!(
    ///     MachineWorkerIdAssigner::check_layout(&narrow),
    ///     Err(StoreError::MachineLayoutUnfit { .. })
    /// ));
    /// # Ok::<(), StoreError>(())
    /// ```
    pub fn check_layout(layout: &Layout) -> Result<()> {
        let unfit = |reason: String| StoreError::MachineLayoutUnfit {
            layout: layout.name().to_owned(),
            reason,
        };
        let bits = layout.bits(FieldKind::Worker);
        if layout.max_worker_id() < MAX_WORKER {
            return Err(unfit(format!(
                "its worker field has {bits} bits, and worker ids `machine << {PROCESS_BITS} | \
                 process` need {}; use the keyworker, snowflake or leaf preset",
                MACHINE_BITS + PROCESS_BITS
            )));
        }
        if let Some(split) = layout.worker_split()
            && (split.machine_bits(), split.process_bits()) != (MACHINE_BITS, PROCESS_BITS)
        {
            return Err(unfit(format!(
                "it reads its worker field as {} machine bits over {} process bits, the assigner \
                 writes {MACHINE_BITS} over {PROCESS_BITS}",
                split.machine_bits(),
                split.process_bits()
            )));
        }
        Ok(())
    }

    fn machine_part(&self) -> Result<MachinePart> {
        match self.machine {
            Some(value) if value > MAX_MACHINE => Err(StoreError::InvalidInput(format!(
                "machine part {value} does not fit in {MACHINE_BITS} bits (0 to {MAX_MACHINE})"
            ))),
            Some(value) => Ok(MachinePart {
                value,
                source: MachineSource::Configured,
            }),
            None => Ok(MachinePart::detect()),
        }
    }

    /// Lock the first free worker id of `machine`, starting at this process's value.
    fn lock_free_value(&self, machine: u64) -> Result<(u64, CacheLock)> {
        let start = u64::from(self.process_id) % PROCESS_VALUES;
        for step in 0..PROCESS_VALUES {
            let process = (start + step) % PROCESS_VALUES;
            let worker_id = (machine << PROCESS_BITS) | process;
            if let Some(lock) = CacheLock::try_acquire(&self.state_path(worker_id))? {
                if step > 0 {
                    tracing::info!(
                        worker_id,
                        preferred = start,
                        process,
                        "process value {start} (pid % {PROCESS_VALUES}) is held by another process \
                         on this host; took the next free one"
                    );
                }
                return Ok((worker_id, lock));
            }
        }
        Err(StoreError::MachineProcessValuesTaken {
            machine,
            count: PROCESS_VALUES,
            state_dir: self.state_dir.display().to_string(),
        })
    }
}

impl WorkerIdAssigner for MachineWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            Self::check_layout(layout)?;
            let machine = self.machine_part()?;
            if let Some(store) = &self.store {
                store
                    .register_worker_range(Self::REGISTRY_NAME, WorkerIdRange::new(0, MAX_WORKER)?)
                    .await?;
            }
            match &machine.source {
                MachineSource::Macs(_) | MachineSource::Configured => {}
                source => tracing::warn!(
                    machine = machine.value,
                    %source,
                    "no usable MAC address on this host; the machine part comes from the hostname, \
                     so hosts with one name share it"
                ),
            }
            let (worker_id, cache) = self.lock_free_value(machine.value)?;
            // From here on this value is ours: continue its mark as a static id continues its
            // own, so a time unit an earlier holder on this host stamped is never stamped again.
            let fence = MarkFence::continue_from(cache, worker_id, layout, &self.timing).await?;
            tracing::info!(
                worker_id,
                machine = machine.value,
                process = worker_id & (PROCESS_VALUES - 1),
                machine_from = %machine.source,
                state = %fence.mark.path().display(),
                "machine+process worker id: unique among the processes sharing this state \
                 directory, only probably unique across hosts"
            );
            Ok(WorkerAssignment {
                fence: Some(Arc::new(fence)),
                ..WorkerAssignment::fixed(worker_id, AssignmentKind::Machine)
            })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn interface(root: &Path, name: &str, mac: &str, flags: &str, device: bool) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("address"), format!("{mac}\n")).unwrap();
        std::fs::write(dir.join("flags"), format!("{flags}\n")).unwrap();
        if device {
            std::fs::create_dir_all(dir.join("device")).unwrap();
        }
    }

    #[test]
    fn detection_skips_loopback_and_prefers_device_backed_interfaces() {
        let root = tempfile::tempdir().unwrap();
        interface(root.path(), "lo", "00:00:00:00:00:00", "0x9", false);
        interface(root.path(), "eth0", "02:FC:00:00:00:01", "0x1003", true);
        interface(root.path(), "veth1", "7e:b5:f2:d8:43:3f", "0x1003", false);
        let part = MachinePart::detect_in(root.path()).unwrap();
        assert_eq!(
            part.source,
            MachineSource::Macs(vec!["02:fc:00:00:00:01".to_owned()])
        );
        assert_eq!(
            Some(part),
            MachinePart::from_macs(["02:fc:00:00:00:01"]),
            "the virtual interface changes nothing"
        );
    }

    #[test]
    fn without_a_device_backed_interface_the_virtual_ones_count() {
        let root = tempfile::tempdir().unwrap();
        interface(root.path(), "lo", "00:00:00:00:00:00", "0x9", false);
        interface(root.path(), "veth1", "7e:b5:f2:d8:43:3f", "0x1003", false);
        interface(root.path(), "tun0", "", "0x1091", false);
        let part = MachinePart::detect_in(root.path()).unwrap();
        assert_eq!(
            part.source,
            MachineSource::Macs(vec!["7e:b5:f2:d8:43:3f".to_owned()])
        );
        let only_loopback = tempfile::tempdir().unwrap();
        interface(
            only_loopback.path(),
            "lo",
            "00:00:00:00:00:00",
            "0x9",
            false,
        );
        assert_eq!(MachinePart::detect_in(only_loopback.path()), None);
        assert_eq!(
            MachinePart::detect_in(&only_loopback.path().join("none")),
            None
        );
    }

    #[test]
    fn the_machine_part_is_a_stable_hash() {
        // Pinned: a change here would move every host's machine part on upgrade.
        let part = MachinePart::from_macs(["02:fc:00:00:00:01"]).unwrap();
        assert_eq!(part.value, fnv1a_64(b"02:fc:00:00:00:01") >> 59);
        assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
        for bad in ["", "zz:00:00:00:00:01", "2:fc:0:0:0:1", "02-fc-00-00-00-01"] {
            assert_eq!(normalise_mac(bad), None, "{bad:?}");
        }
        assert_eq!(
            MachinePart::from_hostname("db-7").value,
            fnv1a_64(b"db-7") >> 59
        );
    }

    #[tokio::test]
    async fn layouts_without_room_for_both_parts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let assigner = MachineWorkerIdAssigner::new(dir.path()).with_machine_part(1);
        let narrow = Layout::baidu_bits(31, 9, 23, "2026-01-01").unwrap();
        let error = assigner.assign(&narrow).await.unwrap_err();
        assert!(
            matches!(error, StoreError::MachineLayoutUnfit { .. }),
            "{error}"
        );
        let odd_split = Layout::snowflake().unwrap().with_worker_split(4).unwrap();
        assert!(matches!(
            assigner.assign(&odd_split).await,
            Err(StoreError::MachineLayoutUnfit { .. })
        ));
        assert!(matches!(
            MachineWorkerIdAssigner::new(dir.path())
                .with_machine_part(32)
                .assign(&Layout::keyworker().unwrap())
                .await,
            Err(StoreError::InvalidInput(_))
        ));
        // A wider worker field holds the ids too.
        let wide = assigner.assign(&Layout::baidu_default().unwrap()).await;
        assert_eq!(wide.unwrap().worker_id >> PROCESS_BITS, 1);
    }
}
