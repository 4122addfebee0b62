//! The gRPC center server (Vesta's "center server" release mode): `uidgen.v1.IdService` from
//! `proto/uidgen/v1/uidgen.proto`, served next to the HTTP API from the same [`AppState`] (the
//! same generator, segment service and store), plus the standard health and reflection
//! services.
//!
//! Every call goes through the service the HTTP handlers use
//! ([`crate::service::generate::one_as`], [`crate::service::generate::many_as`], the segment
//! service, [`crate::service::lease::lease()`]), so an ID is unique whichever channel issued it,
//! and a failure reads the same sentence on both (as a status message here, [`status`] says
//! which code). IDs issued here carry genMethod 1 (center server)
//! on the layouts with that field.

mod explain;
pub mod server;
pub mod status;

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use uidgen_core::GenMethod;
use uidgen_core::mask::Masker;
use uidgen_proto::v1::id_service_server::IdService;
use uidgen_proto::v1::{
    ClaimFallbackLeaseRequest, ExplainIdRequest, ExplainIdResponse, FallbackLease,
    FallbackLeaseRelease, FallbackLeaseRenewal, GetInfoRequest, IdBatch, IdTexts,
    LeaseSegmentRequest, MakeIdRequest, NextIdRequest, NextIdResponse, NextIdTextsRequest,
    NextIdsRequest, ReleaseFallbackLeaseRequest, RenewFallbackLeaseRequest, SegmentIdBatch,
    SegmentIdsRequest, SegmentLease, ServerInfo, StreamIdsRequest,
};

use crate::metrics::waits::{self, RouteWaits};
use crate::metrics::{IssuedCounter, Metrics};
use crate::service::callers::{Caller, RouteFamily, Scoped};
use crate::service::error::ApiError;
use crate::service::forms::{self, Form};
use crate::service::generate::{Source, batch_count, batch_size, many_from, one_from};
use crate::service::state::AppState;

tokio::task_local! {
    /// The caller whose token let this call in (`auth.required`), set by the start gate around
    /// the call: the calls that name a tag check it, and issued IDs are counted under it.
    static CALLER: Arc<Caller>;
}

/// Run `call` as `caller`'s.
pub(crate) fn with_caller<F: Future>(
    caller: Arc<Caller>,
    call: F,
) -> tokio::task::futures::TaskLocalFuture<Arc<Caller>, F> {
    CALLER.scope(caller, call)
}

/// The caller of the call this task answers; `None` where tokens are not required.
fn caller() -> Option<Arc<Caller>> {
    CALLER.try_with(Arc::clone).ok()
}

/// 403 unless the caller (if tokens are required) may use segment tag `tag`.
fn check_tag(tag: &str) -> Result<(), ApiError> {
    match caller() {
        Some(caller) => caller.check(RouteFamily::Segments, &[Scoped::Tag(tag)]),
        None => Ok(()),
    }
}

/// The space `space` names (empty: the default one), 403 unless the caller (if tokens are
/// required) may use it: a named space is scoped as `/v1/spaces/{space}` is.
fn source_for<'a>(state: &'a AppState, space: &str) -> Result<Source<'a>, ApiError> {
    if let Some(caller) = caller().filter(|_| !space.is_empty()) {
        caller.check(RouteFamily::Ids, &[Scoped::Space(space)])?;
    }
    state.source_of(Some(space))
}

/// How many batches a stream may run ahead of tonic's sender. A client that stops reading
/// stops the issuing once HTTP/2 flow control fills (its window, some 64 KiB of IDs) and these
/// batches are queued; a client that goes away stops it at the next send.
const STREAM_AHEAD: usize = 2;

/// `uidgen.v1.IdService` over the HTTP API's state ([`server::serve`] wraps it with health and
/// reflection; this is for embedding the service in a tonic server of one's own).
///
/// ```no_run
/// # use uidgen_server::service::state::AppState;
/// # async fn demo(state: std::sync::Arc<AppState>) -> anyhow::Result<()> {
/// use uidgen_proto::v1::id_service_server::IdServiceServer;
/// let (_stop, stopping) = tokio::sync::watch::channel(false);
/// let service = uidgen_server::grpc::GrpcService::new(state, 1_000_000, stopping);
/// tonic::transport::Server::builder()
///     .add_service(IdServiceServer::new(service))
///     .serve("127.0.0.1:9090".parse()?)
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GrpcService {
    state: Arc<AppState>,
    /// The largest segment lease (`segment.max_lease_size`), for `GetInfo`.
    max_lease_size: u64,
    /// Turns true when the server starts to shut down: open streams end then, rather than
    /// holding the graceful shutdown until its grace runs out.
    stopping: watch::Receiver<bool>,
    /// The issuing methods' counters, looked up once (no label allocation per call).
    issued: IssuedCounters,
    /// Every method's latency and wait figures, looked up once.
    routes: Arc<GrpcRoutes>,
}

