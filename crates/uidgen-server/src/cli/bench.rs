//! `uidgen bench`: drive a running server over HTTP or gRPC, or the embedded generator, for a
//! time or a count, with a live progress line; then print IDs/s, the spread of the seconds and
//! latency percentiles. With `--record DIR` every ID received is kept on disk ([`record`]), and
//! `uidgen bench check DIR…` ([`check::check()`]) says whether any came twice.

mod callers;
pub mod check;
mod record;
mod tally;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{ArgGroup, Args, Subcommand};
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::mpsc;
use tonic::transport::Channel;
use uidgen_core::UidGenerator;
use uidgen_proto::v1::StreamIdsRequest;
use uidgen_proto::v1::id_service_client::IdServiceClient;

use check::CheckArgs;

use callers::{Caller, Failure, GrpcCaller, HttpCaller};
use record::{Received, Recorder};
use tally::{Second, Tally};

/// `uidgen bench` options.
#[derive(Debug, Clone, Args)]
#[command(
    args_conflicts_with_subcommands = true,
    group(ArgGroup::new("server").args(["url", "grpc"]))
)]
pub struct BenchArgs {
    /// `check`, instead of a run.
    #[command(subcommand)]
    pub command: Option<BenchCommand>,
    /// Configuration (embedded runs build its generator).
    #[command(flatten)]
    pub config: super::args::ConfigArgs,
    /// Base URL of a running server (`http://127.0.0.1:8080`); without it, the embedded generator
    /// is measured in process.
    #[arg(long, conflicts_with = "grpc")]
    pub url: Option<String>,
    /// URL of a running server's gRPC port (`http://127.0.0.1:9090`): single IDs with `NextId`,
    /// batches with `NextIds`, or with `--stream` one `StreamIds` call per connection.
    #[arg(long)]
    pub grpc: Option<String>,
    /// With `--grpc` and `--batch N`: read batches of N from one long `StreamIds` call per
    /// connection (each message counts as a request) instead of calling `NextIds`.
    #[arg(long, requires_all = ["grpc", "batch"])]
    pub stream: bool,
    /// Route to call for single IDs.
    #[arg(long, default_value = "/api/snowflake/get/bench")]
    pub route: String,
    /// Ask for batches of this many IDs per request (`/v1/ids?count=N`) instead of single IDs.
    #[arg(long)]
    pub batch: Option<u64>,
    /// How long to run, in seconds (fractions allowed).
    #[arg(long, default_value = "10", value_parser = parse_duration)]
    pub duration: Duration,
    /// Stop after this many requests (or calls, embedded), if reached before the duration.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Concurrent connections, one calling task each (or threads, embedded).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Hide the live progress line.
    #[arg(long)]
    pub quiet: bool,
    /// With `--grpc` and `--batch`: ask for runs of consecutive IDs (`runs` in the request, as
    /// uidgen-client does) instead of every ID listed (what a client that does not set it gets).
    #[arg(long, requires_all = ["grpc", "batch"])]
    pub runs: bool,
    /// Keep every ID received in DIR (created; it must be empty), for `uidgen bench check`.
    /// Each answer is then parsed; that costs the client CPU, so measure throughput apart.
    #[arg(long, value_name = "DIR", requires = "server")]
    pub record: Option<PathBuf>,
    /// Write each second of the run to FILE as CSV: second, requests, ids, errors,
    /// max_latency_us (the slowest call completed in that second).
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,
}

/// `uidgen bench` subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum BenchCommand {
    /// Check recordings made with `--record` for IDs received twice.
    ///
    /// `uidgen bench check DIR… [--layout L]`: every ID of the recordings, together; the
    /// duplicates (the exit status is 1 if any), the worker ids the IDs carry and how far
    /// their time field ran ahead of the clock that received them.
    Check(CheckArgs),
}

