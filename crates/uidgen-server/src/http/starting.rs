//! What the HTTP port answers while the server starts, and the switch to the real routes.
//!
//! `uidgen serve` binds its ports first (a busy port costs no worker id, and a ZooKeeper worker
//! id is named after the bound port), then takes a worker id, which may wait: for a lease's
//! previous holder's last IDs, for a database or ZooKeeper that does not answer yet. A port
//! that accepts connections and answers nothing meanwhile holds every client for its whole
//! timeout. So the port answers at once from the start: `503 starting` with `Retry-After` on
//! every route but `/healthz` (the process is up), until [`StartGate::open`] puts the real
//! routes in place. Clients fail over at once on a 503 (`uidgen-client` treats every 5xx as a
//! peer that cannot answer now).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use axum::Router;
use axum::extract::Request;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::future::RouteFuture;
use tokio::sync::watch;
use tower::Service;

use super::app;
use super::observe::{App, AppFuture};
use crate::service::error::ApiError;
use crate::service::state::AppState;

/// How long a client is told to wait before asking a starting server again (seconds).
pub const STARTING_RETRY_AFTER_SECS: u64 = 1;

/// The switch from "starting" to serving, shared by the HTTP and gRPC servers of one process:
/// until [`open`](Self::open), the HTTP service answers `503 starting` and the gRPC service
/// `UNAVAILABLE`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use axum::body::Body;
/// use axum::http::{Request, StatusCode};
/// use tower::ServiceExt;
/// use uidgen_core::{Layout, SnowflakeGenerator, SystemClock};
/// use uidgen_server::http::starting::StartGate;
/// use uidgen_server::service::state::AppState;
///
/// let gate = StartGate::new();
/// let get = |path: &str| Request::get(path).body(Body::empty()).expect("a request");
/// let starting = gate.http_service().oneshot(get("/genid")).await?;
/// assert_eq!(starting.status(), StatusCode::SERVICE_UNAVAILABLE);
/// assert!(starting.headers().contains_key("retry-after"));
///
/// let generator = SnowflakeGenerator::new(Layout::snowflake()?, 1, SystemClock)?;
/// gate.open(Arc::new(AppState::embedded(Arc::new(generator), 1)));
/// let served = gate.http_service().oneshot(get("/genid")).await?;
/// assert_eq!(served.status(), StatusCode::OK);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StartGate {
    /// The real routes, once the server can answer.
    app: Arc<OnceLock<App>>,
    /// The state, for the gRPC server (which builds its own service from it).
    state: watch::Sender<Option<Arc<AppState>>>,
}

impl Default for StartGate {
    fn default() -> Self {
        Self::new()
    }
}

impl StartGate {
    /// A closed gate: the services answer "starting".
    pub fn new() -> Self {
        Self {
            app: Arc::new(OnceLock::new()),
            state: watch::Sender::new(None),
        }
    }

    /// Serve `state` from now on, on both ports. Only the first call counts.
    pub fn open(&self, state: Arc<AppState>) {
        if self.app.set(app(Arc::clone(&state))).is_ok() {
            self.state.send_replace(Some(state));
        }
    }

    /// Whether [`open`](Self::open) was called.
    pub fn is_open(&self) -> bool {
        self.app.get().is_some()
    }

    /// The state once the gate opens: what the gRPC server waits for.
    pub fn state(&self) -> watch::Receiver<Option<Arc<AppState>>> {
        self.state.subscribe()
    }

    /// The HTTP service: the real routes once open, `starting` before.
    pub fn http_service(&self) -> GatedApp {
        GatedApp {
            app: Arc::clone(&self.app),
            starting: starting_routes(),
            peer: None,
        }
    }

    /// [`http_service`](Self::http_service) knowing the connection's peer, for the access
    /// log: made per connection rather than with axum's `ConnectInfo`, which puts an extension
    /// (an allocation) on every request whether the log is on or not.
    pub fn http_service_for(&self, peer: SocketAddr) -> GatedApp {
        GatedApp {
            peer: Some(peer),
            ..self.http_service()
        }
    }
}

/// The HTTP service behind a [`StartGate`]: one atomic load per request picks the routes.
#[derive(Debug, Clone)]
pub struct GatedApp {
    app: Arc<OnceLock<App>>,
    starting: Router,
    /// The connection's peer, when made by [`StartGate::http_service_for`].
    peer: Option<SocketAddr>,
}

impl Service<Request> for GatedApp {
    type Response = Response;
    type Error = Infallible;
    type Future = GatedFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Both are always ready (`App`, and axum's `Router::poll_ready`).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let inner = match self.app.get() {
            Some(app) => Gated::Serving {
                inner: app.answer_from(request, self.peer),
            },
            // A clone is one Arc increment: `Service::call` needs the router mutably.
            None => Gated::Starting {
                inner: self.starting.clone().call(request),
            },
        };
        GatedFuture { inner }
    }
}

pin_project_lite::pin_project! {
    /// The response future of [`GatedApp`]: the real routes' or the starting answer.
    pub struct GatedFuture {
        #[pin]
        inner: Gated,
    }
}

pin_project_lite::pin_project! {
    #[project = GatedProjection]
    enum Gated {
        Serving { #[pin] inner: AppFuture },
        Starting { #[pin] inner: RouteFuture<Infallible> },
    }
}

impl Future for GatedFuture {
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().inner.project() {
            GatedProjection::Serving { inner } => inner.poll(cx),
            GatedProjection::Starting { inner } => inner.poll(cx),
        }
    }
}

/// The routes of a starting server: `/healthz` says the process is up, everything else
/// (`/readyz` included) is `503 starting`.
fn starting_routes() -> Router {
    Router::new()
        .route("/healthz", axum::routing::get(super::ops::healthz))
        .fallback(starting)
}

/// `503 starting`, with `Retry-After`, for every request while the server starts.
async fn starting() -> Response {
    (
        [(header::RETRY_AFTER, STARTING_RETRY_AFTER_SECS.to_string())],
        ApiError::starting(),
    )
        .into_response()
}
