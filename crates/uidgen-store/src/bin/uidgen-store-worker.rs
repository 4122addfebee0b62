//! A small worker process for the multi-process tests of `uidgen-store`.
//!
//! `uidgen-store-worker URL COUNT OUT` connects to URL, takes a disposable worker id, builds a
//! `CachedUidGenerator`, takes COUNT IDs and writes them to OUT as little-endian u64s; it
//! prints the worker id on stdout.

use std::io::Write;
use std::time::Duration;

use uidgen_core::{CachedOptions, Layout, SystemClock, UidGenerator};
use uidgen_store::{DisposableWorkerIdAssigner, GeneratorBuilder, Store};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, count, out] = args.as_slice() else {
        return Err("usage: uidgen-store-worker URL COUNT OUT".into());
    };
    let count: usize = count.parse()?;
    let store = Store::connect(url).await?;
    let built = GeneratorBuilder::new(Layout::baidu_default()?)
        .assigner(DisposableWorkerIdAssigner::new(store.clone()))
        .build_cached(SystemClock, CachedOptions::waiting(Duration::from_secs(10)))
        .await?;
    store.close().await;
    let mut bytes = Vec::with_capacity(count * 8);
    let mut left = count;
    while left > 0 {
        let batch = left.min(100_000);
        for id in built.generator.next_ids(batch)? {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        left -= batch;
    }
    std::fs::File::create(out)?.write_all(&bytes)?;
    println!("{}", built.worker_id());
    Ok(())
}
