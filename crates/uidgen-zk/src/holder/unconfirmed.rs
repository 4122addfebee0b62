//! A time report whose reply was lost: written or not?
//!
//! `setData` answered with a broken connection (ConnectionLoss, a timeout, an expired
//! session) may have been applied: the server can write the node and lose the connection
//! before its reply arrives. The holder then no longer knows the node's version, and its next
//! report, written at the version it last saw, would fail with BadVersion on its own write and
//! give the id up (the holder would stay unready until restarted, and the id blocked for its
//! reservation). So before writing again the holder reads the node, and:
//!
//! - the node is still at the version it last saw: the write did not happen; report as usual;
//! - the node holds, byte for byte, the report it sent (its ip:port, its own clock reading in
//!   milliseconds, its `reserved_until` and the random number this life writes with every
//!   report, which no other process writes), its czxid is the node's this holder has been
//!   writing, and its version is exactly one past the version this holder last saw: the one
//!   write since is that report, so the node's mzxid is this holder's own write. It is taken
//!   as accepted (the cap rises to its reservation, the cache records the write) and reports
//!   continue from its version;
//! - anything else (another version, other data, another node, no node): someone else wrote
//!   or reclaimed it, or ZooKeeper lost it; the holder takes the id up again only if it is
//!   still this life's to take (`holder.rs`), else the id is lost, as for any report that
//!   fails on the version.
//!
//! Until it is settled the cap stays at the last reservation ZooKeeper is known to hold, so
//! the unconfirmed write never lets the holder stamp past what a successor would read.

use zookeeper_client as zk;

use super::report::Conn;
use super::shared::{Accepted, Shared};

impl Conn {
    /// Settle the unconfirmed report (see the module documentation). `true` when the holder
    /// may report again; `false` when ZooKeeper could not be read (tried again next round) or
    /// the id was lost.
    pub(crate) async fn settle_unconfirmed(&mut self, shared: &Shared) -> bool {
        let (Some(client), Some(sent)) = (self.client.clone(), self.unconfirmed.clone()) else {
            return true;
        };
        let (bytes, stat) = match client.get_data(&shared.node).await {
            Ok(found) => found,
            Err(zk::Error::NoNode) => {
                // Reclaimed, or lost with ZooKeeper's data: `reestablish` tells them apart.
                self.unconfirmed = None;
                return self
                    .reestablish(
                        shared,
                        "its forever node vanished while a report's reply was lost",
                    )
                    .await;
            }
            Err(error) => {
                shared.failed(&error.to_string());
                return false;
            }
        };
        self.unconfirmed = None;
        if Some(stat.version) == self.version && self.czxid == Some(stat.czxid) {
            tracing::info!(
                worker_id = shared.worker_id,
                "the report whose reply was lost was not written; reporting again"
            );
            return true;
        }
        let own_write = bytes == sent.data
            && self.czxid == Some(stat.czxid)
            && self.version.and_then(|v| v.checked_add(1)) == Some(stat.version);
        if !own_write {
            // Another's write, or an older one of this life (ZooKeeper rolled back).
            return self
                .reestablish(
                    shared,
                    "its forever node was written by another while a report's reply was lost",
                )
                .await;
        }
        let accepted = Accepted {
            now_ms: sent.now_ms,
            reserved_ms: sent.reserved_ms,
            stat,
        };
        self.adopt(shared, &accepted);
        shared.record(&accepted);
        tracing::info!(
            worker_id = shared.worker_id,
            version = accepted.stat.version,
            "the report whose reply was lost was written (the node holds it, one version on): \
             continuing from it"
        );
        true
    }
}
