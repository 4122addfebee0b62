//! The baseline of `scripts/bench-http.sh`: the cheapest useful axum route, one that returns an
//! atomic counter as text. `uidgen serve`'s single-ID routes are measured against it in the
//! same run, so the ratio says what uidgen adds on top of axum and hyper.
//!
//! ```sh
//! TOKIO_WORKER_THREADS=1 cargo run --release -p uidgen-server --example bare_axum -- 127.0.0.1:18090
//! curl -s 127.0.0.1:18090/id   # 1
//! ```
//!
//! Served with `axum::serve` and the same axum features as the service (HTTP/1.1 and h2c on
//! one port), plus axum's default `matched-path`, which the service leaves out (it finds route
//! patterns itself), on tokio's multi-threaded runtime, whose worker count
//! `TOKIO_WORKER_THREADS` sets. Build it apart from the server (`cargo build --example
//! bare_axum`): built together, the server would get `matched-path` too.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::extract::State;
use axum::routing::get;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18090".to_owned());
    let counter = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route(
            "/id",
            // Relaxed: the counter orders nothing; each request only needs a distinct number.
            get(|State(c): State<Arc<AtomicU64>>| async move {
                (c.fetch_add(1, Ordering::Relaxed) + 1).to_string()
            }),
        )
        .with_state(counter);
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    eprintln!("bare axum on {}", listener.local_addr()?);
    axum::serve(listener, app).await
}
