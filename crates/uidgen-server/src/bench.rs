//! `uidgen bench`: drive a running server over HTTP, or the embedded generator, for a time or a
//! count, with a live progress line; then print IDs/s and latency percentiles.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use uidgen_core::UidGenerator;

/// `uidgen bench` options.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Configuration (embedded runs build its generator).
    #[command(flatten)]
    pub config: crate::cli::ConfigArgs,
    /// Base URL of a running server (`http://127.0.0.1:8080`); without it, the embedded generator
    /// is measured in process.
    #[arg(long)]
    pub url: Option<String>,
    /// Route to call for single IDs.
    #[arg(long, default_value = "/api/snowflake/get/bench")]
    pub route: String,
    /// Ask for batches of this many IDs per request (`/v1/ids?count=N`) instead of single IDs.
    #[arg(long)]
    pub batch: Option<u64>,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10.0)]
    pub duration: f64,
    /// Stop after this many requests (or calls, embedded), if reached before the duration.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Concurrent HTTP connections (or threads, embedded).
    #[arg(long, default_value_t = 32)]
    pub concurrency: usize,
    /// Hide the live progress line.
    #[arg(long)]
    pub quiet: bool,
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

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

fn progress(
    quiet: bool,
    done: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        if quiet {
            return;
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        let start = Instant::now();
        // Relaxed: a progress display; exact counts are taken after the workers join.
        while !stop.load(Ordering::Relaxed) {
            let n = done.load(Ordering::Relaxed);
            let rate = n as f64 / start.elapsed().as_secs_f64().max(0.001);
            bar.set_message(format!("{n} requests, {rate:.0}/s"));
            bar.tick();
            std::thread::sleep(Duration::from_millis(100));
        }
        bar.finish_and_clear();
    })
}

/// Measure the embedded generator on `concurrency` threads.
pub fn run_embedded(
    args: &BenchArgs,
    generator: Arc<dyn UidGenerator>,
) -> anyhow::Result<BenchReport> {
    let deadline = Duration::from_secs_f64(args.duration);
    let per_thread = args
        .requests
        .map(|n| n / u64::try_from(args.concurrency.max(1)).unwrap_or(1));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let bar = progress(args.quiet, done.clone(), stop.clone());
    let batch = args.batch.unwrap_or(1);
    let n_batch = usize::try_from(batch)?;
    let start = Instant::now();
    let workers: Vec<_> = (0..args.concurrency.max(1))
        .map(|_| {
            let generator = generator.clone();
            let done = done.clone();
            std::thread::spawn(move || -> anyhow::Result<(u64, u64, Histogram<u64>)> {
                let mut latency = histogram()?;
                let (mut calls, mut errors) = (0u64, 0u64);
                let start = Instant::now();
                while start.elapsed() < deadline && per_thread.is_none_or(|n| calls < n) {
                    // Time a run of 64 calls: timing each ~10 ns call alone would measure the
                    // clock, not the generator.
                    let t = Instant::now();
                    for _ in 0..64 {
                        let ok = if n_batch == 1 {
                            generator.next_id().is_ok()
                        } else {
                            generator.next_ids(n_batch).is_ok()
                        };
                        errors += u64::from(!ok);
                    }
                    latency.record(nanos(t.elapsed()) / 64)?;
                    calls += 64;
                    // Relaxed: progress display only.
                    done.fetch_add(64, Ordering::Relaxed);
                }
                Ok((calls, errors, latency))
            })
        })
        .collect();
    let mut report = BenchReport {
        requests: 0,
        ids: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram()?,
    };
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

/// Measure a running server with `concurrency` keep-alive connections.
pub async fn run_http(args: &BenchArgs, base: &str) -> anyhow::Result<BenchReport> {
    let base = base.trim_end_matches('/');
    let url = match args.batch {
        Some(n) if n > 0 => format!("{base}/v1/ids?count={n}"),
        Some(_) => bail!("--batch must be at least 1"),
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
    let deadline = Instant::now() + Duration::from_secs_f64(args.duration);
    let budget = Arc::new(AtomicU64::new(args.requests.unwrap_or(u64::MAX)));
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let bar = progress(args.quiet, done.clone(), stop.clone());
    let batch = args.batch.unwrap_or(1);
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..args.concurrency.max(1) {
        let (client, url, budget, done) =
            (client.clone(), url.clone(), budget.clone(), done.clone());
        tasks.spawn(async move {
            let mut latency = histogram()?;
            let (mut ok, mut errors) = (0u64, 0u64);
            // Relaxed: the budget only needs each decrement to be atomic.
            while Instant::now() < deadline
                && budget
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| b.checked_sub(1))
                    .is_ok()
            {
                let t = Instant::now();
                let result = match client.get(&url).send().await {
                    Ok(r) if r.status().is_success() => r.bytes().await.is_ok(),
                    _ => false,
                };
                latency.record(nanos(t.elapsed()))?;
                if result {
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
    let mut report = BenchReport {
        requests: 0,
        ids: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latency: histogram()?,
    };
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
