//! `uidgen health`: ask a server's `/readyz` and exit 0 only when it answers 200, so a container's
//! `HEALTHCHECK` (and compose's `healthcheck`) needs no curl in the slim image.
//!
//! The address defaults to the configured `listen` (the same file and `UIDGEN_LISTEN` the
//! server reads), with an unspecified address (`0.0.0.0`, `::`) asked on the loopback, where
//! the server listening on every address also answers. A server with `[tls]` is asked over TLS,
//! trusting only the certificates of the configured `tls.cert` file: the CLI's HTTP client links
//! no TLS, so this one GET is written by hand over rustls (ring), as the server's TLS is.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

use super::args::ConfigArgs;
use crate::config::env::ENV_URL;

/// `uidgen health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    /// Configuration (for `listen` and `tls`).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The server's base URL, `http://host:port`; the configured `listen` address when absent
    /// (over TLS when `[tls]` is configured).
    #[arg(long, env = ENV_URL)]
    pub url: Option<String>,
    /// With `[tls]`: the name the server's certificate must carry.
    #[arg(long, default_value = "localhost")]
    pub tls_name: String,
    /// How long to wait for the answer, in seconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout: u64,
}

/// What to ask: a plain URL, or an address over TLS trusting the configured certificates.
enum Probe {
    Plain(String),
    Tls {
        addr: SocketAddr,
        roots: RootCertStore,
    },
}

impl Probe {
    fn url(&self) -> String {
        match self {
            Self::Plain(url) => url.clone(),
            Self::Tls { addr, .. } => format!("https://{addr}/readyz"),
        }
    }
}

/// What `args` say to ask: `--url`'s, or the configured listen address, over TLS with `[tls]`.
fn probe(args: &HealthArgs) -> anyhow::Result<Probe> {
    if let Some(url) = &args.url {
        let base = url.trim_end_matches('/');
        if !base.starts_with("http://") {
            bail!(
                "--url {url:?}: give a plain http:// URL such as http://127.0.0.1:8080 (a server \
                 with [tls] is asked through its configuration, without --url)"
            );
        }
        return Ok(Probe::Plain(format!("{base}/readyz")));
    }
    let settings = args.config.read(false)?.settings()?;
    let addr = probe_address(settings.listen);
    let Some(tls) = &settings.tls else {
        return Ok(Probe::Plain(format!("http://{addr}/readyz")));
    };
    // Relative to the state directory, as the server reads it (`tls.rs`).
    let path = settings.state_dir()?.resolve(&tls.cert);
    let pem = std::fs::read(&path).with_context(|| {
        format!(
            "invalid config key `tls.cert`: cannot read {}",
            path.display()
        )
    })?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| {
            anyhow::anyhow!("invalid config key `tls.cert`: {}: {e}", path.display())
        })?;
        roots
            .add(cert)
            .with_context(|| format!("invalid config key `tls.cert`: {}", path.display()))?;
    }
    Ok(Probe::Tls { addr, roots })
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
    let probe = probe(args)?;
    let url = probe.url();
    let wait = Duration::from_secs(args.timeout);
    let asked = match probe {
        Probe::Plain(url) => tokio::time::timeout(wait, plain(&url)).await,
        Probe::Tls { addr, roots } => {
            tokio::time::timeout(wait, over_tls(addr, roots, &args.tls_name)).await
        }
    };
    let (status, body) = match asked {
        Ok(Ok(answer)) => answer,
        Ok(Err(why)) => bail!("{url} did not answer: {why}"),
        Err(_) => bail!("{url} did not answer: no answer within {} s", args.timeout),
    };
    // An error answer is the API's JSON `{code, message}`: its message is the reason.
    let said = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|json| json.get("message")?.as_str().map(first_line))
        .unwrap_or_else(|| first_line(&body));
    if status == 200 {
        Ok(format!(
            "{url}: {}",
            if said.is_empty() { "ready" } else { &said }
        ))
    } else {
        bail!("{url} answered {status}: {said}")
    }
}

/// `GET url` with the CLI's HTTP client: (status, body), or the deepest cause of a failure
/// (reqwest's own text says only "error sending request"; its cause says "Connection refused").
async fn plain(url: &str) -> Result<(u16, String), String> {
    let response = reqwest::get(url).await.map_err(|error| {
        let mut why: &dyn std::error::Error = &error;
        while let Some(cause) = why.source() {
            why = cause;
        }
        first_line(&why.to_string())
    })?;
    let status = response.status().as_u16();
    Ok((status, response.text().await.unwrap_or_default()))
}

/// `GET /readyz` over TLS to `addr`, its certificate checked against `roots` for `name`, as
/// HTTP/1.1 with `Connection: close`: (status, body), or why not.
async fn over_tls(
    addr: SocketAddr,
    roots: RootCertStore,
    name: &str,
) -> Result<(u16, String), String> {
    let mut config = ClientConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    // The server offers h2 first; this request is HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let server_name =
        ServerName::try_from(name.to_owned()).map_err(|e| format!("--tls-name {name:?}: {e}"))?;
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(server_name, tcp)
        .await
        .map_err(|e| first_line(&e.to_string()))?;
    let request = format!("GET /readyz HTTP/1.1\r\nHost: {name}\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    // A server may close without TLS's close_notify once it has answered: what was read counts.
    if let Err(error) = tls.read_to_end(&mut response).await
        && response.is_empty()
    {
        return Err(error.to_string());
    }
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    // A chunked body starts with its first chunk's size: the text is on the next line.
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let body = if chunked {
        body.split("\r\n").nth(1).unwrap_or_default()
    } else {
        body
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP answer: {:?}", first_line(head)))?;
    Ok((status, body.to_owned()))
}

/// The first line of `text`, trimmed: the answer or the cause, on the one line a health log
/// keeps.
fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_owned()
}
