//! [`EtcdOptions`]: where etcd is, which key prefix, the lease, and the reservation that keeps
//! a reused worker id safe.

use std::time::Duration;

use uidgen_core::Layout;
use uidgen_worker::WorkerIdRange;

use crate::error::{EtcdError, Result};

/// The lease's time to live, by default: a dead holder's claim key goes this long after its
/// last keep-alive.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(10);

/// How far ahead of each accepted keep-alive a holder reserves its id, by default: ten minutes
/// (the ZooKeeper assigner's default). A holder cut off from etcd issues that long past its last
/// accepted keep-alive; its id is reused only once that has passed.
pub const DEFAULT_RESERVATION: Duration = Duration::from_secs(10 * 60);

/// The longest a start waits for its clock to pass where the id was last used, by default.
pub const DEFAULT_MAX_START_WAIT: Duration = Duration::from_secs(5);

/// How long one request to etcd may take, by default.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(3);

/// How an [`EtcdWorkerIdAssigner`](crate::EtcdWorkerIdAssigner) takes and keeps a worker id.
///
/// ```
/// use uidgen_etcd::EtcdOptions;
/// let options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen/order", "10.0.0.7:8080");
/// assert_eq!(options.claim_key(7), "/uidgen/order/workers/7");
/// assert_eq!(options.mark_key(7), "/uidgen/order/marks/7");
/// assert_eq!(options.namespace_key(), "/uidgen/order/namespace");
/// assert_eq!(options.report_interval().as_millis(), 3_333);
/// options.validate()?;
/// # Ok::<(), uidgen_etcd::EtcdError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// The cluster's client URLs (`http://host:2379`), tried in turn.
    pub endpoints: Vec<String>,
    /// The key prefix of this namespace: `{prefix}/workers/{id}` (the claims, under a lease)
    /// and `{prefix}/marks/{id}` (each id's reservation, kept after its holder is gone).
    pub prefix: String,
    /// Who holds the id, written into its claim for operators (`host:port`).
    pub holder: String,
    /// The lease's time to live; keep-alives go every third of it.
    pub lease_ttl: Duration,
    /// How far ahead of each accepted keep-alive the id is reserved (rolling forward, never
    /// lowered). The holder stamps nothing past the reservation of its last accepted keep-alive,
    /// so one cut off from etcd stops this long after it, and the id is claimed again only
    /// once it has passed.
    pub reservation: Duration,
    /// The longest a start waits for its clock to pass a free id's reservation; ids reserved
    /// further ahead are left alone.
    pub max_start_wait: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// The worker ids to take (default: every id of the layout).
    pub range: Option<WorkerIdRange>,
}

impl EtcdOptions {
    /// Options with the defaults: a 10 s lease, a ten-minute reservation, 3 s per request.
    pub fn new<S: Into<String>>(
        endpoints: impl IntoIterator<Item = S>,
        prefix: impl Into<String>,
        holder: impl Into<String>,
    ) -> Self {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: prefix.into().trim_end_matches('/').to_owned(),
            holder: holder.into(),
            lease_ttl: DEFAULT_LEASE_TTL,
            reservation: DEFAULT_RESERVATION,
            max_start_wait: DEFAULT_MAX_START_WAIT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            range: None,
        }
    }

    /// How often the holder keeps its lease alive and records its reservation: a third of the
    /// lease's time to live (etcd's own clients renew at a third), so two may fail in a row.
    pub fn report_interval(&self) -> Duration {
        self.lease_ttl / 3
    }

    /// The claim key of `worker_id`: exists while a holder's lease lives.
    pub fn claim_key(&self, worker_id: u64) -> String {
        format!("{}/workers/{worker_id}", self.prefix)
    }

    /// The namespace record's key (`{prefix}/namespace`): written before any id of the
    /// namespace is claimed, it fences the ids whose records etcd may have lost (see
    /// [`NamespaceRecord`](uidgen_worker::NamespaceRecord)).
    pub fn namespace_key(&self) -> String {
        format!("{}/namespace", self.prefix)
    }

    /// The mark key of `worker_id`: the reservation of its last holder, never deleted.
    pub fn mark_key(&self, worker_id: u64) -> String {
        format!("{}/marks/{worker_id}", self.prefix)
    }

    /// `Ok` when these options can keep a worker id; else [`EtcdError::InvalidOptions`] saying
    /// which and why.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_etcd::{EtcdError, EtcdOptions};
    /// let mut options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen", "a:1");
    /// options.reservation = Duration::from_secs(5); // under two keep-alive rounds of 10 s
    /// assert!(matches!(
    ///     options.validate(),
    ///     Err(EtcdError::InvalidOptions { field: "reservation", .. })
    /// ));
    /// ```
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |field: &'static str, reason: String| Err(EtcdError::InvalidOptions { field, reason });
        if self.endpoints.is_empty() || self.endpoints.iter().any(|e| e.trim().is_empty()) {
            return invalid(
                "endpoints",
                "no endpoints: give etcd's client URLs, http://host:2379".into(),
            );
        }
        if let Some(bad) = self
            .endpoints
            .iter()
            .find(|e| !e.starts_with("http://") && !e.starts_with("https://"))
        {
            return invalid(
                "endpoints",
                format!("endpoint {bad:?} is not a URL: write http://{bad} (etcd's JSON gateway)"),
            );
        }
        if self.prefix.is_empty() || self.prefix.chars().any(char::is_whitespace) {
            return invalid(
                "prefix",
                format!(
                    "prefix {:?} must be non-empty and without spaces (keys are {{prefix}}/workers/{{id}})",
                    self.prefix
                ),
            );
        }
        if self.lease_ttl < Duration::from_secs(2) {
            return invalid(
                "lease_ttl",
                format!(
                    "lease ttl {:?} is below 2 s (etcd grants whole seconds)",
                    self.lease_ttl
                ),
            );
        }
        // A holder must get at least two chances to keep its lease inside its reservation, or
        // a single lost keep-alive stops it.
        if self.reservation < self.lease_ttl {
            return invalid(
                "reservation",
                format!(
                    "reservation {:?} must be at least the lease ttl {:?} (three keep-alives)",
                    self.reservation, self.lease_ttl
                ),
            );
        }
        if self.request_timeout.is_zero() {
            return invalid(
                "request_timeout",
                "the request timeout must be positive".into(),
            );
        }
        Ok(())
    }

    /// The range this assigner takes ids from on `layout`: [`range`](Self::range) or the
    /// [default](Self::default_range), checked against it.
    pub fn range_for(&self, layout: &Layout) -> Result<WorkerIdRange> {
        let range = self.range.unwrap_or_else(|| Self::default_range(layout));
        Ok(range.within(layout)?)
    }

    /// The range taken when [`range`](Self::range) is unset: every id of `layout` (etcd keeps
    /// no Vesta split of its own; a service on a Vesta layout sets the server's range).
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_etcd::EtcdOptions;
    /// assert_eq!(EtcdOptions::default_range(&Layout::leaf()?).to_string(), "0-1023");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn default_range(layout: &Layout) -> WorkerIdRange {
        WorkerIdRange::full(layout)
    }
}
