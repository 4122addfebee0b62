//! Blocking wrappers for callers without an async runtime: the client runs on a runtime of
//! its own (one worker thread for the refill tasks), and a call that finds its buffer empty
//! blocks the calling thread on it.

use std::sync::Arc;

use crate::client::{Client, SegmentIds};
use crate::error::{ClientError, Result};
use crate::options::ClientBuilder;

/// A [`Client`] for synchronous code. Cheap to clone. Do not call it from inside a tokio
/// runtime (use [`Client`] there).
///
/// ```no_run
/// use uidgen_client::{BlockingClient, ClientBuilder, Peer};
/// let builder = ClientBuilder::new([Peer::http("http://127.0.0.1:8080")]);
/// let client = BlockingClient::connect(builder)?;
/// let id = client.next_id()?;
/// let order = client.next_segment_id("orders")?;
/// # let _ = (id, order);
/// # Ok::<(), uidgen_client::ClientError>(())
/// ```
#[derive(Debug, Clone)]
pub struct BlockingClient {
    client: Client,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl BlockingClient {
    /// Start a runtime and [`connect`](ClientBuilder::connect) on it.
    pub fn connect(builder: ClientBuilder) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("uidgen-client")
            .enable_all()
            .build()
            .map_err(|e| {
                crate::error::invalid("runtime", format!("cannot start a tokio runtime: {e}"))
            })?;
        let client = runtime.block_on(builder.connect())?;
        Ok(Self {
            client,
            runtime: Arc::new(runtime),
        })
    }

    /// [`Client::next_id`], blocking only when the local buffer is empty.
    #[inline]
    pub fn next_id(&self) -> Result<u64> {
        if let Some(id) = self.client.try_next_id() {
            return Ok(id);
        }
        self.runtime.block_on(self.client.next_id())
    }

    /// A blocking handle of segment tag `tag` ([`Client::segment`]).
    pub fn segment(&self, tag: &str) -> Result<BlockingSegmentIds> {
        let _guard = self.runtime.enter(); // the tag's refill task is spawned on our runtime
        Ok(BlockingSegmentIds {
            ids: self.client.segment(tag)?,
            runtime: Arc::clone(&self.runtime),
        })
    }

    /// One number of segment tag `tag`.
    pub fn next_segment_id(&self, tag: &str) -> Result<u64> {
        self.segment(tag)?.next()
    }

    /// [`Client::close`]: stop, and give a leased fallback's lease back.
    pub fn close(&self) {
        self.runtime.block_on(self.client.close());
    }

    /// The async client underneath, for code that has both.
    pub fn client(&self) -> &Client {
        &self.client
    }
}

/// [`SegmentIds`] for synchronous code.
#[derive(Debug, Clone)]
pub struct BlockingSegmentIds {
    ids: SegmentIds,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl BlockingSegmentIds {
    /// How many numbers are in memory now.
    pub fn buffered(&self) -> usize {
        self.ids.buffered()
    }

    /// [`SegmentIds::next`], blocking only when the leased numbers in memory ran out.
    #[inline]
    pub fn next(&self) -> Result<u64, ClientError> {
        if let Some(id) = self.ids.try_next() {
            return Ok(id);
        }
        self.runtime.block_on(self.ids.next())
    }
}
