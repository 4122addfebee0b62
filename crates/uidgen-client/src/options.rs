//! [`ClientBuilder`]: peers, timeouts, retries, buffer sizes and the optional fallback.

use std::time::Duration;

use crate::error::{Result, invalid};
use crate::fallback::FallbackOptions;
use crate::peers::CallPolicy;
use crate::transport::Peer;

/// Builds a [`Client`](crate::Client). Every setting has a default but the peers.
///
/// ```
/// use std::time::Duration;
/// use uidgen_client::{ClientBuilder, Peer};
/// let peers = [Peer::grpc("http://10.0.0.5:9090"), Peer::http("http://10.0.0.6:8080")];
/// let builder = ClientBuilder::new(peers)
///     .timeout(Duration::from_millis(500))
///     .buffer_size(1 << 14);
/// assert_eq!(builder.peers().len(), 2);
/// ```
#[derive(Clone)]
pub struct ClientBuilder {
    pub(crate) peers: Vec<Peer>,
    pub(crate) timeout: Duration,
    pub(crate) attempts: Option<usize>,
    pub(crate) backoff: Duration,
    pub(crate) max_backoff: Duration,
    pub(crate) eject_for: Duration,
    pub(crate) buffer_size: usize,
    pub(crate) low_water_percent: u32,
    pub(crate) batch_size: u32,
    pub(crate) lease_size: u64,
    pub(crate) segment_buffer_size: usize,
    pub(crate) wait: Duration,
    pub(crate) probe_interval: Duration,
    pub(crate) fallback: Option<FallbackOptions>,
    pub(crate) token: Option<String>,
    pub(crate) tls_root: Option<Vec<u8>>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("peers", &self.peers)
            .field("timeout", &self.timeout)
            .field("attempts", &self.attempts)
            .field("buffer_size", &self.buffer_size)
            .field("batch_size", &self.batch_size)
            .field("lease_size", &self.lease_size)
            .field("fallback", &self.fallback)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls_root", &self.tls_root.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// A client of `peers`, tried round-robin.
    pub fn new(peers: impl IntoIterator<Item = Peer>) -> Self {
        Self {
            peers: peers.into_iter().collect(),
            timeout: Duration::from_secs(1),
            attempts: None,
            backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(200),
            eject_for: Duration::from_secs(1),
            buffer_size: 8192,
            low_water_percent: 50,
            batch_size: 4096,
            lease_size: 2000,
            segment_buffer_size: 4096,
            wait: Duration::from_secs(3),
            probe_interval: Duration::from_millis(250),
            fallback: None,
            token: None,
            tls_root: None,
        }
    }

    /// The peers.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// The longest one call on one peer may take (default 1 s).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many tries one call makes, each on the next peer (default: twice the peers, at
    /// least 3).
    #[must_use]
    pub fn attempts(mut self, attempts: usize) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// The pause before the second try, doubled before each further one up to `max`
    /// (defaults 10 ms and 200 ms). Each pause is slept as a random part of it, from half to
    /// all, so that clients that lost a server together do not retry in lockstep.
    #[must_use]
    pub fn backoff(mut self, first: Duration, max: Duration) -> Self {
        self.backoff = first;
        self.max_backoff = max;
        self
    }

    /// How long a failed peer is skipped before it is probed again (default 1 s).
    #[must_use]
    pub fn eject_for(mut self, eject_for: Duration) -> Self {
        self.eject_for = eject_for;
        self
    }

    /// The local ID buffer's size, a power of two (default 8192).
    #[must_use]
    pub fn buffer_size(mut self, size: usize) -> Self {
        self.buffer_size = size;
        self
    }

    /// Refill the buffers when fewer than this % of their slots hold numbers (default 50).
    #[must_use]
    pub fn low_water_percent(mut self, percent: u32) -> Self {
        self.low_water_percent = percent;
        self
    }

    /// The most IDs one batch call asks for (default 4096; keep it at most the servers'
    /// `batch_cap`).
    #[must_use]
    pub fn batch_size(mut self, size: u32) -> Self {
        self.batch_size = size;
        self
    }

    /// How many numbers one segment lease asks for (default 2000; at most the servers'
    /// largest lease) and each tag's buffer size (a power of two, default 4096).
    #[must_use]
    pub fn segments(mut self, lease_size: u64, buffer_size: usize) -> Self {
        self.lease_size = lease_size;
        self.segment_buffer_size = buffer_size;
        self
    }

    /// The longest a call waits for an empty buffer to be refilled before it reports the
    /// last failure (default 3 s).
    #[must_use]
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// While every peer fails, how often the buffers try them again (default 250 ms).
    #[must_use]
    pub fn probe_interval(mut self, interval: Duration) -> Self {
        self.probe_interval = interval;
        self
    }

    /// Issue IDs locally when every peer is down (Vesta's embedded fallback).
    #[must_use]
    pub fn fallback(mut self, fallback: FallbackOptions) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Send `token` as `Authorization: Bearer <token>` on every call (HTTP header, gRPC
    /// metadata): the caller token servers with `auth.required` ask for. Kept out of `Debug`
    /// output and marked sensitive in the HTTP headers.
    ///
    /// ```
    /// let builder = uidgen_client::ClientBuilder::new([uidgen_client::Peer::http("http://h:8080")])
    ///     .token("uidgen_0123");
    /// assert!(!format!("{builder:?}").contains("uidgen_0123"));
    /// ```
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Trust the CA certificates in `pem` (PEM text) for gRPC peers given as `https://`: the
    /// servers' `tls.cert` chain or the CA that signed it. Such a peer needs it (there are no
    /// built-in roots); HTTP peers speak plain HTTP only.
    ///
    /// ```
    /// use uidgen_client::{ClientBuilder, Peer};
    /// let builder = ClientBuilder::new([Peer::grpc("https://ids.internal:9090")])
    ///     .tls_root("-----BEGIN CERTIFICATE-----\n...");
    /// assert!(format!("{builder:?}").contains("tls_root: true"));
    /// ```
    #[must_use]
    pub fn tls_root(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root = Some(pem.into());
        self
    }

    /// Check the settings; the call policy they make.
    pub(crate) fn validate(&self) -> Result<CallPolicy> {
        if self.peers.is_empty() {
            return Err(invalid("peers", "give at least one uidgen server"));
        }
        if let Some(token) = &self.token
            && (token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()))
        {
            return Err(invalid(
                "token",
                "a caller token is printable ASCII without spaces (`uidgen_` and 64 hex digits)",
            ));
        }
        if self.timeout.is_zero() {
            return Err(invalid("timeout", "must be above zero"));
        }
        if self.batch_size == 0 {
            return Err(invalid("batch_size", "must be at least 1"));
        }
        if self.lease_size == 0 {
            return Err(invalid("lease_size", "must be at least 1"));
        }
        for (name, size) in [
            ("buffer_size", self.buffer_size),
            ("segment_buffer_size", self.segment_buffer_size),
        ] {
            uidgen_core::RingBuffer::new(size, self.low_water_percent)
                .map_err(|e| invalid(name, e.to_string()))?;
        }
        let attempts = self
            .attempts
            .unwrap_or_else(|| (self.peers.len() * 2).max(3));
        if attempts == 0 {
            return Err(invalid("attempts", "must be at least 1"));
        }
        Ok(CallPolicy {
            timeout: self.timeout,
            attempts,
            backoff: self.backoff,
            max_backoff: self.max_backoff.max(self.backoff),
            eject_for: self.eject_for,
        })
    }
}
