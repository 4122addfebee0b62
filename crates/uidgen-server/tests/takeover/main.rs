//! `uidgen takeover` and the switch from each peer (issue 31), with the real binary against the
//! real services: each store, ZooKeeper path or Redis prefix is seeded with exactly the state the
//! peer's own code leaves (its DDL and statements, its node and key formats, written out here
//! as the peer issues them), then uidgen takes over and serves from it; where the peer may keep
//! running, the peer's statements run from another task while uidgen serves. Every test counts
//! 0 equal IDs, and checks that new IDs sort above the peer's wherever the peer's were ordered,
//! and every refusal has its test.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../common/mod.rs"]
mod common;

mod baidu;
mod leaf;
mod refusals;
mod sharded;
mod tinyid;
mod vesta;

use std::collections::HashSet;

use common::run;

/// `uidgen takeover <args>` with `envs`: (success, stdout and stderr together).
pub fn takeover(args: &[&str], envs: &[(&str, &str)]) -> (bool, String) {
    let args: Vec<&str> = std::iter::once("takeover")
        .chain(args.iter().copied())
        .collect();
    let (status, out, err) = run(&args, envs);
    (status.success(), format!("{out}{err}"))
}

/// A start that must be refused: its log.
pub fn refused_start(envs: &[(&str, &str)]) -> String {
    match common::Server::try_start(&[], envs) {
        Ok(server) => panic!("the server started: {}", server.log()),
        Err(log) => log,
    }
}

/// How many of `ids` repeat one seen before, and assert there are none.
pub fn assert_no_equal(ids: &[u64], what: &str) {
    let mut seen = HashSet::with_capacity(ids.len());
    let repeated: Vec<u64> = ids.iter().copied().filter(|id| !seen.insert(*id)).collect();
    assert!(
        repeated.is_empty(),
        "{what}: {} of {} IDs equal, e.g. {:?}",
        repeated.len(),
        ids.len(),
        &repeated[..repeated.len().min(5)]
    );
}
