//! Segment numbers from ranges leased by this client (Tinyid's client-side segments).
//!
//! `cargo run -p uidgen-client --example segment_ids [tag] [http://host:9090]`: the tag must
//! exist on the servers (`uidgen serve` creates `leaf-segment-test`).

use uidgen_client::{ClientBuilder, Peer};

#[tokio::main]
async fn main() -> Result<(), uidgen_client::ClientError> {
    let mut args = std::env::args().skip(1);
    let tag = args
        .next()
        .unwrap_or_else(|| "leaf-segment-test".to_owned());
    let peer = args
        .next()
        .unwrap_or_else(|| "http://127.0.0.1:9090".to_owned());
    let client = ClientBuilder::new([Peer::grpc(peer)])
        .segments(1_000, 4_096) // lease 1,000 numbers at a time
        .connect()
        .await?;
    let orders = client.segment(&tag)?;
    for _ in 0..3 {
        println!("{}", orders.next().await?);
    }
    Ok(())
}
