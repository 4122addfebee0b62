//! The gRPC server: `uidgen.v1.IdService`, the standard health service
//! (`grpc.health.v1.Health`) and server reflection (v1 and v1alpha, so `grpcurl` and older
//! tools list and call the API without the `.proto` file).

use std::sync::Arc;

use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::server::NamedService;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;
use uidgen_proto::v1::id_service_server::IdServiceServer;

use super::GrpcService;
use crate::http::{AppState, Mode, Readiness, check_readiness};

/// Serve gRPC on `listener` over `state` until `stopping` turns true; then report NOT_SERVING
/// on the health service, end open streams, and finish the calls in flight. Until then the
/// health service follows the server's readiness (the `/readyz` checks), as a whole and per
/// mode ([`mode_service_name`]).
///
/// ```no_run
/// # async fn demo(state: std::sync::Arc<uidgen_server::http::AppState>) -> anyhow::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
/// let (stop, stopping) = tokio::sync::watch::channel(false);
/// let server = tokio::spawn(uidgen_server::grpc::serve(state, listener, 1_000_000, stopping));
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
    let (health, health_service) = tonic_health::server::health_reporter();
    // Known before the port answers: a checker never sees the service as unknown.
    let serving = Serving::of(&check_readiness(&state).await);
    serving.report(&health, None).await;
    let follower = tokio::spawn(follow_readiness(
        Arc::clone(&state),
        health,
        serving,
        stopping.clone(),
    ));
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
    let service = GrpcService::new(state, max_lease_size, stopping);
    // The follower ends at the stop, after reporting NOT_SERVING: only then do the calls in
    // flight drain, so a health checker learns of the stop before the port closes.
    let shutdown = async {
        let _ = follower.await;
    };
    Server::builder()
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(IdServiceServer::new(service))
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
/// use uidgen_server::grpc::mode_service_name;
/// use uidgen_server::http::Mode;
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
