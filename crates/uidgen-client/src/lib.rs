//! A client of uidgen servers: cached IDs, leased segments and an embedded fallback.
//!
//! It is for applications that take IDs from a few `uidgen serve` processes (the center-server
//! release mode) and want a local call to cost about what an in-process generator costs: IDs
//! come from a local buffer filled by batch calls (gRPC `NextIds` or HTTP
//! `GET /v1/ids?count=N`) and refilled in the background at a low-water mark, and segment
//! numbers come from ranges this client leased (`LeaseSegment`, Tinyid's client), the next one
//! leased before the current runs out. Calls go round-robin over the peers, with a timeout per
//! call, retries with backoff on the next peer, and ejection of failing peers until they answer
//! a probe again. When every peer is down, an optional embedded generator (Vesta's fallback)
//! keeps issuing with a worker id of its own, fenced across restarts like a static worker id.
//! It is not a server and holds no database connection.
//!
//! ```no_run
//! # async fn demo() -> uidgen_client::Result<()> {
//! use uidgen_client::{ClientBuilder, Peer};
//! let peers = [Peer::grpc("http://10.0.0.5:9090"), Peer::grpc("http://10.0.0.6:9090")];
//! let client = ClientBuilder::new(peers).connect().await?;
//! let id = client.next_id().await?;
//! let order_no = client.segment("orders")?.next().await?;
//! # let _ = (id, order_no); Ok(()) }
//! ```
//!
//! Errors are [`ClientError`]s: every peer down without a fallback is
//! [`ClientError::AllPeersDown`], naming the peers; with one, the embedded generator answers.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_client::Result<()> {
//! use uidgen_client::{ClientBuilder, ClientError, FallbackOptions, Peer};
//! use uidgen_core::Layout;
//! // Nothing listens on port 9: every try fails over, then the call names the peers it tried.
//! let peers = [Peer::http("http://127.0.0.1:9")];
//! let client = ClientBuilder::new(peers.clone()).connect().await?;
//! let error = client.next_id().await.unwrap_err();
//! assert!(matches!(
//!     error,
//!     ClientError::AllPeersDown { ref peers, .. } if peers == "http://127.0.0.1:9"
//! ));
//!
//! let dir = tempfile::tempdir().expect("a temporary directory");
//! let layout = Layout::vesta_max_peak()?;
//! let fallback = FallbackOptions::new(layout.clone(), 900, dir.path().join("fallback-900.state"));
//! let client = ClientBuilder::new(peers).fallback(fallback).connect().await?;
//! let id = client.next_id().await?;
//! let parts = layout.decompose(id)?;
//! assert_eq!((parts.worker, parts.method), (900, 0)); // the fallback's worker id, genMethod 0
//! # Ok(()) }
//! ```
//! For synchronous code, [`BlockingClient`]
//! runs the same client on a runtime of its own.

mod blocking;
mod client;
mod error;
mod fallback;
mod feed;
mod options;
mod peers;
mod transport;

pub use blocking::{BlockingClient, BlockingSegmentIds};
pub use client::{Client, SegmentIds};
pub use error::{ClientError, Result};
pub use fallback::FallbackOptions;
pub use options::ClientBuilder;
pub use transport::Peer;
