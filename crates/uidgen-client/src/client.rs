//! [`Client`]: cached IDs and leased segments from a set of uidgen servers.

use std::collections::HashMap;
use std::ops::{ControlFlow, Range};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;

use crate::error::{ClientError, Result};
use crate::fallback::{Fallback, keep_lease};
use crate::feed::{Feed, Refill};
use crate::options::ClientBuilder;
use crate::peers::PeerSet;
use crate::refill::feed_ids;

/// An async client of uidgen servers. Cheap to clone; clones share the buffers. Dropping
/// the last clone stops its background tasks.
///
/// ```no_run
/// # async fn demo() -> uidgen_client::Result<()> {
/// use uidgen_client::{ClientBuilder, Peer};
/// let client = ClientBuilder::new([Peer::grpc("http://127.0.0.1:9090")]).connect().await?;
/// let id = client.next_id().await?;          // usually from the local buffer
/// let order = client.segment("orders")?;      // a leased-range handle for one tag
/// let number = order.next().await?;
/// # let _ = (id, number); Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    options: ClientBuilder,
    peers: Arc<PeerSet>,
    ids: Arc<Feed>,
    fallback: Option<Arc<Fallback>>,
    segments: RwLock<HashMap<String, SegmentIds>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Inner {
    /// Close every buffer and stop every background task.
    fn stop(&self) {
        self.ids.close();
        for segment in self.segments.read().values() {
            segment.feed.close();
        }
        for task in self.tasks.lock().drain(..) {
            task.abort();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop();
    }
}

impl ClientBuilder {
    /// Start the client: set up the peers, check every gRPC peer that answers now against the
    /// fallback (if any), lease the fallback's worker id from a server that answers (or, when
    /// none does, continue a lease an earlier process left in the state directory), and start
    /// filling the local ID buffer. Peers that are down now are used once they answer. Nothing
    /// is locked here but a leased fallback's own state file (an explicit id's file is locked
    /// when the fallback first issues), so several processes of one application start side by
    /// side. Must run inside a tokio runtime (the buffers are refilled by tasks on it).
    ///
    /// Errors: an invalid option, or a server whose layout or worker id clashes with the
    /// fallback's. A fallback lease no server grants now is not an error: the client asks again
    /// in the background, and until then an outage is [`ClientError::NoFallbackLease`].
    pub async fn connect(self) -> Result<Client> {
        let policy = self.validate()?;
        let peers = Arc::new(PeerSet::new(
            &self.peers,
            policy,
            self.token.as_deref(),
            self.tls_root.as_deref(),
        )?);
        let ids = Feed::new(self.buffer_size, self.low_water_percent)?;
        let fallback = match &self.fallback {
            Some(options) => {
                options.validate()?;
                Some(Arc::new(Fallback::new(options.clone(), self.wait)))
            }
            None => None,
        };
        let mut tasks = Vec::new();
        if let Some(fallback) = &fallback {
            for index in 0..peers.len() {
                fallback.check_peer(&peers, index, true).await?;
            }
            if let Some(keeper) = fallback.keeper() {
                keeper
                    .first_step(&|peer, layout| fallback.check_layout(peer, layout), &peers)
                    .await;
                tasks.push(tokio::spawn(keep_lease(
                    Arc::clone(fallback),
                    Arc::clone(&peers),
                    self.probe_interval,
                )));
            }
        }
        tasks.push(tokio::spawn(feed_ids(
            Arc::clone(&peers),
            Arc::clone(&ids),
            fallback.clone(),
            self.batch_size,
            self.probe_interval,
        )));
        // The first batch is asked for now, so the first caller usually finds IDs ready.
        ids.ring.request_padding();
        Ok(Client {
            inner: Arc::new(Inner {
                options: self,
                peers,
                ids,
                fallback,
                segments: RwLock::new(HashMap::new()),
                tasks: Mutex::new(tasks),
            }),
        })
    }
}

impl Client {
    /// One snowflake-style ID: from the local buffer when it holds one (no lock, no network),
    /// else after the background refill; when every peer is down, from the embedded
    /// fallback if configured, else [`ClientError::AllPeersDown`].
    ///
    /// Cancel safety: an ID is taken only when the call returns it; cancelling takes none.
    #[inline]
    pub async fn next_id(&self) -> Result<u64> {
        if let Some(id) = self.inner.ids.ring.try_take() {
            return Ok(id);
        }
        self.next_id_slow().await
    }

    /// Only the local buffer: `Some` when it holds an ID (what [`next_id`](Self::next_id)
    /// returns without waiting).
    #[inline]
    pub fn try_next_id(&self) -> Option<u64> {
        self.inner.ids.ring.try_take()
    }

    /// How many IDs the local buffer holds now (for monitoring and benchmarks).
    pub fn buffered(&self) -> usize {
        self.inner.ids.ring.len()
    }

    #[cold]
    async fn next_id_slow(&self) -> Result<u64> {
        let fresh = self.inner.fallback.is_none();
        match self
            .inner
            .ids
            .take_slow(self.inner.options.wait, fresh)
            .await
        {
            Err(ClientError::AllPeersDown { peers, last_error }) => match &self.inner.fallback {
                Some(fallback) => fallback.next_id(&peers, &last_error).await,
                None => Err(ClientError::AllPeersDown { peers, last_error }),
            },
            other => other,
        }
    }

    /// The handle of segment tag `tag`: numbers from ranges this client leased (Tinyid's
    /// client-side segments), the next range leased before the current one runs out. The
    /// first call for a tag starts its refill task.
    ///
    /// Errors: [`ClientError::InvalidOption`] for a tag no server accepts (empty, over 128
    /// characters, a character outside [`uidgen_core::TAG_PATTERN`]).
    pub fn segment(&self, tag: &str) -> Result<SegmentIds> {
        if let Some(handle) = self.inner.segments.read().get(tag) {
            return Ok(handle.clone());
        }
        uidgen_core::check_biz_tag(tag)
            .map_err(|reason| crate::error::invalid("tag", format!("invalid input: {reason}")))?;
        let mut segments = self.inner.segments.write();
        if let Some(handle) = segments.get(tag) {
            return Ok(handle.clone());
        }
        let options = &self.inner.options;
        let feed = Feed::new(options.segment_buffer_size, options.low_water_percent)?;
        let task = tokio::spawn(feed_segment(
            Arc::clone(&self.inner.peers),
            Arc::clone(&feed),
            tag.to_owned(),
            options.lease_size,
            options.probe_interval,
        ));
        self.inner.tasks.lock().push(task);
        feed.ring.request_padding();
        let handle = SegmentIds {
            feed,
            tag: Arc::from(tag),
            wait: options.wait,
        };
        segments.insert(tag.to_owned(), handle.clone());
        Ok(handle)
    }

    /// One number of segment tag `tag` ([`segment`](Self::segment)`(tag)?.next()`).
    pub async fn next_segment_id(&self, tag: &str) -> Result<u64> {
        self.segment(tag)?.next().await
    }

    /// `count` new IDs written as text in `form`: `"decimal"`, `"base36"`, `"base62"` (fixed
    /// width, sorting as the IDs) or `"masked"` (a keyed permutation that hides each ID's
    /// time, worker and sequence, with the servers' `[mask]` keys). Asked of a server every
    /// call, with the failover and retries of the buffered IDs but no buffer and no fallback:
    /// a masked text needs keys the client does not hold. A server without keys refuses
    /// `masked` ([`ClientError::Refused`]).
    ///
    /// ```no_run
    /// # async fn demo(client: uidgen_client::Client) -> uidgen_client::Result<()> {
    /// let order_numbers = client.next_texts("masked", 10).await?;
    /// assert_eq!(order_numbers.len(), 10);
    /// # Ok(()) }
    /// ```
    pub async fn next_texts(&self, form: &str, count: u32) -> Result<Vec<String>> {
        let answer = self
            .inner
            .peers
            .call(|connection| {
                let form = form.to_owned();
                async move { connection.next_texts(&form, count).await }
            })
            .await?;
        Ok(answer.value)
    }

    /// True while every peer is ejected (the client serves from its buffers or the fallback).
    pub fn all_peers_down(&self) -> bool {
        self.inner.peers.all_ejected()
    }

    /// The fallback's worker id: an explicit one, or the lease's while one is held.
    pub fn fallback_worker_id(&self) -> Option<u64> {
        self.inner.fallback.as_ref().and_then(|f| f.worker_id())
    }

    /// The leased fallback's lease expiry (ms since the Unix epoch) as last confirmed by a
    /// server (or recorded in the state file it was continued from), while a lease is held.
    pub fn fallback_valid_until_ms(&self) -> Option<u64> {
        let keeper = self.inner.fallback.as_ref()?.keeper()?;
        keeper.valid_until_ms()
    }

    /// Shut the client down: its background tasks stop, calls that find a buffer empty get
    /// [`ClientError::Closed`], and a leased fallback gives its lease back (recording how far
    /// it issued, deleting its state file), so its worker id is free at once instead of after
    /// the lease's ttl. Every clone is closed with it.
    ///
    /// Cancel safety: once it returns `Pending` the fallback issues no more IDs; dropped
    /// before the server answered, the lease is left to expire.
    pub async fn close(&self) {
        let inner = &self.inner;
        inner.stop();
        if let Some(keeper) = inner.fallback.as_ref().and_then(|f| f.keeper()) {
            keeper.release(&inner.peers).await;
        }
    }
}

/// Numbers of one segment tag from ranges leased by this client. Cheap to clone.
///
/// ```no_run
/// # async fn demo(client: uidgen_client::Client) -> uidgen_client::Result<()> {
/// let orders = client.segment("orders")?;
/// let a = orders.next().await?;
/// let b = orders.next().await?;
/// assert_ne!(a, b);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SegmentIds {
    feed: Arc<Feed>,
    tag: Arc<str>,
    wait: std::time::Duration,
}

