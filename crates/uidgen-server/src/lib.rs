//! The `uidgen` service and command line, as a library so tests can drive the router without a
//! socket.
//!
//! It is for serving IDs over HTTP (Leaf- and Vesta-compatible routes and a JSON API) and for the
//! `uidgen` subcommands. It is not where IDs are made (that is `uidgen-core`) or stored
//! (`uidgen-store`, `uidgen-segment`).
//!
//! ```
//! use std::sync::Arc;
//! use uidgen_core::{Layout, SnowflakeGenerator, SystemClock};
//! use uidgen_server::http::{app, AppState};
//!
//! let generator = SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, SystemClock).unwrap();
//! let router = app(Arc::new(AppState::embedded(Arc::new(generator), 1)));
//! # drop(router);
//! ```

pub mod bench;
pub mod cli;
pub mod config;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod serve;
pub mod sharded;
pub mod zk;
