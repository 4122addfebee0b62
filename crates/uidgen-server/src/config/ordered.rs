//! `[ordered]`: how the servers of a cluster lead and forward ordered tags (issue 35;
//! docs/OPERATIONS.md, "Ordered tags"). The leading and forwarding are [`crate::ordered`].

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// The most a leader's clock may run fast against the database's over one lease, as a share
/// of the lease: the leader stops issuing this much before its lease ends by its own clock.
/// NTP keeps clocks' rates within 0.05%; 10% is a margin for a VM paused and a clock slewed.
pub const DRIFT_SHARE: f64 = 0.1;

/// `[ordered]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrderedConfig {
    /// How long a leader's lease runs, by the database's clock, in milliseconds (default
    /// 3,000): how long an ordered tag may go unserved when its leader dies.
    pub lease_ms: u64,
    /// How long calls wait for a leader, forwarding and retrying included, in milliseconds
    /// (default 5,000); past it they fail with 503 `ordered_leader_unavailable`.
    pub wait_ms: u64,
    /// Where the other servers reach this one's gRPC port to forward calls: a URL such as
    /// `http://10.0.0.7:9090` (default: `grpc_listen`, its host name when it listens on every
    /// address). With gRPC off and no URL here, the others cannot forward to this server: while
    /// it leads a tag, it serves its own callers only.
    pub advertise: String,
    /// Tags marked ordered at start, created (step 1,000) when missing. Set in the file only.
    /// Taking a tag off the list does not unmark it: `PUT /v1/admin/segments/{tag}` with
    /// `"ordered": false` does.
    pub tags: Vec<String>,
}

impl Default for OrderedConfig {
    fn default() -> Self {
        Self {
            lease_ms: 3_000,
            wait_ms: 5_000,
            advertise: String::new(),
            tags: Vec::new(),
        }
    }
}

/// The `[ordered]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["ordered", "lease_ms"], Kind::Int),
    (&["ordered", "wait_ms"], Kind::Int),
    (&["ordered", "advertise"], Kind::Str),
];

/// `[ordered]` as the service runs it.
///
/// ```
/// use std::time::Duration;
/// use uidgen_server::config::ordered::OrderedSettings;
/// let settings = OrderedSettings::default();
/// assert_eq!(settings.lease, Duration::from_secs(3));
/// // Stops issuing 10% + 100 ms before its lease ends, renews three times a lease.
/// assert_eq!(settings.own_lease(), Duration::from_millis(2_600));
/// assert_eq!(settings.renew_every(), Duration::from_secs(1));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderedSettings {
    /// The lease, by the database's clock.
    pub lease: Duration,
    /// How long a call waits for a leader.
    pub wait: Duration,
    /// `ordered.advertise`: this server's gRPC URL for the others; `None`: the bound gRPC
    /// address ([`address`](Self::address)).
    pub advertise: Option<String>,
    /// gRPC runs over TLS (`[tls]`): the derived URL is `https://`.
    pub tls: bool,
    /// `ordered.tags`: marked ordered at start.
    pub tags: Vec<String>,
}

impl Default for OrderedSettings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(3),
            wait: Duration::from_secs(5),
            advertise: None,
            tls: false,
            tags: Vec::new(),
        }
    }
}

impl OrderedSettings {
    /// How long after sending a renewal the leader still issues, by its own monotonic clock:
    /// the lease less [`DRIFT_SHARE`] of it and 100 ms, so that it has stopped before the
    /// database's clock lets a successor begin (docs/OPERATIONS.md has the argument).
    pub fn own_lease(&self) -> Duration {
        self.lease
            .mul_f64(1.0 - DRIFT_SHARE)
            .saturating_sub(Duration::from_millis(100))
    }

    /// The store sessions' idle-in-transaction timeout
    /// ([`StoreOptions::idle_transaction_timeout`](uidgen_store::StoreOptions)): two thirds of
    /// the lease, between 1 s and the store's default of 2 s. A leader frozen inside a
    /// transaction holds the lease row until the database ends its session, so with a lease
    /// under 3 s the default alone would let that failover outlast the lease.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_server::config::ordered::OrderedSettings;
    /// let lease = |ms| OrderedSettings { lease: Duration::from_millis(ms), ..Default::default() };
    /// assert_eq!(lease(3_000).store_idle_timeout(), Duration::from_secs(2));
    /// assert_eq!(lease(1_500).store_idle_timeout(), Duration::from_secs(1));
    /// assert_eq!(lease(1_000).store_idle_timeout(), Duration::from_secs(1));
    /// assert_eq!(lease(60_000).store_idle_timeout(), Duration::from_secs(2));
    /// ```
    pub fn store_idle_timeout(&self) -> Duration {
        let default = uidgen_store::StoreOptions::default().idle_transaction_timeout;
        (self.lease * 2 / 3).clamp(Duration::from_secs(1), default)
    }

