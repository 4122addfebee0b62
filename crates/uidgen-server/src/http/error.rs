//! How every failure becomes an HTTP response, in one place.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use uidgen_core::UidError;

/// What a client is told when the cause is on the server's side (a lost lease, a stopped
/// generator, a failing store): the details, which may name the database, go to the log.
pub const SEE_LOG: &str = "see the server log";

/// A failure as the JSON API reports it: `{"code": "...", "message": "..."}` and a status.
///
/// Messages are safe to show a client: they say what was wrong with the request or why the
/// service cannot answer now, never database internals.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// A sentence for a person.
    pub message: String,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
}

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: a request parameter is missing or malformed.
    pub fn bad_parameter(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_parameter", message)
    }

    /// 404: no such route.
    pub fn not_found() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "no such route; see docs/API.md",
        )
    }

    /// A failure while generating IDs: the service, not the request, is at fault (503), except
    /// for a batch size out of range (400).
    pub fn generation(err: UidError) -> Self {
        match err {
            UidError::InvalidCount { .. } => {
                Self::new(StatusCode::BAD_REQUEST, "invalid_count", err.to_string())
            }
            UidError::ClockMovedBackwards { .. } | UidError::ClockBeforeEpoch { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "clock_moved_backwards",
                err.to_string(),
            ),
            UidError::TimestampExhausted { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "exhausted",
                err.to_string(),
            ),
            // A stopped generator's reason can carry a lease's database error: log it, and tell
            // the client only that the service cannot issue now.
            UidError::GeneratorStopped(_) => {
                tracing::warn!(error = %err, "ID generation refused");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "not_ready",
                    format!("ID generation has stopped on this server; {SEE_LOG}"),
                )
            }
            _ => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                err.to_string(),
            ),
        }
    }

    /// 500: a generation task panicked; the panic is in the log, not the response.
    pub fn internal(what: &str) -> Self {
        tracing::error!("{what}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            format!("internal error; {SEE_LOG}"),
        )
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; see docs/API.md",
        )
    }

    /// A path parameter axum could not extract (e.g. invalid UTF-8 such as `%FF`).
    pub fn from_path(rejection: &PathRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            format!("invalid path: {}", clip(&rejection.body_text())),
        )
    }

    /// A query string axum could not parse.
    pub fn from_query(rejection: &QueryRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            format!("invalid query string: {}", clip(&rejection.body_text())),
        )
    }

    /// A request body that could not be read: too large (413) or broken off (400).
    pub fn from_body(rejection: &BytesRejection) -> Self {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "the request body is larger than {} bytes",
                    super::MAX_BODY_BYTES
                ),
            )
        } else {
            Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!(
                    "cannot read the request body: {}",
                    clip(&rejection.body_text())
                ),
            )
        }
    }

    /// A failure caused by what the client sent to decode or make (400).
    pub fn input(err: UidError) -> Self {
        let code = match err {
            UidError::MalformedId { .. } => "malformed_id",
            UidError::InvalidCount { .. } => "invalid_count",
            _ => "invalid_parameter",
        };
        Self::new(StatusCode::BAD_REQUEST, code, err.to_string())
    }

    /// The error kind label for metrics.
    pub fn kind(&self) -> &'static str {
        self.code
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            code: self.code,
            message: &self.message,
        };
        let mut response = (self.status, Json(body)).into_response();
        response.extensions_mut().insert(ErrorKind(self.code));
        response
    }
}

/// Rejection texts can echo client input: keep a message a line long.
fn clip(text: &str) -> String {
    const SHOWN: usize = 200;
    if text.chars().count() <= SHOWN {
        text.to_owned()
    } else {
        let head: String = text.chars().take(SHOWN).collect();
        format!("{head}…")
    }
}

/// Marks a response as an error of this kind, for the metrics layer.
#[derive(Debug, Clone, Copy)]
pub struct ErrorKind(pub &'static str);

/// Leaf's routes answer errors with a bare text body, as Leaf's clients expect.
#[derive(Debug)]
pub struct TextError(pub ApiError);

impl IntoResponse for TextError {
    fn into_response(self) -> Response {
        let mut response = (self.0.status, self.0.message).into_response();
        response.extensions_mut().insert(ErrorKind(self.0.code));
        response
    }
}

impl From<ApiError> for TextError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}
