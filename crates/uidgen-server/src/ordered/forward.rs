//! Forwarding an ordered tag's calls to its leader over gRPC, batched: the calls that wait
//! while one forward is in flight go together in the next, one `SegmentIds` call each.
//!
//! Why batching keeps the order: every call of a batch was waiting before the batch was sent
//! and none was answered before its reply came, so the calls of one batch overlap in time and
//! any split of the reply's increasing IDs among them is in order; a call that arrives while a
//! batch is in flight goes in a later batch, sent after the reply, so the leader issues its IDs
//! later and they are larger.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tonic::Code;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use uidgen_proto::v1::SegmentIdsRequest;
use uidgen_proto::v1::id_service_client::IdServiceClient;

/// The metadata key a forwarded call carries: the leader serves it itself or refuses, never
/// forwards it again (no loop between two servers that each think the other leads).
pub const FORWARDED: &str = "uidgen-forwarded";

/// How long one forward may take before the caller looks the leader up again: a fifth of a
/// lease, within 100 ms and 1 s, so that a leader that stopped (SIGSTOP, a cut network) is
/// given up on well within the lease its successor waits for, not after `ordered.wait_ms`.
///
/// ```
/// use std::time::Duration;
/// use uidgen_server::ordered::forward::forward_timeout;
/// assert_eq!(forward_timeout(Duration::from_secs(3)), Duration::from_millis(600));
/// assert_eq!(forward_timeout(Duration::from_secs(60)), Duration::from_secs(1));
/// ```
pub fn forward_timeout(lease: Duration) -> Duration {
    (lease / 5).clamp(Duration::from_millis(100), Duration::from_secs(1))
}

/// Why a forward got no IDs.
#[derive(Debug)]
pub(crate) enum ForwardFailure {
    /// Worth looking the leader up and trying again (it does not lead any more, it did not
    /// answer).
    Retry(String),
    /// The leader refused the call for a reason retrying does not change.
    Final(tonic::Status),
}

/// One call waiting to be forwarded.
struct Pending {
    n: usize,
    address: String,
    auth: Option<String>,
    reply: oneshot::Sender<Result<Vec<i64>, ForwardFailure>>,
}

/// The gRPC channels to the leaders, one per address, shared by every tag.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    open: Mutex<HashMap<String, Channel>>,
    /// With TLS on: the certificate the leaders' is checked against (the server's own
    /// `tls.cert`, so a cluster sharing one certificate or its CA needs nothing more).
    ca_pem: Option<Vec<u8>>,
}

impl Channels {
    pub(crate) fn new(ca_pem: Option<Vec<u8>>) -> Self {
        Self {
            open: Mutex::new(HashMap::new()),
            ca_pem,
        }
    }

    fn channel(&self, address: &str) -> Result<Channel, ForwardFailure> {
        if let Some(channel) = self.open.lock().get(address) {
            return Ok(channel.clone());
        }
        let bad = |error: tonic::transport::Error| {
            ForwardFailure::Retry(format!("the leader's address `{address}`: {error}"))
        };
        let mut endpoint = Endpoint::from_shared(address.to_owned())
            .map_err(bad)?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true);
        if address.starts_with("https://") {
            let mut tls = ClientTlsConfig::new();
            if let Some(pem) = &self.ca_pem {
                tls = tls.ca_certificate(Certificate::from_pem(pem));
            }
            endpoint = endpoint.tls_config(tls).map_err(bad)?;
        }
        let channel = endpoint.connect_lazy();
        self.open.lock().insert(address.to_owned(), channel.clone());
        Ok(channel)
    }
}

/// One ordered tag's calls waiting to be forwarded, and the task sending them.
pub(crate) struct ForwardQueue {
    tag: String,
    batch_cap: usize,
    timeout: Duration,
    channels: Arc<Channels>,
    pending: Mutex<Vec<Pending>>,
    /// A task is sending the pending calls.
    flushing: AtomicBool,
    /// Calls forwarded and forwards sent, for the metrics.
    pub(crate) calls: AtomicU64,
    pub(crate) batches: AtomicU64,
}

impl std::fmt::Debug for ForwardQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ForwardQueue")
            .field("tag", &self.tag)
            .field("pending", &self.pending.lock().len())
            .finish_non_exhaustive()
    }
}

impl ForwardQueue {
    pub(crate) fn new(
        tag: &str,
        batch_cap: usize,
        timeout: Duration,
        channels: Arc<Channels>,
    ) -> Self {
        Self {
            tag: tag.to_owned(),
            batch_cap: batch_cap.max(1),
            timeout,
            channels,
            pending: Mutex::new(Vec::new()),
            flushing: AtomicBool::new(false),
            calls: AtomicU64::new(0),
            batches: AtomicU64::new(0),
        }
    }

