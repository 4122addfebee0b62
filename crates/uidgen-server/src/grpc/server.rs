//! The gRPC server: `uidgen.v1.IdService`, the standard health service
//! (`grpc.health.v1.Health`) and server reflection (v1 and v1alpha, so `grpcurl` and older
//! tools list and call the API without the `.proto` file).

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::codegen::{BoxFuture, Service, http};
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use uidgen_proto::v1::id_service_server::IdServiceServer;

use super::GrpcService;
use crate::service::callers::{Callers, RouteFamily};
use crate::service::error::STARTING_MESSAGE;
use crate::service::readiness::{Mode, Readiness};
use crate::service::ready::check as check_readiness;
use crate::service::state::AppState;

/// Serve gRPC on `listener` over `state` until `stopping` turns true; then report NOT_SERVING
/// on the health service, end open streams, and finish the calls in flight. Until then the
/// health service follows the server's readiness (the `/readyz` checks), as a whole and per
/// mode ([`mode_service_name`]).
///
/// ```no_run
/// # use uidgen_server::service::state::AppState;
/// use uidgen_server::grpc::server::serve;
/// # async fn demo(state: std::sync::Arc<AppState>) -> anyhow::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
/// let (stop, stopping) = tokio::sync::watch::channel(false);
/// let server = tokio::spawn(serve(state, listener, 1_000_000, stopping));
/// stop.send(true)?;
/// server.await??;
/// # Ok(()) }
/// ```
pub async fn serve(
    state: Arc<AppState>,
    listener: TcpListener,
    max_lease_size: u64,
    stopping: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let gate = GrpcGate::default();
    gate.open(Arc::clone(&state), max_lease_size, stopping.clone());
    let (_started, state) = watch::channel(Some(state));
    serve_starting(gate, state, listener, stopping, None).await
}

/// [`serve`] for a server that is still starting: until `gate` is
/// [opened](GrpcGate::open), every `uidgen.v1.IdService` call is answered `UNAVAILABLE` at once,
/// so a client fails over instead of waiting for a server that holds no worker id yet; the
/// health service says NOT_SERVING until `started` holds the state, then follows readiness. A
/// stop while starting (or the state's sender going away unsent) ends the server. With `tls`,
/// every connection is TLS.
pub(crate) async fn serve_starting(
    gate: GrpcGate,
    mut started: watch::Receiver<Option<Arc<AppState>>>,
    listener: TcpListener,
    mut stopping: watch::Receiver<bool>,
    tls: Option<tonic::transport::ServerTlsConfig>,
) -> anyhow::Result<()> {
    let (health, health_service) = tonic_health::server::health_reporter();
    // Known before the port answers: a checker never sees the service as unknown.
    let state = started.borrow().clone();
    let serving = match &state {
        Some(state) => Serving::of(&check_readiness(state).await),
        None => Serving::starting(),
    };
    serving.report(&health, None).await;
    let follower = tokio::spawn(async move {
        let (state, serving) = match state {
            Some(state) => (state, serving),
            None => {
                let opened = tokio::select! {
                    opened = started.wait_for(Option::is_some) => opened.ok().and_then(|s| s.clone()),
                    _ = stopping.wait_for(|&s| s) => None,
                };
                let Some(state) = opened else {
                    serving.stopped().report(&health, None).await;
                    return;
                };
                let now = Serving::of(&check_readiness(&state).await);
                now.report(&health, Some(&serving)).await;
                (state, now)
            }
        };
        follow_readiness(state, health, serving, stopping).await;
    });
    let reflection = |builder: tonic_reflection::server::Builder<'static>| {
        builder
            .register_encoded_file_descriptor_set(uidgen_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    // The descriptor sets are compiled in: failing to read them is a build defect.
    let reflection_v1 = reflection(tonic_reflection::server::Builder::configure())
        .build_v1()
        .context("cannot build gRPC reflection")?;
    let reflection_v1alpha = reflection(tonic_reflection::server::Builder::configure())
        .build_v1alpha()
        .context("cannot build gRPC reflection")?;
    // The follower ends at the stop, after reporting NOT_SERVING: only then do the calls in
    // flight drain, so a health checker learns of the stop before the port closes.
    let shutdown = async {
        let _ = follower.await;
    };
    let mut builder = Server::builder();
    if let Some(tls) = tls {
        builder = builder
            .tls_config(tls)
            .context("cannot set up TLS for gRPC")?;
    }
    builder
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(gate)
        // TCP_NODELAY: an answer must not wait for the client's delayed ACK (Nagle's
        // algorithm held batch answers back some 40 ms each without it).
        .serve_with_incoming_shutdown(
            TcpIncoming::from(listener).with_nodelay(Some(true)),
            shutdown,
        )
        .await
        .context("the gRPC server failed")
}

/// How often the health service re-reads readiness (the same checks as `/readyz`).
const HEALTH_INTERVAL: Duration = Duration::from_secs(2);

/// The health service's name for one mode (`uidgen.v1.IdService/segment`): SERVING while that
/// mode can serve, as `/readyz?mode=segment` answers; only the modes this server serves have one.
///
/// ```
/// use uidgen_server::grpc::server::mode_service_name;
/// use uidgen_server::service::readiness::Mode;
/// assert_eq!(mode_service_name(Mode::Segment), "uidgen.v1.IdService/segment");
/// ```
pub fn mode_service_name(mode: Mode) -> String {
    format!("{}/{}", IdServiceServer::<GrpcService>::NAME, mode.name())
}

/// What the health service reports: the server as a whole (some mode can serve, as `/readyz`
/// answers), and each configured mode.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Serving {
    any: bool,
    modes: Vec<(Mode, bool)>,
}

