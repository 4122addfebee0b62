//! `uidgen health`: ask a server's `/readyz` and exit 0 only when it answers 200, so a container's
//! `HEALTHCHECK` (and compose's `healthcheck`) needs no curl in the slim image.
//!
//! The address defaults to the configured `listen` (the same file and `UIDGEN_LISTEN` the
//! server reads), with an unspecified address (`0.0.0.0`, `::`) asked on the loopback, where
//! the server listening on every address also answers. Plain HTTP only: the CLI's client links
//! no TLS, so a server with `[tls]` is refused with a sentence rather than probed wrongly.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;

use super::ConfigArgs;

/// The variable `--url` is read from when absent.
pub const ENV_URL: &str = "UIDGEN_HEALTH_URL";

/// `uidgen health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Configuration (for `listen` and `tls`).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The server's base URL, `http://host:port`; the configured `listen` address when absent.
    #[arg(long, env = ENV_URL)]
    pub url: Option<String>,
    /// How long to wait for the answer, in seconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,
}

/// The URL of `/readyz` to ask: `--url`'s, or the configured listen address's.
pub fn readyz_url(args: &HealthArgs) -> anyhow::Result<String> {
    if let Some(url) = &args.url {
        let base = url.trim_end_matches('/');
        if !base.starts_with("http://") {
            bail!("--url {url:?}: give a plain http:// URL such as http://127.0.0.1:8080");
        }
        return Ok(format!("{base}/readyz"));
    }
    let config = args.config.read(false)?;
    let set = |path: &Option<std::path::PathBuf>| {
        path.as_ref().is_some_and(|p| !p.as_os_str().is_empty())
    };
    if set(&config.tls.cert) || set(&config.tls.key) {
        bail!(
            "the server is configured for TLS ([tls]), and `uidgen health` speaks plain HTTP \
             only; probe it through a plain listener or another client"
        );
    }
    let listen = config.listen_addr()?;
    Ok(format!("http://{}/readyz", probe_address(listen)))
}

/// Where a server listening on `listen` is asked: the loopback for an unspecified address.
///
/// ```
/// use uidgen_server::cli::health::probe_address;
/// assert_eq!(probe_address("0.0.0.0:8080".parse().unwrap()).to_string(), "127.0.0.1:8080");
/// assert_eq!(probe_address("[::]:8080".parse().unwrap()).to_string(), "[::1]:8080");
/// assert_eq!(probe_address("10.0.0.7:80".parse().unwrap()).to_string(), "10.0.0.7:80");
/// ```
pub fn probe_address(listen: SocketAddr) -> SocketAddr {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, listen.port())
}

/// Ask `/readyz`; `Ok` with its answer when it is 200, else an error of one line saying why.
pub async fn health(args: &HealthArgs) -> anyhow::Result<String> {
    let url = readyz_url(args)?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(args.timeout))
        .build()
        .context("cannot build the HTTP client")?;
    let response = client.get(&url).send().await.map_err(|error| {
        // reqwest's own text says "error sending request"; the deepest cause says why
        // ("Connection refused").
        let mut why: &dyn std::error::Error = &error;
        while let Some(cause) = why.source() {
            why = cause;
        }
        let why = if error.is_timeout() {
            format!("no answer within {} s", args.timeout)
        } else {
            first_line(&why.to_string())
        };
        anyhow::anyhow!("{url} did not answer: {why}")
    })?;
    let status = response.status();
    let body = response.text().await.unwrap_or_default();
    // An error answer is the API's JSON `{code, message}`: its message is the reason.
    let said = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|json| json.get("message")?.as_str().map(first_line))
        .unwrap_or_else(|| first_line(&body));
    if status.is_success() {
        Ok(format!(
            "{url}: {}",
            if said.is_empty() { "ready" } else { &said }
        ))
    } else {
        bail!("{url} answered {status}: {said}")
    }
}

/// The first line of `text`, trimmed: the answer or the cause, on the one line a health log
/// keeps.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}
