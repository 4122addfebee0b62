//! The HTTP API in process: routers built over an `AppState` (no `uidgen serve`, but for one
//! dated-number test), against the real databases and Redis. One binary, so one link: see
//! `tests/common/mod.rs`.
#![allow(clippy::unwrap_used)] // tests, and the helpers in common/: a panic is the failure report

#[path = "../common/mod.rs"]
mod common;

mod dated;
mod forms;
mod messages;
mod no_leaks;
mod openapi;
mod routes;
mod sharded_routes;
mod strict_inputs;
