//! Generate a few IDs with the default (Baidu, lock-free CAS) generator and take one apart.
//!
//! Run with `cargo run --release --example quickstart`.

use uidgen::core::{DefaultUidGenerator, Layout, SystemClock, UidGenerator};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let layout = Layout::baidu_default()?;
    let generator = DefaultUidGenerator::new(layout, 1, SystemClock)?;
    let ids = generator.next_ids(5)?;
    for id in &ids {
        println!("{id}");
    }
    let decoded = generator.parse(ids[0])?;
    println!("{}", decoded.to_baidu_json());
    println!(
        "made at {} by worker {} (sequence {}, layout {})",
        decoded.timestamp_iso8601(),
        decoded.parts.worker,
        decoded.parts.sequence,
        decoded.layout
    );
    Ok(())
}
