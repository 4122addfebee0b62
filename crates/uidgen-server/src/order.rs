//! Order across restarts (issue 33, item 1): each space's generator runs under an
//! [`OrderFence`], which writes the space's order mark ahead of every time unit stamped and
//! starts each life above the mark every earlier life left, so the first ID of a new life (of
//! any server sharing the mark) sorts above every ID the space issued before. The mark is kept
//! where the fleet meets ([`marks_for`]): the etcd or ZooKeeper the worker ids come from, else
//! the store (`id_order_mark`). docs/OPERATIONS.md, "Order across restarts", says why, what it
//! costs and what it covers.
//!
//! Metrics (`uidgen_order_*{space}`) are read when scraped from the fences opened here.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use parking_lot::Mutex;
use tracing::{info, warn};
use uidgen_core::{Clock, SystemClock};
use uidgen_etcd::EtcdOrderMarks;
use uidgen_store::{Store, StoreError};
use uidgen_worker::{OrderFence, OrderMarkStatus, OrderMarks, OrderOptions, WorkerAssignment};
use uidgen_zk::ZkOrderMarks;

use crate::config::Settings;
use crate::config::generator::GeneratorKind;
use crate::config::worker::AssignerKind;

/// The longest a start waits for its clock to reach the space's order mark: a mark further
/// ahead than this means a clock far behind the fleet's (or a mark written by a host whose
/// clock ran far ahead), which waiting does not fix; the start is refused, saying so.
///
/// ```
/// assert_eq!(uidgen_server::order::MAX_START_WAIT.as_secs(), 900);
/// ```
pub const MAX_START_WAIT: Duration = Duration::from_secs(15 * 60);

/// The fences this process opened, by space, with how long each start waited: what the
/// metrics read. A later start of a space (a test's second server in one process) replaces it.
fn opened() -> &'static Mutex<Vec<(String, OrderFence, Duration)>> {
    static OPENED: OnceLock<Mutex<Vec<(String, OrderFence, Duration)>>> = OnceLock::new();
    OPENED.get_or_init(|| Mutex::new(Vec::new()))
}

/// How far ahead the configured generator may stamp IDs on `assignment`'s worker id: its
/// borrowing bound for the cached generator, tightened by the assignment's fence (a lease
/// borrows a third of its ttl at most), `None` when unbounded; nothing for the others.
fn stamps_ahead(settings: &Settings, assignment: &WorkerAssignment) -> Option<Duration> {
    match settings.generator.kind {
        GeneratorKind::Cached => {
            let unit_ms = settings.layout.unit().millis();
            let own = settings
                .ring
                .max_borrow_units
                .map(|units| units.saturating_mul(unit_ms));
            let fence = assignment
                .fence
                .as_ref()
                .and_then(|fence| fence.max_borrow_ms())
                // The generator's rule: whole units, at least one.
                .map(|ms| (ms / unit_ms).max(1).saturating_mul(unit_ms));
            let bound = match (own, fence) {
                (Some(own), Some(fence)) => Some(own.min(fence)),
                (own, fence) => own.or(fence),
            };
            bound.map(Duration::from_millis)
        }
        GeneratorKind::Default | GeneratorKind::Snowflake => Some(Duration::ZERO),
    }
}

/// Where the order marks are kept: where every server of the fleet meets. A fleet whose
/// worker ids come from etcd or ZooKeeper often gives each host a store of its own (the
/// embedded SQLite), so the marks go in that coordinator, under the assigner's own prefix or
/// namespace; every other assigner shares the store (its worker ids are registered there).
pub fn marks_for(settings: &Settings, store: &Store) -> anyhow::Result<Arc<dyn OrderMarks>> {
    Ok(match settings.worker.assigner {
        AssignerKind::Etcd => {
            let etcd = settings
                .etcd
                .as_ref()
                .context("the settings lack `[etcd]`; build them with Config::settings")?;
            Arc::new(EtcdOrderMarks::new(&etcd.options)?)
        }
        AssignerKind::Zookeeper => {
            let zk = settings
                .zookeeper
                .as_ref()
                .context("the settings lack `[zookeeper]`; build them with Config::settings")?;
            Arc::new(ZkOrderMarks::new(&zk.options))
        }
        AssignerKind::Disposable
        | AssignerKind::Leased
        | AssignerKind::Static
        | AssignerKind::Machine
        | AssignerKind::Statefulset => Arc::new(store.clone()),
    })
}