/// `--duration`: a positive, finite number of seconds.
///
/// ```
/// use uidgen_server::cli::bench::parse_duration;
/// assert_eq!(parse_duration("1.5").unwrap().as_millis(), 1500);
/// assert!(parse_duration("nan").is_err());
/// assert!(parse_duration("-1").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        _ => Err(format!(
            "{text:?} is not a usable duration: give a positive, finite number of seconds"
        )),
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct BenchReport {
    /// Requests (or calls) completed.
    pub requests: u64,
    /// IDs received.
    pub ids: u64,
    /// Failed requests.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Latency per request, in nanoseconds.
    pub latency: Histogram<u64>,
    /// IDs received in each whole second of the run.
    pub ids_per_second: Vec<u64>,
    /// With `--record`: the directory and the IDs it holds.
    pub recorded: Option<(PathBuf, u64)>,
    /// Why a failed call failed (the first failure of one connection that had some).
    pub first_failure: Option<String>,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(f64::EPSILON);
        let us = |q: f64| self.latency.value_at_quantile(q) as f64 / 1000.0;
        writeln!(
            f,
            "requests: {}  errors: {}  IDs: {}  elapsed: {:.2} s",
            self.requests, self.errors, self.ids, secs
        )?;
        writeln!(
            f,
            "throughput: {:.0} req/s  {:.0} IDs/s",
            self.requests as f64 / secs,
            self.ids as f64 / secs
        )?;
        if let Some((lowest, median, highest)) = tally::spread(&self.ids_per_second) {
            writeln!(
                f,
                "per second: min {lowest} IDs/s  median {median}  max {highest}  over {} s",
                self.ids_per_second.len()
            )?;
        }
        if let Some((dir, ids)) = &self.recorded {
            writeln!(f, "recorded: {ids} IDs in {}", dir.display())?;
        }
        if let Some(failure) = &self.first_failure {
            writeln!(f, "failed calls, e.g.: {failure}")?;
        }
        write!(
            f,
            "latency: p50 {:.1} µs  p90 {:.1} µs  p99 {:.1} µs  p99.9 {:.1} µs  max {:.1} µs",
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            self.latency.max() as f64 / 1000.0
        )
    }
}

fn histogram() -> anyhow::Result<Histogram<u64>> {
    // 1 ns to 60 s at 3 significant digits; a slower call is counted as 60 s.
    Histogram::new_with_bounds(1, 60_000_000_000, 3).context("latency histogram")
}

