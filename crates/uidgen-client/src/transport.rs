//! One peer and the calls the client makes on it, over gRPC (tonic) or HTTP (reqwest).
//!
//! Each call classifies its failure: [`Failure::Down`] (try another peer: refused connection,
//! timeout, 5xx, `UNAVAILABLE`, `RESOURCE_EXHAUSTED`) or [`Failure::Refused`] (the request
//! itself is wrong: another peer would say the same).

use std::time::Duration;

use serde::Deserialize;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use uidgen_proto::CheckedBatch;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{
    GetInfoRequest, IdBatch, LeaseSegmentRequest, NextIdTextsRequest, NextIdsRequest, ServerInfo,
};

use crate::error::{ClientError, Result, invalid};

/// How to reach one uidgen server.
///
/// ```
/// use uidgen_client::Peer;
/// let grpc = Peer::grpc("http://10.0.0.5:9090");
/// let http = Peer::http("http://10.0.0.6:8080");
/// assert_eq!(grpc.to_string(), "grpc+http://10.0.0.5:9090");
/// assert_eq!(http.to_string(), "http://10.0.0.6:8080");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// The gRPC port (`grpc_listen`), e.g. `http://10.0.0.5:9090`.
    Grpc(String),
    /// The HTTP port (`listen`), e.g. `http://10.0.0.6:8080`.
    Http(String),
}

impl Peer {
    /// A gRPC peer at `uri`.
    pub fn grpc(uri: impl Into<String>) -> Self {
        Self::Grpc(uri.into())
    }

    /// An HTTP peer at `base` (no trailing path).
    pub fn http(base: impl Into<String>) -> Self {
        Self::Http(base.into())
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Grpc(uri) => write!(f, "grpc+{uri}"),
            Self::Http(base) => f.write_str(base),
        }
    }
}

/// Why a call on one peer failed.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// The peer is down, slow or cannot issue now: retry on another one.
    Down(String),
    /// The peer refused the request itself.
    Refused(String),
    /// The peer said that what the request names is gone for good: a fallback lease taken
    /// over or released (HTTP 409 `fallback_lease_lost`, gRPC `ABORTED`).
    Gone(String),
}

/// A leased range `[start, end)` of a segment tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Lease {
    pub start: u64,
    pub end: u64,
}

/// The caller token every call carries, when the client has one: as gRPC metadata (this
/// interceptor) and as an HTTP default header ([`http_headers`](Self::http_headers)).
#[derive(Clone, Default)]
pub(crate) struct Bearer(Option<MetadataValue<Ascii>>);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Bearer(<redacted>)"
        } else {
            "Bearer(none)"
        })
    }
}

impl Bearer {
    pub(crate) fn new(token: Option<&str>) -> Result<Self> {
        let Some(token) = token else {
            return Ok(Self(None));
        };
        let value: MetadataValue<Ascii> = format!("Bearer {token}")
            .parse()
            .map_err(|_| invalid("token", "not a valid header value"))?;
        Ok(Self(Some(value)))
    }

