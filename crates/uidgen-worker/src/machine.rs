//! The zero-config `machine` assigner (the Snowflake-variant write-up): the worker id is a
//! 5-bit machine part, hashed from what identifies the host ([`MachinePart`], in
//! `machine_part.rs`), above a 5-bit process part, from the process id.
//!
//! What it guarantees:
//!
//! - **Registered in a shared store, no two live processes anywhere hold one worker id.**
//!   Each (machine, process) value is leased in `worker_lease` as an exact id
//!   (`exact_lease.rs`): a value another live process holds, on this host or on another whose
//!   machine part is the same, is skipped for the next one; all 32 held is
//!   [`WorkerError::MachineProcessValuesHeld`].
//! - **On one host, no two live processes sharing the state directory hold one worker id.**
//!   Each worker id has a lock file there (`worker-{id}.state.lock`, an advisory `flock`
//!   released when the process dies); a process starts at `pid % 32` and takes the first value
//!   whose lock it gets (and, with a store, whose lease), wrapping within the 32 values of its
//!   machine part. All 32 locked is [`WorkerError::MachineProcessValuesTaken`].
//! - **No two lives of one worker id stamp the same time unit.** A later process that takes a
//!   value again continues its reserved-until mark exactly as a static worker id does
//!   ([`LocalMark`](crate::LocalMark), a state file synced before any ID past it) and, with a
//!   store, the lease's recorded issued-until time: it waits until its clock has passed both.
//! - **Inside a container, nothing is left to chance.** Without a shared store the lock files
//!   separate nothing (each container has its own), so the assigner refuses to start when
//!   [`ContainerProbe`] finds a container, unless told the ids are kept apart otherwise
//!   ([`allow_uncoordinated`](MachineWorkerIdAssigner::allow_uncoordinated)):
//!   [`WorkerError::UncoordinatedInContainer`].
//!
//! Outside containers and without a shared store, uniqueness across hosts is only probable:
//! with N processes spread over the 1,024 worker ids, two share one with probability about
//! `1 - exp(-N(N-1)/2048)` (docs/OPERATIONS.md, "The machine assigner's odds").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Clock, FieldKind, Layout};

use crate::assigner::{AssignmentKind, WorkerAssignment, WorkerIdAssigner};
use crate::cache::CacheLock;
use crate::container::ContainerProbe;
use crate::error::{Result, WorkerError};
use crate::future::BoxFuture;
use crate::lease_options::LeaseOptions;
use crate::machine_part::{MACHINE_BITS, MachinePart, MachineSource};
use crate::mark::{MarkFence, MarkTiming};
use crate::range::WorkerIdRange;
use crate::registry::{ExactLease, ExactLeaseRegistry, LiveHolder};

/// Width of the process part.
pub const PROCESS_BITS: u32 = 5;
/// How many process values one machine part has (32).
const PROCESS_VALUES: u64 = 1 << PROCESS_BITS;
/// The largest machine part (31).
const MAX_MACHINE: u64 = (1 << MACHINE_BITS) - 1;
/// The largest worker id the assigner hands out (1023).
const MAX_WORKER: u64 = (1 << (MACHINE_BITS + PROCESS_BITS)) - 1;

