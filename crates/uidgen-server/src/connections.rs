//! The HTTP port's connections (`[http]`, issue 32): how long a client may take to send a
//! request, and how many connections are served at once, so that no host can hold the port
//! by sending slowly or not at all.
//!
//! Invariants:
//! - A connection whose first request has not fully arrived (HTTP/1 head, HTTP/2 preface and
//!   first `HEADERS`) within [`ConnectionLimits::header_read_timeout`] is closed; on HTTP/1,
//!   hyper's own header timeout does the same for every later request head, idle time between
//!   requests included. HTTP/2 has no per-request header timeout in hyper: past the first
//!   request, a stream whose headers never finish holds that stream only, and the connection
//!   counts against the cap.
//! - A request body must have fully arrived within [`ConnectionLimits::body_read_timeout`] of
//!   its head: reading it past that fails with [`BodyTimedOut`] (a 408), and hyper closes an
//!   HTTP/1 connection whose request body was left unread.
//! - At most [`ConnectionLimits::max_connections`] connections are served at once. Past the
//!   cap the server stops accepting: new connections wait in the kernel's listen backlog (or
//!   are refused by it once it is full) until one of the served ones ends, which the timeouts
//!   above bound for a client that sends nothing.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower::{Service, ServiceExt};

/// How long a client may take to send a request's head unless `http.header_read_timeout_ms`
/// says otherwise. A person typing a request by hand still makes it; a client that opened a
/// connection and went quiet gives it back within seconds.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a client may take to send a request's body unless `http.body_read_timeout_ms`
/// says otherwise. No route takes more than `MAX_BODY_BYTES`,
/// which any link sends in far less.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How many connections are served at once unless `http.max_connections` says otherwise: under
/// the common soft limit of 1,024 open files, so the store's pool, the gRPC port and the state
/// files still get descriptors when every connection is taken.
pub const DEFAULT_MAX_CONNECTIONS: usize = 900;

/// The shortest timeout: below it a healthy client on a slow link is cut.
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);

/// The longest timeout: past it the timeout no longer protects the port.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(3600);

/// The most connections one server may be told to serve at once (the semaphore's bound is far
/// above; this one keeps a typo from meaning "unbounded").
pub const MAX_CONNECTIONS: usize = 1_000_000;

/// A limit out of its range, as [`ConnectionLimits::validate`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// `header_read_timeout` is out of range.
    #[error("must be between {} and {} ms", MIN_TIMEOUT.as_millis(), MAX_TIMEOUT.as_millis())]
    HeaderReadTimeout,
    /// `body_read_timeout` is out of range.
    #[error("must be between {} and {} ms", MIN_TIMEOUT.as_millis(), MAX_TIMEOUT.as_millis())]
    BodyReadTimeout,
    /// `max_connections` is out of range.
    #[error("must be between 1 and {MAX_CONNECTIONS}")]
    MaxConnections,
}

/// How long a client may take to send a request, and how many connections are served at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// How long a request's head may take to arrive (and, on HTTP/1, how long a connection
    /// may stay idle between requests).
    pub header_read_timeout: Duration,
    /// How long a request's body may take to arrive, counted from its head.
    pub body_read_timeout: Duration,
    /// How many connections are served at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ConnectionLimits {
    /// Each limit within its range.
    pub fn validate(&self) -> Result<(), LimitError> {
        let in_range = |d: Duration| (MIN_TIMEOUT..=MAX_TIMEOUT).contains(&d);
        if !in_range(self.header_read_timeout) {
            return Err(LimitError::HeaderReadTimeout);
        }
        if !in_range(self.body_read_timeout) {
            return Err(LimitError::BodyReadTimeout);
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.max_connections) {
            return Err(LimitError::MaxConnections);
        }
        Ok(())
    }
}

/// A request body that did not arrive within `http.body_read_timeout_ms`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .0.as_millis())]
pub struct BodyTimedOut(pub Duration);

/// Serve the connections `listener` accepts, each with the service `service_for` makes for
/// its peer (the access log names it), within `limits`, until `stop` turns true; then stop
/// accepting and wait for the connections to finish their requests (the caller bounds that
/// wait).
///
/// Cancel safety: dropping the future stops accepting; connections already accepted run on in
/// their own tasks until they end.
pub(crate) async fn serve<L, S, M>(
    mut listener: L,
    service_for: M,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) where
    L: axum::serve::Listener,
    M: Fn(L::Addr) -> S,
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        // A slot first, then the connection: past the cap the server stops accepting, and new
        // connections wait in the listen backlog rather than being accepted and starved.
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => slot,
            _ = stop.wait_for(|&s| s) => break,
        };
        // The semaphore is never closed.
        let Ok(slot) = slot else { break };
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|&s| s) => break,
        };
        let first_request = Arc::new(Notify::new());
        let seen = Arc::clone(&first_request);
        let body_timeout = limits.body_read_timeout;
        let service =
            service_for(peer).map_request(move |request: Request<hyper::body::Incoming>| {
                seen.notify_one();
                request.map(|body| timed(body, body_timeout))
            });
        let builder = Arc::clone(&builder);
        let watcher = graceful.watcher();
        let header_timeout = limits.header_read_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let connection =
                builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
            let connection = watcher.watch(connection);
            tokio::pin!(connection);
            // hyper's header timeout starts once it knows the protocol: a client that sends
            // nothing, or part of the HTTP/2 preface, is cut here instead.
            tokio::select! {
                _ = &mut connection => return,
                () = first_request.notified() => {}
                () = tokio::time::sleep(header_timeout) => {
                    tracing::debug!("no request within the header read timeout; closing");
                    return;
                }
            }
            let _ = connection.await;
        });
    }
    graceful.shutdown().await;
}

/// `body` bounded by `timeout` from now; an empty body (most `GET`s) as it is, no timer made.
fn timed(body: hyper::body::Incoming, timeout: Duration) -> Body {
    use http_body::Body as _;
    if body.is_end_stream() {
        return Body::new(body);
    }
    Body::new(TimedBody {
        inner: body,
        timeout,
        deadline: Instant::now() + timeout,
        sleep: None,
    })
}

pin_project_lite::pin_project! {
    /// A request body that fails with [`BodyTimedOut`] once its deadline passes unfinished.
    struct TimedBody {
        #[pin]
        inner: hyper::body::Incoming,
        timeout: Duration,
        deadline: Instant,
        // Made on the first wait only: a body that is there at once needs no timer.
        sleep: Option<Pin<Box<Sleep>>>,
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = *this.deadline;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyTimedOut(*this.timeout).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether `error` (or what caused it) is a [`BodyTimedOut`].
pub(crate) fn is_body_timeout(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if error.is::<BodyTimedOut>() {
            return true;
        }
        cause = error.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_each_limit_is_bounded() {
        assert_eq!(ConnectionLimits::default().validate(), Ok(()));
        let zero = |f: fn(&mut ConnectionLimits)| {
            let mut limits = ConnectionLimits::default();
            f(&mut limits);
            limits.validate()
        };
        assert_eq!(
            zero(|l| l.header_read_timeout = Duration::ZERO),
            Err(LimitError::HeaderReadTimeout)
        );
        assert_eq!(
            zero(|l| l.body_read_timeout = Duration::from_secs(7200)),
            Err(LimitError::BodyReadTimeout)
        );
        assert_eq!(
            zero(|l| l.max_connections = 0),
            Err(LimitError::MaxConnections)
        );
    }
}