impl Serving {
    fn of(readiness: &Readiness) -> Self {
        Self {
            any: readiness.any_ready(),
            modes: readiness
                .modes
                .iter()
                .map(|(mode, check)| (*mode, check.is_ok()))
                .collect(),
        }
    }

    /// A starting server: NOT_SERVING as a whole (its modes are not known yet).
    fn starting() -> Self {
        Self {
            any: false,
            modes: Vec::new(),
        }
    }

    /// Everything NOT_SERVING: the server is stopping.
    fn stopped(&self) -> Self {
        Self {
            any: false,
            modes: self.modes.iter().map(|(mode, _)| (*mode, false)).collect(),
        }
    }

    /// Set the statuses that differ from `before` (all of them without one).
    async fn report(&self, health: &HealthReporter, before: Option<&Serving>) {
        if before.is_none_or(|b| b.any != self.any) {
            let status = status_of(self.any);
            health
                .set_service_status(IdServiceServer::<GrpcService>::NAME, status)
                .await;
            // "": the server as a whole, which is what most health checkers ask about.
            health.set_service_status("", status).await;
        }
        for (i, (mode, serving)) in self.modes.iter().enumerate() {
            if before.is_none_or(|b| b.modes.get(i) != Some(&(*mode, *serving))) {
                health
                    .set_service_status(mode_service_name(*mode), status_of(*serving))
                    .await;
            }
        }
    }
}

fn status_of(serving: bool) -> ServingStatus {
    if serving {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

/// Keep the health service's statuses equal to readiness: `""` and `uidgen.v1.IdService`
/// SERVING while some mode can serve, each `uidgen.v1.IdService/{mode}` while that mode can;
/// re-read every [`HEALTH_INTERVAL`], so failover clients can probe it. When `stopping` turns
/// true (or its sender goes away), report NOT_SERVING everywhere and end.
async fn follow_readiness(
    state: Arc<AppState>,
    health: HealthReporter,
    mut serving: Serving,
    mut stopping: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stopping.wait_for(|&s| s) => break,
            () = tokio::time::sleep(HEALTH_INTERVAL) => {}
        }
        let now = Serving::of(&check_readiness(&state).await);
        if *stopping.borrow() {
            break;
        }
        if now != serving {
            now.report(&health, Some(&serving)).await;
            serving = now;
        }
    }
    serving.stopped().report(&health, None).await;
}

/// `uidgen.v1.IdService` behind the start gate: `UNAVAILABLE` until [`open`](Self::open), then
/// the service itself (one atomic load per call), behind the caller-token check when
/// `auth.required` is on.
#[derive(Debug, Clone, Default)]
pub(crate) struct GrpcGate {
    service: Arc<OnceLock<Opened>>,
}

/// What an open gate serves.
#[derive(Debug)]
struct Opened {
    service: IdServiceServer<GrpcService>,
    state: Arc<AppState>,
    /// The caller tokens, when `auth.required` is on.
    callers: Option<Arc<Callers>>,
}

impl GrpcGate {
    /// Serve calls from `state` from now on (see [`GrpcService::new`]). Only the first call
    /// counts.
    pub(crate) fn open(
        &self,
        state: Arc<AppState>,
        max_lease_size: u64,
        stopping: watch::Receiver<bool>,
    ) {
        let service = GrpcService::new(Arc::clone(&state), max_lease_size, stopping);
        let callers = state.callers.clone().filter(|c| c.required());
        let _ = self.service.set(Opened {
            service: IdServiceServer::new(service),
            state,
            callers,
        });
    }
}

impl NamedService for GrpcGate {
    const NAME: &'static str = IdServiceServer::<GrpcService>::NAME;
}

impl<B> Service<http::Request<B>> for GrpcGate
where
    B: Send + 'static,
    IdServiceServer<GrpcService>: Service<
            http::Request<B>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
            Future = BoxFuture<http::Response<tonic::body::Body>, Infallible>,
        >,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _: &mut TaskContext<'_>) -> Poll<Result<(), Self::Error>> {
        // The generated service is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let Some(opened) = self.service.get() else {
            let status = tonic::Status::unavailable(STARTING_MESSAGE);
            return Box::pin(std::future::ready(Ok(status.into_http())));
        };
        // A clone is an Arc increment: `call` needs the service mutably.
        let mut service = opened.service.clone();
        let Some(callers) = &opened.callers else {
            return service.call(request);
        };
        // Every method, known or added later, needs a valid token; the family check covers
        // the methods of a family, and the tag check the calls that name one (`with_caller`).
        let method = request.uri().path().rsplit('/').next().unwrap_or_default();
        let authorization = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let checked =
            callers.authenticate(authorization).and_then(
                |caller| match RouteFamily::of_grpc_method(method) {
                    Some(family) => caller.check(family, &[]).map(|()| caller),
                    None => Ok(caller),
                },
            );
        match checked {
            Ok(caller) => {
                caller.counters.requests.inc();
                Box::pin(super::with_caller(caller, service.call(request)))
            }
            Err(error) => {
                opened.state.metrics.error(error.kind());
                Box::pin(std::future::ready(Ok(
                    super::status::status(&error).into_http()
                )))
            }
        }
    }
}
