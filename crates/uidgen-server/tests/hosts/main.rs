//! Several hosts emulated on one: `uidgen serve` as pid 1 of its own pid, mount and network
//! namespaces (`tests/common/container.rs`), with and without a coordinator. Needs root (or
//! user namespaces) and `socat`; apart from the other binaries so that its load stays off
//! their timings.
#![allow(clippy::unwrap_used)] // tests, and the helpers in common/: a panic is the failure report

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/container.rs"]
mod container;

mod containers;
mod containers_coordinated;
