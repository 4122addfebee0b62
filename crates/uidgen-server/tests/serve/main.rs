//! Real `uidgen serve` processes on one host: the CLI, start-up and its refusals, HTTP, h2c,
//! gRPC and TLS, logs, readiness, spaces, tokens and load. One binary, so one link; every
//! server of this process shares one state directory (`common::serve_state_dir`), and one
//! started without `UIDGEN_STORE` shares its default SQLite store too, so such a server must
//! keep the default (disposable) assigner: a test that needs another gets its own store.
#![allow(clippy::unwrap_used)] // tests, and the helpers in common/: a panic is the failure report

#[path = "../common/mod.rs"]
mod common;

mod auth_tokens;
mod cli;
mod clock_watch;
mod connections;
mod direct;
mod e2e;
mod grpc;
mod h2c;
mod logs;
mod machine;
mod order_restarts;
mod ordered_tags;
mod readiness;
mod ring_load;
mod runway;
mod segment_groups;
mod segment_restarts;
mod sharded_e2e;
mod spaces;
mod start_up;
mod state_dir;
mod statefulset;
mod sustained;
mod tls;
