//! The calls a bench run makes: one connection's way of asking a server for IDs, over HTTP or
//! gRPC, and of reading the IDs out of the answer when the run records them.

use serde::Deserialize;
use tonic::transport::Channel;
use uidgen_proto::v1::id_service_client::IdServiceClient;
use uidgen_proto::v1::{IdBatch, NextIdRequest, NextIdsRequest};

use super::record::Received;

/// Why a call failed, as the report names it.
pub(super) type Failure = String;

/// One connection's way of asking a server for IDs: each call is one request (or one streamed
/// message), answered or failed.
pub(super) trait Caller: Send + 'static {
    /// Make one call; how many IDs it brought, or why it failed (an error answer, or one that
    /// does not read as IDs). With `received`, every ID of the answer goes there.
    fn call(
        &mut self,
        received: Option<&mut Received>,
    ) -> impl std::future::Future<Output = Result<u64, Failure>> + Send;
}

/// `error` and its causes, as one line: reqwest's own message alone ("error sending request")
/// does not say that the connection was refused.
fn describe(error: &dyn std::error::Error) -> Failure {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        line.push_str(": ");
        line.push_str(&error.to_string());
        cause = error.source();
    }
    line
}

/// The start of a body, for a failure's message.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.into_owned(),
    }
}

/// An HTTP keep-alive connection calling one URL: a single-ID route (the ID as text) or
/// `/v1/ids?count=N` (`{"ids": [...]}`).
pub(super) struct HttpCaller {
    /// The client, whose pool keeps the connection.
    pub(super) client: reqwest::Client,
    /// The URL every call asks.
    pub(super) url: String,
    /// `count` of a batch URL.
    pub(super) batch: Option<u64>,
}

/// The body of `/v1/ids`.
#[derive(Deserialize)]
struct IdsBody {
    ids: Vec<u64>,
}

impl Caller for HttpCaller {
    async fn call(&mut self, received: Option<&mut Received>) -> Result<u64, Failure> {
        let response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| describe(&e))?;
        if !status.is_success() {
            return Err(format!("HTTP {status}: {}", excerpt(&body)));
        }
        let Some(received) = received else {
            return Ok(self.batch.unwrap_or(1));
        };
        let unreadable = || format!("the answer is not IDs: {}", excerpt(&body));
        if self.batch.is_some() {
            let IdsBody { ids } = serde_json::from_slice(&body).map_err(|_| unreadable())?;
            ids.iter().for_each(|&id| received.push(id));
            Ok(ids.len() as u64)
        } else {
            let id = std::str::from_utf8(&body)
                .ok()
                .and_then(|text| text.trim().parse().ok())
                .ok_or_else(unreadable)?;
            received.push(id);
            Ok(1)
        }
    }
}

/// A gRPC connection: `NextId`, `NextIds` of `count`, or the messages of one `StreamIds` call
/// of `count` per message.
pub(super) enum GrpcCaller {
    Unary(IdServiceClient<Channel>),
    Batch {
        client: IdServiceClient<Channel>,
        count: u32,
        runs: bool,
    },
    Stream {
        stream: tonic::Streaming<IdBatch>,
        count: u32,
    },
}

/// A failed call's status, as `code: message`.
fn status(status: &tonic::Status) -> Failure {
    format!("gRPC {:?}: {}", status.code(), status.message())
}

/// How many IDs `batch` holds; with `received`, each of them, checked as uidgen-client checks a
/// batch (a batch it refuses is a failure).
fn take_batch(batch: IdBatch, asked: u32, received: Option<&mut Received>) -> Result<u64, Failure> {
    match received {
        None => {
            let runs: u64 = batch.runs.iter().map(|run| u64::from(run.count)).sum();
            Ok(batch.ids.len() as u64 + runs)
        }
        Some(received) => {
            let checked = batch
                .into_checked(u64::from(asked))
                .map_err(|e| format!("a batch uidgen-client would refuse: {e}"))?;
            let len = checked.len();
            checked.into_iter().for_each(|id| received.push(id));
            Ok(len)
        }
    }
}

impl Caller for GrpcCaller {
    async fn call(&mut self, received: Option<&mut Received>) -> Result<u64, Failure> {
        match self {
            Self::Unary(client) => {
                let id = client
                    .next_id(NextIdRequest::default())
                    .await
                    .map_err(|e| status(&e))?;
                if let Some(received) = received {
                    received.push(id.into_inner().id);
                }
                Ok(1)
            }
            Self::Batch {
                client,
                count,
                runs,
            } => {
                let request = NextIdsRequest {
                    count: *count,
                    runs: *runs,
                    ..Default::default()
                };
                let batch = client
                    .next_ids(request)
                    .await
                    .map_err(|e| status(&e))?
                    .into_inner();
                take_batch(batch, *count, received)
            }
            Self::Stream { stream, count } => match stream.message().await {
                Ok(Some(batch)) => take_batch(batch, *count, received),
                Ok(None) => Err("the server ended the stream".to_owned()),
                Err(e) => Err(status(&e)),
            },
        }
    }
}