/// Each method of `uidgen.v1.IdService` by its name and its path, the path being its `route`
/// label (as HTTP labels a route by its pattern).
const METHODS: [(&str, &str); 12] = [
    ("NextId", "/uidgen.v1.IdService/NextId"),
    ("NextIds", "/uidgen.v1.IdService/NextIds"),
    ("StreamIds", "/uidgen.v1.IdService/StreamIds"),
    ("NextIdTexts", "/uidgen.v1.IdService/NextIdTexts"),
    ("ExplainId", "/uidgen.v1.IdService/ExplainId"),
    ("MakeId", "/uidgen.v1.IdService/MakeId"),
    ("SegmentIds", "/uidgen.v1.IdService/SegmentIds"),
    ("LeaseSegment", "/uidgen.v1.IdService/LeaseSegment"),
    ("GetInfo", "/uidgen.v1.IdService/GetInfo"),
    (
        "ClaimFallbackLease",
        "/uidgen.v1.IdService/ClaimFallbackLease",
    ),
    (
        "RenewFallbackLease",
        "/uidgen.v1.IdService/RenewFallbackLease",
    ),
    (
        "ReleaseFallbackLease",
        "/uidgen.v1.IdService/ReleaseFallbackLease",
    ),
];

/// One method's metrics handles.
#[derive(Debug)]
struct GrpcRoute {
    method: &'static str,
    /// The `route` label: the method's path.
    path: &'static str,
    latency: prometheus_client::metrics::histogram::Histogram,
    waits: &'static RouteWaits,
}

/// Every method's [`GrpcRoute`].
#[derive(Debug)]
struct GrpcRoutes([GrpcRoute; METHODS.len()]);

impl GrpcRoutes {
    fn new(metrics: &Metrics) -> Self {
        Self(METHODS.map(|(method, path)| {
            let (latency, waits) = metrics.grpc_route(path);
            GrpcRoute {
                method,
                path,
                latency,
                waits,
            }
        }))
    }

    /// The route of `method` (a name from [`METHODS`]).
    fn of(&self, method: &str) -> &GrpcRoute {
        let found = self.0.iter().find(|route| route.method == method);
        debug_assert!(found.is_some(), "{method} is missing from METHODS");
        found.unwrap_or(&self.0[0])
    }
}

/// `uidgen_ids_issued_total` of each method that issues IDs, labelled by its path as HTTP
/// labels a route by its pattern.
#[derive(Debug, Clone)]
struct IssuedCounters {
    next_id: IssuedCounter,
    next_ids: IssuedCounter,
    stream_ids: IssuedCounter,
    next_id_texts: IssuedCounter,
    segment_ids: IssuedCounter,
}

impl IssuedCounters {
    fn new(metrics: &Metrics) -> Self {
        let counter =
            |method: &str| metrics.issued_counter(&format!("/uidgen.v1.IdService/{method}"));
        Self {
            next_id: counter("NextId"),
            next_ids: counter("NextIds"),
            stream_ids: counter("StreamIds"),
            next_id_texts: counter("NextIdTexts"),
            segment_ids: counter("SegmentIds"),
        }
    }

    /// The counter of `method`; `None` for the methods that issue nothing.
    fn of(&self, method: &str) -> Option<&IssuedCounter> {
        match method {
            "NextId" => Some(&self.next_id),
            "NextIds" => Some(&self.next_ids),
            "StreamIds" => Some(&self.stream_ids),
            "NextIdTexts" => Some(&self.next_id_texts),
            "SegmentIds" => Some(&self.segment_ids),
            _ => None,
        }
    }
}

