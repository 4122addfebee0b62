//! The gRPC server: `uidgen.v1.IdService`, the standard health service
//! (`grpc.health.v1.Health`) and server reflection (v1 and v1alpha, so `grpcurl` and older
//! tools list and call the API without the `.proto` file).

use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tonic::transport::Server;
use tonic::transport::server::TcpIncoming;
use uidgen_proto::v1::id_service_server::IdServiceServer;

use super::GrpcService;
use crate::http::AppState;

/// Serve gRPC on `listener` over `state` until `stopping` turns true; then report NOT_SERVING
/// on the health service, end open streams, and finish the calls in flight.
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
    health.set_serving::<IdServiceServer<GrpcService>>().await;
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
    let service = GrpcService::new(state, max_lease_size, stopping.clone());
    let shutdown = stopped(stopping, health);
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

/// Resolves when `stopping` turns true (or its sender goes away), after telling health
/// checkers that the service no longer serves.
async fn stopped(
    mut stopping: watch::Receiver<bool>,
    health: tonic_health::server::HealthReporter,
) {
    let _ = stopping.wait_for(|&s| s).await;
    health
        .set_not_serving::<IdServiceServer<GrpcService>>()
        .await;
}
