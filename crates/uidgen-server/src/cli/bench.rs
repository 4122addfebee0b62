//! `uidgen bench`: drive a running server over HTTP or gRPC, or the embedded generator, for a
//! time or a count, with a live progress line; then print IDs/s and latency percentiles.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use tonic::transport::Channel;
use uidgen_core::UidGenerator;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{NextIdRequest, NextIdsRequest, StreamIdsRequest};

/// `uidgen bench` options.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Configuration (embedded runs build its generator).
    #[command(flatten)]
    pub config: super::ConfigArgs,
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
    // 1 ns to 60 s at 3 significant digits.
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
        })
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// The live progress line: a bar with the share done when the run is bounded by `--requests`,
/// else the time elapsed against `--duration`.
fn progress(
    args: &BenchArgs,
    done: Arc<AtomicU64>,
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
            let n = done.load(Ordering::Relaxed);
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
    let deadline = args.duration;
    let budget = Arc::new(AtomicU64::new(args.requests.unwrap_or(u64::MAX)));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let bar = progress(args, done.clone(), stop.clone());
    let batch = args.batch.unwrap_or(1);
    let n_batch = usize::try_from(batch)?;
    let start = Instant::now();
    let workers: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let generator = generator.clone();
            let (done, budget) = (done.clone(), budget.clone());
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
                    for _ in 0..run {
                        let ok = if n_batch == 1 {
                            generator.next_id().is_ok()
                        } else {
                            generator.next_ids(n_batch).is_ok()
                        };
                        errors += u64::from(!ok);
                    }
                    latency.record((nanos(t.elapsed()) / run).max(1))?;
                    calls += run;
                    // Relaxed: progress display only.
                    done.fetch_add(run, Ordering::Relaxed);
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
    // Relaxed: tells the progress thread to stop; it reads no data we wrote.
    stop.store(true, Ordering::Relaxed);
    let _ = bar.join();
    Ok(report)
}

/// One connection's way of asking a server for IDs: each call is one request (or one streamed
/// message), answered or failed.
trait Caller: Send + 'static {
    /// Make one call; whether it brought IDs.
    fn call(&mut self) -> impl std::future::Future<Output = bool> + Send;
}

/// An HTTP keep-alive connection calling one URL.
struct HttpCaller {
    client: reqwest::Client,
    url: String,
}

impl Caller for HttpCaller {
    async fn call(&mut self) -> bool {
        match self.client.get(&self.url).send().await {
            Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
            _ => false,
        }
    }
}

/// A gRPC connection: `NextId`, `NextIds` of `batch`, or the messages of one `StreamIds` call.
enum GrpcCaller {
    Unary(IdServiceClient<Channel>),
    Batch(IdServiceClient<Channel>, u32),
    Stream(tonic::Streaming<uidgen_proto::v1::IdBatch>),
}

impl Caller for GrpcCaller {
    async fn call(&mut self) -> bool {
        match self {
            Self::Unary(client) => client.next_id(NextIdRequest::default()).await.is_ok(),
            Self::Batch(client, count) => {
                let count = *count;
                client
                    .next_ids(NextIdsRequest {
                        count,
                        ..Default::default()
                    })
                    .await
                    .is_ok()
            }
            Self::Stream(stream) => matches!(stream.message().await, Ok(Some(_))),
        }
    }
}

/// Run `callers` concurrently until the duration or the request budget runs out; each
/// successful call counts `batch` IDs.
async fn run_callers<C: Caller>(
    args: &BenchArgs,
    batch: u64,
    callers: Vec<C>,
) -> anyhow::Result<BenchReport> {
    let deadline = Instant::now() + args.duration;
    let budget = Arc::new(AtomicU64::new(args.requests.unwrap_or(u64::MAX)));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let bar = progress(args, done.clone(), stop.clone());
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for mut caller in callers {
        let (budget, done) = (budget.clone(), done.clone());
        tasks.spawn(async move {
            let mut latency = histogram()?;
            let (mut ok, mut errors) = (0u64, 0u64);
            while Instant::now() < deadline && claim(&budget, 1) == 1 {
                let t = Instant::now();
                let answered = caller.call().await;
                latency.record(nanos(t.elapsed()))?;
                if answered {
                    ok += 1;
                } else {
                    errors += 1;
                }
                // Relaxed: progress display only.
                done.fetch_add(1, Ordering::Relaxed);
            }
            anyhow::Ok((ok, errors, latency))
        });
    }
    let mut report = BenchReport::empty()?;
    while let Some(joined) = tasks.join_next().await {
        let (ok, errors, latency) = joined??;
        report.requests += ok + errors;
        report.errors += errors;
        report.ids += ok * batch;
        report.latency.add(latency)?;
    }
    report.elapsed = start.elapsed();
    // Relaxed: tells the progress thread to stop.
    stop.store(true, Ordering::Relaxed);
    let _ = bar.join();
    Ok(report)
}

/// `--batch`, checked: at least 1 when given.
fn batch_of(args: &BenchArgs) -> anyhow::Result<Option<u64>> {
    match args.batch {
        Some(0) => bail!("--batch must be at least 1"),
        batch => Ok(batch),
    }
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
        })
        .collect();
    run_callers(args, batch.unwrap_or(1), callers).await
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
            Some(n) if !args.stream => GrpcCaller::Batch(client, n),
            Some(n) => {
                let request = StreamIdsRequest {
                    batch_size: n,
                    max_ids: 0,
                    ..Default::default()
                };
                let stream = client
                    .stream_ids(request)
                    .await
                    .with_context(|| format!("{url} refused StreamIds"))?;
                GrpcCaller::Stream(stream.into_inner())
            }
        });
    }
    // Fail fast, with the URL, if the server answers with errors.
    if let Some(GrpcCaller::Unary(client) | GrpcCaller::Batch(client, _)) = callers.first_mut() {
        client
            .get_info(uidgen_proto::v1::GetInfoRequest {})
            .await
            .with_context(|| format!("{url} answered with an error"))?;
    }
    run_callers(args, batch.unwrap_or(1), callers).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use uidgen_core::{Layout, ManualClock, SnowflakeGenerator};

    fn args(requests: Option<u64>, concurrency: usize) -> BenchArgs {
        BenchArgs {
            config: super::super::ConfigArgs { config: None },
            url: None,
            grpc: None,
            stream: false,
            route: String::new(),
            batch: None,
            duration: Duration::from_secs(3600),
            requests,
            concurrency,
            quiet: true,
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