impl GrpcService {
    /// The service over `state`. `stopping` turns true at shutdown.
    pub fn new(state: Arc<AppState>, max_lease_size: u64, stopping: watch::Receiver<bool>) -> Self {
        Self {
            issued: IssuedCounters::new(&state.metrics),
            routes: Arc::new(GrpcRoutes::new(&state.metrics)),
            state,
            max_lease_size,
            stopping,
        }
    }

    /// Run one call: count it by method and status code, time it, count its waits for IDs
    /// and the IDs it issued, and log the cause a failure carries (as the HTTP `observe`
    /// middleware does for routes).
    async fn answer<T>(
        &self,
        method: &'static str,
        call: impl Future<Output = Result<(T, u64), ApiError>>,
    ) -> Result<Response<T>, Status> {
        let route = self.routes.of(method);
        let start = std::time::Instant::now();
        let answered = waits::scoped(route.waits, call).await;
        route.latency.observe(start.elapsed().as_secs_f64());
        match answered {
            Ok((reply, issued)) => {
                self.state.metrics.grpc_call(route.path, "ok");
                if let Some(counter) = self.issued.of(method).filter(|_| issued > 0) {
                    counter.add(issued);
                    if let Some(caller) = caller() {
                        caller.counters.ids.inc_by(issued);
                    }
                }
                self.access(route, "ok", start, issued);
                Ok(Response::new(reply))
            }
            Err(error) => {
                let status = self.failed(method, &error);
                self.access(route, status::code_name(status.code()), start, 0);
                Err(status)
            }
        }
    }

    /// The access log's line of one call (`log.access`), as HTTP's has for a request; a
    /// stream's when it is opened.
    fn access(&self, route: &GrpcRoute, code: &str, start: std::time::Instant, ids: u64) {
        if !self.state.access_log {
            return;
        }
        let duration_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        tracing::info!(
            target: crate::logging::ACCESS_TARGET,
            method = "gRPC",
            route = route.path,
            status = code,
            duration_us,
            ids,
            "gRPC {} {code}",
            route.path
        );
    }

    /// Count and log a failed call; the status to answer it with.
    fn failed(&self, method: &'static str, error: &ApiError) -> Status {
        let answer = status::status(error);
        self.state.metrics.grpc_call(
            self.routes.of(method).path,
            status::code_name(answer.code()),
        );
        self.state.metrics.error(error.kind());
        if let Some(cause) = &error.cause {
            if answer.code() == tonic::Code::Internal {
                tracing::error!(method, kind = error.kind(), cause, "gRPC call failed");
            } else {
                tracing::warn!(method, kind = error.kind(), cause, "gRPC call failed");
            }
        }
        answer
    }
}

/// A `u32` count as a batch size: the sentence HTTP's `count` gets, and past what one message
/// may carry ([`message_cap`]) a sentence saying so.
fn count(count: u32, cap: usize, largest: u64) -> Result<usize, ApiError> {
    check_message_cap("count", u64::from(count), largest)?;
    batch_count(u64::from(count), cap)
}

/// The form a request's `form` field names (empty: none), `masked` with `masker`'s keys;
/// an unknown name, or `masked` without keys, is INVALID_ARGUMENT as HTTP's `?form=` is a 400.
fn form_named<'a>(name: &str, masker: Option<&'a Masker>) -> Result<Option<Form<'a>>, ApiError> {
    if name.is_empty() {
        return Ok(None);
    }
    forms::named(name, masker).map(Some)
}

/// The message limit gRPC clients apply to what they receive unless told otherwise (tonic,
/// grpc-go, grpc-java and grpcio all default to 4 MiB): an answer past it fails on the client
/// after the server issued its IDs, which are then lost.
pub const CLIENT_MESSAGE_LIMIT: usize = 4 * 1024 * 1024;

/// The most IDs up to `largest` one batch message may carry and stay within
/// [`CLIENT_MESSAGE_LIMIT`]: each listed ID is a varint of at most `largest`'s length (runs are
/// sent only when smaller than the list, `IdBatch::from_ids`), plus the packed field's key and
/// length.
pub fn message_cap(largest: u64) -> usize {
    // 7 bits a byte; at least one byte.
    let bits = 64 - largest.leading_zeros();
    let id_bytes = usize::try_from(bits.div_ceil(7).max(1)).unwrap_or(10);
    (CLIENT_MESSAGE_LIMIT - 16) / id_bytes
}