/// The zero-config assigner: worker id `machine << 5 | process`, where the machine part is
/// [`MachinePart::detect`] and the process part starts at `pid % 32` and moves to the next free
/// value.
///
/// What it guarantees (argued in `machine.rs`'s module docs): registered in a store shared by
/// every host ([`registered_in`](Self::registered_in)), no two live processes hold one worker
/// id (an exact-id lease per value); among the processes of one host that share its state
/// directory, the same without a store (a lock file per value); and no two holders of a value,
/// one after the other, stamp the same time unit. Without a shared store it refuses to start
/// in a container ([`WorkerError::UncoordinatedInContainer`]) unless
/// [`allow_uncoordinated`](Self::allow_uncoordinated) is set or the machine part is
/// [configured](Self::with_machine_part); outside containers, uniqueness across hosts is then
/// only probable (docs/OPERATIONS.md has the odds).
///
/// Its assignment carries a fence as a static id's does: a restart on a value waits until its
/// clock has passed the value's previous mark (up to
/// [`max_start_wait`](Self::max_start_wait), else [`WorkerError::ClockBehindLastIssued`]), and
/// a cached generator borrows at most [`max_borrow`](Self::max_borrow) ahead.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use uidgen_core::Layout;
/// use uidgen_worker::{MachineWorkerIdAssigner, WorkerError, WorkerIdAssigner};
/// let dir = tempfile::tempdir().map_err(|e| WorkerError::InvalidInput(e.to_string()))?;
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
    store: Option<Arc<dyn ExactLeaseRegistry>>,
    /// Whether `store` is seen by every host that could take these ids (see
    /// [`with_store_shared`](MachineWorkerIdAssigner::with_store_shared)).
    store_shared: bool,
    lease: LeaseOptions,
    allow_uncoordinated: bool,
    probe: ContainerProbe,
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
            store_shared: true,
            lease: LeaseOptions::default(),
            allow_uncoordinated: false,
            probe: ContainerProbe::system(),
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
    /// or static assigner sharing the store is refused if its range overlaps it, and lease the
    /// (machine, process) value taken there, so that no other process sharing the store (on
    /// any host) holds it at the same time. The lease is renewed by a heartbeat and ends with
    /// the process; lost, the generator stops issuing (its lease is the assignment's
    /// `keeper`).
    #[must_use]
    pub fn registered_in(self, store: impl ExactLeaseRegistry + 'static) -> Self {
        self.registered_in_shared(Arc::new(store))
    }

    crate::exact_lease_setters!();

    /// Start without a shared store even inside a container: the operator states that the
    /// containers' worker ids are kept apart some other way (one container per host with host
    /// networking and a shared state directory, say). Default `false`.
    #[must_use]
    pub fn allow_uncoordinated(mut self, allow: bool) -> Self {
        self.allow_uncoordinated = allow;
        self
    }

    /// Look for a container with `probe` instead of [`ContainerProbe::system`] (for tests).
    #[must_use]
    pub fn with_container_probe(mut self, probe: ContainerProbe) -> Self {
        self.probe = probe;
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
    /// use uidgen_worker::{MachineWorkerIdAssigner, WorkerError};
    /// assert!(MachineWorkerIdAssigner::check_layout(&Layout::keyworker()?).is_ok());
    /// assert!(MachineWorkerIdAssigner::check_layout(&Layout::leaf()?).is_ok());
    /// let narrow = Layout::baidu_bits(31, 9, 23, "2026-01-01")?;
    /// assert!(matches!(
    ///     MachineWorkerIdAssigner::check_layout(&narrow),
    ///     Err(WorkerError::MachineLayoutUnfit { .. })
    /// ));
    /// # Ok::<(), WorkerError>(())
    /// ```
    pub fn check_layout(layout: &Layout) -> Result<()> {
        let unfit = |reason: String| WorkerError::MachineLayoutUnfit {
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
            Some(value) if value > MAX_MACHINE => Err(WorkerError::InvalidInput(format!(
                "machine part {value} does not fit in {MACHINE_BITS} bits (0 to {MAX_MACHINE})"
            ))),
            Some(value) => Ok(MachinePart {
                value,
                source: MachineSource::Configured,
            }),
            None => Ok(MachinePart::detect()),
        }
    }

    /// Refuse an uncoordinated start inside a container: without a store every host sees,
    /// each container's lock files keep only itself apart. A configured machine part is the
    /// operator's statement that it is this host's alone.
    fn check_coordinated(&self) -> Result<()> {
        let coordinated = self.store.is_some() && self.store_shared;
        if coordinated || self.allow_uncoordinated || self.machine.is_some() {
            return Ok(());
        }
        match self.probe.detect() {
            None => Ok(()),
            Some(evidence) => Err(WorkerError::UncoordinatedInContainer {
                assigner: "machine",
                evidence: evidence.to_string(),
                remedy: "Configure a store that every container shares (`store = \
                         \"postgres://...\"`, or a SQLite file on a volume they all mount), where \
                         each (machine, process) value is leased; or, if these worker ids are kept \
                         apart some other way, set `worker.machine.allow_uncoordinated = true` \
                         (UIDGEN_WORKER_MACHINE_ALLOW_UNCOORDINATED=true)."
                    .to_owned(),
            }),
        }
    }

    /// Take the first free worker id of `machine`, starting at this process's value: its lock
    /// file, and with a store its lease.
    async fn take_free_value(&self, machine: u64, layout: &Layout) -> Result<WorkerAssignment> {
        let start = u64::from(self.process_id) % PROCESS_VALUES;
        let mut locked_here = 0u64;
        let mut leased: Vec<LiveHolder> = Vec::new();
        for step in 0..PROCESS_VALUES {
            let process = (start + step) % PROCESS_VALUES;
            let worker_id = (machine << PROCESS_BITS) | process;
            let Some(lock) = CacheLock::try_acquire(&self.state_path(worker_id))? else {
                locked_here += 1;
                continue;
            };
            let assignment = match &self.store {
                // From here on this value is ours: continue its mark as a static id continues
                // its own, so a time unit an earlier holder on this host stamped is never
                // stamped again.
                None => {
                    let fence =
                        MarkFence::continue_from(lock, worker_id, layout, &self.timing).await?;
                    WorkerAssignment {
                        fence: Some(Arc::new(fence)),
                        ..WorkerAssignment::fixed(worker_id, AssignmentKind::MACHINE)
                    }
                }
                Some(store) => {
                    let request = ExactLease {
                        options: &self.lease,
                        timing: &self.timing,
                        layout,
                        worker_id,
                        cache: lock,
                        kind: AssignmentKind::MACHINE,
                    };
                    match store.lease_exact(request).await? {
                        Ok(assignment) => assignment,
                        Err(live) => {
                            tracing::info!(
                                worker_id,
                                holder = %live.holder,
                                "process value {process} of machine part {machine} is leased by \
                                 another process sharing the store; trying the next one"
                            );
                            leased.push(live);
                            continue;
                        }
                    }
                }
            };
            if step > 0 {
                tracing::info!(
                    worker_id,
                    preferred = start,
                    process,
                    "process value {start} (pid % {PROCESS_VALUES}) is held by another process; \
                     took the next free one"
                );
            }
            return Ok(assignment);
        }
        let state_dir = self.state_dir.display().to_string();
        Err(match leased.first() {
            None => WorkerError::MachineProcessValuesTaken {
                machine,
                count: PROCESS_VALUES,
                state_dir,
            },
            Some(example) => WorkerError::MachineProcessValuesHeld {
                machine,
                count: PROCESS_VALUES,
                held: format!(
                    "{} by leases in the store (e.g. `{}`), {locked_here} by processes sharing \
                     {state_dir}",
                    leased.len(),
                    example.holder
                ),
            },
        })
    }
}

