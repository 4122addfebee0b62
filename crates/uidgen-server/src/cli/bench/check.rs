//! `uidgen bench check DIR…`: whether any ID of the given recordings ([`super::record`]) came
//! twice, exactly, however many billions they hold: one bucket of every recording at a time is
//! read, sorted and swept for overlapping runs. It also names the worker ids the IDs carry, per
//! recording (decoded with the layout), and how far their time field ran ahead of the clock of
//! the machine that received them.

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, bail};
use clap::Args;
use uidgen_core::{FieldKind, Layout};

use super::record::{self, BLOCK_BITS, BUCKETS, Manifest, PIECE_BYTES, Run};
use crate::cli::args::{ConfigArgs, LayoutArgs};

/// `uidgen bench check` options.
#[derive(Debug, Clone, Args)]
pub struct CheckArgs {
    /// Recordings (`uidgen bench --record DIR`), or directories holding them (searched through):
    /// all of them are checked together, as one set of IDs.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Configuration (its layout decodes the IDs).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The layout the IDs were issued with, over the configured one.
    #[command(flatten)]
    pub layout: LayoutArgs,
}

/// The most duplicated IDs a report lists.
const EXAMPLES: usize = 10;

/// One recording's share of a check.
#[derive(Debug, Clone)]
pub struct RecordingSummary {
    /// Its directory.
    pub dir: PathBuf,
    /// What its run called.
    pub target: String,
    /// IDs it holds.
    pub ids: u64,
    /// The worker ids its IDs carry.
    pub workers: BTreeSet<u64>,
    /// The most its IDs' time field (the start of their time unit) ran ahead of the receiving
    /// machine's clock, in ms (negative: behind it); `None` for a recording without IDs.
    pub lead_ms: Option<i64>,
}

/// What a check found.
#[derive(Debug)]
pub struct CheckReport {
    /// The layout the IDs were decoded with.
    pub layout: String,
    /// Each recording checked.
    pub recordings: Vec<RecordingSummary>,
    /// IDs received, over all recordings.
    pub ids: u64,
    /// IDs received more than once, counted once per extra copy (0 for unique IDs).
    pub duplicates: u64,
    /// Some of the duplicated IDs.
    pub examples: Vec<u64>,
}

impl CheckReport {
    /// The worker ids of every recording together.
    pub fn workers(&self) -> BTreeSet<u64> {
        self.recordings
            .iter()
            .flat_map(|r| r.workers.iter().copied())
            .collect()
    }

    /// The largest time lead of any recording, in ms.
    pub fn lead_ms(&self) -> Option<i64> {
        self.recordings.iter().filter_map(|r| r.lead_ms).max()
    }

    /// An error when some ID came more than once.
    pub fn unique(&self) -> anyhow::Result<()> {
        if self.duplicates > 0 {
            bail!(
                "{} IDs were received more than once (the first ones are listed above)",
                self.duplicates
            );
        }
        Ok(())
    }
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let seconds = |ms: i64| ms as f64 / 1000.0;
        writeln!(
            f,
            "{} recordings, decoded with layout {}:",
            self.recordings.len(),
            self.layout
        )?;
        for r in &self.recordings {
            write!(
                f,
                "  {}: {} IDs from {}, worker ids {}",
                r.dir.display(),
                r.ids,
                r.target,
                ranges(&r.workers)
            )?;
            match r.lead_ms {
                Some(ms) => writeln!(f, ", time field at most {:.3} s ahead", seconds(ms))?,
                None => writeln!(f)?,
            }
        }
        writeln!(f, "IDs: {}  duplicates: {}", self.ids, self.duplicates)?;
        if !self.examples.is_empty() {
            let listed: Vec<String> = self.examples.iter().map(u64::to_string).collect();
            writeln!(
                f,
                "duplicated IDs (first ones; `uidgen decode` names their worker and time): {}",
                listed.join(" ")
            )?;
        }
        let workers = self.workers();
        writeln!(
            f,
            "worker ids: {} distinct: {}",
            workers.len(),
            ranges(&workers)
        )?;
        match self.lead_ms() {
            Some(ms) => write!(
                f,
                "time lead: at most {:.3} s (the IDs' time unit ahead of the clock that received \
                 them, to {} ms)",
                seconds(ms),
                record::WINDOW_MS
            ),
            None => write!(f, "time lead: no IDs"),
        }
    }
}

