//! How every failure becomes a gRPC status, in one place: the HTTP API's [`ApiError`] mapped by
//! its HTTP status (and, where one HTTP status covers two gRPC meanings, by its code), with the
//! same message. The mapping is the table at the top of `proto/uidgen/v1/uidgen.proto`.

use tonic::{Code, Status};

use crate::service::error::ApiError;

/// The gRPC status for an API error; the message is the HTTP error body's `message`.
///
/// ```
/// use axum::http::StatusCode;
/// use uidgen_server::grpc::status::status;
/// use uidgen_server::service::error::ApiError;
/// let error = ApiError::new(StatusCode::NOT_FOUND, "unknown_tag", "unknown biz tag `x`");
/// let status = status(&error);
/// assert_eq!(status.code(), tonic::Code::NotFound);
/// assert_eq!(status.message(), "unknown biz tag `x`");
/// ```
pub fn status(error: &ApiError) -> Status {
    Status::new(code(error), error.message.clone())
}

fn code(error: &ApiError) -> Code {
    match error.code {
        // A 404 over HTTP (no such route there), but on gRPC the call exists and the mode is off.
        "segments_disabled" | "sharded_disabled" | "admin_disabled" | "fallback_disabled" => {
            return Code::FailedPrecondition;
        }
        // A 409 over HTTP like a full fallback range, but this one tells the caller to stop
        // using the worker id, so it gets a code of its own.
        "fallback_lease_lost" => return Code::Aborted,
        // A 503 over HTTP, but retrying here shortly helps: the supply ran dry for now.
        "segments_not_ready" | "ring_empty" => return Code::ResourceExhausted,
        _ => {}
    }
    match error.status.as_u16() {
        400 | 413 => Code::InvalidArgument,
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        409 => Code::FailedPrecondition,
        503 => Code::Unavailable,
        _ => Code::Internal,
    }
}

/// A status code's name for the `uidgen_grpc_calls_total{code}` label.
pub(super) fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::InvalidArgument => "invalid_argument",
        Code::NotFound => "not_found",
        Code::FailedPrecondition => "failed_precondition",
        Code::ResourceExhausted => "resource_exhausted",
        Code::Aborted => "aborted",
        Code::Unavailable => "unavailable",
        Code::Internal => "internal",
        Code::Unauthenticated => "unauthenticated",
        Code::PermissionDenied => "permission_denied",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use tonic::Code;

    use super::code;
    use crate::service::error::ApiError;

    fn of(status: StatusCode, kind: &'static str) -> Code {
        code(&ApiError::new(status, kind, "m"))
    }

    #[test]
    fn http_statuses_map_to_the_codes_the_proto_documents() {
        let table = [
            (
                StatusCode::BAD_REQUEST,
                "invalid_count",
                Code::InvalidArgument,
            ),
            (StatusCode::NOT_FOUND, "unknown_tag", Code::NotFound),
            (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                Code::Unauthenticated,
            ),
            (StatusCode::FORBIDDEN, "forbidden", Code::PermissionDenied),
            (
                StatusCode::NOT_FOUND,
                "segments_disabled",
                Code::FailedPrecondition,
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "segments_not_ready",
                Code::ResourceExhausted,
            ),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                Code::Unavailable,
            ),
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                Code::Internal,
            ),
        ];
        for (status, code, expected) in table {
            assert_eq!(of(status, code), expected, "{status} {code}");
        }
    }
}
