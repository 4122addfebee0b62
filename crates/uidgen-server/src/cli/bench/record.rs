//! `uidgen bench --record DIR`: every ID a run receives, kept on disk in a form that lets
//! `uidgen bench check` say exactly whether any ID came twice, over billions of IDs, in memory
//! the size of one bucket.
//!
//! A recording directory holds (format 1):
//! - `bucket-000.bin` … `bucket-255.bin`: the IDs as runs of consecutive IDs, 12 bytes each,
//!   little-endian `first` (u64) and `count` (u32). A cached generator's batch of 1,000 `baidu`
//!   IDs is one or two runs, so a billion batched IDs take tens of megabytes, not 8 GB (single
//!   IDs cost a run each). Each run is cut at the multiples of 2^[`BLOCK_BITS`] (a *block*),
//!   and each piece goes to the bucket a hash of its block names ([`bucket_of`]): every copy
//!   of an ID lands in the same bucket of every recording, so the check reads one bucket of
//!   all recordings at a time, sorts it and looks for overlaps.
//! - `windows.bin`: per [`WINDOW_MS`] of the receiving machine's clock, the largest ID received
//!   in it, as (window start in ms since the Unix epoch, ID) u64 pairs: how far the IDs' time
//!   field ran ahead of the clock, read by the check with the layout.
//! - `recording.json` ([`Manifest`]), written last: a directory without it did not finish.
//!
//! Invariants: every piece holds 1 to 2^[`BLOCK_BITS`] IDs of one block; the manifest's `ids`
//! is the sum of the pieces' counts.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

/// The recording format this code writes and reads.
pub(super) const FORMAT: u32 = 1;
/// Runs are cut at multiples of 2^16 IDs: large enough that a batch's run is rarely cut, small
/// enough that the blocks of one second of IDs spread over every bucket.
pub(super) const BLOCK_BITS: u32 = 16;
/// Bucket files per recording: a billion single IDs make buckets of some 50 MB.
pub(super) const BUCKETS: usize = 256;
/// The receiving clock's resolution for the time lead: the check's figure is at most this much
/// above the true one, never below it.
pub(super) const WINDOW_MS: u64 = 100;
/// Bytes of one piece in a bucket file.
pub(super) const PIECE_BYTES: usize = 12;
/// Runs a calling task gathers before handing them to the writer.
const CHUNK_RUNS: usize = 4096;

/// IDs `first`, `first + 1`, …, `first + count - 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    /// The first ID.
    pub(super) first: u64,
    /// How many (at least 1).
    pub(super) count: u64,
}

impl Run {
    /// The last ID of the run.
    pub(super) fn last(self) -> u64 {
        debug_assert!(self.count >= 1 && self.first.checked_add(self.count - 1).is_some());
        self.first + (self.count - 1)
    }

    /// The run cut at block boundaries, in order.
    pub(super) fn pieces(self) -> impl Iterator<Item = Run> {
        let block = 1u64 << BLOCK_BITS;
        let (mut first, mut left) = (self.first, self.count);
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let room = block - (first & (block - 1));
            let piece = Run {
                first,
                count: left.min(room),
            };
            left -= piece.count;
            // Not past the last ID: the run may end at u64::MAX.
            if left > 0 {
                first += piece.count;
            }
            Some(piece)
        })
    }
}

/// The bucket every piece of `first`'s block goes to: the top byte of a Fibonacci hash of the
/// block, so consecutive blocks (one second of IDs) spread over all buckets.
///
/// ```text
/// bucket_of(x) == bucket_of(y) whenever x >> BLOCK_BITS == y >> BLOCK_BITS
/// ```
pub(super) fn bucket_of(first: u64) -> usize {
    let hash = (first >> BLOCK_BITS).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    usize::from(hash.to_be_bytes()[0])
}

/// What one calling task received since it last handed over: runs of IDs, and the largest ID
/// of each clock window.
#[derive(Debug, Default)]
pub(super) struct Received {
    /// The IDs, as runs, in the order received.
    runs: Vec<Run>,
    /// Closed windows: (window start ms, largest ID received in it).
    windows: Vec<(u64, u64)>,
    /// The open window and its largest ID so far.
    open: Option<(u64, u64)>,
    /// The largest ID of the answer being read.
    answer_max: Option<u64>,
}

impl Received {
    /// One ID of the answer being read.
    pub(super) fn push(&mut self, id: u64) {
        self.answer_max = Some(self.answer_max.map_or(id, |m| m.max(id)));
        if let Some(run) = self.runs.last_mut()
            && run.first.checked_add(run.count) == Some(id)
        {
            run.count += 1;
            return;
        }
        self.runs.push(Run {
            first: id,
            count: 1,
        });
    }

