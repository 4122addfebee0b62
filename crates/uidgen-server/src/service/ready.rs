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
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use uidgen_core::{Clock, SystemClock};
use uidgen_store::Store;
use uidgen_worker::WorkerKeeper;

use super::readiness::{Mode, ModeCheck, NotReady, Readiness, ReadinessCheck};
use super::state::AppState;

/// How long a readiness check waits for the store or Redis to answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

impl Mode {
    /// Whether `state` serves this mode (the generator always; the others when enabled).
    pub fn configured(self, state: &AppState) -> bool {
        match self {
            Self::Ids => true,
            Self::Segment => state.segments.is_some(),
            Self::Sharded => state.sharded.is_some(),
        }
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

/// The clock watch has not fenced this host's clock ([`super::clock_watch`]), and the default
/// space's generator can issue (see [`generator_check`]). A named space that cannot issue
/// leaves the mode ready but degraded, naming the space: the other spaces still serve.
async fn ids(state: &AppState) -> ModeCheck {
    state.clock.readiness()?;
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
            public: "the ID generator has stopped".into(),
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
            public: "the layout's time bits cannot represent the current time".into(),
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
        public: "the sharded mode's app list or Redis is unavailable".into(),
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
                public: "the store does not answer".into(),
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
            public: status.not_issuing.into(),
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
