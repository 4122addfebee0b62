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

/// One console file's handler: its media type and its body, so the four routes differ only in
/// what differs.
macro_rules! console_file {
    ($(#[doc = $doc:literal])* $name:ident, $media:literal, $body:expr) => {
        $(#[doc = $doc])*
        pub async fn $name() -> impl IntoResponse {
            asset(concat!($media, "; charset=utf-8"), $body)
        }
    };
}

console_file!(
    /// `GET /`: the web console.
    index, "text/html", INDEX_HTML
);
console_file!(
    /// `GET /ui`: the web console, under the name some operators look for.
    ui, "text/html", INDEX_HTML
);
console_file!(
    /// `GET /console/console.js`: the console's script.
    script, "text/javascript", CONSOLE_JS
);
console_file!(
    /// `GET /console/console.css`: the console's style sheet.
    style, "text/css", CONSOLE_CSS
);