/// The longest text of an ID in any form: 20 decimal digits (a masked text is at most a
/// five-digit key id, `_` and 11 base62 digits; base36 13).
const LONGEST_TEXT: usize = 20;

/// The most texts one `IdTexts` message may carry and stay within [`CLIENT_MESSAGE_LIMIT`]:
/// each is its length and two bytes of field key and length.
pub const TEXT_MESSAGE_CAP: usize = (CLIENT_MESSAGE_LIMIT - 16) / (LONGEST_TEXT + 2);

/// 400 (gRPC `INVALID_ARGUMENT`) when `value` IDs in one message would pass
/// [`CLIENT_MESSAGE_LIMIT`]: refused before any ID is taken.
fn check_message_cap(name: &str, value: u64, largest: u64) -> Result<(), ApiError> {
    check_cap(
        name,
        value,
        message_cap(largest),
        "or use StreamIds for more",
    )
}

/// 400 when `value` items would pass `cap`, the most one message may carry; `more` says how
/// to get more.
fn check_cap(name: &str, value: u64, cap: usize, more: &str) -> Result<(), ApiError> {
    if usize::try_from(value).is_ok_and(|v| v <= cap) {
        return Ok(());
    }
    Err(ApiError::new(
        axum::http::StatusCode::BAD_REQUEST,
        "invalid_count",
        format!(
            "{name} {value} would make a message over the 4 MiB gRPC clients accept by default; \
             ask for at most {cap} IDs per message ({more})"
        ),
    ))
}

type IdStream = ReceiverStream<Result<IdBatch, Status>>;

#[tonic::async_trait]
impl IdService for GrpcService {
    async fn next_id(
        &self,
        request: Request<NextIdRequest>,
    ) -> Result<Response<NextIdResponse>, Status> {
        let space = request.into_inner().space;
        self.answer("NextId", async {
            let source = source_for(&self.state, &space)?;
            let id = one_from(source, GenMethod::CenterServer).await?;
            Ok((NextIdResponse { id }, 1))
        })
        .await
    }

    async fn next_ids(
        &self,
        request: Request<NextIdsRequest>,
    ) -> Result<Response<IdBatch>, Status> {
        let NextIdsRequest {
            count: wanted,
            space,
            runs,
        } = request.into_inner();
        self.answer("NextIds", async {
            let source = source_for(&self.state, &space)?;
            let n = count(
                wanted,
                self.state.batch_cap,
                source.generator.layout().max_id(),
            )?;
            let ids = many_from(source, n, GenMethod::CenterServer).await?;
            let issued = ids.len() as u64;
            Ok((IdBatch::from_ids(ids, runs), issued))
        })
        .await
    }

    type StreamIdsStream = IdStream;

