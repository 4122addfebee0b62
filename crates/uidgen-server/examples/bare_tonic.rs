//! The gRPC baseline of `scripts/bench-sustained.sh`: uidgen's own `uidgen.v1.IdService` served
//! by a bare tonic server whose `NextId` and `NextIds` answer from an atomic counter, with no
//! generator, store or worker id behind them. `uidgen serve`'s gRPC calls are measured against
//! it in the same run, so the ratio says what uidgen adds on top of tonic, HTTP/2 and prost, as
//! `bare_axum` says it for HTTP.
//!
//! ```sh
//! TOKIO_WORKER_THREADS=1 cargo run --release -p uidgen-server --example bare_tonic -- 127.0.0.1:19090
//! uidgen bench --grpc http://127.0.0.1:19090 --batch 1000 --duration 5
//! ```
//!
//! Like the service: `tonic::transport::Server` with its defaults, TCP_NODELAY on accepted
//! connections (uidgen sets it, or a batch answer waits for the client's delayed ACK), on
//! tokio's multi-threaded runtime, whose worker count `TOKIO_WORKER_THREADS` sets. Unlike it:
//! no health or reflection service, no auth gate, no metrics. `NextIds` answers in the form
//! uidgen answers: [`IdBatch::from_ids`], so a request without `runs` gets every ID listed and
//! one with `runs` gets the (here single) run of consecutive IDs. Every other call is
//! `UNIMPLEMENTED`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};
use uidgen_proto::v1::id_service_server::{IdService, IdServiceServer};
use uidgen_proto::v1::{
    ClaimFallbackLeaseRequest, ExplainIdRequest, ExplainIdResponse, FallbackLease,
    FallbackLeaseRelease, FallbackLeaseRenewal, GetInfoRequest, IdBatch, IdTexts,
    LeaseSegmentRequest, MakeIdRequest, NextIdRequest, NextIdResponse, NextIdTextsRequest,
    NextIdsRequest, ReleaseFallbackLeaseRequest, RenewFallbackLeaseRequest, SegmentIdBatch,
    SegmentIdsRequest, SegmentLease, ServerInfo, StreamIdsRequest,
};
use uidgen_server::config::DEFAULT_BATCH_CAP;

/// The counter every ID comes from.
#[derive(Debug, Default, Clone)]
struct Counter(Arc<AtomicU64>);

impl Counter {
    /// The next `n` numbers (the first is 1), as a range.
    fn take(&self, n: u64) -> std::ops::Range<u64> {
        // Relaxed: the counter orders nothing; each call only needs numbers no other call got.
        let first = self.0.fetch_add(n, Ordering::Relaxed) + 1;
        first..first + n
    }
}

fn unimplemented<T>(call: &str) -> Result<Response<T>, Status> {
    Err(Status::unimplemented(format!(
        "bare_tonic answers NextId and NextIds only, not {call}"
    )))
}

#[tonic::async_trait]
impl IdService for Counter {
    async fn next_id(
        &self,
        _request: Request<NextIdRequest>,
    ) -> Result<Response<NextIdResponse>, Status> {
        Ok(Response::new(NextIdResponse {
            id: self.take(1).start,
        }))
    }

    async fn next_ids(
        &self,
        request: Request<NextIdsRequest>,
    ) -> Result<Response<IdBatch>, Status> {
        let NextIdsRequest { count, runs, .. } = request.into_inner();
        // uidgen's default cap, so that a request uidgen refuses is refused here too rather
        // than measured.
        let cap = DEFAULT_BATCH_CAP;
        if count == 0 || usize::try_from(count).is_ok_and(|n| n > cap) {
            return Err(Status::invalid_argument(format!(
                "count must be 1 to {cap}, not {count}"
            )));
        }
        // The list built and handed to `from_ids` as uidgen's service does, so the answer costs
        // what uidgen's costs to encode.
        let ids: Vec<u64> = self.take(u64::from(count)).collect();
        Ok(Response::new(IdBatch::from_ids(ids, runs)))
    }

    type StreamIdsStream = tokio_stream::Empty<Result<IdBatch, Status>>;

    async fn stream_ids(
        &self,
        _request: Request<StreamIdsRequest>,
    ) -> Result<Response<Self::StreamIdsStream>, Status> {
        unimplemented("StreamIds")
    }

    async fn next_id_texts(
        &self,
        _request: Request<NextIdTextsRequest>,
    ) -> Result<Response<IdTexts>, Status> {
        unimplemented("NextIdTexts")
    }

    async fn explain_id(
        &self,
        _request: Request<ExplainIdRequest>,
    ) -> Result<Response<ExplainIdResponse>, Status> {
        unimplemented("ExplainId")
    }

    async fn make_id(
        &self,
        _request: Request<MakeIdRequest>,
    ) -> Result<Response<ExplainIdResponse>, Status> {
        unimplemented("MakeId")
    }

    async fn segment_ids(
        &self,
        _request: Request<SegmentIdsRequest>,
    ) -> Result<Response<SegmentIdBatch>, Status> {
        unimplemented("SegmentIds")
    }

    async fn lease_segment(
        &self,
        _request: Request<LeaseSegmentRequest>,
    ) -> Result<Response<SegmentLease>, Status> {
        unimplemented("LeaseSegment")
    }

    async fn get_info(
        &self,
        _request: Request<GetInfoRequest>,
    ) -> Result<Response<ServerInfo>, Status> {
        unimplemented("GetInfo")
    }

    async fn claim_fallback_lease(
        &self,
        _request: Request<ClaimFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLease>, Status> {
        unimplemented("ClaimFallbackLease")
    }

    async fn renew_fallback_lease(
        &self,
        _request: Request<RenewFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLeaseRenewal>, Status> {
        unimplemented("RenewFallbackLease")
    }

    async fn release_fallback_lease(
        &self,
        _request: Request<ReleaseFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLeaseRelease>, Status> {
        unimplemented("ReleaseFallbackLease")
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:19090".to_owned())
        .parse()?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!("bare tonic on {}", listener.local_addr()?);
    Server::builder()
        .add_service(IdServiceServer::new(Counter::default()))
        .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true)))
        .await?;
    Ok(())
}