    /// The answer being read is complete, received at `now_ms` (ms since the Unix epoch).
    pub(super) fn answered(&mut self, now_ms: u64) {
        let Some(max) = self.answer_max.take() else {
            return;
        };
        let window = now_ms - now_ms % WINDOW_MS;
        match &mut self.open {
            Some((start, largest)) if *start == window => *largest = (*largest).max(max),
            open => {
                if let Some(closed) = open.replace((window, max)) {
                    self.windows.push(closed);
                }
            }
        }
    }

    /// Whether enough is gathered to hand over.
    pub(super) fn is_full(&self) -> bool {
        self.runs.len() >= CHUNK_RUNS || self.windows.len() >= CHUNK_RUNS
    }

    /// What is gathered, to hand over; with `last`, the open window too.
    pub(super) fn take(&mut self, last: bool) -> Received {
        Received {
            runs: std::mem::take(&mut self.runs),
            windows: std::mem::take(&mut self.windows),
            open: if last { self.open.take() } else { None },
            answer_max: None,
        }
    }
}

/// `recording.json`: what a finished recording holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Manifest {
    /// [`FORMAT`].
    pub(super) format: u32,
    /// [`BLOCK_BITS`] as written.
    pub(super) block_bits: u32,
    /// [`BUCKETS`] as written.
    pub(super) buckets: usize,
    /// [`WINDOW_MS`] as written.
    pub(super) window_ms: u64,
    /// IDs recorded.
    pub(super) ids: u64,
    /// Pieces written to the buckets.
    pub(super) pieces: u64,
    /// What the run called (a URL and a route or method).
    pub(super) target: String,
    /// When the recording started, in ms since the Unix epoch.
    pub(super) started_ms: u64,
    /// When it finished, in ms since the Unix epoch.
    pub(super) finished_ms: u64,
}

impl Manifest {
    /// Whether this code reads a recording of this shape.
    pub(super) fn check_format(&self, dir: &Path) -> anyhow::Result<()> {
        if (self.format, self.block_bits, self.buckets, self.window_ms)
            != (FORMAT, BLOCK_BITS, BUCKETS, WINDOW_MS)
        {
            bail!(
                "{} is a recording of format {} ({} buckets of 2^{} blocks); this uidgen reads \
                 format {FORMAT} ({BUCKETS} buckets of 2^{BLOCK_BITS}): check it with the uidgen \
                 that recorded it",
                dir.display(),
                self.format,
                self.buckets,
                self.block_bits
            );
        }
        Ok(())
    }
}

/// The name of bucket `b`'s file.
pub(super) fn bucket_file(dir: &Path, b: usize) -> PathBuf {
    dir.join(format!("bucket-{b:03}.bin"))
}

/// The manifest's file in `dir`.
pub(super) fn manifest_file(dir: &Path) -> PathBuf {
    dir.join("recording.json")
}

/// The windows' file in `dir`.
pub(super) fn windows_file(dir: &Path) -> PathBuf {
    dir.join("windows.bin")
}

/// Milliseconds since the Unix epoch on this machine's clock.
pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The writer of one recording: calling tasks hand it what they received through
/// [`Recorder::sender`]; a thread of its own cuts, buckets and writes it, so the tasks never
/// wait on the disk unless it falls behind by [`QUEUE`] hand-overs.
#[derive(Debug)]
pub(super) struct Recorder {
    sender: mpsc::Sender<Received>,
    writer: std::thread::JoinHandle<anyhow::Result<Manifest>>,
}

/// Hand-overs queued for the writer before calling tasks wait for it.
const QUEUE: usize = 256;

