//! `uidgen-client`'s hot path next to the in-process `CachedUidGenerator`, in the same run.
//!
//! Real `uidgen serve` processes (the release binary, SQLite stores, gRPC on) feed one blocking
//! client: one server, then three (one SQLite store, which gives each its own worker id, and
//! a state directory each). Two readings per source, at 1 and 2 threads:
//! - `*_buffered`: `next_id()` while the local buffer holds IDs, the refill waited for off the
//!   clock between chunks: what a caller pays when the buffer is ahead of demand;
//! - `*_sustained`: calls back to back, the buffer refilled over gRPC while measured: what the
//!   servers can feed one client (issue 23's goal: within 2x of the cached generator).
//!
//! Segment numbers (leased ranges) are read against one server only: a lease is one call
//! whatever the number of servers.
//!
//! Run: `cargo build --release -p uidgen-server && cargo bench --bench client` (or point
//! `UIDGEN_BIN` at a `uidgen` binary). Figures and conditions are in docs/BENCHMARKS.md.
#![allow(missing_docs, clippy::unwrap_used)] // a bench binary: a panic is the failure report

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;

use common::run_shared;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use uidgen::core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
use uidgen_client::{BlockingClient, ClientBuilder, Peer};

/// The client's buffers: large, so a chunk of a measured sample fits the buffered reading.
const BUFFER: usize = 1 << 20;
const TAG: &str = "bench-client";

/// A `uidgen serve` child, killed on drop.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the release `uidgen serve` on ephemeral ports, its state in `dir`, on the SQLite
/// store `store` (shared by the servers of a run, which hands each a worker id of its own);
/// its gRPC address.
fn start_server(dir: &std::path::Path, store: &std::path::Path) -> (Server, String) {
    let bin = std::env::var("UIDGEN_BIN")
        .unwrap_or_else(|_| format!("{}/target/release/uidgen", env!("CARGO_MANIFEST_DIR")));
    assert!(
        std::path::Path::new(&bin).exists(),
        "no uidgen binary at {bin}: run `cargo build --release -p uidgen-server` or set UIDGEN_BIN"
    );
    let mut child = Command::new(&bin)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(dir)
        .env("UIDGEN_STATE_DIR", dir)
        .env_remove("UIDGEN_CONFIG")
        .env("UIDGEN_STORE", format!("sqlite://{}", store.display()))
        .env("UIDGEN_GRPC_LISTEN", "127.0.0.1:0")
        // Borrowing unbounded, as scripts/bench-http.sh runs it: with the default bound (60 s
        // ahead of the clock) the baidu layout settles at 8,192 IDs a second once the minute
        // is borrowed, and the buffered benchmarks wait for refills that never come.
        .env("UIDGEN_RING_MAX_BORROW_SECONDS", "0")
        .env("UIDGEN_SEGMENT_SAMPLE_TAG", TAG)
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines().map_while(Result::ok);
    let grpc = lines
        .find_map(|line| {
            line.contains("uidgen serving").then(|| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix("grpc_listen="))
                    .map(str::to_owned)
            })?
        })
        .expect("uidgen serve did not announce its gRPC address");
    // Keep draining the log so the server never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (Server(child), format!("http://{grpc}"))
}

/// `iters` calls of `f` on `threads` threads, in chunks that the buffer holds: before each
/// chunk, wait (off the clock) until `buffered()` has it.
fn run_buffered(
    threads: u64,
    iters: u64,
    buffered: &dyn Fn() -> usize,
    f: &(dyn Fn() -> u64 + Sync),
) -> Duration {
    let chunk_max = u64::try_from(BUFFER / 4).unwrap();
    let mut left = iters;
    let mut total = Duration::ZERO;
    while left > 0 {
        let chunk = left.min(chunk_max);
        while u64::try_from(buffered()).unwrap() < chunk {
            std::thread::sleep(Duration::from_micros(200));
        }
        total += run_shared(threads, chunk, f);
        left -= chunk;
    }
    total
}

fn client(c: &mut Criterion) {
    // Sustained, as in benches/generators.rs: refilled by its padding thread while measured.
    let cached = CachedUidGenerator::new(
        Layout::baidu_default().unwrap(),
        1,
        SystemClock,
        CachedOptions::waiting(Duration::from_secs(5)),
    )
    .unwrap();
    let cached_next = || cached.next_id().unwrap();
    for servers in [1u64, 3] {
        let store_dir = tempfile::tempdir().unwrap();
        let store = store_dir.path().join("bench.db");
        let dirs: Vec<_> = (0..servers).map(|_| tempfile::tempdir().unwrap()).collect();
        // One at a time: each takes its worker id from the shared store before the next starts.
        let (_running, peers): (Vec<Server>, Vec<Peer>) = dirs
            .iter()
            .map(|dir| {
                let (server, grpc) = start_server(dir.path(), &store);
                (server, Peer::grpc(grpc))
            })
            .unzip();
        let client = BlockingClient::connect(
            ClientBuilder::new(peers)
                .buffer_size(BUFFER)
                .batch_size(100_000)
                .segments(1_000_000, BUFFER),
        )
        .unwrap();
        let segment = (servers == 1).then(|| client.segment(TAG).unwrap());
        let next_id = || client.next_id().unwrap();
        let id_buffer = || client.client().buffered();

        for threads in [1u64, 2] {
            let name = match servers {
                1 => format!("client_{threads}_thread"),
                n => format!("client_{n}_servers_{threads}_thread"),
            };
            let mut group = c.benchmark_group(name);
            group.throughput(Throughput::Elements(1));
            group.measurement_time(Duration::from_secs(4));
            group.warm_up_time(Duration::from_secs(1));
            group.bench_function(BenchmarkId::from_parameter("cached_generator"), |b| {
                b.iter_custom(|iters| run_shared(threads, iters, &cached_next));
            });
            group.bench_function(
                BenchmarkId::from_parameter("client_next_id_buffered"),
                |b| {
                    b.iter_custom(|iters| run_buffered(threads, iters, &id_buffer, &next_id));
                },
            );
            group.bench_function(
                BenchmarkId::from_parameter("client_next_id_sustained"),
                |b| {
                    b.iter_custom(|iters| run_shared(threads, iters, &next_id));
                },
            );
            if let Some(segment) = &segment {
                let next_number = || segment.next().unwrap();
                let segment_buffer = || segment.buffered();
                group.bench_function(
                    BenchmarkId::from_parameter("client_segment_buffered"),
                    |b| {
                        b.iter_custom(|iters| {
                            run_buffered(threads, iters, &segment_buffer, &next_number)
                        });
                    },
                );
                group.bench_function(
                    BenchmarkId::from_parameter("client_segment_sustained"),
                    |b| {
                        b.iter_custom(|iters| run_shared(threads, iters, &next_number));
                    },
                );
            }
            group.finish();
        }
    }
}

criterion_group!(benches, client);
criterion_main!(benches);