impl BenchReport {
    /// Nothing counted yet: what every run adds its workers' results to.
    fn empty() -> anyhow::Result<Self> {
        Ok(Self {
            requests: 0,
            ids: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            latency: histogram()?,
            ids_per_second: Vec::new(),
            recorded: None,
            first_failure: None,
        })
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// What watches a run while it goes: the counts, the progress line and the per-second sampler.
struct Watch {
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
    bar: std::thread::JoinHandle<()>,
    sampler: std::thread::JoinHandle<anyhow::Result<Vec<Second>>>,
}

impl Watch {
    fn start(args: &BenchArgs) -> anyhow::Result<Self> {
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = tally::sample(tally.clone(), stop.clone(), args.timeline.as_deref())?;
        let bar = progress(args, tally.clone(), stop.clone());
        Ok(Self {
            tally,
            stop,
            bar,
            sampler,
        })
    }

    /// Stop watching; the IDs of each whole second.
    fn finish(self) -> anyhow::Result<Vec<u64>> {
        // Relaxed: tells the threads to stop; they read no data we wrote.
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.bar.join();
        let seconds = self
            .sampler
            .join()
            .map_err(|_| anyhow::anyhow!("the per-second sampler panicked"))??;
        Ok(seconds.iter().map(|s| s.ids).collect())
    }
}

/// The live progress line: a bar with the share done when the run is bounded by `--requests`,
/// else the time elapsed against `--duration`.
fn progress(
    args: &BenchArgs,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let (quiet, requests, duration) = (args.quiet, args.requests, args.duration);
    std::thread::spawn(move || {
        if quiet {
            return;
        }
        let style = |template: &str| {
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
        };
        let bar = match requests {
            Some(n) => {
                let bar = ProgressBar::new(n);
                bar.set_style(style(
                    "{elapsed_precise} [{wide_bar}] {percent:>3}% {pos}/{len} {msg}",
                ));
                bar
            }
            None => {
                let bar = ProgressBar::new(duration.as_millis().try_into().unwrap_or(u64::MAX));
                bar.set_style(style("{elapsed_precise} [{wide_bar}] {percent:>3}% {msg}"));
                bar
            }
        };
        let start = Instant::now();
        // Relaxed: a progress display; exact counts are taken after the workers join.
        while !stop.load(Ordering::Relaxed) {
            let n = tally.requests.load(Ordering::Relaxed);
            let rate = n as f64 / start.elapsed().as_secs_f64().max(0.001);
            if requests.is_some() {
                bar.set_position(n);
                bar.set_message(format!("{rate:.0}/s"));
            } else {
                bar.set_position(start.elapsed().as_millis().try_into().unwrap_or(u64::MAX));
                bar.set_message(format!("{n} requests, {rate:.0}/s"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    })
}

/// Claim up to `want` calls from a shared budget; how many were granted (0: the budget is
/// spent). Every call of `--requests N` is granted exactly once, whatever the thread count.
fn claim(budget: &AtomicU64, want: u64) -> u64 {
    // Relaxed: the budget only needs each claim to be atomic; it orders no other memory.
    match budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
        (left > 0).then(|| left - left.min(want))
    }) {
        Ok(left) => left.min(want),
        Err(_) => 0,
    }
}

/// Measure the embedded generator on `concurrency` threads.
pub fn run_embedded(
    args: &BenchArgs,
    generator: Arc<dyn UidGenerator>,
) -> anyhow::Result<BenchReport> {
    if args.record.is_some() {
        bail!("--record keeps what a server answers: give --url or --grpc");
    }
    let deadline = args.duration;
    let budget = Arc::new(AtomicU64::new(args.requests.unwrap_or(u64::MAX)));
    let watch = Watch::start(args)?;
    let batch = args.batch.unwrap_or(1);
    let n_batch = usize::try_from(batch)?;
    let start = Instant::now();
    let workers: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let generator = generator.clone();
            let (tally, budget) = (watch.tally.clone(), budget.clone());
            std::thread::spawn(move || -> anyhow::Result<(u64, u64, Histogram<u64>)> {
                let mut latency = histogram()?;
                let (mut calls, mut errors) = (0u64, 0u64);
                let start = Instant::now();
                while start.elapsed() < deadline {
                    // Time a run of up to 64 calls: timing each ~10 ns call alone would measure
                    // the clock, not the generator.
                    let run = claim(&budget, 64);
                    if run == 0 {
                        break;
                    }
                    let t = Instant::now();
                    let mut failed = 0;
                    for _ in 0..run {
                        let ok = if n_batch == 1 {
                            generator.next_id().is_ok()
                        } else {
                            generator.next_ids(n_batch).is_ok()
                        };
                        failed += u64::from(!ok);
                    }
                    let each = (nanos(t.elapsed()) / run).max(1);
                    latency.saturating_record(each);
                    calls += run;
                    errors += failed;
                    tally.add(run, (run - failed) * batch, failed, each);
                }
                Ok((calls, errors, latency))
            })
        })
        .collect();
    let mut report = BenchReport::empty()?;
    for w in workers {
        let (calls, errors, latency) = w
            .join()
            .map_err(|_| anyhow::anyhow!("a bench thread panicked"))??;
        report.requests += calls;
        report.errors += errors;
        report.latency.add(latency)?;
    }
    report.elapsed = start.elapsed();
    report.ids = (report.requests - report.errors) * batch;
    report.ids_per_second = watch.finish()?;
    Ok(report)
}

/// How long a calling task waits after a failed call before the next: a server that is down
/// (restarting, say) gets a call per connection every 10 ms rather than a busy loop of refused
/// connections, which would also take the CPU the other connections' calls need.
const FAILED_PAUSE: Duration = Duration::from_millis(10);

/// What one calling task counted.
struct Counted {
    answered: u64,
    errors: u64,
    ids: u64,
    latency: Histogram<u64>,
    first_failure: Option<Failure>,
}

/// Run `callers` concurrently until the duration or the request budget runs out, handing what
/// they receive to `recorder` if given.
async fn run_callers<C: Caller>(
    args: &BenchArgs,
    callers: Vec<C>,
    recorder: Option<Recorder>,
) -> anyhow::Result<BenchReport> {
    let deadline = Instant::now() + args.duration;
    let budget = Arc::new(AtomicU64::new(args.requests.unwrap_or(u64::MAX)));
    let watch = Watch::start(args)?;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for mut caller in callers {
        let (budget, tally) = (budget.clone(), watch.tally.clone());
        let sender = recorder.as_ref().map(Recorder::sender);
        tasks.spawn(async move {
            let mut counted = Counted {
                answered: 0,
                errors: 0,
                ids: 0,
                latency: histogram()?,
                first_failure: None,
            };
            let mut received = sender.as_ref().map(|_| Received::default());
            while Instant::now() < deadline && claim(&budget, 1) == 1 {
                let t = Instant::now();
                let answer = caller.call(received.as_mut()).await;
                let ns = nanos(t.elapsed());
                counted.latency.saturating_record(ns);
                match answer {
                    Ok(ids) => {
                        counted.answered += 1;
                        counted.ids += ids;
                        tally.add(1, ids, 0, ns);
                    }
                    Err(failure) => {
                        counted.errors += 1;
                        counted.first_failure.get_or_insert(failure);
                        tally.add(1, 0, 1, ns);
                        tokio::time::sleep(FAILED_PAUSE).await;
                    }
                }
                if let (Some(received), Some(sender)) = (&mut received, &sender) {
                    received.answered(record::now_ms());
                    if received.is_full() {
                        hand_over(sender, received.take(false)).await?;
                    }
                }
            }
            if let (Some(received), Some(sender)) = (&mut received, &sender) {
                hand_over(sender, received.take(true)).await?;
            }
            anyhow::Ok(counted)
        });
    }
    let mut report = BenchReport::empty()?;
    let mut failure = None;
    while let Some(joined) = tasks.join_next().await {
        match joined? {
            Ok(counted) => {
                report.requests += counted.answered + counted.errors;
                report.errors += counted.errors;
                report.ids += counted.ids;
                report.latency.add(counted.latency)?;
                if report.first_failure.is_none() {
                    report.first_failure = counted.first_failure;
                }
            }
            Err(error) => {
                failure.get_or_insert(error);
            }
        }
    }
    report.elapsed = start.elapsed();
    report.ids_per_second = watch.finish()?;
    // The writer's own error first: a task fails to hand over only when the writer stopped.
    if let (Some(recorder), Some(dir)) = (recorder, &args.record) {
        report.recorded = Some((dir.clone(), recorder.finish().await?.ids));
    }
    match failure {
        Some(error) => Err(error),
        None => Ok(report),
    }
}

/// Hand a task's IDs to the recording's writer.
async fn hand_over(sender: &mpsc::Sender<Received>, received: Received) -> anyhow::Result<()> {
    sender
        .send(received)
        .await
        .map_err(|_| anyhow::anyhow!("the recording's writer stopped"))
}

/// `--batch`, checked: at least 1 when given.
fn batch_of(args: &BenchArgs) -> anyhow::Result<Option<u64>> {
    match args.batch {
        Some(0) => bail!("--batch must be at least 1"),
        batch => Ok(batch),
    }
}

/// The recorder of `--record`, if given, for calls to `target`.
fn recorder(args: &BenchArgs, target: String) -> anyhow::Result<Option<Recorder>> {
    args.record
        .as_deref()
        .map(|dir| Recorder::create(dir, target))
        .transpose()
}

/// Measure a running server with `concurrency` keep-alive connections.
pub async fn run_http(args: &BenchArgs, base: &str) -> anyhow::Result<BenchReport> {
    let base = base.trim_end_matches('/');
    let batch = batch_of(args)?;
    let url = match batch {
        Some(n) => format!("{base}/v1/ids?count={n}"),
        None => format!("{base}{}", args.route),
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(args.concurrency)
        .build()?;
    // Fail fast, with the URL, if nothing answers.
    client
        .get(&url)
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?
        .error_for_status()
        .with_context(|| format!("{url} answered with an error"))?;
    let callers = (0..args.concurrency.max(1))
        .map(|_| HttpCaller {
            client: client.clone(),
            url: url.clone(),
            batch,
        })
        .collect();
    let recorder = recorder(args, url.clone())?;
    run_callers(args, callers, recorder).await
}

/// Measure a running server's gRPC port with `concurrency` connections (one HTTP/2 connection
/// per calling task, as the HTTP target keeps one keep-alive connection per task).
pub async fn run_grpc(args: &BenchArgs, url: &str) -> anyhow::Result<BenchReport> {
    let batch = batch_of(args)?;
    let count = batch
        .map(u32::try_from)
        .transpose()
        .context("--batch is above 2^32")?;
    let mut callers = Vec::with_capacity(args.concurrency.max(1));
    for _ in 0..args.concurrency.max(1) {
        let channel = Channel::from_shared(url.to_owned())
            .with_context(|| format!("{url:?} is not a gRPC URL like http://127.0.0.1:9090"))?
            .connect()
            .await
            .with_context(|| format!("cannot reach {url}"))?;
        let mut client = IdServiceClient::new(channel);
        callers.push(match count {
            None => GrpcCaller::Unary(client),
            Some(count) if !args.stream => GrpcCaller::Batch {
                client,
                count,
                runs: args.runs,
            },
            Some(count) => {
                let request = StreamIdsRequest {
                    batch_size: count,
                    max_ids: 0,
                    runs: args.runs,
                    ..Default::default()
                };
                let stream = client
                    .stream_ids(request)
                    .await
                    .with_context(|| format!("{url} refused StreamIds"))?;
                GrpcCaller::Stream {
                    stream: stream.into_inner(),
                    count,
                }
            }
        });
    }
    // Fail fast, with the URL, if the server answers with errors: one call of the kind the run
    // makes (a bare server may answer no other).
    if let Some(caller) = callers.first_mut()
        && !matches!(caller, GrpcCaller::Stream { .. })
        && let Err(failure) = caller.call(None).await
    {
        bail!("{url} answered the first call with an error: {failure}");
    }
    let method = match (count, args.stream) {
        (None, _) => "NextId".to_owned(),
        (Some(n), false) => format!("NextIds count {n}"),
        (Some(n), true) => format!("StreamIds batch_size {n}"),
    };
    let recorder = recorder(args, format!("{url} {method}"))?;
    run_callers(args, callers, recorder).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use uidgen_core::{Layout, ManualClock, SnowflakeGenerator};

    fn args(requests: Option<u64>, concurrency: usize) -> BenchArgs {
        BenchArgs {
            command: None,
            config: super::super::args::ConfigArgs { config: None },
            url: None,
            grpc: None,
            stream: false,
            route: String::new(),
            batch: None,
            duration: Duration::from_secs(3600),
            requests,
            concurrency,
            quiet: true,
            runs: false,
            record: None,
            timeline: None,
        }
    }

    fn generator() -> Arc<dyn UidGenerator> {
        let clock = ManualClock::auto_advancing(1_800_000_000_000);
        Arc::new(SnowflakeGenerator::new(Layout::snowflake().unwrap(), 1, clock).unwrap())
    }

    #[test]
    fn embedded_requests_run_exactly_that_many_calls_whatever_the_thread_count() {
        for (requests, concurrency) in [(5, 32), (1, 1), (100, 3), (1000, 7), (64, 64)] {
            let report = run_embedded(&args(Some(requests), concurrency), generator()).unwrap();
            assert_eq!(report.requests, requests, "{requests} over {concurrency}");
            assert_eq!(report.ids, requests);
        }
    }

    #[test]
    fn durations_that_are_not_positive_and_finite_are_refused() {
        for bad in ["nan", "inf", "-1", "0", "abc", "1e300"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_duration("0.25").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn claims_never_grant_more_than_the_budget() {
        let budget = AtomicU64::new(100);
        assert_eq!(claim(&budget, 64), 64);
        assert_eq!(claim(&budget, 64), 36);
        assert_eq!(claim(&budget, 64), 0);
    }
}
