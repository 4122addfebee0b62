//! [`ZkOptions`]: where the ensemble is, which namespace, how often to report, and the bounds
//! that keep a reused worker id safe.

use std::path::PathBuf;
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_worker::WorkerIdRange;

use crate::error::{Result, ZkError};

/// Leaf reports its time every 3 s (`SnowflakeZookeeperHolder.scheduledUploadData`).
pub const DEFAULT_REPORT_INTERVAL: Duration = Duration::from_secs(3);

/// The most [`ZkOptions::reservation`] may be, by default: a day.
pub const DEFAULT_MAX_OUTAGE: Duration = Duration::from_secs(24 * 60 * 60);

/// How far ahead of each report a holder reserves its id, by default: ten minutes. A holder
/// cut off from ZooKeeper issues that long past its last accepted report; a restart without
/// the cache, or a reclaim, may take the id that long after its holder went silent.
pub const DEFAULT_RESERVATION: Duration = Duration::from_secs(10 * 60);

/// The most a clock may be off from the other live holders' average, by default.
pub const DEFAULT_MAX_PEER_SKEW: Duration = Duration::from_secs(5);

/// The session timeout asked of ZooKeeper, by default (the server clamps it to 2 to 20 ticks).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest a start waits for its clock to pass where the id was last used, by default: a
/// fast restart's few seconds.
pub const DEFAULT_MAX_START_WAIT: Duration = Duration::from_secs(5);

/// The longest `max_outage` accepted: 30 days. A longer reservation only delays every reuse.
pub const MAX_OUTAGE_LIMIT: Duration = Duration::from_secs(30 * 24 * 60 * 60);

/// Vesta's split of a 10-bit machine id between its release modes: the embedded library and
/// CLI take 0–923, the server (HTTP/RPC) 924–1023.
pub const VESTA_SERVER_RANGE: (u64, u64) = (924, 1023);

/// Which of Vesta's release modes a process runs in: it picks the default machine-id range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseMode {
    /// The library or the command line, in the caller's process: ids 0–923 on a 10-bit field.
    Embedded,
    /// The HTTP/RPC service: ids 924–1023 on a 10-bit field.
    Server,
}

impl ReleaseMode {
    /// Vesta's default range for this mode on `layout`: the split above when the layout has
    /// exactly 10 worker bits (1,024 ids), every id of the layout otherwise.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_zk::ReleaseMode;
    /// let leaf = Layout::leaf()?;
    /// assert_eq!(ReleaseMode::Server.default_range(&leaf).to_string(), "924-1023");
    /// assert_eq!(ReleaseMode::Embedded.default_range(&leaf).to_string(), "0-923");
    /// let range = ReleaseMode::Server.default_range(&Layout::baidu_default()?);
    /// assert_eq!(range.to_string(), "0-4194303");
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn default_range(self, layout: &Layout) -> WorkerIdRange {
        let full = WorkerIdRange::full(layout);
        let (server_low, server_high) = VESTA_SERVER_RANGE;
        if layout.max_worker_id() != server_high {
            return full;
        }
        let split = match self {
            Self::Embedded => WorkerIdRange::new(0, server_low - 1),
            Self::Server => WorkerIdRange::new(server_low, server_high),
        };
        split.unwrap_or(full)
    }
}

/// How a [`ZooKeeperWorkerIdAssigner`](crate::ZooKeeperWorkerIdAssigner) takes and keeps a
/// worker id.
///
/// ```
/// use uidgen_zk::ZkOptions;
/// let options = ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
/// assert_eq!(options.root(), "/snowflake/order");
/// assert_eq!(options.cache_file.to_str(), Some("uidgen-zk-order-8080.state"));
/// options.validate()?;
/// # Ok::<(), uidgen_zk::ZkError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkOptions {
    /// The ensemble, with an optional chroot: `zk1:2181,zk2:2181/uidgen`. A missing chroot
    /// node is created.
    pub connect: String,
    /// Leaf's `leaf.name`: the namespace, `/snowflake/{name}`.
    pub name: String,
    /// This process's IP as written into its forever node (Leaf: the first non-loopback IPv4).
    pub ip: String,
    /// This process's port as written into its forever node (Leaf: the HTTP port). A restart
    /// with the same ip:port keeps its worker id.
    pub port: String,
    /// The session timeout asked of ZooKeeper; a start that cannot connect gives up after it.
    pub session_timeout: Duration,
    /// How often the holder reports its time (Leaf: 3 s).
    pub report_interval: Duration,
    /// The most this clock may differ from the other live holders' average report at
    /// start-up, beyond the staleness of their reports.
    pub max_peer_skew: Duration,
    /// How far ahead of each report the holder reserves its id (`reserved_until = now +
    /// reservation`, rolling forward with every report, never lowered). The holder stamps
    /// nothing past the reservation of its last accepted report, so one cut off from
    /// ZooKeeper stops this long after it; a restart on the same ip:port without the cache,
    /// and a reclaim, take the id only once it has passed.
    pub reservation: Duration,
    /// The most `reservation` may be: the longest any holder may issue without a report
    /// ZooKeeper accepted.
    pub max_outage: Duration,
    /// The longest a start waits for its clock to pass where the id was last used.
    pub max_start_wait: Duration,
    /// Free dead holders' ids in the background after this long without a report (opt-in;
    /// at least `reservation`).
    pub auto_reclaim_after: Option<Duration>,
    /// The local state file: the worker id, its last accepted report and the reserved-until
    /// mark, synced before any ID past the mark is issued.
    pub cache_file: PathBuf,
    /// The worker ids to take (default: [`ReleaseMode::Embedded`]'s range of the layout).
    pub range: Option<WorkerIdRange>,
}

