//! Vesta's embedded fallback: when no server answers, the client issues IDs itself.
//!
//! Uniqueness rests on these checks:
//! - the fallback stamps a worker id no server and no other client stamps in the same time
//!   units. By default ([`FallbackOptions::leased`]) a server leases it to the client from the
//!   *embedded range* through the store, with the rules of every lease (uidgen-store's
//!   `FallbackLeases`): distinct ids for racing clients, and a fence ([`RemoteLease`]) whose
//!   limit is the lease's last confirmed `valid_until` and whose floor lies above every unit an
//!   earlier holder of the id may have stamped. No lease ever obtained means no fallback
//!   ([`ClientError::NoFallbackLease`]); a lease that ran out stops it
//!   ([`ClientError::FallbackLeaseExpired`]) until a server renews it. With
//!   [`FallbackOptions::explicit`] the operator states instead that nobody else uses the id;
//! - every worker id a server reports (gRPC `GetInfo`) or stamps (the IDs of each HTTP batch)
//!   is compared with the fallback's, and a clash disables the fallback with
//!   [`ClientError::FallbackWorkerConflict`];
//! - its layout and epoch must be the servers' ([`ClientError::LayoutMismatch`] otherwise):
//!   under another layout, the same bits mean other fields and worker ids stop separating;
//! - a worker id reused across the client's restarts is fenced by a reserved-until mark in its
//!   state file, exactly as a static worker id is (`uidgen_worker::LocalMark`): a restart starts
//!   above the mark.
//!
//! On the Vesta layouts the fallback's IDs carry genMethod 0 (embedded), the servers' 1
//! (gRPC) or 2 (HTTP), so every ID says where it came from.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::OnceCell;
use uidgen_core::{DefaultUidGenerator, FieldKind, Layout, SystemClock, UidGenerator};
use uidgen_proto::CheckedBatch;
use uidgen_proto::v1::ServerInfo;
use uidgen_worker::{GeneratorBuilder, GuardedGenerator, StaticWorkerIdAssigner};

use crate::error::{ClientError, Result, invalid};
use crate::fallback_lease::{LeaseKeeper, Next};
use crate::fallback_rpc::describe;
use crate::peers::PeerSet;

/// The embedded fallback's settings: the servers' layout, and where its worker id comes from.
///
/// ```
/// use std::time::Duration;
/// use uidgen_client::FallbackOptions;
/// use uidgen_core::Layout;
/// // A worker id leased from the servers; the lease and its mark kept in /var/lib/myapp/uidgen.
/// let leased = FallbackOptions::leased(Layout::vesta_max_peak()?, "/var/lib/myapp/uidgen")
///     .ttl(Duration::from_secs(300));
/// assert_eq!(leased.worker_id(), None); // known once a server granted the lease
/// // A worker id the operator states nobody else uses, with an absolute state file.
/// let explicit = FallbackOptions::explicit(
///     Layout::vesta_max_peak()?,
///     900,
///     "/var/lib/myapp/uidgen-fallback-900.state",
/// );
/// assert_eq!(explicit.worker_id(), Some(900));
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FallbackOptions {
    layout: Layout,
    source: Source,
}

#[derive(Debug, Clone)]
enum Source {
    Leased {
        state_dir: PathBuf,
        ttl: Duration,
        holder: Option<String>,
    },
    Explicit {
        worker_id: u64,
        state_path: PathBuf,
    },
}

impl FallbackOptions {
    /// The lease ttl by default: an outage up to about this long is ridden out (the lease is
    /// renewed every third of it while servers answer), and a client that dies without
    /// releasing its lease keeps its worker id from other clients this long.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(10 * 60);

    /// Issue IDs of `layout` (the servers' own, epoch included) with a worker id the servers
    /// lease to this client from their embedded range (`worker.fallback_range`), keeping each
    /// lease and its reserved-until mark in `state_dir` (`fallback-{id}.state`, one file per
    /// leased id; give every client process on a host the same directory, so a restarted one
    /// can continue a lease it left there while no server answers).
    pub fn leased(layout: Layout, state_dir: impl Into<PathBuf>) -> Self {
        Self {
            layout,
            source: Source::Leased {
                state_dir: state_dir.into(),
                ttl: Self::DEFAULT_TTL,
                holder: None,
            },
        }
    }