    /// `n` IDs from the leader at `address`, with the caller's `authorization` passed on.
    pub(crate) async fn forward(
        self: &Arc<Self>,
        address: &str,
        n: usize,
        auth: Option<&str>,
    ) -> Result<Vec<i64>, ForwardFailure> {
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut pending = self.pending.lock();
            pending.push(Pending {
                n,
                address: address.to_owned(),
                auth: auth.map(str::to_owned),
                reply,
            });
            // SeqCst: paired with the flusher's store and re-check below, so that a call
            // pushed as the flusher stops is either seen by it or starts a new one.
            !self.flushing.swap(true, Ordering::SeqCst)
        };
        if start {
            // A task of its own: the calls of a batch must get their answers even when the
            // caller that started it goes away.
            tokio::spawn(Arc::clone(self).flush());
        }
        // Relaxed: a count for the metrics.
        self.calls.fetch_add(1, Ordering::Relaxed);
        answer
            .await
            .unwrap_or_else(|_| Err(ForwardFailure::Retry("the forward was dropped".into())))
    }

    /// Send the pending calls until none is left.
    async fn flush(self: Arc<Self>) {
        loop {
            let batch = std::mem::take(&mut *self.pending.lock());
            if batch.is_empty() {
                self.flushing.store(false, Ordering::SeqCst);
                // A call pushed after the take and before the store saw `flushing` set and
                // started no flusher: take it on, unless one started since.
                if self.pending.lock().is_empty() || self.flushing.swap(true, Ordering::SeqCst) {
                    return;
                }
                continue;
            }
            for group in self.chunks(batch) {
                self.send(group).await;
            }
        }
    }

    /// The calls grouped by leader and token, each group cut into forwards of at most
    /// `batch_cap` IDs.
    fn chunks(&self, batch: Vec<Pending>) -> Vec<Vec<Pending>> {
        let mut groups: Vec<Vec<Pending>> = Vec::new();
        for call in batch {
            let fits = groups.iter_mut().rev().find(|group| {
                group.first().is_some_and(|first| {
                    first.address == call.address
                        && first.auth == call.auth
                        && group.iter().map(|p| p.n).sum::<usize>() + call.n <= self.batch_cap
                })
            });
            match fits {
                Some(group) => group.push(call),
                None => groups.push(vec![call]),
            }
        }
        groups
    }

    /// One forward for `group`, its reply split among its calls in order.
    async fn send(&self, group: Vec<Pending>) {
        let Some(first) = group.first() else {
            return;
        };
        let total: usize = group.iter().map(|p| p.n).sum();
        let outcome = self
            .call(&first.address, first.auth.as_deref(), total)
            .await;
        // Relaxed: a count for the metrics.
        self.batches.fetch_add(1, Ordering::Relaxed);
        match outcome {
            Ok(ids) if ids.len() == total => {
                let mut rest = ids.as_slice();
                for call in group {
                    let (mine, others) = rest.split_at(call.n);
                    rest = others;
                    // A caller that went away loses its IDs (skipped, never repeated).
                    let _ = call.reply.send(Ok(mine.to_vec()));
                }
            }
            Ok(ids) => {
                let reason = format!("the leader sent {} IDs for {total}", ids.len());
                for call in group {
                    let _ = call.reply.send(Err(ForwardFailure::Retry(reason.clone())));
                }
            }
            Err(failure) => {
                for call in group {
                    let copy = match &failure {
                        ForwardFailure::Retry(reason) => ForwardFailure::Retry(reason.clone()),
                        ForwardFailure::Final(status) => ForwardFailure::Final(status.clone()),
                    };
                    let _ = call.reply.send(Err(copy));
                }
            }
        }
    }

    async fn call(
        &self,
        address: &str,
        auth: Option<&str>,
        n: usize,
    ) -> Result<Vec<i64>, ForwardFailure> {
        let channel = self.channels.channel(address)?;
        let count = u32::try_from(n).map_err(|_| {
            ForwardFailure::Final(tonic::Status::invalid_argument("count out of range"))
        })?;
        let mut request = tonic::Request::new(SegmentIdsRequest {
            tag: self.tag.clone(),
            count,
        });
        request.set_timeout(self.timeout);
        request
            .metadata_mut()
            .insert(FORWARDED, tonic::metadata::MetadataValue::from_static("1"));
        if let Some(auth) = auth {
            let value = auth.parse().map_err(|_| {
                ForwardFailure::Final(tonic::Status::unauthenticated(
                    "the authorization header cannot be passed on",
                ))
            })?;
            request.metadata_mut().insert("authorization", value);
        }
        let reply = tokio::time::timeout(
            self.timeout,
            IdServiceClient::new(channel).segment_ids(request),
        )
        .await
        .map_err(|_| ForwardFailure::Retry(format!("{address} did not answer in time")))?;
        match reply {
            Ok(batch) => Ok(batch.into_inner().ids),
            Err(status) => match status.code() {
                Code::InvalidArgument
                | Code::NotFound
                | Code::Unauthenticated
                | Code::PermissionDenied => Err(ForwardFailure::Final(status)),
                _ => Err(ForwardFailure::Retry(format!(
                    "{address}: {}",
                    status.message()
                ))),
            },
        }
    }
}