/// Open the order fence of `space` for a generator on `assignment`'s worker id, waiting (up to
/// [`MAX_START_WAIT`], the server answering `503 starting` meanwhile) until the clock is
/// within the generator's borrowing bound of the space's mark. `None` only for a leased
/// assigner starting from its local cache while the store is down: the start goes on without
/// the order guarantee, saying so.
pub async fn fence_for(
    settings: &Settings,
    store: &Store,
    space: &str,
    assignment: &WorkerAssignment,
) -> anyhow::Result<Option<OrderFence>> {
    let ahead = stamps_ahead(settings, assignment);
    let options = match settings.generator.kind {
        GeneratorKind::Cached => OrderOptions::borrowing(ahead),
        GeneratorKind::Default | GeneratorKind::Snowflake => OrderOptions::not_borrowing(),
    };
    let holder = format!(
        "worker {} ({}), pid {}",
        assignment.worker_id,
        assignment.kind.name(),
        std::process::id()
    );
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let marks = marks_for(settings, store)?;
    let kept_in = marks.kept_in();
    let fence = match OrderFence::open(marks, clock, space, &holder, options).await {
        Ok(fence) => fence,
        Err(error)
            if error
                .downcast_backend::<StoreError>()
                .is_some_and(StoreError::is_unreachable)
                && settings.worker.assigner == AssignerKind::Leased
                && settings.worker.lease.cache_path.is_some() =>
        {
            warn!(space, %error,
                "store unreachable: starting from the lease cache WITHOUT order across restarts \
                 (this life's IDs may sort below earlier lives' until the next start)");
            return Ok(None);
        }
        Err(error) => {
            return Err(error).with_context(|| {
                format!(
                    "cannot read or write the order mark of the ID space `{space}` in {kept_in}"
                )
            });
        }
    };
    let waited = wait_for_mark(&fence, ahead).await?;
    let mut opened = opened().lock();
    opened.retain(|(name, _, _)| name != space);
    opened.push((space.to_owned(), fence.clone(), waited));
    Ok(Some(fence))
}

/// Wait until the clock, plus what the generator may stamp ahead of it, reaches the space's
/// mark: a clock behind the mark (a restart right after a burst borrowed further than the
/// bound allows now, a host clock behind the fleet's). Refused past [`MAX_START_WAIT`].
async fn wait_for_mark(fence: &OrderFence, ahead: Option<Duration>) -> anyhow::Result<Duration> {
    // Unbounded borrowing: the generator starts at the mark whatever the clock says.
    let Some(ahead) = ahead else {
        return Ok(Duration::ZERO);
    };
    let ahead_ms = u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX);
    let mark = fence.start_mark_ms();
    let behind = |now: u64| mark.saturating_sub(now.saturating_add(ahead_ms));
    let first = behind(SystemClock.now_millis());
    if first == 0 {
        return Ok(Duration::ZERO);
    }
    let space = fence.space();
    if first > u64::try_from(MAX_START_WAIT.as_millis()).unwrap_or(u64::MAX) {
        anyhow::bail!(
            "the ID space `{space}` has issued IDs up to {mark} ms since the epoch, {first} ms \
             past what this host's clock allows it to stamp now (its clock plus {ahead_ms} ms \
             of borrowing): this clock is behind the fleet's, or a host's clock ran ahead when \
             it wrote the mark. Waiting longer than {} s is refused: check the clocks (NTP); \
             starting anyway would issue IDs below ones already issued",
            MAX_START_WAIT.as_secs()
        );
    }
    warn!(
        space,
        mark_ms = mark,
        wait_ms = first,
        "the ID space's order mark is ahead of this host's clock; waiting {first} ms before \
         issuing, so that this life's IDs sort above every earlier life's"
    );
    let started = std::time::Instant::now();
    loop {
        let left = behind(SystemClock.now_millis());
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(left.min(1_000))).await;
    }
    let waited = started.elapsed();
    info!(
        space,
        waited_ms = waited.as_millis(),
        "the clock reached the order mark"
    );
    Ok(waited)
}

/// Every order fence this process opened, as the metrics publish it: the space, the fence's
/// status and how long the start waited for the mark.
pub fn readings() -> Vec<(String, OrderMarkStatus, Duration)> {
    opened()
        .lock()
        .iter()
        .map(|(space, fence, waited)| (space.clone(), fence.status(), *waited))
        .collect()
}
