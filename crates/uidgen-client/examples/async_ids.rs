//! IDs from uidgen servers over gRPC, with the embedded fallback for outages.
//!
//! Start a server first (`UIDGEN_LAYOUT=vesta_max_peak uidgen serve` serves gRPC on
//! 127.0.0.1:9090 and leases fallback worker ids 0-923), then:
//! `cargo run -p uidgen-client --example async_ids [http://host:9090 ...]`.
//! The same lines are the README's client example (a test keeps the two equal).

use uidgen_client::{ClientBuilder, FallbackOptions, Peer};
use uidgen_core::Layout;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut peers: Vec<Peer> = std::env::args().skip(1).map(Peer::grpc).collect();
    if peers.is_empty() {
        peers.push(Peer::grpc("http://127.0.0.1:9090"));
    }
    // README start
    // If every server is down: IDs from a worker id the servers leased to this process (from
    // their embedded range, 0-923 on Vesta layouts), its lease kept in the per-host state
    // directory (`UIDGEN_STATE_DIR`, else `~/.local/state/uidgen`), whatever the cwd.
    let fallback = FallbackOptions::leased_in_state_dir(Layout::vesta_max_peak()?)?;
    let client = ClientBuilder::new(peers)
        .fallback(fallback)
        .connect()
        .await?;
    let id = client.next_id().await?; // from the local buffer, refilled in the background
    let worker = client.fallback_worker_id(); // the leased id; None until a server leased one
    println!("{id} (fallback worker id {worker:?})");
    client.close().await; // gives the lease back at once
    // README end
    Ok(())
}
