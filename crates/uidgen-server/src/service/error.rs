//! Every failure of the service as one value: [`ApiError`], a status, a stable code and a
//! sentence a client may see, built from the domain's errors. The HTTP adapter turns it into a
//! response (`crate::http`), the gRPC adapter into a status (`crate::grpc`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::http::StatusCode;
use uidgen_core::UidError;

/// What a client is told when the cause is on the server's side (a lost lease, a stopped
/// generator, a failing store): the details, which may name the database, go to the log.
pub const SEE_LOG: &str = "see the server log";

/// What a request to a starting server is told, over HTTP and gRPC alike.
pub const STARTING_MESSAGE: &str =
    "the server is starting and cannot issue IDs yet; ask another server or retry shortly";

/// At most this many characters of a client's value (a tag, a query parameter) are echoed in a
/// message: a 10 kB tag should not become a 10 kB response or log line.
pub(crate) const ECHO_CHARS: usize = 64;

/// A failure as the JSON API reports it: `{"code": "...", "message": "..."}` and a status.
///
/// Messages are safe to show a client: they say what was wrong with the request or why the
/// service cannot answer now, never database internals. Those go in the
/// [`cause`](Self::cause), which only the log sees.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// A sentence for a person.
    pub message: String,
    /// What the server log is told when the client gets only a fixed sentence: the underlying
    /// error, which may name the database. Never sent to the client.
    pub cause: Option<String>,
    /// Which fields of the request were wrong, each with its own sentence (the make route
    /// reports every bad field at once, so a form can mark each). Boxed: errors are rare, and
    /// `Result<_, ApiError>` stays small on the hot path.
    pub fields: Option<Box<FieldErrors>>,
}

/// Request fields and what was wrong with each, by field name.
pub type FieldErrors = BTreeMap<String, String>;

impl ApiError {
    /// A new error.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            cause: None,
            fields: None,
        }
    }

    /// 400 naming each bad field of the request; the message lists them all.
    pub fn bad_fields(fields: FieldErrors) -> Self {
        let message = fields
            .iter()
            .map(|(name, why)| format!("`{name}`: {why}"))
            .collect::<Vec<_>>()
            .join("; ");
        let mut error = Self::bad_parameter(message);
        error.fields = Some(Box::new(fields));
        error
    }

    /// The same error, with `cause` for the log (the `observe` middleware writes it).
    pub fn with_cause(mut self, cause: impl Into<String>) -> Self {
        self.cause = Some(cause.into());
        self
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
            // A stopped generator's reason, or a lease's expiry that has not been renewed, can
            // carry a database error: log it, and tell the client only that the service cannot
            // issue now.
            UidError::GeneratorStopped(_) | UidError::BeyondFence { .. } => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                format!("ID generation has stopped on this server; {SEE_LOG}"),
            )
            .with_cause(format!("ID generation refused: {err}")),
            // Padding has not caught up: the next request shortly will likely be served.
            UidError::RingEmpty(_) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "ring_empty",
                err.to_string(),
            ),
            _ => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                err.to_string(),
            ),
        }
    }

    /// 503: the server is starting (it holds no worker id yet, or is still building its
    /// generators): ask another server, or this one again shortly.
    pub fn starting() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "starting",
            STARTING_MESSAGE,
        )
    }

    /// 500: a generation task panicked; `what` happened goes to the log, not the response.
    pub fn internal(what: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            format!("internal error; {SEE_LOG}"),
        )
        .with_cause(what)
    }

    /// 405: the route exists, the method does not.
    pub fn method_not_allowed() -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this route does not take that method; see docs/API.md",
        )
    }

    /// A failure caused by what the client sent to decode or make (400).
    pub fn input(err: UidError) -> Self {
        let code = match err {
            // A rendered form that does not read back is as malformed as a bad decimal.
            UidError::MalformedId { .. } | UidError::MalformedForm { .. } => "malformed_id",
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

/// `text` cut to at most `max` characters, with `…` where it was cut: messages echo client input,
/// and must stay a line long whatever the client sent. Borrows when nothing is cut.
pub(crate) fn clip(text: &str, max: usize) -> Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => Cow::Borrowed(text),
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use super::clip;

    #[test]
    fn clip_borrows_short_text_and_cuts_long_text_at_a_character() {
        assert!(matches!(clip("order", 5), Cow::Borrowed("order")));
        assert_eq!(clip("orders", 5), "order…");
        assert_eq!(clip("äöüßé-tag", 3), "äöü…", "counts characters, not bytes");
    }
}