impl WorkerIdAssigner for MachineWorkerIdAssigner {
    fn assign<'a>(&'a self, layout: &'a Layout) -> BoxFuture<'a, Result<WorkerAssignment>> {
        Box::pin(async move {
            Self::check_layout(layout)?;
            let machine = self.machine_part()?;
            self.check_coordinated()?;
            if let Some(store) = &self.store {
                store
                    .register_worker_range(Self::REGISTRY_NAME, WorkerIdRange::new(0, MAX_WORKER)?)
                    .await?;
            }
            if machine.source == MachineSource::Nothing {
                tracing::warn!(
                    machine = machine.value,
                    "nothing identifies this host (no machine id, MAC address or hostname): \
                     machine part 0, which every such host shares"
                );
            }
            let assignment = self.take_free_value(machine.value, layout).await?;
            let worker_id = assignment.worker_id;
            let scope = match (&self.store, self.store_shared) {
                (Some(_), true) => {
                    "leased in the shared store: unique among every process \
                                    sharing it"
                }
                (Some(_), false) => {
                    "leased in this host's own store: unique among the \
                                     processes sharing it, only probably unique across hosts"
                }
                (None, _) => {
                    "unique among the processes sharing this state directory, only \
                              probably unique across hosts"
                }
            };
            tracing::info!(
                worker_id,
                machine = machine.value,
                process = worker_id & (PROCESS_VALUES - 1),
                machine_from = %machine.source,
                state_dir = %self.state_dir.display(),
                "machine+process worker id, {scope}"
            );
            Ok(assignment)
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn layouts_without_room_for_both_parts_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let assigner = MachineWorkerIdAssigner::new(dir.path()).with_machine_part(1);
        let narrow = Layout::baidu_bits(31, 9, 23, "2026-01-01").unwrap();
        let error = assigner.assign(&narrow).await.unwrap_err();
        assert!(
            matches!(error, WorkerError::MachineLayoutUnfit { .. }),
            "{error}"
        );
        let odd_split = Layout::snowflake().unwrap().with_worker_split(4).unwrap();
        assert!(matches!(
            assigner.assign(&odd_split).await,
            Err(WorkerError::MachineLayoutUnfit { .. })
        ));
        assert!(matches!(
            MachineWorkerIdAssigner::new(dir.path())
                .with_machine_part(32)
                .assign(&Layout::keyworker().unwrap())
                .await,
            Err(WorkerError::InvalidInput(_))
        ));
        // A wider worker field holds the ids too.
        let wide = assigner.assign(&Layout::baidu_default().unwrap()).await;
        assert_eq!(wide.unwrap().worker_id >> PROCESS_BITS, 1);
    }
}