    /// `Authorization: Bearer <token>`, marked sensitive (kept out of reqwest's logs).
    pub(crate) fn http_headers(&self) -> reqwest::header::HeaderMap {
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(value) = &self.0
            && let Ok(mut value) = reqwest::header::HeaderValue::from_bytes(value.as_bytes())
        {
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        headers
    }
}

impl Interceptor for Bearer {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.0 {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        Ok(request)
    }
}

/// A connected peer: a lazily connecting gRPC channel or the shared HTTP client.
#[derive(Debug, Clone)]
pub(crate) enum Connection {
    Grpc(IdServiceClient<InterceptedService<Channel, Bearer>>),
    Http {
        client: reqwest::Client,
        base: reqwest::Url,
    },
}

#[derive(Deserialize)]
struct IdsBody {
    ids: Vec<u64>,
}

#[derive(Deserialize)]
struct TextsBody {
    ids: Vec<String>,
}

#[derive(Deserialize)]
struct LeaseBody {
    start: i64,
    end: i64,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    message: String,
}

/// The error code of a fallback lease that is not the caller's any more.
const LEASE_LOST: &str = "fallback_lease_lost";

impl Connection {
    /// Set up `peer`; gRPC connects on first use (and reconnects after a server restart).
    pub(crate) fn new(
        peer: &Peer,
        http: &reqwest::Client,
        timeout: Duration,
        bearer: &Bearer,
        tls_root: Option<&[u8]>,
    ) -> Result<Self> {
        match peer {
            Peer::Grpc(uri) => {
                let mut endpoint = Endpoint::from_shared(uri.clone())
                    .map_err(|e| invalid("peers", format!("`{uri}` is not a gRPC URI: {e}")))?
                    .connect_timeout(timeout)
                    .timeout(timeout);
                if uri.starts_with("https://") {
                    let Some(pem) = tls_root else {
                        return Err(invalid(
                            "tls_root",
                            format!(
                                "the gRPC peer `{uri}` is https://: give the servers' CA \
                                 certificate (PEM) with ClientBuilder::tls_root"
                            ),
                        ));
                    };
                    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(pem));
                    endpoint = endpoint
                        .tls_config(tls)
                        .map_err(|e| invalid("tls_root", e.to_string()))?;
                }
                Ok(Self::Grpc(IdServiceClient::with_interceptor(
                    endpoint.connect_lazy(),
                    bearer.clone(),
                )))
            }
            Peer::Http(base) => {
                let url = reqwest::Url::parse(base).ok().filter(|url| {
                    matches!(url.scheme(), "http" | "https") && !url.cannot_be_a_base()
                });
                let Some(base) = url else {
                    return Err(invalid(
                        "peers",
                        format!("`{base}` is not an http:// or https:// URL"),
                    ));
                };
                Ok(Self::Http {
                    client: http.clone(),
                    base,
                })
            }
        }
    }

    /// At most `count` snowflake-style IDs, checked. Over gRPC they are asked for as runs of
    /// consecutive IDs (a server from before runs answers with the list, which is read as
    /// well). A malformed batch is the peer's fault: [`Failure::Down`], so the call moves on
    /// to another peer and not one ID of the batch is used.
    pub(crate) async fn next_ids(&self, count: u32) -> Result<CheckedBatch, Failure> {
        let batch = match self {
            Self::Grpc(client) => {
                let mut client = client.clone();
                client
                    .next_ids(NextIdsRequest {
                        count,
                        runs: true,
                        ..Default::default()
                    })
                    .await
                    .map_err(status_failure)?
                    .into_inner()
            }
            Self::Http { client, base } => {
                let url = route(base, &["v1", "ids"], ("count", count.into()));
                let body: IdsBody = http_json(client.get(url)).await?;
                IdBatch {
                    ids: body.ids,
                    runs: Vec::new(),
                }
            }
        };
        batch
            .into_checked(count.into())
            .map_err(|e| Failure::Down(format!("malformed batch of IDs: {e}")))
    }

    /// `count` new IDs written in `form` (`masked` with the server's keys). A server that
    /// answers another number of texts is at fault: [`Failure::Down`].
    pub(crate) async fn next_texts(&self, form: &str, count: u32) -> Result<Vec<String>, Failure> {
        let texts = match self {
            Self::Grpc(client) => {
                let mut client = client.clone();
                client
                    .next_id_texts(NextIdTextsRequest {
                        count,
                        form: form.to_owned(),
                        ..Default::default()
                    })
                    .await
                    .map_err(status_failure)?
                    .into_inner()
                    .texts
            }
            Self::Http { client, base } => {
                let mut url = route(base, &["v1", "ids"], ("count", count.into()));
                url.query_pairs_mut().append_pair("form", form);
                let body: TextsBody = http_json(client.get(url)).await?;
                body.ids
            }
        };
        if texts.len() != usize::try_from(count).unwrap_or(usize::MAX) {
            return Err(Failure::Down(format!(
                "asked for {count} IDs as text, got {}",
                texts.len()
            )));
        }
        Ok(texts)
    }