    /// How often the leader renews, and the others look for a leader: a third of the lease,
    /// so that two renewals may fail before the lease is at risk.
    pub fn renew_every(&self) -> Duration {
        self.lease / 3
    }

    /// How long after a tag is marked before its first term may begin: two of the other
    /// servers' looks at the list of ordered tags, so that each has stopped serving the tag
    /// from its own segments.
    pub fn settle(&self) -> Duration {
        self.renew_every() * 2
    }
}

impl OrderedConfig {
    /// The settings.
    pub(crate) fn settings(&self, tls: bool) -> Result<OrderedSettings, ConfigError> {
        if !(1_000..=600_000).contains(&self.lease_ms) {
            return Err(invalid(
                "ordered.lease_ms",
                format!(
                    "{} is outside 1,000 to 600,000: a shorter lease leaves no room for the \
                     margin the leader keeps (10% + 100 ms)",
                    self.lease_ms
                ),
            ));
        }
        if self.wait_ms == 0 || self.wait_ms > 600_000 {
            return Err(invalid(
                "ordered.wait_ms",
                format!("{} is outside 1 to 600,000", self.wait_ms),
            ));
        }
        let url = self.advertise.trim();
        if !url.is_empty()
            && (!(url.starts_with("http://") || url.starts_with("https://"))
                || url.len() > uidgen_store::MAX_HOLDER_LEN)
        {
            return Err(invalid(
                "ordered.advertise",
                format!(
                    "expected an http:// or https:// URL of at most {} bytes",
                    uidgen_store::MAX_HOLDER_LEN
                ),
            ));
        }
        for tag in &self.tags {
            uidgen_segment::validate_tag(tag)
                .map_err(|e| invalid("ordered.tags", e.to_string()))?;
        }
        Ok(OrderedSettings {
            lease: Duration::from_millis(self.lease_ms),
            wait: Duration::from_millis(self.wait_ms),
            advertise: (!url.is_empty()).then(|| url.to_owned()),
            tls,
            tags: self.tags.clone(),
        })
    }
}

impl OrderedSettings {
    /// The URL the other servers forward to: `ordered.advertise`, else the bound gRPC address
    /// `grpc` (this host's name when it listens on every address); `None` with gRPC off.
    ///
    /// ```
    /// use uidgen_server::config::ordered::OrderedSettings;
    /// let settings = OrderedSettings::default();
    /// let bound = "127.0.0.1:9090".parse().ok();
    /// assert_eq!(settings.address(bound).as_deref(), Some("http://127.0.0.1:9090"));
    /// assert_eq!(settings.address(None), None);
    /// ```
    pub fn address(&self, grpc: Option<SocketAddr>) -> Option<String> {
        if let Some(url) = &self.advertise {
            return Some(url.clone());
        }
        let grpc = grpc?;
        let scheme = if self.tls { "https" } else { "http" };
        if grpc.ip().is_unspecified() {
            let host = hostname()?;
            return Some(format!("{scheme}://{host}:{}", grpc.port()));
        }
        Some(format!("{scheme}://{grpc}"))
    }
}

/// This host's name, from the kernel (`/proc/sys/kernel/hostname`) or `HOSTNAME`.
pub(crate) fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn ordered_has_defaults_reads_its_section_and_variables_and_refuses_bad_values() {
        let settings = parse("", &[]).unwrap().settings().unwrap().ordered;
        assert_eq!(settings, super::OrderedSettings::default());
        let file = "[ordered]\nlease_ms = 6000";
        let longer = parse(file, &[]).unwrap().settings().unwrap().ordered;
        assert_eq!(
            (longer.lease, longer.advertise),
            (Duration::from_secs(6), None)
        );
        let env = parse(
            "",
            &[
                ("UIDGEN_ORDERED_ADVERTISE", "http://10.0.0.7:9090"),
                ("UIDGEN_ORDERED_WAIT_MS", "250"),
            ],
        )
        .unwrap()
        .settings()
        .unwrap()
        .ordered;
        assert_eq!(env.advertise.as_deref(), Some("http://10.0.0.7:9090"));
        let listed = parse("[ordered]\ntags = [\"orders\", \"ledger\"]", &[]).unwrap();
        assert_eq!(
            listed.settings().unwrap().ordered.tags,
            ["orders", "ledger"]
        );
        assert_eq!(env.wait, Duration::from_millis(250));
        let cases: &[Refusal] = &[
            ("[ordered]\nlease_ms = 10", &[], "`ordered.lease_ms`"),
            ("[ordered]\nwait_ms = 0", &[], "`ordered.wait_ms`"),
            (
                "[ordered]\nadvertise = \"10.0.0.7\"",
                &[],
                "`ordered.advertise`",
            ),
            ("[ordered]\nterm = 1", &[], "term"),
            ("[ordered]\ntags = [\"no spaces\"]", &[], "`ordered.tags`"),
        ];
        assert_refused(cases);
    }
}