    /// [`leased`](Self::leased), its leases kept in `fallback/` of the per-host state
    /// directory that `uidgen serve` uses too (`UIDGEN_STATE_DIR`, `$XDG_STATE_HOME/uidgen`,
    /// `/var/lib/uidgen` for root, `$HOME/.local/state/uidgen`): one directory for every client
    /// process of the host, whatever its working directory, so a restarted process finds the
    /// lease it left there. Created when the first lease is kept.
    ///
    /// ```
    /// use uidgen_client::FallbackOptions;
    /// use uidgen_core::Layout;
    /// let fallback = FallbackOptions::leased_in_state_dir(Layout::vesta_max_peak()?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn leased_in_state_dir(layout: Layout) -> Result<Self> {
        let dir =
            uidgen_worker::StateDir::find(None).map_err(|e| invalid("fallback", e.to_string()))?;
        Ok(Self::leased(layout, dir.resolve(Path::new("fallback"))))
    }

    /// Issue IDs of `layout` with `worker_id`, which the operator states no server and no other
    /// process on any host ever uses, keeping its reserved-until mark in `state_path` (an
    /// absolute path, so that a restart from another directory finds it). Its state file is
    /// locked when the fallback first issues, so a second process on the host with the same
    /// id cannot fall back while the first holds it.
    pub fn explicit(layout: Layout, worker_id: u64, state_path: impl Into<PathBuf>) -> Self {
        Self {
            layout,
            source: Source::Explicit {
                worker_id,
                state_path: state_path.into(),
            },
        }
    }

    /// A leased fallback's lease length (default [`DEFAULT_TTL`](Self::DEFAULT_TTL); the
    /// servers accept 1 s to a day). No effect on an explicit id.
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        if let Source::Leased { ttl: ours, .. } = &mut self.source {
            *ours = ttl;
        }
        self
    }

    /// The name a leased fallback gives the servers (default `<host>/<pid>`; 1 to 111
    /// characters). No effect on an explicit id.
    #[must_use]
    pub fn holder(mut self, name: impl Into<String>) -> Self {
        if let Source::Leased { holder, .. } = &mut self.source {
            *holder = Some(name.into());
        }
        self
    }

    /// The explicit worker id; `None` for a leased one.
    pub fn worker_id(&self) -> Option<u64> {
        match &self.source {
            Source::Explicit { worker_id, .. } => Some(*worker_id),
            Source::Leased { .. } => None,
        }
    }

    /// The layout the fallback issues.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Check the settings.
    pub(crate) fn validate(&self) -> Result<()> {
        match &self.source {
            Source::Explicit {
                worker_id,
                state_path,
            } => {
                self.layout
                    .check_worker_id(*worker_id)
                    .map_err(|e| invalid("fallback", e.to_string()))?;
                if !state_path.is_absolute() {
                    return Err(invalid(
                        "fallback",
                        format!(
                            "the explicit fallback's state file `{}` must be an absolute path: a \
                             relative one depends on the working directory, and a restart \
                             elsewhere would not find the mark its earlier life left",
                            state_path.display()
                        ),
                    ));
                }
            }
            Source::Leased {
                state_dir,
                ttl,
                holder,
            } => {
                if state_dir.as_os_str().is_empty() {
                    return Err(invalid(
                        "fallback",
                        "give the leased fallback a state directory",
                    ));
                }
                let (min, max) = (
                    uidgen_worker::MIN_FALLBACK_LEASE_TTL,
                    uidgen_worker::MAX_LEASE_TTL,
                );
                if *ttl < min || *ttl > max {
                    return Err(invalid(
                        "fallback",
                        format!("the lease ttl {ttl:?} is out of range: {min:?} to {max:?}"),
                    ));
                }
                let len = holder.as_deref().map_or(1, |h| h.chars().count());
                if len == 0 || len > uidgen_worker::MAX_HOLDER_NAME_LEN {
                    return Err(invalid(
                        "fallback",
                        format!(
                            "the holder name must be 1 to {} characters",
                            uidgen_worker::MAX_HOLDER_NAME_LEN
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// The running fallback.
#[derive(Debug)]
pub(crate) struct Fallback {
    layout: Layout,
    /// The layout as [`describe`] writes it, to compare with servers'.
    description: String,
    mode: Mode,
    /// How long a call waits for a lease the fallback is about to have (the client's `wait`).
    wait: Duration,
    /// Set when a server was found to clash with the fallback: it never issues again.
    disabled: Mutex<Option<ClientError>>,
}

#[derive(Debug)]
enum Mode {
    /// Boxed: one per client, and far larger than the explicit id's state.
    Leased(Box<LeaseKeeper>),
    Explicit {
        worker_id: u64,
        state_path: PathBuf,
        /// Built at the first fallback: the state file is locked from then on.
        generator: OnceCell<Arc<GuardedGenerator<DefaultUidGenerator<SystemClock>>>>,
    },
}

impl Fallback {
    /// The fallback `options` describe (validated), whose calls wait up to `wait` for a lease
    /// about to come; nothing is locked or claimed yet.
    pub(crate) fn new(options: FallbackOptions, wait: Duration) -> Self {
        let description = describe(
            options.layout.name(),
            layout_fields(&options.layout).into_iter(),
            options.layout.epoch_ms(),
        );
        let mode = match options.source {
            Source::Leased {
                state_dir,
                ttl,
                holder,
            } => Mode::Leased(Box::new(LeaseKeeper::new(
                options.layout.clone(),
                state_dir,
                ttl,
                holder.unwrap_or_else(default_holder),
            ))),
            Source::Explicit {
                worker_id,
                state_path,
            } => Mode::Explicit {
                worker_id,
                state_path,
                generator: OnceCell::new(),
            },
        };
        Self {
            layout: options.layout,
            description,
            mode,
            wait,
            disabled: Mutex::new(None),
        }
    }

    /// The lease keeper of a leased fallback.
    pub(crate) fn keeper(&self) -> Option<&LeaseKeeper> {
        match &self.mode {
            Mode::Leased(keeper) => Some(keeper),
            Mode::Explicit { .. } => None,
        }
    }

    /// One ID from the embedded generator, every peer being down (`peers`, `last_error`). A
    /// leased fallback about to have its lease (a restart continuing the one an earlier process
    /// left) waits for it up to the client's `wait`.
    pub(crate) async fn next_id(&self, peers: &str, last_error: &str) -> Result<u64> {
        if let Some(error) = self.disabled.lock().as_ref() {
            return Err(error.replay());
        }
        match &self.mode {
            Mode::Leased(keeper) => keeper.next_id(peers, last_error, self.wait).await,
            Mode::Explicit {
                worker_id,
                state_path,
                generator,
            } => {
                let generator = generator
                    .get_or_try_init(|| async {
                        let built = GeneratorBuilder::new(self.layout.clone())
                            .assigner(StaticWorkerIdAssigner::new(*worker_id, state_path))
                            .build_default(SystemClock)
                            .await?;
                        tracing::info!(
                            worker_id,
                            layout = self.layout.name(),
                            state = %state_path.display(),
                            "uidgen client: every server is down; the embedded fallback issues on \
                             its explicit worker id"
                        );
                        Ok::<_, ClientError>(built.generator)
                    })
                    .await?;
                Ok(generator.next_id()?)
            }
        }
    }

    /// Disable the fallback for good with `error` (the first error sticks); a copy of it.
    pub(crate) fn disable(&self, error: ClientError) -> ClientError {
        tracing::error!(%error, "uidgen client: embedded fallback disabled");
        let copy = error.replay();
        let mut disabled = self.disabled.lock();
        disabled.get_or_insert(error);
        copy
    }

    /// Check peer `index` against the fallback (gRPC: its `GetInfo`). A peer that does not
    /// answer is left unchecked, to be checked when it does; `at_start` only logs that.
    pub(crate) async fn check_peer(
        &self,
        peers: &PeerSet,
        index: usize,
        at_start: bool,
    ) -> Result<()> {
        let peer = peers.peer(index).to_string();
        match peers.connection(index).info().await {
            Ok(Some(info)) => self.check_info(&peer, &info),
            Ok(None) => Ok(()), // HTTP: checked on the IDs of each batch instead
            Err(failure) => {
                peers.mark_unchecked(index);
                if at_start {
                    tracing::info!(
                        %peer,
                        error = failure.message(),
                        "uidgen client: peer not answering at start; checked when it does"
                    );
                }
                Ok(())
            }
        }
    }

    /// Compare a server's `GetInfo` with the fallback: the same layout and epoch, another
    /// worker id. A clash disables the fallback for good and is returned.
    pub(crate) fn check_info(&self, peer: &str, info: &ServerInfo) -> Result<()> {
        let server = describe(
            &info.layout,
            info.fields.iter().map(|f| (f.name.as_str(), f.bits)),
            info.epoch_ms,
        );
        self.check_layout(peer, server)?;
        self.check_worker(peer, info.worker_id)
    }

    /// Compare a server's layout (as [`describe`] writes it) with the fallback's.
    pub(crate) fn check_layout(&self, peer: &str, server: String) -> Result<()> {
        if server != self.description {
            return Err(self.disable(ClientError::LayoutMismatch {
                peer: peer.to_owned(),
                server,
                fallback: self.description.clone(),
            }));
        }
        Ok(())
    }

    /// Compare the worker ids stamped in a batch a server issued with the fallback's.
    pub(crate) fn check_ids(&self, peer: &str, ids: &CheckedBatch) -> Result<()> {
        for id in [ids.first(), ids.last()].into_iter().flatten() {
            let worker = match self.layout.decompose(id) {
                Ok(parts) => parts.worker,
                Err(error) => {
                    return Err(self.disable(ClientError::LayoutMismatch {
                        peer: peer.to_owned(),
                        server: format!(
                            "one that issued {id}, which `{}` cannot decode: {error}",
                            self.layout.name()
                        ),
                        fallback: self.layout.name().to_owned(),
                    }));
                }
            };
            self.check_worker(peer, worker)?;
        }
        Ok(())
    }

    fn check_worker(&self, peer: &str, worker_id: u64) -> Result<()> {
        if self.worker_id() == Some(worker_id) {
            return Err(self.disable(ClientError::FallbackWorkerConflict {
                peer: peer.to_owned(),
                worker_id,
            }));
        }
        Ok(())
    }

    /// The fallback's worker id: the explicit one, or the lease's while one is held.
    pub(crate) fn worker_id(&self) -> Option<u64> {
        match &self.mode {
            Mode::Leased(keeper) => keeper.held().map(|held| held.worker_id()),
            Mode::Explicit { worker_id, .. } => Some(*worker_id),
        }
    }
}

/// `<host>/<pid>`: what the servers' log says of a leased fallback's holder.
fn default_holder() -> String {
    let host = uidgen_worker::host_name();
    format!("{host}/{}", std::process::id())
}

/// The layout's fields as `GetInfo` lists them: most significant first, only those with
/// bits, a split worker field as its machine and process parts.
fn layout_fields(layout: &Layout) -> Vec<(&'static str, u32)> {
    let mut out = Vec::new();
    for &(kind, bits) in layout.fields() {
        if bits == 0 {
            continue;
        }
        match layout.worker_split() {
            Some(split) if kind == FieldKind::Worker => {
                out.push(("machine", split.machine_bits()));
                out.push(("process", split.process_bits()));
            }
            _ => out.push((kind.name(), bits)),
        }
    }
    out
}

/// The keeper's task: renew every third of the ttl while a lease is held; while no server
/// answers, try again every `probe` (at least a second apart, so a fleet of clients does not
/// hammer a store that is down).
pub(crate) async fn keep_lease(fallback: Arc<Fallback>, peers: Arc<PeerSet>, probe: Duration) {
    let Some(keeper) = fallback.keeper() else {
        return;
    };
    let renewal = keeper.ttl / 3;
    let soon = probe.max(Duration::from_secs(1)).min(renewal);
    loop {
        let check = |peer: &str, layout: String| fallback.check_layout(peer, layout);
        let pause = match keeper.step(&check, &peers).await {
            Next::Renewal => renewal,
            Next::Soon => soon,
            Next::Now => Duration::ZERO,
        };
        tokio::time::sleep(pause).await;
    }
}
