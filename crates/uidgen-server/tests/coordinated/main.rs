//! Clients and coordinators against real servers: `uidgen-client` over several `uidgen serve`
//! processes (failover, fallback, runs), and the ZooKeeper and etcd assigners. One binary, so
//! one link.
#![allow(clippy::unwrap_used)] // tests, and the helpers in common/: a panic is the failure report

#[path = "../common/cluster.rs"]
mod cluster;
#[path = "../common/mod.rs"]
mod common;

mod client;
mod client_fallback;
mod etcd;
mod id_runs;
mod zk;