    async fn stream_ids(
        &self,
        request: Request<StreamIdsRequest>,
    ) -> Result<Response<IdStream>, Status> {
        let StreamIdsRequest {
            batch_size: per_batch,
            max_ids,
            space,
            runs,
        } = request.into_inner();
        let route = self.routes.of("StreamIds");
        let start = std::time::Instant::now();
        let checked = source_for(&self.state, &space).and_then(|source| {
            let largest = source.generator.layout().max_id();
            check_message_cap("batch_size", u64::from(per_batch), largest)?;
            batch_size("batch_size", u64::from(per_batch), self.state.batch_cap)
        });
        let batch = match checked {
            Ok(batch) => batch,
            Err(error) => {
                route.latency.observe(start.elapsed().as_secs_f64());
                let status = self.failed("StreamIds", &error);
                self.access(route, status::code_name(status.code()), start, 0);
                return Err(status);
            }
        };
        self.state.metrics.grpc_call(route.path, "ok");
        let (tx, rx) = mpsc::channel(STREAM_AHEAD);
        // The stream's batches wait for IDs under the method's route, as a unary call's do.
        tokio::spawn(waits::scoped(
            route.waits,
            stream(self.clone(), tx, batch, max_ids, runs, space, caller()),
        ));
        route.latency.observe(start.elapsed().as_secs_f64());
        self.access(route, "ok", start, 0);
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn next_id_texts(
        &self,
        request: Request<NextIdTextsRequest>,
    ) -> Result<Response<IdTexts>, Status> {
        let NextIdTextsRequest {
            count: wanted,
            space,
            form,
        } = request.into_inner();
        self.answer("NextIdTexts", async {
            let source = source_for(&self.state, &space)?;
            let form = form_named(&form, self.state.masker.as_deref())?
                .unwrap_or(Form::Plain(uidgen_core::IdForm::Decimal));
            check_cap(
                "count",
                u64::from(wanted),
                TEXT_MESSAGE_CAP,
                "and call again for more",
            )?;
            let n = batch_count(u64::from(wanted), self.state.batch_cap)?;
            let layout = source.generator.layout();
            let ids = many_from(source, n, GenMethod::CenterServer).await?;
            let issued = ids.len() as u64;
            let texts = form.write_all(layout, ids).map_err(ApiError::input)?;
            Ok((IdTexts { texts }, issued))
        })
        .await
    }

    async fn explain_id(
        &self,
        request: Request<ExplainIdRequest>,
    ) -> Result<Response<ExplainIdResponse>, Status> {
        let ExplainIdRequest {
            id: text,
            space,
            form,
        } = request.into_inner();
        self.answer("ExplainId", async {
            let layout = source_for(&self.state, &space)?.generator.layout();
            let form = form_named(&form, self.state.masker.as_deref())?;
            Ok((explain::explain(layout, &text, form)?, 0))
        })
        .await
    }

    async fn make_id(
        &self,
        request: Request<MakeIdRequest>,
    ) -> Result<Response<ExplainIdResponse>, Status> {
        let request = request.into_inner();
        self.answer("MakeId", async {
            Ok((explain::make(self.state.generator.layout(), &request)?, 0))
        })
        .await
    }

    async fn segment_ids(
        &self,
        request: Request<SegmentIdsRequest>,
    ) -> Result<Response<SegmentIdBatch>, Status> {
        // A call another server forwarded for an ordered tag (issue 35): served here if this
        // server leads the tag, else refused, never forwarded again.
        let forwarded = request
            .metadata()
            .contains_key(crate::ordered::forward::FORWARDED);
        let auth = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let SegmentIdsRequest { tag, count: wanted } = request.into_inner();
        self.answer("SegmentIds", async {
            check_tag(&tag)?;
            crate::service::segments::service(&self.state)?;
            // Segment numbers are positive `int64`s.
            let n = count(wanted, self.state.batch_cap, i64::MAX.unsigned_abs())?;
            let ids = match (&self.state.ordered, forwarded) {
                (Some(ordered), true) => ordered
                    .take_forwarded(&tag, n)
                    .await
                    .map_err(crate::service::segments::ordered_error)?,
                (None, true) => {
                    return Err(crate::service::segments::ordered_error(
                        crate::ordered::OrderedError::NotLeading(tag.clone()),
                    ));
                }
                (_, false) => {
                    crate::service::segments::numbers(&self.state, &tag, n, auth.as_deref()).await?
                }
            };
            let issued = ids.len() as u64;
            Ok((SegmentIdBatch { tag, ids }, issued))
        })
        .await
    }

    async fn lease_segment(
        &self,
        request: Request<LeaseSegmentRequest>,
    ) -> Result<Response<SegmentLease>, Status> {
        let LeaseSegmentRequest { tag, size } = request.into_inner();
        self.answer("LeaseSegment", async {
            check_tag(&tag)?;
            let lease = crate::service::lease::lease(&self.state, &tag, size, "grpc").await?;
            Ok((
                SegmentLease {
                    tag: lease.tag,
                    start: lease.start,
                    end: lease.end,
                },
                0,
            ))
        })
        .await
    }

    async fn get_info(
        &self,
        _request: Request<GetInfoRequest>,
    ) -> Result<Response<ServerInfo>, Status> {
        self.answer("GetInfo", async {
            let layout = self.state.generator.layout();
            let runway = crate::service::runway::RunwayInfo::of(
                self.state.generator.as_ref(),
                uidgen_core::Clock::now_millis(&uidgen_core::SystemClock),
                self.state.runway_warning,
            );
            Ok((
                ServerInfo {
                    layout: layout.name().to_owned(),
                    fields: explain::fields(layout, None),
                    epoch_ms: layout.epoch_ms(),
                    worker_id: self.state.worker_id,
                    batch_cap: u32::try_from(self.state.batch_cap).unwrap_or(u32::MAX),
                    max_lease_size: self.max_lease_size,
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    runs_out_at_ms: runway.runs_out_at_ms,
                    runway_clock_ms: runway.left_at_clock_ms,
                    runway_lead_ms: runway.left_at_lead_ms,
                },
                0,
            ))
        })
        .await
    }

    async fn claim_fallback_lease(
        &self,
        request: Request<ClaimFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLease>, Status> {
        let ClaimFallbackLeaseRequest { holder, ttl_ms } = request.into_inner();
        self.answer("ClaimFallbackLease", async {
            let grant = crate::service::fallback::claim(&self.state, &holder, ttl_ms).await?;
            let layout = self.state.generator.layout();
            Ok((
                FallbackLease {
                    worker_id: grant.worker_id,
                    holder: grant.holder,
                    valid_until_ms: grant.valid_until_ms,
                    floor_ms: grant.floor_ms,
                    ttl_ms,
                    layout: layout.name().to_owned(),
                    fields: explain::fields(layout, None),
                    epoch_ms: layout.epoch_ms(),
                },
                0,
            ))
        })
        .await
    }

    async fn renew_fallback_lease(
        &self,
        request: Request<RenewFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLeaseRenewal>, Status> {
        let RenewFallbackLeaseRequest {
            worker_id,
            holder,
            ttl_ms,
            issued_until_ms,
        } = request.into_inner();
        self.answer("RenewFallbackLease", async {
            let valid_until_ms = crate::service::fallback::renew(
                &self.state,
                worker_id,
                &holder,
                ttl_ms,
                issued_until_ms,
            )
            .await?;
            Ok((
                FallbackLeaseRenewal {
                    worker_id,
                    valid_until_ms,
                },
                0,
            ))
        })
        .await
    }

    async fn release_fallback_lease(
        &self,
        request: Request<ReleaseFallbackLeaseRequest>,
    ) -> Result<Response<FallbackLeaseRelease>, Status> {
        let ReleaseFallbackLeaseRequest {
            worker_id,
            holder,
            issued_until_ms,
        } = request.into_inner();
        self.answer("ReleaseFallbackLease", async {
            let released =
                crate::service::fallback::release(&self.state, worker_id, &holder, issued_until_ms)
                    .await?;
            Ok((
                FallbackLeaseRelease {
                    worker_id,
                    released,
                },
                0,
            ))
        })
        .await
    }
}

/// Feed one `StreamIds` call: batches of `batch` IDs (as runs when the client reads them) until
/// `max_ids` have gone (0: no limit), the client goes away (its receiver is dropped, so a send
/// fails), issuing fails (the client gets the status, then the end), or the server starts to
/// shut down.
async fn stream(
    service: GrpcService,
    tx: mpsc::Sender<Result<IdBatch, Status>>,
    batch: usize,
    max_ids: u64,
    runs: bool,
    space: String,
    caller: Option<Arc<Caller>>,
) {
    {
        let mut stopping = service.stopping.clone();
        let mut left = max_ids;
        loop {
            let n = if max_ids == 0 {
                batch
            } else if left == 0 {
                return;
            } else {
                usize::try_from(left).map_or(batch, |left| left.min(batch))
            };
            let next = tokio::select! {
                // Checked first: a stream that always has IDs ready would otherwise never look.
                biased;
                () = async { let _ = stopping.wait_for(|&s| s).await; } => {
                    let _ = tx
                        .send(Err(Status::unavailable(
                            "the server is shutting down; call another server",
                        )))
                        .await;
                    return;
                }
                next = async {
                    // Checked before the stream started; a space never leaves a running server.
                    let source = service.state.source_of(Some(&space))?;
                    many_from(source, n, GenMethod::CenterServer).await
                } => next,
            };
            match next {
                Ok(ids) => {
                    let sent = ids.len() as u64;
                    if tx.send(Ok(IdBatch::from_ids(ids, runs))).await.is_err() {
                        // The client went away: these IDs are skipped, never reissued.
                        return;
                    }
                    service.issued.stream_ids.add(sent);
                    if let Some(caller) = &caller {
                        caller.counters.ids.inc_by(sent);
                    }
                    left = left.saturating_sub(sent);
                }
                Err(error) => {
                    let _ = tx.send(Err(service.failed("StreamIds", &error))).await;
                    return;
                }
            }
        }
    }
}
