//! IDs for synchronous code: the client runs on a runtime of its own.
//!
//! `cargo run -p uidgen-client --example blocking_ids [http://host:8080 ...]` (HTTP peers, the
//! `listen` port of `uidgen serve`, default 127.0.0.1:8080).

use uidgen_client::{BlockingClient, ClientBuilder, Peer};

fn main() -> Result<(), uidgen_client::ClientError> {
    let mut peers: Vec<Peer> = std::env::args().skip(1).map(Peer::http).collect();
    if peers.is_empty() {
        peers.push(Peer::http("http://127.0.0.1:8080"));
    }
    let client = BlockingClient::connect(ClientBuilder::new(peers))?;
    for _ in 0..3 {
        println!("{}", client.next_id()?);
    }
    Ok(())
}
