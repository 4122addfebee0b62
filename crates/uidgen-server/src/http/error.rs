//! How every failure becomes an HTTP response, in one place.
//!
//! Building an [`ApiError`] or turning it into a response has no side effects: a cause that
//! belongs in the server log rides along in the response's [`ErrorReport`] extension, and the
//! `observe` middleware logs it (axum's `examples/error-handling`), so each failure is logged once,
//! with its route, whichever handler or extractor produced it.

use axum::Json;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::service::error::{ApiError, FieldErrors, clip};

/// Requests larger than this are refused (413): no route takes more than a small JSON body.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// At most this many characters of axum's rejection text, which quotes the input inside a
/// sentence of its own.
const REJECTION_CHARS: usize = 200;

/// Every error response of the JSON API has this body.
#[derive(Serialize, ToSchema)]
#[schema(as = Error)]
pub struct ErrorBody<'a> {
    /// Stable, machine-readable code, e.g. `malformed_id`, `not_found`, `method_not_allowed`.
    #[schema(value_type = String, example = "invalid_parameter")]
    code: &'a str,
    /// A sentence for a person, safe to show (no database internals).
    #[schema(value_type = String, example = "worker id 5000 exceeds the maximum 1023")]
    message: &'a str,
    /// For a request with bad fields (`POST /v1/ids/make`): each bad field with its own message.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<BTreeMap<String, String>>)]
    fields: Option<&'a FieldErrors>,
}

impl ApiError {
    /// A path parameter axum could not extract (e.g. invalid UTF-8 such as `%FF`).
    pub fn from_path(rejection: &PathRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            format!(
                "invalid path: {}",
                clip(&rejection.body_text(), REJECTION_CHARS)
            ),
        )
    }

    /// A query string axum could not parse.
    pub fn from_query(rejection: &QueryRejection) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_parameter",
            format!(
                "invalid query string: {}",
                clip(&rejection.body_text(), REJECTION_CHARS)
            ),
        )
    }

    /// A request body that could not be read: too slow (408), too large (413) or broken off
    /// (400).
    pub fn from_body(rejection: &BytesRejection) -> Self {
        if crate::connections::is_body_timeout(rejection) {
            Self::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body did not arrive within the server's http.body_read_timeout_ms; \
                 send it at once after the head"
                    .to_owned(),
            )
        } else if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the request body is larger than {} bytes", MAX_BODY_BYTES),
            )
        } else {
            Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_body",
                format!(
                    "cannot read the request body: {}",
                    clip(&rejection.body_text(), REJECTION_CHARS)
                ),
            )
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code,
            message: &self.message,
            fields: self.fields.as_deref(),
        };
        let mut response = (self.status, Json(body)).into_response();
        response.extensions_mut().insert(ErrorReport {
            kind: self.code,
            cause: self.cause,
        });
        response
    }
}

/// What an error response carries for the `observe` middleware, never for the client: its kind,
/// counted in `uidgen_errors_total{kind}`, and the cause to log, if any.
#[derive(Debug, Clone)]
pub struct ErrorReport {
    /// The error code, e.g. `store_unavailable`.
    pub kind: &'static str,
    /// The underlying error, for the log ([`ApiError::cause`]).
    pub cause: Option<String>,
}

/// Leaf's routes answer errors with a bare text body, as Leaf's clients expect.
#[derive(Debug)]
pub struct TextError(pub ApiError);

impl IntoResponse for TextError {
    fn into_response(self) -> Response {
        let ApiError {
            status,
            code,
            message,
            cause,
            fields: _,
        } = self.0;
        let mut response = (status, message).into_response();
        response
            .extensions_mut()
            .insert(ErrorReport { kind: code, cause });
        response
    }
}

impl From<ApiError> for TextError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}
