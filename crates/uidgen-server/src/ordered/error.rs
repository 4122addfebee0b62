//! How an ordered tag's call fails.

use uidgen_store::StoreError;

/// Why an ordered tag's call got no IDs.
///
/// ```
/// use uidgen_server::ordered::OrderedError;
/// let error = OrderedError::NotLeading("order".into());
/// assert!(error.to_string().contains("does not lead"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OrderedError {
    /// A forwarded call reached a server that does not lead the tag (any more): the caller
    /// looks the leader up again.
    #[error("this server does not lead ordered biz tag `{0}`")]
    NotLeading(String),
    /// No leader answered within `ordered.wait_ms`: the leader died and its lease has not run
    /// out yet, or the store does not answer.
    #[error("no leader of ordered biz tag `{tag}` answered within {waited_ms} ms (last: {last})")]
    NoLeader {
        /// The tag.
        tag: String,
        /// How long the call waited.
        waited_ms: u64,
        /// The last reason, for the log.
        last: String,
    },
    /// The store refused: the tag is unknown or used up, or it failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The leader refused the call for a reason retrying does not change (a malformed tag or
    /// count, a missing token): its status, passed on.
    #[error("the leader refused the call: {}", .0.message())]
    Refused(tonic::Status),
    /// The server is stopping.
    #[error("the server is stopping")]
    Stopping,
}