impl Recorder {
    /// Start a recording in `dir` (created if missing; refused if it holds anything) of calls
    /// to `target`.
    pub(super) fn create(dir: &Path, target: String) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the recording directory {}", dir.display()))?;
        if std::fs::read_dir(dir)
            .with_context(|| format!("cannot read {}", dir.display()))?
            .next()
            .is_some()
        {
            bail!(
                "{} is not empty: give each recording a directory of its own",
                dir.display()
            );
        }
        let buckets = (0..BUCKETS)
            .map(|b| {
                let path = bucket_file(dir, b);
                File::create(&path)
                    .map(|file| BufWriter::with_capacity(64 * 1024, file))
                    .with_context(|| format!("cannot create {}", path.display()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let (sender, receiver) = mpsc::channel(QUEUE);
        let dir = dir.to_owned();
        let writer = std::thread::spawn(move || write(&dir, buckets, receiver, target));
        Ok(Self { sender, writer })
    }

    /// Where a calling task hands over what it received.
    pub(super) fn sender(&self) -> mpsc::Sender<Received> {
        self.sender.clone()
    }

    /// Finish the recording once every sender is gone: flush the buckets, write the windows and
    /// the manifest.
    pub(super) async fn finish(self) -> anyhow::Result<Manifest> {
        drop(self.sender);
        let writer = self.writer;
        tokio::task::spawn_blocking(move || writer.join())
            .await?
            .map_err(|_| anyhow::anyhow!("the recording's writer thread panicked"))?
    }
}

/// The writer thread: until every sender is gone, write the pieces of each hand-over; then the
/// windows and the manifest.
fn write(
    dir: &Path,
    mut buckets: Vec<BufWriter<File>>,
    mut receiver: mpsc::Receiver<Received>,
    target: String,
) -> anyhow::Result<Manifest> {
    let started_ms = now_ms();
    let (mut ids, mut pieces) = (0u64, 0u64);
    let mut windows: BTreeMap<u64, u64> = BTreeMap::new();
    let mut window = |(start, largest): (u64, u64)| {
        let entry = windows.entry(start).or_insert(largest);
        *entry = (*entry).max(largest);
    };
    while let Some(received) = receiver.blocking_recv() {
        for run in received.runs {
            ids += run.count;
            for piece in run.pieces() {
                let count = u32::try_from(piece.count).context("a piece larger than a block")?;
                let bucket = &mut buckets[bucket_of(piece.first)];
                bucket.write_all(&piece.first.to_le_bytes())?;
                bucket.write_all(&count.to_le_bytes())?;
                pieces += 1;
            }
        }
        received.windows.into_iter().for_each(&mut window);
        received.open.into_iter().for_each(&mut window);
    }
    for (b, mut bucket) in buckets.into_iter().enumerate() {
        bucket
            .flush()
            .with_context(|| format!("cannot write {}", bucket_file(dir, b).display()))?;
    }
    let mut out = BufWriter::new(File::create(windows_file(dir))?);
    for (start, largest) in windows {
        out.write_all(&start.to_le_bytes())?;
        out.write_all(&largest.to_le_bytes())?;
    }
    out.flush()?;
    let manifest = Manifest {
        format: FORMAT,
        block_bits: BLOCK_BITS,
        buckets: BUCKETS,
        window_ms: WINDOW_MS,
        ids,
        pieces,
        target,
        started_ms,
        finished_ms: now_ms(),
    };
    let path = manifest_file(dir);
    std::fs::write(&path, serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: u64, count: u64) -> Run {
        Run { first, count }
    }

    #[test]
    fn runs_are_cut_at_block_boundaries_and_keep_every_id() {
        let block = 1u64 << BLOCK_BITS;
        let pieces: Vec<_> = run(block - 2, block + 5).pieces().collect();
        assert_eq!(
            pieces,
            [run(block - 2, 2), run(block, block), run(2 * block, 3)]
        );
        assert_eq!(run(7, 3).pieces().collect::<Vec<_>>(), [run(7, 3)]);
        // A run ending at the largest ID ends without overflowing.
        assert_eq!(
            run(u64::MAX - 1, 2).pieces().collect::<Vec<_>>(),
            [run(u64::MAX - 1, 2)]
        );
    }

    #[test]
    fn ids_of_one_block_share_a_bucket_and_blocks_spread_over_all_buckets() {
        let block = 1u64 << BLOCK_BITS;
        assert_eq!(bucket_of(5 * block), bucket_of(6 * block - 1));
        let used: std::collections::BTreeSet<_> = (0..4 * BUCKETS as u64)
            .map(|b| bucket_of(b * block))
            .collect();
        assert!(used.len() > BUCKETS * 9 / 10, "{} buckets used", used.len());
    }

    #[test]
    fn consecutive_ids_gather_into_one_run_and_a_repeat_starts_another() {
        let mut received = Received::default();
        for id in [10, 11, 12, 12, 13, 40] {
            received.push(id);
        }
        received.answered(1_050);
        assert_eq!(received.runs, [run(10, 3), run(12, 2), run(40, 1)]);
        assert_eq!(received.open, Some((1_000, 40)));
    }

    #[test]
    fn each_window_keeps_the_largest_id_of_the_answers_received_in_it() {
        let mut received = Received::default();
        received.push(7);
        received.answered(1_010);
        received.push(5);
        received.answered(1_090);
        received.push(3);
        received.answered(1_100);
        let taken = received.take(true);
        assert_eq!(taken.windows, [(1_000, 7)]);
        assert_eq!(taken.open, Some((1_100, 3)));
    }
}
