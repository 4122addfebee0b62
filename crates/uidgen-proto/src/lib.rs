//! uidgen's gRPC API, package `uidgen.v1`, generated from `proto/uidgen/v1/uidgen.proto`.
//!
//! It is for talking to `uidgen serve`'s gRPC port (the center-server release mode): the
//! server implements [`v1::id_service_server::IdService`], clients use
//! [`v1::id_service_client::IdServiceClient`] (the `uidgen-client` crate wraps it with failover
//! and local caches). The `.proto` file is the documentation of every call and error code.
//!
//! ```
//! use uidgen_proto::v1::{LeaseSegmentRequest, NextIdsRequest};
//!
//! let batch = NextIdsRequest { count: 100, ..Default::default() };
//! let lease = LeaseSegmentRequest { tag: "orders".into(), size: 10_000 };
//! assert_eq!(batch.count, 100);
//! assert_eq!(lease.tag, "orders");
//! ```

mod runs;

pub use runs::{BatchError, BatchIds, CheckedBatch};

/// Package `uidgen.v1`: messages, `id_service_client` and `id_service_server`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1;

/// The encoded `FileDescriptorSet` of `uidgen.v1`, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!("generated/uidgen_v1_descriptor.bin");
