//! ZooKeeper's clock, for a server that compares its own with it while it serves (issue 33,
//! "Clocks watched while serving").
//!
//! ZooKeeper has no call that answers its time, but every write carries it: the leader stamps
//! each transaction with its wall clock (`Time.currentWallTime()` in `PrepRequestProcessor`,
//! in ms) and a node's `mtime` is the stamp of its last write. So a reading writes this
//! process's own node, `/snowflake/{name}/clock/{ip}:{port}` (ephemeral, under a persistent
//! `clock` parent made when missing), and takes the `mtime` of the reply: the leader's clock at
//! an instant between sending the write and its answer, to the millisecond. The offset is
//! measured from the midpoint of that round trip; its uncertainty is half the round trip plus
//! the millisecond `mtime` truncates.
//!
//! The node is beside Leaf's `forever/`, not in it: Leaf and every listing of ours read
//! `forever/`, `ids/` and `live/` only, so a clock node is never taken for a worker id.
//!
//! The session is kept from one reading to the next (one write per reading, no reconnect); it
//! is opened again only once ZooKeeper ended it (expired, or closed).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::task::JoinHandle;
use zookeeper_client as zk;

use crate::error::{Result, ZkError};
use crate::options::ZkOptions;
use crate::session::{EPHEMERAL, PERSISTENT, connect, zk_error};
use crate::tree::Tree;

/// The resolution of `mtime`, which truncates to the millisecond.
const RESOLUTION_MS: u64 = 1;

/// One reading of ZooKeeper's clock (its leader's) against this host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZkClockReading {
    /// ZooKeeper's clock minus this host's, ms (positive: this host is behind).
    pub offset_ms: i64,
    /// How far the true offset may be from `offset_ms`: half the round trip plus the
    /// millisecond of `mtime`'s resolution.
    pub uncertainty_ms: u64,
}

/// Reads ZooKeeper's clock from the `mtime` of a write to this process's clock node, over
/// one session kept between readings.
///
/// ```no_run
/// # async fn demo() -> uidgen_zk::Result<()> {
/// let options = uidgen_zk::ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
/// let clock = uidgen_zk::ZkClock::new(&options)?;
/// let reading = clock.read().await?;
/// println!("ZooKeeper is {} ms ahead, ± {} ms", reading.offset_ms, reading.uncertainty_ms);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ZkClock {
    connect: String,
    session_timeout: Duration,
    /// `/snowflake/{name}/clock`.
    dir: String,
    /// `/snowflake/{name}/clock/{ip}:{port}`.
    node: String,
    /// Held across the awaits of one reading: readings take turns, and a reading cancelled
    /// while the session opens leaves the opening running for the next one.
    session: tokio::sync::Mutex<Session>,
}

/// The session the readings share.
#[derive(Debug)]
enum Session {
    /// None yet, or the last one could not be opened.
    Closed,
    /// Being opened in a task of its own, so that a reading bounded tighter than a connect
    /// does not cancel it.
    Opening(JoinHandle<Result<zk::Client>>),
    /// Open (or reconnecting by itself after a lost connection).
    Open(zk::Client),
}

impl ZkClock {
    /// A reader for `options`' ensemble and namespace, writing the node of `options`' ip:port.
    /// Connects on the first [`read`](Self::read); options that [`ZkOptions::validate`]
    /// refuses are refused here too.
    pub fn new(options: &ZkOptions) -> Result<Self> {
        options.validate()?;
        let tree = Tree::new(options.root());
        Ok(Self {
            connect: options.connect.clone(),
            session_timeout: options.session_timeout,
            dir: tree.clock_dir(),
            node: tree.clock(&options.listen_address()),
            session: tokio::sync::Mutex::new(Session::Closed),
        })
    }

    /// The node each reading writes (`/snowflake/{name}/clock/{ip}:{port}`, under the
    /// connect string's chroot).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// One reading: `Unreachable` or `ZooKeeper` when no session can be opened or the write
    /// fails.
    ///
    /// Cancel safety: a reading dropped while the session opens leaves it opening for the
    /// next; one dropped during its write leaves at most that write done, unread.
    pub async fn read(&self) -> Result<ZkClockReading> {
        let mut session = self.session.lock().await;
        let client = self.open(&mut session).await?;
        let data = self.write(&client).await;
        if client.state().is_terminated() {
            // Expired or closed: the next reading opens a new session (and node).
            *session = Session::Closed;
        }
        data
    }

