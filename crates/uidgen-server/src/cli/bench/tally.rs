//! The running counts of a bench run and their second-by-second record: what a sustained run
//! is judged by (a server that keeps its rate for ten minutes, or falls to its layout's unit
//! rate after one), which a single average over the run hides.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

/// Counts the calling tasks add to as they go, read by the progress line and the per-second
/// sampler. The exact totals of the report come from the tasks' own counts after they join.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Calls completed, answered or failed.
    pub(super) requests: AtomicU64,
    /// IDs received.
    pub(super) ids: AtomicU64,
    /// Failed calls.
    pub(super) errors: AtomicU64,
    /// The slowest call completed since the sampler last looked, in nanoseconds.
    slowest_ns: AtomicU64,
}

impl Tally {
    /// `requests` calls completed, which brought `ids` IDs and of which `errors` failed, the
    /// slowest in `slowest_ns` nanoseconds.
    pub(super) fn add(&self, requests: u64, ids: u64, errors: u64, slowest_ns: u64) {
        // Relaxed, all four: counters read for display and per-second deltas; they order no
        // other memory, and the report's totals are taken from the joined tasks.
        self.requests.fetch_add(requests, Ordering::Relaxed);
        self.ids.fetch_add(ids, Ordering::Relaxed);
        self.errors.fetch_add(errors, Ordering::Relaxed);
        self.slowest_ns.fetch_max(slowest_ns, Ordering::Relaxed);
    }
}

/// One second of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Second {
    /// Calls completed in the second.
    pub(super) requests: u64,
    /// IDs received in it.
    pub(super) ids: u64,
    /// Failed calls in it.
    pub(super) errors: u64,
    /// The slowest call that completed in it, in nanoseconds (0: none completed).
    pub(super) slowest_ns: u64,
}

/// Sample `tally` once a second until `stop`, writing each second as a CSV line to `timeline`
/// if given; the seconds, the last (partial) one left out.
pub(super) fn sample(
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    timeline: Option<&Path>,
) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<Vec<Second>>>> {
    let mut out = match timeline {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("cannot create the timeline {}", path.display()))?;
            writeln!(file, "second,requests,ids,errors,max_latency_us")?;
            Some(std::io::LineWriter::new(file))
        }
        None => None,
    };
    Ok(std::thread::spawn(move || {
        let start = Instant::now();
        let mut seconds = Vec::new();
        let mut before = Second {
            requests: 0,
            ids: 0,
            errors: 0,
            slowest_ns: 0,
        };
        for n in 1u32.. {
            // Sleep to the next whole second of the run, not for a second: the lines stay on
            // the run's clock however long writing one takes.
            let due = start + Duration::from_secs(u64::from(n));
            while Instant::now() < due {
                // Relaxed: a stop flag; it guards no data.
                if stop.load(Ordering::Relaxed) {
                    return Ok(seconds);
                }
                std::thread::sleep(
                    due.saturating_duration_since(Instant::now())
                        .min(Duration::from_millis(50)),
                );
            }
            // Relaxed: see `Tally::add`.
            let now = Second {
                requests: tally.requests.load(Ordering::Relaxed),
                ids: tally.ids.load(Ordering::Relaxed),
                errors: tally.errors.load(Ordering::Relaxed),
                slowest_ns: tally.slowest_ns.swap(0, Ordering::Relaxed),
            };
            let second = Second {
                requests: now.requests - before.requests,
                ids: now.ids - before.ids,
                errors: now.errors - before.errors,
                slowest_ns: now.slowest_ns,
            };
            before = now;
            if let Some(out) = &mut out {
                writeln!(
                    out,
                    "{n},{},{},{},{}",
                    second.requests,
                    second.ids,
                    second.errors,
                    second.slowest_ns / 1000
                )?;
            }
            seconds.push(second);
        }
        Ok(seconds)
    }))
}

/// The lowest, median and highest of `ids_per_second`; `None` for a run shorter than a second.
pub(super) fn spread(ids_per_second: &[u64]) -> Option<(u64, u64, u64)> {
    let mut ids = ids_per_second.to_vec();
    ids.sort_unstable();
    Some((*ids.first()?, ids[ids.len() / 2], *ids.last()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_names_the_slowest_the_median_and_the_fastest_second() {
        assert_eq!(
            spread(&[500, 8192, 900_000, 8192, 8191]),
            Some((500, 8192, 900_000))
        );
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn each_second_holds_what_was_added_during_it_and_its_slowest_call() {
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.csv");
        tally.add(3, 3000, 0, 5_000);
        tally.add(1, 0, 1, 2_000_000);
        let sampler = sample(tally.clone(), stop.clone(), Some(&path)).unwrap();
        // Wait for the first line rather than sleeping a guessed time.
        while std::fs::read_to_string(&path).unwrap().lines().count() < 2 {
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, Ordering::Relaxed);
        let seconds = sampler.join().unwrap().unwrap();
        assert_eq!(
            seconds[0],
            Second {
                requests: 4,
                ids: 3000,
                errors: 1,
                slowest_ns: 2_000_000
            }
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text.lines().take(2).collect::<Vec<_>>(),
            [
                "second,requests,ids,errors,max_latency_us",
                "1,4,3000,1,2000"
            ]
        );
    }
}
