//! What readiness is made of: the modes a server serves, why one is not ready, the check a
//! mode depends on, and the board that remembers the last result. The checks themselves are
//! in [`super::ready`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

/// A boxed future, for the readiness probe.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Why a mode is not ready: a sentence safe for clients, and the details for the log (which
/// may name the database and quote its driver).
#[derive(Debug, Clone)]
pub struct NotReady {
    /// The error code a probe of the mode answers with: `not_ready`, or `exhausted` when the
    /// layout's time bits have run out.
    pub code: &'static str,
    /// What the client is told, e.g. "the store does not answer" (owned when it carries a
    /// figure, as a clock's offset).
    pub public: std::borrow::Cow<'static, str>,
    /// What the log is told.
    pub detail: String,
}

/// Checks that something a mode depends on answers (the store, the worker lease).
pub type ReadinessCheck = Arc<dyn Fn() -> BoxFuture<Result<(), NotReady>> + Send + Sync>;

/// A [`ReadinessCheck`] that always passes: nothing to depend on.
pub fn always_ready() -> ReadinessCheck {
    Arc::new(|| Box::pin(async { Ok(()) }))
}

/// How old the last check may be before `GET /v1/status` asks for a new one (in the
/// background: the status route itself never waits for a database).
const FRESH_FOR: Duration = Duration::from_secs(2);

/// A mode a server can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The ID generator: `/v1/ids`, `/genid`, `/api/snowflake/get/{key}`, gRPC `NextId`,
    /// `NextIds`, `StreamIds`, `NextIdTexts`.
    Ids,
    /// Leaf segment mode: `/v1/segments/…`, `/api/segment/get/{key}`, gRPC `SegmentIds`,
    /// `LeaseSegment`.
    Segment,
    /// The sharded mode: `/v1/apps/…`, `/api/shard/get/{app_id}`.
    Sharded,
}

impl Mode {
    /// Every mode, in the order they are reported.
    pub const ALL: [Mode; 3] = [Mode::Ids, Mode::Segment, Mode::Sharded];

    /// The mode's name, as `?mode=` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ids => "ids",
            Self::Segment => "segment",
            Self::Sharded => "sharded",
        }
    }

    /// The mode of `name`.
    ///
    /// ```
    /// use uidgen_server::service::readiness::Mode;
    /// assert_eq!(Mode::from_name("segment"), Some(Mode::Segment));
    /// assert_eq!(Mode::from_name("leaf"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

/// One mode's readiness: ready (possibly degraded, with a note), or why not.
pub type ModeCheck = Result<Option<String>, NotReady>;

/// Every configured mode's readiness, checked together.
#[derive(Debug, Clone)]
pub struct Readiness {
    /// Each configured mode and its check, in [`Mode::ALL`] order.
    pub modes: Vec<(Mode, ModeCheck)>,
    /// When the checks ran.
    pub at: Instant,
}

impl Readiness {
    /// Whether some configured mode can serve (what `/readyz` and the gRPC health service's
    /// server-wide status report).
    pub fn any_ready(&self) -> bool {
        self.modes.iter().any(|(_, check)| check.is_ok())
    }

    /// The check of `mode`, if it is configured.
    pub fn of(&self, mode: Mode) -> Option<&ModeCheck> {
        self.modes.iter().find(|(m, _)| *m == mode).map(|(_, c)| c)
    }
}

/// The last readiness checked, for `GET /v1/status`, which must not wait for a database: it
/// reads what `/readyz`, the gRPC health service or its own background refresh found last.
///
/// It also logs each mode's changes, once per change (a 200 `/readyz` with a degraded mode
/// carries no cause for the request log): a mode that cannot serve any more with the reason,
/// a mode that can again.
#[derive(Debug, Default)]
pub struct ReadinessBoard {
    last: parking_lot::Mutex<Option<Readiness>>,
    pub(super) refreshing: AtomicBool,
}

impl ReadinessBoard {
    pub(super) fn record(&self, readiness: Readiness) {
        let mut last = self.last.lock();
        if last.as_ref().is_some_and(|l| l.at > readiness.at) {
            return;
        }
        for (mode, check) in &readiness.modes {
            let was_ready = last
                .as_ref()
                .and_then(|l| l.of(*mode))
                .is_none_or(Result::is_ok);
            match check {
                Err(why) if was_ready => tracing::warn!(
                    mode = mode.name(),
                    reason = %why.public,
                    detail = why.detail,
                    "mode cannot serve"
                ),
                Ok(_) if !was_ready => tracing::info!(mode = mode.name(), "mode can serve again"),
                _ => {}
            }
        }
        *last = Some(readiness);
    }

    /// The last check, if any.
    pub fn last(&self) -> Option<Readiness> {
        self.last.lock().clone()
    }

    /// Whether the last check is missing or older than [`FRESH_FOR`].
    pub(super) fn stale(&self) -> bool {
        self.last().is_none_or(|l| l.at.elapsed() >= FRESH_FOR)
    }
}
