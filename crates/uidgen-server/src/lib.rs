//! The `uidgen` service and command line, as a library so tests can drive the router without a
//! socket.
//!
//! It is for serving IDs over HTTP (Leaf- and Vesta-compatible routes and a JSON API) and for the
//! `uidgen` subcommands. It is not where IDs are made (that is `uidgen-core`) or stored
//! (`uidgen-store`, `uidgen-segment`).
//!
//! ```
//! use std::sync::Arc;
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use http_body_util::BodyExt;
//! use tower::ServiceExt;
//! use uidgen_core::{Layout, SnowflakeGenerator, SystemClock};
//! use uidgen_server::http::app;
//! use uidgen_server::service::state::AppState;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let generator = SnowflakeGenerator::new(Layout::snowflake()?, 1, SystemClock)?;
//! let router = app(Arc::new(AppState::embedded(Arc::new(generator), 1)));
//! let response = router.oneshot(Request::get("/genid").body(Body::empty())?).await?;
//! assert_eq!(response.status(), StatusCode::OK);
//! let body = response.into_body().collect().await?.to_bytes();
//! let id: u64 = std::str::from_utf8(&body)?.parse()?; // a bare decimal, as Vesta answers
//! assert_eq!(Layout::snowflake()?.decode(id)?.parts.worker, 1);
//! # Ok(()) }
//! ```

pub mod cli;
pub mod command;
pub mod config;
pub mod connections;
pub mod fallback;
pub mod generators;
pub mod grpc;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod order;
pub mod ordered;
pub mod serve;
mod servers;
pub mod service;
pub mod sharded;
mod tls;
pub mod workers;
