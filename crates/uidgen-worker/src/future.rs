//! [`BoxFuture`], the one future type of this crate's traits: a leaf, so that the assigner
//! and keeper traits can both name it without importing each other.

use std::future::Future;
use std::pin::Pin;

/// A boxed, `Send` future: what [`WorkerIdAssigner::assign`](crate::WorkerIdAssigner::assign)
/// returns, so that assigners can be held as `Arc<dyn WorkerIdAssigner>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