impl SegmentIds {
    /// The tag.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The next number: from the leased range in memory (no lock, no network) when it has
    /// one, else after the refill. When every peer is down: [`ClientError::SegmentPeersDown`]
    /// (segment numbers come only from the database).
    ///
    /// Cancel safety: a number is taken only when the call returns it.
    #[inline]
    pub async fn next(&self) -> Result<u64> {
        if let Some(id) = self.feed.ring.try_take() {
            return Ok(id);
        }
        self.feed.take_slow(self.wait, true).await
    }

    /// How many numbers are in memory now (for monitoring and benchmarks).
    pub fn buffered(&self) -> usize {
        self.feed.ring.len()
    }

    /// Only what is in memory: `Some` when a number is ready.
    #[inline]
    pub fn try_next(&self) -> Option<u64> {
        self.feed.ring.try_take()
    }
}

/// A tag's refill task: keeps one leased range ahead of the one being issued.
async fn feed_segment(
    peers: Arc<PeerSet>,
    feed: Arc<Feed>,
    tag: String,
    lease_size: u64,
    probe: std::time::Duration,
) {
    let refill = SegmentRefill {
        peers,
        tag,
        lease_size,
        current: 0..0,
        next: None,
    };
    feed.serve(probe, refill).await;
}

/// A tag's feed state between steps: the range being issued and the one leased ahead.
struct SegmentRefill {
    peers: Arc<PeerSet>,
    tag: String,
    lease_size: u64,
    current: Range<u64>,
    next: Option<Range<u64>>,
}

impl Refill for SegmentRefill {
    async fn step(&mut self, feed: &Feed) -> Result<ControlFlow<()>> {
        if self.next.is_none() {
            let (tag, lease_size) = (&self.tag, self.lease_size);
            let answer = self
                .peers
                .call(|connection| {
                    let tag = tag.clone();
                    async move { connection.lease(&tag, lease_size).await }
                })
                .await
                .map_err(|error| for_segment(tag, error))?;
            self.next = Some(answer.value.start..answer.value.end);
        }
        if self.current.is_empty() {
            // Swap in the range leased ahead; the next step leases the one after it.
            if let Some(range) = self.next.take() {
                self.current = range;
            }
            return Ok(ControlFlow::Continue(()));
        }
        feed.ring.put_batch(&mut self.current);
        Ok(if self.current.is_empty() {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(()) // the ring is full
        })
    }
}

fn for_segment(tag: &str, error: ClientError) -> ClientError {
    match error {
        ClientError::AllPeersDown { peers, last_error } => ClientError::SegmentPeersDown {
            tag: tag.to_owned(),
            peers,
            last_error,
        },
        other => other,
    }
}
