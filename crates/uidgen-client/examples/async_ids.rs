//! IDs from uidgen servers over gRPC, with the embedded fallback for outages.
//!
//! Start a server first (`uidgen serve` serves gRPC on 127.0.0.1:9090), then:
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
    // If every server is down: IDs from worker id 900 (outside the servers' range).
    let fallback = FallbackOptions::new(Layout::baidu_default()?, 900, "fallback-900.state");
    let client = ClientBuilder::new(peers)
        .fallback(fallback)
        .connect()
        .await?;
    let id = client.next_id().await?; // from the local buffer, refilled in the background
    println!("{id}");
    // README end
    Ok(())
}