/// `1-3, 7`: a set of numbers as ranges.
fn ranges(set: &BTreeSet<u64>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = set.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == end.checked_add(1).as_ref() {
            end += 1;
            iter.next();
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    if out.is_empty() {
        "none".to_owned()
    } else {
        out.join(", ")
    }
}

/// Check the recordings `args` names, with its layout.
pub fn check(args: &CheckArgs) -> anyhow::Result<CheckReport> {
    let layout = args.layout.layout(&args.config)?;
    let mut dirs = Vec::new();
    for dir in &args.dirs {
        let before = dirs.len();
        find(dir, &mut dirs)?;
        if dirs.len() == before {
            bail!(
                "{} holds no recording: give directories `uidgen bench --record DIR` wrote",
                dir.display()
            );
        }
    }
    check_dirs(&dirs, &layout)
}

/// Push `dir` if it is a recording, else the recordings below it, in name order. A directory
/// with bucket files but no manifest is a recording that did not finish: refused.
fn find(dir: &Path, found: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if record::manifest_file(dir).exists() {
        found.push(dir.to_owned());
        return Ok(());
    }
    if record::bucket_file(dir, 0).exists() {
        bail!(
            "{} has no recording.json: its recording did not finish (the bench was stopped \
             or failed), so it cannot be checked whole",
            dir.display()
        );
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_dir())
        .collect();
    subdirs.sort();
    subdirs.iter().try_for_each(|sub| find(sub, found))
}

/// One piece of a bucket: a run within one block, and the recording it came from.
#[derive(Debug, Clone, Copy)]
struct Piece {
    run: Run,
    recording: usize,
}

/// What one thread found over the buckets it swept.
#[derive(Debug)]
struct Partial {
    ids: Vec<u64>,
    workers: Vec<BTreeSet<u64>>,
    duplicates: u64,
    examples: Vec<u64>,
}

fn check_dirs(dirs: &[PathBuf], layout: &Layout) -> anyhow::Result<CheckReport> {
    let manifests = dirs
        .iter()
        .map(|dir| {
            let path = record::manifest_file(dir);
            let text =
                std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let manifest: Manifest = serde_json::from_slice(&text)
                .with_context(|| format!("{} is not a recording's manifest", path.display()))?;
            manifest.check_format(dir)?;
            Ok(manifest)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let next = AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    let partials = std::thread::scope(|scope| {
        let sweepers: Vec<_> = (0..threads.min(4))
            .map(|_| scope.spawn(|| sweep(dirs, layout, &next)))
            .collect();
        sweepers
            .into_iter()
            .map(|s| {
                s.join()
                    .map_err(|_| anyhow::anyhow!("a check thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()
    })?;
    let mut total = Partial {
        ids: vec![0; dirs.len()],
        workers: vec![BTreeSet::new(); dirs.len()],
        duplicates: 0,
        examples: Vec::new(),
    };
    for partial in partials {
        for (r, ids) in partial.ids.into_iter().enumerate() {
            total.ids[r] += ids;
        }
        for (r, workers) in partial.workers.into_iter().enumerate() {
            total.workers[r].extend(workers);
        }
        total.duplicates += partial.duplicates;
        total.examples.extend(partial.examples);
    }
    total.examples.sort_unstable();
    total.examples.truncate(EXAMPLES);
    let mut recordings = Vec::with_capacity(dirs.len());
    for (r, (dir, manifest)) in dirs.iter().zip(manifests).enumerate() {
        if total.ids[r] != manifest.ids {
            bail!(
                "{} holds {} IDs in its buckets but its manifest says {}: the recording was cut \
                 short or changed after it finished",
                dir.display(),
                total.ids[r],
                manifest.ids
            );
        }
        recordings.push(RecordingSummary {
            dir: dir.clone(),
            target: manifest.target,
            ids: manifest.ids,
            workers: std::mem::take(&mut total.workers[r]),
            lead_ms: lead_ms(dir, layout)?,
        });
    }
    Ok(CheckReport {
        layout: layout.name().to_owned(),
        ids: total.ids.iter().sum(),
        recordings,
        duplicates: total.duplicates,
        examples: total.examples,
    })
}

/// Sweep buckets until none is left (`next` hands them out): load bucket `b` of every
/// recording, sort its pieces, count the IDs two pieces share, and note each piece's workers.
fn sweep(dirs: &[PathBuf], layout: &Layout, next: &AtomicUsize) -> anyhow::Result<Partial> {
    let mut partial = Partial {
        ids: vec![0; dirs.len()],
        workers: vec![BTreeSet::new(); dirs.len()],
        duplicates: 0,
        examples: Vec::new(),
    };
    let worker_shift = layout.shift(FieldKind::Worker);
    let mut pieces = Vec::new();
    loop {
        // Relaxed: hands out bucket numbers; the buckets' data is read from files, not shared.
        let b = next.fetch_add(1, Ordering::Relaxed);
        if b >= BUCKETS {
            return Ok(partial);
        }
        pieces.clear();
        for (recording, dir) in dirs.iter().enumerate() {
            load(dir, b, recording, &mut pieces)?;
        }
        pieces.sort_unstable_by_key(|p| p.run.first);
        // The highest ID of the pieces swept so far: sorted by first ID, a piece shares IDs
        // with earlier ones exactly when it starts at or below it, and then shares all of
        // [first, min(last, reach)] (every earlier piece starts at or below its first).
        let mut reach: Option<u64> = None;
        // The last (recording, worker block) decoded: consecutive pieces mostly share it.
        let mut decoded: Option<(usize, u64)> = None;
        for piece in &pieces {
            let (first, last) = (piece.run.first, piece.run.last());
            if let Some(reach) = reach.filter(|&reach| first <= reach) {
                partial.duplicates += last.min(reach) - first + 1;
                if partial.examples.len() < EXAMPLES {
                    partial.examples.push(first);
                }
            }
            reach = Some(reach.map_or(last, |reach| reach.max(last)));
            partial.ids[piece.recording] += piece.run.count;
            if let Some(shift) = worker_shift {
                workers_of(
                    piece,
                    shift,
                    layout,
                    &mut decoded,
                    &mut partial.workers[piece.recording],
                )?;
            }
        }
    }
}

/// Note the worker ids of `piece`'s IDs: the worker field holds still across each aligned
/// block of 2^`shift` IDs, so one ID of each block the piece touches is decoded.
fn workers_of(
    piece: &Piece,
    shift: u32,
    layout: &Layout,
    decoded: &mut Option<(usize, u64)>,
    workers: &mut BTreeSet<u64>,
) -> anyhow::Result<()> {
    let last = u128::from(piece.run.last());
    let mut id = piece.run.first;
    loop {
        let block = id >> shift;
        if *decoded != Some((piece.recording, block)) {
            let parts = layout.decompose(id).with_context(|| {
                format!(
                    "ID {id} is not a {} ID: give the layout it was issued with (--layout)",
                    layout.name()
                )
            })?;
            workers.insert(parts.worker);
            *decoded = Some((piece.recording, block));
        }
        let next = (u128::from(block) + 1) << shift;
        if next > last {
            return Ok(());
        }
        id = u64::try_from(next)?;
    }
}

/// Add bucket `b` of the recording in `dir` to `pieces`, each piece checked to be one the
/// recorder writes.
fn load(dir: &Path, b: usize, recording: usize, pieces: &mut Vec<Piece>) -> anyhow::Result<()> {
    let path = record::bucket_file(dir, b);
    let bytes = std::fs::read(&path).with_context(|| {
        format!(
            "cannot read {}: the recording is incomplete",
            path.display()
        )
    })?;
    if bytes.len() % PIECE_BYTES != 0 {
        bail!(
            "{} is cut short ({} bytes, not a multiple of {PIECE_BYTES})",
            path.display(),
            bytes.len()
        );
    }
    let block = 1u64 << BLOCK_BITS;
    for raw in bytes.chunks_exact(PIECE_BYTES) {
        let (first, count) = raw.split_at(8);
        let first = u64::from_le_bytes(first.try_into()?);
        let count = u64::from(u32::from_le_bytes(count.try_into()?));
        if count == 0 || (first & (block - 1)) + count > block || record::bucket_of(first) != b {
            bail!(
                "{} holds a piece the recorder does not write ({count} IDs from {first}): the \
                 file is damaged",
                path.display()
            );
        }
        pieces.push(Piece {
            run: Run { first, count },
            recording,
        });
    }
    Ok(())
}

/// The most the IDs of the recording in `dir` ran ahead of the clock that received them, in
/// ms: per window, the start of the largest ID's time unit less the window's start (at most
/// [`record::WINDOW_MS`] above the truth, never below it). The largest ID is the latest on
/// every layout whose fields above the time field hold still on one server.
fn lead_ms(dir: &Path, layout: &Layout) -> anyhow::Result<Option<i64>> {
    let path = record::windows_file(dir);
    let bytes = std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))?;
    if bytes.len() % 16 != 0 {
        bail!("{} is cut short", path.display());
    }
    let mut lead: Option<i64> = None;
    for raw in bytes.chunks_exact(16) {
        let (start, id) = raw.split_at(8);
        let start = u64::from_le_bytes(start.try_into()?);
        let id = u64::from_le_bytes(id.try_into()?);
        let time = layout
            .decompose(id)
            .with_context(|| format!("ID {id} is not a {} ID", layout.name()))?
            .time;
        let ahead = i64::try_from(i128::from(layout.millis_of(time)) - i128::from(start))?;
        lead = Some(lead.map_or(ahead, |lead| lead.max(ahead)));
    }
    Ok(lead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::bench::record::{Received, Recorder};

    /// Record `answers` (each a list of IDs received at `at_ms`) into a new recording in `dir`.
    fn recording(dir: &Path, answers: &[(u64, Vec<u64>)]) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let recorder = Recorder::create(dir, "test".into()).unwrap();
            let sender = recorder.sender();
            let mut received = Received::default();
            for (at_ms, ids) in answers {
                ids.iter().for_each(|&id| received.push(id));
                received.answered(*at_ms);
            }
            sender.send(received.take(true)).await.unwrap();
            drop(sender);
            recorder.finish().await.unwrap();
        });
    }

    fn baidu() -> Layout {
        Layout::preset("baidu").unwrap()
    }

    fn id(layout: &Layout, time: u64, worker: u64, sequence: u64) -> u64 {
        layout
            .compose(&layout.parts(time, worker, sequence))
            .unwrap()
    }

    #[test]
    fn unique_ids_over_several_recordings_check_clean_with_their_workers() {
        let layout = baidu();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let t = 1000;
        let now = layout.millis_of(t);
        recording(
            &a,
            &[(now, (0..5000).map(|s| id(&layout, t, 1, s)).collect())],
        );
        recording(
            &b,
            &[
                (now, (0..3).map(|s| id(&layout, t, 2, s)).collect()),
                (now, vec![id(&layout, t, 3, 8191), id(&layout, t, 4, 0)]),
            ],
        );
        let report = check_dirs(&[a, b], &layout).unwrap();
        assert_eq!((report.ids, report.duplicates), (5005, 0));
        assert_eq!(report.recordings[0].workers, BTreeSet::from([1]));
        assert_eq!(report.recordings[1].workers, BTreeSet::from([2, 3, 4]));
        assert!(report.unique().is_ok());
        assert!(report.to_string().contains("worker ids: 4 distinct: 1-4"));
    }

    #[test]
    fn an_id_in_two_recordings_or_twice_in_one_is_counted_as_a_duplicate() {
        let layout = baidu();
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let t = 2000;
        let now = layout.millis_of(t);
        let dup = id(&layout, t, 7, 100);
        // In `a` the run 90..=110 and again 100 alone; `b` holds 95..=105.
        recording(
            &a,
            &[
                (now, (90..=110).map(|s| id(&layout, t, 7, s)).collect()),
                (now, vec![dup]),
            ],
        );
        recording(
            &b,
            &[(now, (95..=105).map(|s| id(&layout, t, 7, s)).collect())],
        );
        let report = check_dirs(&[a, b], &layout).unwrap();
        assert_eq!(report.ids, 21 + 1 + 11);
        assert_eq!(report.duplicates, 1 + 11);
        assert!(report.examples.contains(&id(&layout, t, 7, 95)));
        let error = report.unique().unwrap_err().to_string();
        assert!(
            error.contains("12 IDs were received more than once"),
            "{error}"
        );
    }

    #[test]
    fn the_time_lead_is_how_far_the_largest_id_of_a_window_runs_ahead_of_it() {
        let layout = baidu();
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let t = 5000;
        let now = layout.millis_of(t);
        recording(
            &a,
            &[
                (now + 500, vec![id(&layout, t, 1, 0)]),
                (
                    now + 1000,
                    vec![id(&layout, t + 60, 1, 0), id(&layout, t, 1, 1)],
                ),
            ],
        );
        let report = check_dirs(&[a], &layout).unwrap();
        assert_eq!(report.lead_ms(), Some(59_000));
    }

    #[test]
    fn a_recording_that_did_not_finish_or_was_cut_is_refused() {
        let layout = baidu();
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let ids: Vec<u64> = (0..10).map(|s| id(&layout, 1, 1, s)).collect();
        recording(&a, &[(0, ids.clone())]);
        let bucket = record::bucket_file(&a, record::bucket_of(ids[0]));
        let mut bytes = std::fs::read(&bucket).unwrap();
        bytes.pop();
        std::fs::write(&bucket, &bytes).unwrap();
        let error = check_dirs(std::slice::from_ref(&a), &layout)
            .unwrap_err()
            .to_string();
        assert!(error.contains("cut short"), "{error}");
        std::fs::remove_file(record::manifest_file(&a)).unwrap();
        let mut found = Vec::new();
        let error = find(&a, &mut found).unwrap_err().to_string();
        assert!(error.contains("did not finish"), "{error}");
    }

    #[test]
    fn a_recording_directory_must_start_empty() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x"), b"").unwrap();
        let error = Recorder::create(dir.path(), "t".into())
            .unwrap_err()
            .to_string();
        assert!(error.contains("is not empty"), "{error}");
    }

    #[test]
    fn ranges_read_as_a_person_writes_them() {
        assert_eq!(ranges(&BTreeSet::from([1, 2, 3, 7, 9, 10])), "1-3, 7, 9-10");
        assert_eq!(ranges(&BTreeSet::new()), "none");
    }
}