    /// Lease `[start, end)` of `tag`, `size` numbers.
    pub(crate) async fn lease(&self, tag: &str, size: u64) -> Result<Lease, Failure> {
        let (start, end) = match self {
            Self::Grpc(client) => {
                let mut client = client.clone();
                let lease = client
                    .lease_segment(LeaseSegmentRequest {
                        tag: tag.to_owned(),
                        size,
                    })
                    .await
                    .map_err(status_failure)?
                    .into_inner();
                (lease.start, lease.end)
            }
            Self::Http { client, base } => {
                let url = route(base, &["v1", "segments", tag, "lease"], ("size", size));
                let body: LeaseBody = http_json(client.post(url)).await?;
                (body.start, body.end)
            }
        };
        match (u64::try_from(start), u64::try_from(end)) {
            (Ok(start), Ok(end)) if start < end => Ok(Lease { start, end }),
            _ => Err(Failure::Down(format!(
                "lease of `{tag}` is not a non-empty range of non-negative numbers: [{start}, \
                 {end})"
            ))),
        }
    }

    /// The server's layout and worker id; `None` over HTTP, which has no such route.
    pub(crate) async fn info(&self) -> Result<Option<ServerInfo>, Failure> {
        match self {
            Self::Grpc(client) => {
                let mut client = client.clone();
                let info = client
                    .get_info(GetInfoRequest {})
                    .await
                    .map_err(status_failure)?;
                Ok(Some(info.into_inner()))
            }
            Self::Http { .. } => Ok(None),
        }
    }
}

/// `base` with `path` appended (each segment percent-encoded, so a tag stays one segment)
/// and one query parameter.
fn route(base: &reqwest::Url, path: &[&str], (name, value): (&str, u64)) -> reqwest::Url {
    let mut url = path_url(base, path);
    url.query_pairs_mut().append_pair(name, &value.to_string());
    url
}

/// `base` with `path` appended, each segment percent-encoded.
pub(crate) fn path_url(base: &reqwest::Url, path: &[&str]) -> reqwest::Url {
    let mut url = base.clone();
    // `cannot_be_a_base` URLs were refused in `Connection::new`, so the segments exist.
    if let Ok(mut segments) = url.path_segments_mut() {
        segments.pop_if_empty().extend(path);
    }
    url
}

/// Send `request` and read its JSON body, classifying failures by status.
pub(crate) async fn http_json<T: for<'de> Deserialize<'de>>(
    request: reqwest::RequestBuilder,
) -> Result<T, Failure> {
    let response = request
        .send()
        .await
        .map_err(|e| Failure::Down(e.to_string()))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| Failure::Down(e.to_string()))?;
    if status.is_success() {
        return serde_json::from_slice(&bytes)
            .map_err(|e| Failure::Down(format!("malformed JSON body: {e}")));
    }
    let (code, message) = serde_json::from_slice::<ErrorBody>(&bytes).map_or_else(
        |_| (String::new(), String::from_utf8_lossy(&bytes).into_owned()),
        |body| (body.code, body.message),
    );
    let message = format!("HTTP {}: {message}", status.as_u16());
    if code == LEASE_LOST {
        return Err(Failure::Gone(message));
    }
    // 429 and 5xx: this server cannot issue now, another may; other 4xx: the request is wrong.
    if status.is_server_error() || status.as_u16() == 429 {
        Err(Failure::Down(message))
    } else {
        Err(Failure::Refused(message))
    }
}

pub(crate) fn status_failure(status: tonic::Status) -> Failure {
    use tonic::Code;
    let message = format!("{:?}: {}", status.code(), status.message());
    match status.code() {
        Code::Aborted => Failure::Gone(message),
        Code::InvalidArgument
        | Code::NotFound
        | Code::FailedPrecondition
        | Code::PermissionDenied
        | Code::Unauthenticated
        | Code::Unimplemented
        | Code::OutOfRange
        | Code::AlreadyExists => Failure::Refused(message),
        _ => Failure::Down(message),
    }
}

impl Failure {
    /// The failure's message.
    pub(crate) fn message(&self) -> &str {
        match self {
            Self::Down(message) | Self::Refused(message) | Self::Gone(message) => message,
        }
    }
}

/// A refusal as the caller sees it.
pub(crate) fn refused(peer: &Peer, message: &str) -> ClientError {
    ClientError::Refused {
        peer: peer.to_string(),
        message: message.to_owned(),
    }
}
