//! The web console: three static files compiled into the binary (no build step, nothing fetched
//! from elsewhere), served at `/` and `/ui`. The page reads the JSON API like any client.
//!
//! Every console response carries a Content-Security-Policy that allows only this origin: the
//! page handles an admin token, so no script from anywhere else may run beside it.

use axum::http::header;
use axum::response::IntoResponse;

/// The page.
const INDEX_HTML: &str = include_str!("../../console/index.html");
/// Its script: plain JS, the chart drawn as SVG.
const CONSOLE_JS: &str = include_str!("../../console/console.js");
/// Its style sheet.
const CONSOLE_CSS: &str = include_str!("../../console/console.css");

/// Only this origin's scripts, styles and fetches; no frames, no plugins, no inline script.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

fn asset(content_type: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_SECURITY_POLICY, CSP),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // Revalidate every load: after an upgrade the page and its script must match the API.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
}

/// `GET /`: the web console.
#[utoipa::path(
    get,
    path = "/",
    tag = "console",
    responses((
        status = 200,
        description = "The web console's page",
        content_type = "text/html",
        body = String
    ))
)]
pub async fn index() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /ui`: the web console, under the name some operators look for.
#[utoipa::path(
    get,
    path = "/ui",
    tag = "console",
    responses((
        status = 200,
        description = "The web console's page",
        content_type = "text/html",
        body = String
    ))
)]
pub async fn ui() -> impl IntoResponse {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /console/console.js`: the console's script.
#[utoipa::path(
    get,
    path = "/console/console.js",
    tag = "console",
    responses((
        status = 200,
        description = "The console's script",
        content_type = "text/javascript",
        body = String
    ))
)]
pub async fn script() -> impl IntoResponse {
    asset("text/javascript; charset=utf-8", CONSOLE_JS)
}

/// `GET /console/console.css`: the console's style sheet.
#[utoipa::path(
    get,
    path = "/console/console.css",
    tag = "console",
    responses((
        status = 200,
        description = "The console's style sheet",
        content_type = "text/css",
        body = String
    ))
)]
pub async fn style() -> impl IntoResponse {
    asset("text/css; charset=utf-8", CONSOLE_CSS)
}
