//! A client of uidgen servers: cached IDs, leased segments and an embedded fallback.
//!
//! It is for applications that take IDs from a few `uidgen serve` processes (the center-server
//! release mode) and want a local call to cost about what an in-process generator costs: IDs
//! come from a local buffer filled by batch calls (gRPC `NextIds` or HTTP
//! `GET /v1/ids?count=N`; over gRPC a batch travels as runs of consecutive IDs, with several
//! calls in flight) and refilled in the background at a low-water mark, and segment
//! numbers come from ranges this client leased (`LeaseSegment`, Tinyid's client), the next one
//! leased before the current runs out. Calls go round-robin over the peers, with a timeout per
//! call, retries with jittered backoff on the next peer, and ejection of failing peers until they answer
//! a probe again. When every peer is down, an optional embedded generator (Vesta's fallback)
//! keeps issuing with a worker id of its own: leased from the servers while they answer
//! ([`FallbackOptions::leased`], the servers' embedded range), renewed every third of its ttl,
//! and fenced by that lease and a reserved-until mark in a state file. It is not a server and
//! holds no database connection.
//!
//! ```no_run
//! # async fn demo() -> uidgen_client::Result<()> {
//! use uidgen_client::{ClientBuilder, FallbackOptions, Peer};
//! use uidgen_core::Layout;
//! let peers = [Peer::grpc("http://10.0.0.5:9090"), Peer::grpc("http://10.0.0.6:9090")];
//! let fallback = FallbackOptions::leased(Layout::vesta_max_peak()?, "/var/lib/myapp/uidgen");
//! let client = ClientBuilder::new(peers).fallback(fallback).connect().await?;
//! let id = client.next_id().await?;
//! let order_no = client.segment("orders")?.next().await?;
//! # let _ = (id, order_no);
//! client.close().await; // gives the fallback's lease back
//! # Ok(()) }
//! ```
//!
//! Errors are [`ClientError`]s: every peer down without a fallback is
//! [`ClientError::AllPeersDown`], naming the peers; with one, the embedded generator answers,
//! as long as it holds a lease ([`ClientError::NoFallbackLease`] when no server ever granted
//! one).
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
//! // A leased fallback that never reached a server has no worker id, so no fallback.
//! let dir = tempfile::tempdir().expect("a temporary directory");
//! let layout = Layout::vesta_max_peak()?;
//! let leased = FallbackOptions::leased(layout.clone(), dir.path());
//! let client = ClientBuilder::new(peers.clone()).fallback(leased).connect().await?;
//! assert!(matches!(client.next_id().await, Err(ClientError::NoFallbackLease { .. })));
//!
//! // An explicit id (the operator states nobody else uses it) issues at once.
//! let explicit = FallbackOptions::explicit(layout.clone(), 900, dir.path().join("fb-900.state"));
//! let client = ClientBuilder::new(peers).fallback(explicit).connect().await?;
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
mod fallback_lease;
mod fallback_resume;
mod fallback_rpc;
mod feed;
mod jitter;
mod options;
mod peers;
mod refill;
mod transport;

pub use blocking::{BlockingClient, BlockingSegmentIds};
pub use client::{Client, SegmentIds};
pub use error::{ClientError, Result};
pub use fallback::FallbackOptions;
pub use options::ClientBuilder;
pub use transport::Peer;
