//! Readiness per mode. A server serves up to three modes, each with its own dependencies: the
//! ID generator (`ids`: `/v1/ids`, `/genid`, Leaf's snowflake route, gRPC `NextId`) needs its
//! worker id held, its ring alive and time left in its layout, but no database once it runs;
//! segment mode needs the store; the sharded mode needs its app list and Redis. A store outage
//! therefore takes segment mode down while the generator keeps issuing, and `/readyz` fails only
//! when no configured mode can serve; `/readyz?mode=…` and the gRPC health service's per-mode
//! names probe one mode.
//!
//! Every check is bounded by [`READY_TIMEOUT`]: a probe that hangs as long as a database does
//! is no probe. Reasons that may name a database are for the log only; clients get the fixed
//! [`NotReady::public`] sentence.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use utoipa::ToSchema;

use uidgen_core::{Clock, SystemClock};
use uidgen_store::Store;
use uidgen_worker::WorkerKeeper;

use super::{AppState, NotReady, ReadinessCheck};

/// How long a readiness check waits for the store or Redis to answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

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
    /// use uidgen_server::service::Mode;
    /// assert_eq!(Mode::from_name("segment"), Some(Mode::Segment));
    /// assert_eq!(Mode::from_name("leaf"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Mode> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }

    /// Whether `state` serves this mode (the generator always; the others when enabled).
    pub fn configured(self, state: &AppState) -> bool {
        match self {
            Self::Ids => true,
            Self::Segment => state.segments.is_some(),
            Self::Sharded => state.sharded.is_some(),
        }
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

/// Check every configured mode now (concurrently; each bounded by [`READY_TIMEOUT`]), and
/// remember the result for `GET /v1/status`.
pub async fn check(state: &AppState) -> Readiness {
    let (ids, segment, sharded) = tokio::join!(
        check_mode(state, Mode::Ids),
        check_mode(state, Mode::Segment),
        check_mode(state, Mode::Sharded),
    );
    let modes = [
        (Mode::Ids, ids),
        (Mode::Segment, segment),
        (Mode::Sharded, sharded),
    ]
    .into_iter()
    .filter_map(|(mode, check)| check.map(|c| (mode, c)))
    .collect();
    let readiness = Readiness {
        modes,
        at: Instant::now(),
    };
    state.readiness.record(readiness.clone());
    readiness
}

/// Check one mode now; `None` when the state does not serve it.
pub async fn check_mode(state: &AppState, mode: Mode) -> Option<ModeCheck> {
    if !mode.configured(state) {
        return None;
    }
    Some(match mode {
        Mode::Ids => ids(state).await,
        Mode::Segment => (state.store_check)().await.map(|()| None),
        Mode::Sharded => sharded(state).await,
    })
}

/// The default space's generator (see [`generator_check`]). A named space that cannot issue
/// leaves the mode ready but degraded, naming the space: the other spaces still serve.
async fn ids(state: &AppState) -> ModeCheck {
    let degraded = generator_check(state.generator.as_ref(), state.keeper.as_deref())?;
    let spaces: Vec<String> = state
        .spaces
        .values()
        .filter_map(|space| {
            generator_check(space.generator.as_ref(), space.keeper.as_deref())
                .err()
                .map(|why| format!("space `{}` cannot issue: {}", space.name, why.public))
        })
        .collect();
    if spaces.is_empty() {
        return Ok(degraded);
    }
    Ok(Some(
        degraded
            .into_iter()
            .chain(spaces)
            .collect::<Vec<_>>()
            .join("; "),
    ))
}

/// A generator (the default space's or a named one's): its worker id is held (whatever keeps
/// it), its ring's padding has not stopped, and its layout can still represent the current
/// time. No database is asked.
pub fn generator_check(
    generator: &dyn uidgen_core::UidGenerator,
    keeper: Option<&dyn WorkerKeeper>,
) -> ModeCheck {
    if let Some(reason) = generator.stock().and_then(|stock| stock.stop_reason()) {
        return Err(NotReady {
            code: "not_ready",
            public: "the ID generator has stopped",
            detail: format!("the ring buffer's padding has stopped: {reason}"),
        });
    }
    let degraded = match keeper {
        Some(keeper) => keeper_readiness(keeper)?,
        None => None,
    };
    let now = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
    if let Err(error) = generator.layout().time_at(now) {
        return Err(NotReady {
            code: "exhausted",
            public: "the layout's time bits cannot represent the current time",
            detail: error.to_string(),
        });
    }
    Ok(degraded)
}

/// The sharded mode: its app list has loaded and Redis answers on a verified connection.
async fn sharded(state: &AppState) -> ModeCheck {
    let Some(sharded) = &state.sharded else {
        return Ok(None);
    };
    let not_ready = |detail: String| NotReady {
        code: "not_ready",
        public: "the sharded mode's app list or Redis is unavailable",
        detail,
    };
    match tokio::time::timeout(READY_TIMEOUT, sharded.ready()).await {
        Ok(Ok(())) => Ok(None),
        Ok(Err(error)) => Err(not_ready(error.to_string())),
        Err(_) => Err(not_ready(format!(
            "no answer from Redis within {READY_TIMEOUT:?}"
        ))),
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
    refreshing: AtomicBool,
}

impl ReadinessBoard {
    fn record(&self, readiness: Readiness) {
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
                    reason = why.public,
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
    fn stale(&self) -> bool {
        self.last().is_none_or(|l| l.at.elapsed() >= FRESH_FOR)
    }
}

/// What `GET /v1/status` shows: the last check, after starting a new one in the background when
/// it is stale (one at a time, however many consoles poll); the very first call waits for it.
pub async fn latest(state: &Arc<AppState>) -> Readiness {
    if let Some(last) = state.readiness.last() {
        if state.readiness.stale() && !state.readiness.refreshing.swap(true, Ordering::SeqCst) {
            let state = Arc::clone(state);
            tokio::spawn(async move {
                check(&state).await;
                state.readiness.refreshing.store(false, Ordering::SeqCst);
            });
        }
        return last;
    }
    check(state).await
}

/// Segment mode's readiness: the store answers a ping within [`READY_TIMEOUT`]. Failures carry
/// the driver's text for the log only.
pub fn store_readiness(store: Store) -> ReadinessCheck {
    Arc::new(move || {
        let store = store.clone();
        Box::pin(async move {
            let failed = |detail| NotReady {
                code: "not_ready",
                public: "the store does not answer",
                detail,
            };
            match tokio::time::timeout(READY_TIMEOUT, store.ping()).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(failed(e.to_string())),
                Err(_) => Err(failed(format!(
                    "no answer to a ping within {READY_TIMEOUT:?} from {}",
                    store.redacted_url()
                ))),
            }
        })
    })
}

/// What the ID generator needs besides itself: its worker id's keeper still lets it issue (a
/// lease outlives an outage of the store by its ttl, a coordinator's id its last accepted
/// reservation; no database is asked here). `Err` (503) once it cannot issue, in the keeper's
/// words; `Ok(Some(..))` (200, degraded) while a keeper whose time reports are published
/// cannot reach its coordinator but the held id still issues; `Ok(None)` when all is well.
pub fn keeper_readiness(keeper: &dyn WorkerKeeper) -> ModeCheck {
    let checked = keeper.check();
    let status = keeper.status();
    if let Err(error) = checked {
        return Err(NotReady {
            code: "not_ready",
            public: status.not_issuing,
            detail: error.to_string(),
        });
    }
    let Some(reports) = status.reports.filter(|_| !status.health.connected) else {
        return Ok(None);
    };
    let now = SystemClock.now_millis();
    let away = status
        .health
        .outage_since_ms
        .map_or(0, |since| now.saturating_sub(since) / 1000);
    Ok(Some(format!(
        "{} unreachable for {away} s; IDs are still issued on worker id {} for up to {} s more",
        reports.authority,
        status.worker_id,
        status.health.accepted_until_ms.saturating_sub(now) / 1000
    )))
}
