//! A small segment-service process for the multi-process tests: takes IDs of one biz tag from a
//! shared database and prints one per line on stdout.
//!
//! ```text
//! uidgen-segment-worker <database-url> <biz-tag> <count | forever>
//! ```
//!
//! Dynamic step is off, so every segment has the tag's stored step and segment `k` is
//! `[1 + k * step, 1 + (k + 1) * step)`: the tests recover each process's segments from its IDs.
//! `forever` runs until killed, flushing every 1,000 IDs.

use std::io::Write;
use std::process::ExitCode;

use uidgen_core::SystemClock;
use uidgen_segment::{SegmentOptions, SegmentService};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("uidgen-segment-worker: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, tag, count] = args.as_slice() else {
        return Err(
            "usage: uidgen-segment-worker <database-url> <biz-tag> <count | forever>".into(),
        );
    };
    let count: Option<u64> = match count.as_str() {
        "forever" => None,
        n => Some(n.parse()?),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let options = SegmentOptions {
        dynamic_step: false,
        ..SegmentOptions::default()
    };
    let service = runtime.block_on(async {
        let store = uidgen_store::Store::connect(url).await?;
        SegmentService::start(store, options, SystemClock).await
    })?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut taken = 0_u64;
    while count.is_none_or(|count| taken < count) {
        // `get` is a plain function: this thread is not a runtime thread.
        let id = service.get(tag)?;
        writeln!(out, "{id}")?;
        taken += 1;
        if count.is_none() && taken.is_multiple_of(1_000) {
            out.flush()?;
        }
    }
    out.flush()?;
    service.shutdown();
    Ok(())
}