impl ZkOptions {
    /// Options with the defaults: reports every 3 s, a ten-minute reservation (at most a day),
    /// a 5 s peer skew, the cache file `uidgen-zk-{name}-{port}.state` in the working directory.
    pub fn new(
        connect: impl Into<String>,
        name: impl Into<String>,
        ip: impl Into<String>,
        port: impl Into<String>,
    ) -> Self {
        let (name, port) = (name.into(), port.into());
        Self {
            connect: connect.into(),
            cache_file: PathBuf::from(format!("uidgen-zk-{name}-{port}.state")),
            name,
            ip: ip.into(),
            port,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            report_interval: DEFAULT_REPORT_INTERVAL,
            max_peer_skew: DEFAULT_MAX_PEER_SKEW,
            reservation: DEFAULT_RESERVATION,
            max_outage: DEFAULT_MAX_OUTAGE,
            max_start_wait: DEFAULT_MAX_START_WAIT,
            auto_reclaim_after: None,
            range: None,
        }
    }

    /// The namespace's root: `/snowflake/{name}` (relative to the connect string's chroot).
    pub fn root(&self) -> String {
        format!("/snowflake/{}", self.name)
    }

    /// This process's forever-node prefix, `{ip}:{port}` (Leaf's `listenAddress`).
    pub fn listen_address(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    /// `Ok` when these options can keep a worker id; else [`ZkError::InvalidOptions`] (or
    /// [`ZkError::ReclaimThreshold`]) saying which and why.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_zk::{ZkError, ZkOptions};
    /// let mut options = ZkOptions::new("127.0.0.1:2181", "order", "10.0.0.7", "8080");
    /// options.auto_reclaim_after = Some(Duration::from_secs(60)); // below the reservation
    /// assert!(matches!(options.validate(), Err(ZkError::ReclaimThreshold { .. })));
    /// ```
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(ZkError::InvalidOptions(reason));
        if self.connect.trim().is_empty() {
            return invalid(
                "the connect string is empty: give host:port[,host:port][/chroot]".into(),
            );
        }
        for (what, value) in [("name", &self.name), ("ip", &self.ip), ("port", &self.port)] {
            if value.is_empty() || value.contains('/') || value.chars().any(char::is_whitespace) {
                return invalid(format!(
                    "{what} {value:?} must be non-empty, without `/` or spaces (it is part of a \
                     node path)"
                ));
            }
        }
        if self.report_interval.is_zero() {
            return invalid("the report interval must be positive".into());
        }
        if self.session_timeout < Duration::from_secs(1) {
            return invalid(format!(
                "session timeout {:?} is below a second",
                self.session_timeout
            ));
        }
        if self.max_outage > MAX_OUTAGE_LIMIT {
            return invalid(format!(
                "max_outage {:?} is longer than the longest accepted, {MAX_OUTAGE_LIMIT:?}",
                self.max_outage
            ));
        }
        // A holder must get at least two chances to report inside its reservation, or a
        // single lost report stops it.
        if self.reservation < self.report_interval.saturating_mul(2) {
            return invalid(format!(
                "reservation {:?} must be at least twice the report interval {:?}",
                self.reservation, self.report_interval
            ));
        }
        if self.reservation > self.max_outage {
            return invalid(format!(
                "reservation {:?} is longer than max_outage {:?}, the longest a holder may issue \
                 without ZooKeeper: shorten the reservation or raise max_outage",
                self.reservation, self.max_outage
            ));
        }
        if self.max_peer_skew.is_zero() {
            return invalid("max_peer_skew must be positive".into());
        }
        if let Some(threshold) = self.auto_reclaim_after {
            check_threshold(threshold, self.reservation)?;
        }
        Ok(())
    }

    /// The range this assigner takes ids from on `layout`: [`range`](Self::range), or the
    /// embedded default ([`ReleaseMode::Embedded`]), checked against the layout.
    pub fn range_for(&self, layout: &Layout) -> Result<WorkerIdRange> {
        let range = self
            .range
            .unwrap_or_else(|| ReleaseMode::Embedded.default_range(layout));
        Ok(range.within(layout)?)
    }
}

/// A reclaim threshold must cover the reservation (see `reclaim.rs` for why).
pub(crate) fn check_threshold(threshold: Duration, reservation: Duration) -> Result<()> {
    if threshold < reservation {
        return Err(ZkError::ReclaimThreshold {
            threshold_secs: threshold.as_secs(),
            reservation_secs: reservation.as_secs(),
        });
    }
    Ok(())
}
