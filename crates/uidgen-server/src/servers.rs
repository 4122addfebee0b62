//! The HTTP and gRPC servers of `uidgen serve`, from the bound ports to the bounded graceful
//! stop.
//!
//! They run from the moment the ports are bound, before the worker id is taken: behind a
//! [`StartGate`] they answer `503 starting` (gRPC `UNAVAILABLE`) at once until the service can
//! issue, so no request waits on a start (a takeover that waits for its predecessor's last
//! IDs, a database or ZooKeeper that does not answer yet). A shutdown signal stops both,
//! whether the service is still starting or serving; in-flight requests then get
//! [`SHUTDOWN_GRACE`] to finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::connections::ConnectionLimits;
use crate::grpc::server::GrpcGate;
use crate::http::starting::StartGate;
use crate::service::state::AppState;

/// After a shutdown signal, in-flight requests get this long to finish; then they are
/// abandoned, and the worker id lease is still released.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// Resolve when SIGINT (Ctrl-C) or SIGTERM arrives.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("SIGINT received; finishing in-flight requests"),
        () = terminate => tracing::info!("SIGTERM received; finishing in-flight requests"),
    }
}

/// The bound sockets: HTTP, and gRPC unless `grpc_listen` is empty; both over TLS when `tls`.
pub(crate) struct Listeners {
    pub(crate) http: TcpListener,
    pub(crate) grpc: Option<TcpListener>,
    pub(crate) tls: Option<crate::tls::Tls>,
}

/// The running servers and the shutdown signal they follow.
pub(crate) struct Servers {
    http: JoinHandle<anyhow::Result<()>>,
    grpc: JoinHandle<anyhow::Result<()>>,
    /// The HTTP routes' gate.
    gate: StartGate,
    /// The gRPC service's gate, when gRPC is served.
    grpc_gate: Option<GrpcGate>,
    /// `segment.max_lease_size`, for the gRPC service.
    max_lease_size: u64,
    /// Turns true on SIGTERM or SIGINT.
    stopping: watch::Receiver<bool>,
    /// Where they listen, for the log.
    pub(crate) http_addr: SocketAddr,
    pub(crate) grpc_addr: Option<SocketAddr>,
}

impl Servers {
    /// Answer on `listeners` from now on ("starting" until [`open`](Self::open)), HTTP within
    /// `limits`, and watch for the shutdown signal. Must be called inside a tokio runtime.
    pub(crate) fn start(
        listeners: Listeners,
        limits: ConnectionLimits,
        max_lease_size: u64,
    ) -> anyhow::Result<Self> {
        let gate = StartGate::new();
        let http_addr = listeners.http.local_addr()?;
        let grpc_addr = listeners
            .grpc
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()?;
        let (signalled, stopping) = watch::channel(false);
        tokio::spawn(async move {
            shutdown_signal().await;
            let _ = signalled.send(true);
        });
        let http_gate = gate.clone();
        let service = move |peer| http_gate.http_service_for(peer);
        let http = match &listeners.tls {
            Some(tls) => {
                let serving = crate::connections::serve(
                    tls.listen(listeners.http)?,
                    service,
                    limits,
                    stopping.clone(),
                );
                tokio::spawn(async move {
                    serving.await;
                    Ok(())
                })
            }
            None => {
                let serving =
                    crate::connections::serve(listeners.http, service, limits, stopping.clone());
                tokio::spawn(async move {
                    serving.await;
                    Ok(())
                })
            }
        };
        let grpc_gate = listeners.grpc.as_ref().map(|_| GrpcGate::default());
        let grpc = match (listeners.grpc, &grpc_gate) {
            (Some(listener), Some(grpc_gate)) => tokio::spawn(crate::grpc::server::serve_starting(
                grpc_gate.clone(),
                gate.state(),
                listener,
                stopping.clone(),
                listeners.tls.as_ref().map(crate::tls::Tls::grpc),
            )),
            _ => tokio::spawn(async { Ok(()) }),
        };
        Ok(Self {
            http,
            grpc,
            gate,
            grpc_gate,
            max_lease_size,
            stopping,
            http_addr,
            grpc_addr,
        })
    }

    /// Serve `state` on both ports from now on: gRPC first, then HTTP (whose gate also tells
    /// the gRPC health service), so that both answer once this returns.
    pub(crate) fn open(&self, state: Arc<AppState>) {
        if let Some(grpc_gate) = &self.grpc_gate {
            grpc_gate.open(
                Arc::clone(&state),
                self.max_lease_size,
                self.stopping.clone(),
            );
        }
        self.gate.open(state);
    }

    /// Resolves once a shutdown signal arrived.
    pub(crate) async fn stopped(&self) {
        let mut stopping = self.stopping.clone();
        // The sender lives as long as the signal task, which only ends after sending.
        let _ = stopping.wait_for(|&s| s).await;
    }

    /// Wait until both servers have stopped after a shutdown signal, at most
    /// [`SHUTDOWN_GRACE`] past it for the requests in flight; either server failing stops
    /// both (a half-served process is worse than a restart).
    pub(crate) async fn run(self) -> anyhow::Result<()> {
        let Self {
            http,
            grpc,
            stopping,
            ..
        } = self;
        let aborts = [http.abort_handle(), grpc.abort_handle()];
        let joined =
            async { tokio::try_join!(finished(http, "HTTP"), finished(grpc, "gRPC")).map(|_| ()) };
        let mut grace_signal = stopping;
        let grace_over = async {
            if grace_signal.wait_for(|&s| s).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        let served = tokio::select! {
            result = joined => result,
            () = grace_over => {
                tracing::warn!(
                    grace = ?SHUTDOWN_GRACE,
                    "in-flight requests did not finish in time; abandoning them"
                );
                Ok(())
            }
        };
        for abort in aborts {
            abort.abort();
        }
        served
    }

    /// Stop both servers now (the start failed: nothing was served but `starting`).
    pub(crate) fn abort(self) {
        self.http.abort();
        self.grpc.abort();
    }
}

/// A server task's result, its panic told as an error.
async fn finished(task: JoinHandle<anyhow::Result<()>>, which: &str) -> anyhow::Result<()> {
    task.await
        .with_context(|| format!("the {which} server task failed"))?
}
