//! A start from the local cache while ZooKeeper is down.
//!
//! The guarantee this file keeps, from the `zookeeper` row of docs/OPERATIONS.md ("Why IDs
//! never repeat"; the whole argument is in `assigner.rs`): **a start from the cache continues
//! the same life's lease.** Its `floor` is the cache's mark, and its limit the cap the cache
//! recorded (an `R` ZooKeeper accepted). When ZooKeeper answers, the holder checks the node is
//! still at the write the cache recorded (`holder/report.rs`); if not, the id is lost and the
//! fence closes (anyone who wrote it started above `R`, so nothing was shared meanwhile).

use std::sync::Arc;

use uidgen_core::Layout;
use uidgen_worker::{CachedWorker, WorkerIdRange, read_cache};

use super::{ZkAssignment, ZkSource, ZooKeeperWorkerIdAssigner};
use crate::error::{Result, ZkError};
use crate::holder::ZkHolder;
use crate::holder::report::Conn;
use crate::holder::shared::Shared;
use crate::holder::shared::holder_prefix;
use crate::tree::{Tree, forever_name};

impl ZooKeeperWorkerIdAssigner {
    /// ZooKeeper is unreachable: the local cache, else refuse.
    pub(super) async fn start_without(
        &self,
        layout: &Layout,
        range: WorkerIdRange,
        down: &ZkError,
    ) -> Result<ZkAssignment> {
        let options = &self.core.options;
        let refuse = |reason: String| ZkError::NoUsableCache {
            connect: options.connect.clone(),
            zk_reason: down.to_string(),
            cache: options.cache_file.display().to_string(),
            reason,
        };
        let (cached, czxid, mzxid) = self.usable_cache(layout, range).map_err(refuse)?;
        let worker_id = cached.worker_id;
        let cap = cached.lease_expires_ms.unwrap_or(0);
        let mark = self.open_mark(worker_id, layout, false)?;
        self.wait_for_clock(
            worker_id,
            cached.until_ms,
            "the local cache's reserved-until mark",
        )
        .await?;
        let tree = Tree::new(options.root());
        let node = tree.forever(&forever_name(&options.listen_address(), worker_id));
        let shared = Shared::new(
            worker_id,
            options.clone(),
            tree,
            node,
            Arc::clone(&self.core.clock),
            mark,
            (cached.until_ms, cap),
        );
        shared.mark.reserve(self.core.clock.now_millis())?;
        shared.mark.start_refresher()?;
        tracing::warn!(
            worker_id,
            cache = %options.cache_file.display(),
            mark_ms = cached.until_ms,
            issuing_until_ms = cap,
            "ZooKeeper unreachable at start-up: started from the local cache (this clock is past \
             its mark); reports begin when ZooKeeper answers, and IDs stop at issuing_until_ms \
             without one"
        );
        let holder = ZkHolder::start(shared, Conn::new(None, None, Some((czxid, mzxid))));
        Ok(self.assignment(holder, ZkSource::LocalCache))
    }

    /// The cache, if it can stand in for ZooKeeper now: it names this namespace and address,
    /// an id of the range, and a cap not yet reached. `Err` says why not.
    fn usable_cache(
        &self,
        layout: &Layout,
        range: WorkerIdRange,
    ) -> std::result::Result<(CachedWorker, i64, i64), String> {
        let options = &self.core.options;
        let cached =
            read_cache(&options.cache_file).map_err(|e| format!("it cannot be read ({e})"))?;
        let prefix = holder_prefix(options);
        let Some((czxid, mzxid)) = cached
            .holder
            .as_deref()
            .and_then(|h| h.strip_prefix(&prefix))
            .and_then(|zxids| zxids.split_once(':'))
            .and_then(|(c, m)| Some((c.parse().ok()?, m.parse().ok()?)))
        else {
            return Err(format!("it records no ZooKeeper worker id of {prefix}…"));
        };
        let id = cached.worker_id;
        if id > layout.max_worker_id() || !range.contains(id) {
            return Err(format!("its worker id {id} is outside the range {range}"));
        }
        let now = self.core.clock.now_millis();
        match cached.lease_expires_ms {
            Some(cap) if now < cap => Ok((cached, czxid, mzxid)),
            Some(cap) => Err(format!(
                "its reservation ended at {cap} ms (`reservation` past its last accepted report); \
                 the id may have been reused or reclaimed since"
            )),
            None => Err("it records no reservation".to_owned()),
        }
    }
}