    /// The session, opened when there is none or ZooKeeper ended the last.
    async fn open(&self, session: &mut Session) -> Result<zk::Client> {
        loop {
            match session {
                Session::Open(client) if !client.state().is_terminated() => {
                    return Ok(client.clone());
                }
                Session::Open(_) | Session::Closed => {
                    let (connect, timeout) = (self.connect.clone(), self.session_timeout);
                    *session = Session::Opening(tokio::spawn(async move {
                        connect_to(&connect, timeout).await
                    }));
                }
                Session::Opening(task) => {
                    let opened = task.await;
                    // The task is done: it is never awaited again.
                    *session = Session::Closed;
                    match opened {
                        Ok(Ok(client)) => *session = Session::Open(client),
                        Ok(Err(error)) => return Err(error),
                        Err(join) => {
                            return Err(ZkError::Unreachable {
                                connect: self.connect.clone(),
                                reason: format!("opening the session failed: {join}"),
                            });
                        }
                    }
                }
            }
        }
    }

    /// Write the node (creating it in this session when missing) and measure.
    async fn write(&self, client: &zk::Client) -> Result<ZkClockReading> {
        let error = |action, source| zk_error(&self.connect, action, source);
        for _ in 0..2 {
            let t0 = local_ms();
            let written = client
                .set_data(&self.node, t0.to_string().as_bytes(), None)
                .await;
            let t1 = local_ms();
            match written {
                Ok(stat) => return Ok(measure(t0, stat.mtime, t1)),
                Err(zk::Error::NoNode) => {}
                Err(source) => return Err(error("writing its clock node", source)),
            }
            // First reading of this session, or a ZooKeeper that lost its data.
            client
                .mkdir(&self.dir, &PERSISTENT)
                .await
                .map_err(|source| error("creating the clock nodes' parent", source))?;
            match client.create(&self.node, b"", &EPHEMERAL).await {
                Ok(_) | Err(zk::Error::NodeExists) => {}
                Err(source) => return Err(error("creating its clock node", source)),
            }
        }
        // Created, then gone before the write: another session deletes it as fast.
        Err(error("writing its clock node", zk::Error::NoNode))
    }
}

impl Drop for ZkClock {
    fn drop(&mut self) {
        // An opening nobody will read: its session would only be closed once opened.
        if let Session::Opening(task) = self.session.get_mut() {
            task.abort();
        }
    }
}

/// [`connect`], as a task's owned future.
async fn connect_to(address: &str, session_timeout: Duration) -> Result<zk::Client> {
    connect(address, session_timeout).await
}

/// The reading of an `mtime` of `mtime_ms` answered to a write sent at `t0_ms` and answered at
/// `t1_ms` (this host's clock).
fn measure(t0_ms: i64, mtime_ms: i64, t1_ms: i64) -> ZkClockReading {
    let round_trip = t1_ms.saturating_sub(t0_ms).max(0);
    let midpoint = t0_ms.saturating_add(round_trip / 2);
    ZkClockReading {
        offset_ms: mtime_ms.saturating_sub(midpoint),
        uncertainty_ms: round_trip.unsigned_abs().div_ceil(2) + RESOLUTION_MS,
    }
}

/// This host's clock in ms since the Unix epoch (before 1970 reads as negative), signed as
/// `mtime` is.
fn local_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_takes_the_round_trip_s_midpoint_and_half_of_it_as_doubt() {
        // Written at 10.000 s, answered at 10.041 s, stamped 12.020 s: ZooKeeper ~2 s ahead.
        let reading = measure(10_000, 12_020, 10_041);
        assert_eq!(reading.offset_ms, 2_000);
        assert_eq!(reading.uncertainty_ms, 22);
        // This host ahead: negative.
        assert_eq!(measure(10_000, 9_000, 10_000).offset_ms, -1_000);
        // A clock stepped back mid-call reads as no round trip rather than a negative one.
        assert_eq!(measure(10_000, 10_000, 9_990).uncertainty_ms, 1);
    }

    #[test]
    fn options_validate_refuses_are_refused_and_the_node_is_named_after_ip_port() {
        let options = ZkOptions::new("127.0.0.1:2181", "a/b", "10.0.0.7", "8080");
        assert!(matches!(
            ZkClock::new(&options),
            Err(ZkError::InvalidOptions(_))
        ));
        let options = ZkOptions::new("127.0.0.1:2181/x", "order", "10.0.0.7", "8080");
        let clock = ZkClock::new(&options).ok();
        assert_eq!(
            clock.as_ref().map(ZkClock::node),
            Some("/snowflake/order/clock/10.0.0.7:8080")
        );
    }
}
