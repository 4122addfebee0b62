#![allow(clippy::unwrap_used)]
//! Several OS processes take disposable worker ids from one database and generate IDs with
//! CachedUidGenerator: the union has no duplicates.

mod common;

use std::collections::HashSet;
use std::time::Instant;

use uidgen_store::testing::{TestDb, fresh_store};

/// One fresh output file per worker process, named by `kind`, this test process and a random
/// tag so parallel runs never share one.
fn output_files(kind: &str, processes: usize) -> Vec<std::path::PathBuf> {
    let dir = std::env::temp_dir().join("uidgen-store-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let tag = fastrand::u32(..);
    (0..processes)
        .map(|i| dir.join(format!("{kind}-{}-{tag:08x}-{i}.bin", std::process::id())))
        .collect()
}

/// The IDs a worker process wrote: little-endian u64s.
fn decode_ids(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
}

const PROCESSES: usize = 4;
const IDS_PER_PROCESS: usize = 1_000_000;

per_db! {
    async fn four_processes_generate_a_million_ids_each_without_duplicates(db: TestDb) {
        let started = Instant::now();
        let (_store, url) = fresh_store(db).await.unwrap();
        let outputs = output_files("ids", PROCESSES);
        let children: Vec<_> = outputs
            .iter()
            .map(|out| {
                tokio::process::Command::new(uidgen_testkit::worker_binary("uidgen-store-worker"))
                    .arg(&url)
                    .arg(IDS_PER_PROCESS.to_string())
                    .arg(out)
                    .env_remove("UIDGEN_HOST")
                    .env_remove("UIDGEN_PORT")
                    .output()
            })
            .collect();
        let mut workers = HashSet::new();
        for child in children {
            let output = child.await.unwrap();
            assert!(output.status.success(), "worker failed: {}", String::from_utf8_lossy(&output.stderr));
            let worker: u64 = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap();
            assert!(workers.insert(worker), "worker id {worker} assigned twice");
        }
        let mut ids = Vec::with_capacity(PROCESSES * IDS_PER_PROCESS);
        for out in &outputs {
            let bytes = std::fs::read(out).unwrap();
            std::fs::remove_file(out).unwrap();
            assert_eq!(bytes.len(), IDS_PER_PROCESS * 8);
            ids.extend(decode_ids(&bytes));
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), PROCESSES * IDS_PER_PROCESS, "duplicates across processes");
        eprintln!("{db:?}: {PROCESSES} x {IDS_PER_PROCESS} ids in {:?}", started.elapsed());
    }
}

const LEASE_PROCESSES: usize = 6;
// Within what a lease lets the cached generator borrow (ttl / 3 = 10 s of 8,192 IDs), so a
// winner does not wait for the clock.
const IDS_PER_LEASE: usize = 60_000;

per_db! {
    async fn processes_racing_for_two_leased_worker_ids_never_share_one(db: TestDb) {
        let (_store, url) = fresh_store(db).await.unwrap();
        let outputs = output_files("leased", LEASE_PROCESSES);
        // All at once: six processes, a layout with two worker ids.
        let children: Vec<_> = outputs
            .iter()
            .map(|out| {
                tokio::process::Command::new(uidgen_testkit::worker_binary("uidgen-store-worker"))
                    .arg("--leased")
                    .arg(&url)
                    .arg(IDS_PER_LEASE.to_string())
                    .arg(out)
                    .output()
            })
            .collect();
        let (mut winners, mut refused) = (Vec::new(), 0);
        for (child, out) in children.into_iter().zip(&outputs) {
            let output = child.await.unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            match output.status.code() {
                Some(0) => {
                    let worker: u64 = String::from_utf8_lossy(&output.stdout).trim().parse().unwrap();
                    assert!(worker <= 1, "worker id {worker} outside the layout");
                    winners.push((worker, std::fs::read(out).unwrap()));
                    std::fs::remove_file(out).unwrap();
                }
                // No id to be had: every id leased, a lost race, or a successor that would have
                // to wait for the previous holder's borrowed seconds.
                Some(3) => {
                    assert!(
                        ["no free worker id", "lost the race", "was used until"]
                            .iter()
                            .any(|m| stderr.contains(m)),
                        "{stderr}"
                    );
                    refused += 1;
                }
                _ => panic!("worker failed: {stderr}"),
            }
        }
        assert!(!winners.is_empty(), "no process got a worker id");
        assert_eq!(winners.len() + refused, LEASE_PROCESSES);
        // Two holders of one id at the same time would issue the same IDs from the same second.
        let mut ids: Vec<u64> = winners
            .iter()
            .flat_map(|(_, bytes)| decode_ids(bytes))
            .collect();
        assert_eq!(ids.len(), winners.len() * IDS_PER_LEASE);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), winners.len() * IDS_PER_LEASE, "duplicates across leased processes");
        eprintln!("{db:?}: {} winners {:?}, {refused} refused", winners.len(), winners.iter().map(|w| w.0).collect::<Vec<_>>());
    }
}
