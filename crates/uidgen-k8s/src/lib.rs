//! Worker ids for uidgen from a Kubernetes StatefulSet: the pod's ordinal (the numeric suffix
//! of its hostname, `uidgen-3` → 3, or `UIDGEN_POD_ORDINAL`) plus a configured offset.
//!
//! It is for [`StatefulSetWorkerIdAssigner`] (kind [`StatefulSetWorkerIdAssigner::KIND`]) and
//! the [`PodOrdinal`] it reads. It is not a fence of its own: the worker id is leased exactly
//! in a store every pod shares, through the static assigner's registration
//! ([`uidgen_worker::StaticWorkerIdAssigner`] with an [`ExactLeaseRegistry`]), so two pods that
//! believe they have the same ordinal are refused, naming the holder, never duplicated. A store
//! private to one host is refused: a StatefulSet runs on many hosts.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use uidgen_core::Layout;
//! use uidgen_k8s::{PodOrdinal, StatefulSetError, StatefulSetWorkerIdAssigner};
//! use uidgen_worker::WorkerIdAssigner;
//!
//! let ordinal = PodOrdinal::from_hostname("uidgen-3")?;
//! assert_eq!(ordinal.value(), 3);
//! let dir = tempfile::tempdir()?;
//! let assigner = StatefulSetWorkerIdAssigner::new(ordinal, dir.path().join("w.state"))
//!     .with_offset(100);
//! assert_eq!(assigner.worker_id()?, 103);
//! // Without a store shared by every pod, it refuses to start.
//! let refused = assigner.assign(&Layout::snowflake()?).await.unwrap_err();
//! assert!(matches!(
//!     refused.downcast_backend::<StatefulSetError>(),
//!     Some(StatefulSetError::NoSharedStore)
//! ));
//! # Ok(()) }
//! ```
//!
//! [`ExactLeaseRegistry`]: uidgen_worker::ExactLeaseRegistry

mod assigner;
mod error;
mod ordinal;

pub use assigner::StatefulSetWorkerIdAssigner;
pub use error::{Result, StatefulSetError};
pub use ordinal::{ENV_HOSTNAME, ENV_POD_ORDINAL, PodOrdinal};
