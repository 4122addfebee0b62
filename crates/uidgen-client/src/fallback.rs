//! Vesta's embedded fallback: when no server answers, the client issues IDs itself.
//!
//! Uniqueness rests on three checks, in this order:
//! - the fallback stamps its own worker id, taken from the *embedded range* the operator keeps
//!   out of every server's `worker.range` (docs/OPERATIONS.md, "The client's embedded
//!   fallback"); every worker id a server reports (gRPC `GetInfo`) or stamps (the IDs of each
//!   HTTP batch) is compared with it, and a clash disables the fallback with
//!   [`ClientError::FallbackWorkerConflict`];
//! - its layout and epoch must be the servers' ([`ClientError::LayoutMismatch`] otherwise):
//!   under another layout, the same bits mean other fields and worker ids stop separating;
//! - its worker id is reused across client restarts, so it is fenced exactly as a static
//!   worker id is (`uidgen_store::StaticWorkerIdAssigner`): a synced reserved-until mark in
//!   `state_path` that a restart waits out, and a file lock that refuses a second process.
//!
//! On the Vesta layouts the fallback's IDs carry genMethod 0 (embedded), the servers' 1
//! (gRPC) or 2 (HTTP), so every ID says where it came from.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use uidgen_core::{DefaultUidGenerator, FieldKind, Layout, SystemClock, UidGenerator};
use uidgen_proto::v1::ServerInfo;
use uidgen_store::{GeneratorBuilder, GuardedGenerator, StaticWorkerIdAssigner};

use crate::error::{ClientError, Result};

/// The embedded fallback's settings: the servers' layout, a worker id from the embedded
/// range, and the state file that fences it across restarts.
///
/// ```
/// use uidgen_client::FallbackOptions;
/// use uidgen_core::Layout;
/// let fallback = FallbackOptions::new(
///     Layout::vesta_max_peak()?,
///     1000,
///     "/var/lib/myapp/uidgen-fallback-1000.state",
/// );
/// assert_eq!(fallback.worker_id(), 1000);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone)]
pub struct FallbackOptions {
    layout: Layout,
    worker_id: u64,
    state_path: PathBuf,
}

impl FallbackOptions {
    /// Issue IDs of `layout` (the servers' own, epoch included) with `worker_id` (outside
    /// every server's range), keeping its reserved-until mark in `state_path` (one file per
    /// worker id, kept across restarts).
    pub fn new(layout: Layout, worker_id: u64, state_path: impl Into<PathBuf>) -> Self {
        Self {
            layout,
            worker_id,
            state_path: state_path.into(),
        }
    }

    /// The fallback's worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// The layout the fallback issues.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

/// The running fallback generator.
#[derive(Debug)]
pub(crate) struct Fallback {
    generator: Arc<GuardedGenerator<DefaultUidGenerator<SystemClock>>>,
    layout: Layout,
    worker_id: u64,
    /// Set when a server was found to clash with the fallback: it never issues again.
    disabled: Mutex<Option<ClientError>>,
}

impl Fallback {
    /// Take the worker id (lock its state file, wait out its earlier life's mark) and build
    /// the generator.
    pub(crate) async fn start(options: FallbackOptions) -> Result<Self> {
        let built = GeneratorBuilder::new(options.layout.clone())
            .assigner(StaticWorkerIdAssigner::new(
                options.worker_id,
                options.state_path,
            ))
            .build_default(SystemClock)
            .await?;
        tracing::info!(
            worker_id = options.worker_id,
            layout = options.layout.name(),
            "uidgen client: embedded fallback ready"
        );
        Ok(Self {
            generator: built.generator,
            layout: options.layout,
            worker_id: options.worker_id,
            disabled: Mutex::new(None),
        })
    }

    /// One ID from the embedded generator.
    pub(crate) fn next_id(&self) -> Result<u64> {
        if let Some(error) = self
            .disabled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            return Err(error.replay());
        }
        Ok(self.generator.next_id()?)
    }

    fn disable(&self, error: ClientError) -> ClientError {
        tracing::error!(%error, "uidgen client: embedded fallback disabled");
        let copy = error.replay();
        let mut disabled = self.disabled.lock().unwrap_or_else(PoisonError::into_inner);
        disabled.get_or_insert(error);
        copy
    }

    /// Compare a server's `GetInfo` with the fallback: the same layout and epoch, another
    /// worker id. A clash disables the fallback for good and is returned.
    pub(crate) fn check_info(&self, peer: &str, info: &ServerInfo) -> Result<()> {
        let server = describe(
            &info.layout,
            info.fields.iter().map(|f| (f.name.as_str(), f.bits)),
            info.epoch_ms,
        );
        let fallback = describe(
            self.layout.name(),
            layout_fields(&self.layout).into_iter(),
            self.layout.epoch_ms(),
        );
        if server != fallback {
            return Err(self.disable(ClientError::LayoutMismatch {
                peer: peer.to_owned(),
                server,
                fallback,
            }));
        }
        self.check_worker(peer, info.worker_id)
    }

    /// Compare the worker ids stamped in a batch a server issued with the fallback's.
    pub(crate) fn check_ids(&self, peer: &str, ids: &[u64]) -> Result<()> {
        for id in [ids.first(), ids.last()].into_iter().flatten() {
            let worker = match self.layout.decompose(*id) {
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
        if worker_id == self.worker_id {
            return Err(self.disable(ClientError::FallbackWorkerConflict {
                peer: peer.to_owned(),
                worker_id,
            }));
        }
        Ok(())
    }

    /// The fallback's worker id.
    pub(crate) fn worker_id(&self) -> u64 {
        self.worker_id
    }
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

/// A layout as one comparable line: the name with `-` read as `_`, field widths from the
/// most significant, the epoch.
fn describe<'a>(name: &str, fields: impl Iterator<Item = (&'a str, u32)>, epoch_ms: u64) -> String {
    let fields: Vec<String> = fields
        .map(|(name, bits)| format!("{name}:{bits}"))
        .collect();
    format!(
        "{} [{}] epoch {epoch_ms} ms",
        name.replace('-', "_"),
        fields.join(" ")
    )
}
