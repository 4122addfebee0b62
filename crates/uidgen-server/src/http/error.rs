//! How every failure becomes an HTTP response, in one place.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use uidgen_core::UidError;

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
            _ => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                err.to_string(),
            ),
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
