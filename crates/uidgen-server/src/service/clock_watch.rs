//! Clocks watched while serving (issue 33, item 4): every `clock_watch.interval_ms` the server
//! reads the store's clock (PostgreSQL's `clock_timestamp()`, MariaDB's `NOW(3)`) against its
//! own, NTP-style ([`uidgen_store::ClockReading`]), etcd's (its HTTP `Date` header, to the
//! second: [`uidgen_etcd::EtcdClock`]) when the worker id comes from etcd, and ZooKeeper's (the
//! `mtime` its leader stamps on a write, to the millisecond: [`uidgen_zk::ZkClock`]) when it
//! comes from ZooKeeper, publishes the offset
//! (`uidgen_clock_offset_seconds{source="store"|"etcd"|"zookeeper"}`), warns once the clocks are
//! `clock_watch.warn_ms` apart and, `clock_watch.fence_ms` apart, stops issuing time-stamped
//! IDs: the ID mode's readiness answers 503 naming the offset and every ID request, HTTP, h2c
//! and gRPC alike, is refused by [`ClockWatch::admit`] in [`super::generate`]. Every
//! comparison deducts the reading's uncertainty first, so a slow round trip never fences a good
//! clock.
//!
//! Segment and sharded IDs carry no time: they keep being served.
//!
//! The server resumes by itself once a reading is back under the fence. That is safe for
//! uniqueness: the generators never stamp a time unit below the last one they used (a clock
//! that moved back makes them wait or borrow from units already theirs), so IDs issued while
//! the clock was ahead are not issued again; and a worker id passed to another holder starts
//! past what its earlier holder recorded, whatever either clock said. What the fence protects
//! is the time IDs carry: a server whose clock is minutes off stamps IDs that sort minutes away
//! from its peers' and spends its layout's time field early.
//!
//! An SQLite store is a library inside this process: its clock is this host's, so there is
//! nothing to compare. The status says `local` and no offset is published.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::http::StatusCode;
use parking_lot::Mutex;
use serde::Serialize;
use uidgen_store::ClockReading;
use utoipa::ToSchema;

use super::error::ApiError;
use super::readiness::NotReady;
use crate::config::clock_watch::ClockWatchSettings;

/// The source name of the store's clock, in the metric's label and the status.
pub const STORE: &str = "store";

/// The source name of etcd's clock (when the worker id comes from etcd).
pub const ETCD: &str = "etcd";

/// The source name of ZooKeeper's clock (when the worker id comes from ZooKeeper).
pub const ZOOKEEPER: &str = "zookeeper";

/// A source's clock as a sentence names it.
fn whose(source: &str) -> &str {
    match source {
        STORE => "the store's",
        ETCD => "etcd's",
        ZOOKEEPER => "ZooKeeper's",
        other => other,
    }
}

/// Where one source's clock stands against this host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ClockState {
    /// Not measured yet.
    Unknown,
    /// The source's clock is this host's (an SQLite store): nothing to compare.
    Local,
    /// Within `clock_watch.warn_ms`.
    Ok,
    /// At least `clock_watch.warn_ms` apart: the log warned.
    Warning,
    /// At least `clock_watch.fence_ms` apart: time-stamped IDs are refused.
    Fenced,
}

/// One source's last reading, as `GET /v1/status` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SourceClock {
    /// The source: `store`, `etcd` or `zookeeper`.
    pub source: &'static str,
    /// Where it stands.
    pub state: ClockState,
    /// The source's clock minus this host's, in ms (positive: this host is behind); absent
    /// until measured, and for a `local` source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_ms: Option<i64>,
    /// How far the true offset may be from `offset_ms` (half the round trip plus the
    /// source's resolution), ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uncertainty_ms: Option<u64>,
    /// When it was last measured, ms since the Unix epoch (this host's clock).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_at_ms: Option<u64>,
    /// Whether the last attempt to read it answered (the offset above is the last that did;
    /// a source that does not answer neither fences nor lifts a fence).
    pub answered: bool,
}

/// The `clock` object of `GET /v1/status`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClockStatus {
    /// How often the clocks are compared, ms; absent when the watch is off
    /// (`clock_watch.interval_ms = 0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    /// `clock_watch.warn_ms`.
    pub warn_ms: u64,
    /// `clock_watch.fence_ms`; absent when the watch only warns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fence_ms: Option<u64>,
    /// Whether time-stamped IDs are refused now.
    pub fenced: bool,
    /// Why, naming the source and the offset, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Each source compared.
    pub sources: Vec<SourceClock>,
}

/// The watch's findings, shared by the task that measures and every request that asks.
#[derive(Debug)]
pub struct ClockWatch {
    pub(crate) settings: ClockWatchSettings,
    /// Read on every ID request: a lock-free look before the lock of a refusal.
    fenced: AtomicBool,
    last: Mutex<Findings>,
}

#[derive(Debug, Default)]
struct Findings {
    sources: Vec<SourceClock>,
    /// The sentence a refusal and the readiness answer carry while fenced.
    reason: Option<String>,
}

impl Default for ClockWatch {
    /// A watch that never ran: nothing fenced (the embedded CLI and tests).
    fn default() -> Self {
        Self::new(ClockWatchSettings {
            interval: None,
            ..ClockWatchSettings::default()
        })
    }
}

impl ClockWatch {
    /// A watch with `settings`, nothing measured yet.
    pub fn new(settings: ClockWatchSettings) -> Self {
        Self {
            settings,
            fenced: AtomicBool::new(false),
            last: Mutex::new(Findings::default()),
        }
    }

    /// Refuse a time-stamped ID while fenced: 503 `clock_skewed`, naming the source and the
    /// offset (gRPC: `UNAVAILABLE`). What every ID route calls before taking an ID.
    ///
    /// ```
    /// use uidgen_server::service::clock_watch::ClockWatch;
    /// assert!(ClockWatch::default().admit().is_ok());
    /// ```
    pub fn admit(&self) -> Result<(), ApiError> {
        if !self.fenced.load(Ordering::SeqCst) {
            return Ok(());
        }
        match self.last.lock().reason.clone() {
            Some(reason) => Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "clock_skewed",
                format!("{reason}; ask another server"),
            )),
            None => Ok(()),
        }
    }

    /// The ID mode's readiness: `Err` while fenced, naming the source and the offset.
    pub fn readiness(&self) -> Result<(), NotReady> {
        if !self.fenced.load(Ordering::SeqCst) {
            return Ok(());
        }
        match self.last.lock().reason.clone() {
            Some(reason) => Err(NotReady {
                code: "not_ready",
                public: Cow::Owned(reason.clone()),
                detail: reason,
            }),
            None => Ok(()),
        }
    }

    /// What `GET /v1/status` shows.
    pub fn status(&self) -> ClockStatus {
        let last = self.last.lock();
        ClockStatus {
            interval_ms: self
                .settings
                .interval
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            warn_ms: self.settings.warn_ms,
            fence_ms: self.settings.fence_ms,
            fenced: last.reason.is_some(),
            reason: last.reason.clone(),
            sources: last.sources.clone(),
        }
    }

    /// Where a reading `apart_ms` apart (uncertainty deducted) stands.
    fn state_of(&self, apart_ms: u64) -> ClockState {
        if self
            .settings
            .fence_ms
            .is_some_and(|fence| apart_ms >= fence)
        {
            ClockState::Fenced
        } else if apart_ms >= self.settings.warn_ms {
            ClockState::Warning
        } else {
            ClockState::Ok
        }
    }

    /// Record `source`'s outcome (`Ok(None)`: its clock is this host's), log what changed,
    /// and fence or lift the fence. A source that did not answer keeps its last state.
    pub(crate) fn record(
        &self,
        source: &'static str,
        outcome: Result<Option<ClockReading>, String>,
        now_ms: u64,
    ) {
        let mut last = self.last.lock();
        let index = match last.sources.iter().position(|s| s.source == source) {
            Some(index) => index,
            None => {
                last.sources.push(SourceClock {
                    source,
                    state: ClockState::Unknown,
                    offset_ms: None,
                    uncertainty_ms: None,
                    measured_at_ms: None,
                    answered: false,
                });
                last.sources.len() - 1
            }
        };
        let entry = &mut last.sources[index];
        let was = entry.state;
        match outcome {
            Err(error) => {
                if entry.answered {
                    tracing::warn!(source, %error, "cannot read {}'s clock; the \
                        clock watch keeps its last finding until it answers", whose(source));
                }
                entry.answered = false;
                return;
            }
            Ok(None) => {
                entry.state = ClockState::Local;
                entry.answered = true;
                entry.measured_at_ms = Some(now_ms);
                return;
            }
            Ok(Some(reading)) => {
                let apart = reading.excess_ms();
                let state = self.state_of(apart);
                *entry = SourceClock {
                    source,
                    state,
                    offset_ms: Some(reading.offset_ms),
                    uncertainty_ms: Some(reading.uncertainty_ms),
                    measured_at_ms: Some(now_ms),
                    answered: true,
                };
                log_change(source, was, state, &reading, &self.settings);
            }
        }
        // The fence is the first fenced source's.
        let reason = last
            .sources
            .iter()
            .find(|s| s.state == ClockState::Fenced)
            .map(|s| fence_reason(s, self.settings.fence_ms.unwrap_or_default()));
        self.fenced.store(reason.is_some(), Ordering::SeqCst);
        last.reason = reason;
    }
}

/// The sentence of a fence: the source, the offset and which way, the threshold.
fn fence_reason(source: &SourceClock, fence_ms: u64) -> String {
    let offset = source.offset_ms.unwrap_or_default();
    let way = if offset < 0 { "ahead of" } else { "behind" };
    format!(
        "this server's clock is {} ms {way} {} (± {} ms), past clock_watch.fence_ms = \
         {fence_ms}; time-stamped IDs are refused until the clocks agree again",
        offset.unsigned_abs(),
        whose(source.source),
        source.uncertainty_ms.unwrap_or_default()
    )
}

/// Log a change of state, once per change.
fn log_change(
    source: &'static str,
    was: ClockState,
    now: ClockState,
    reading: &ClockReading,
    settings: &ClockWatchSettings,
) {
    if was == now {
        return;
    }
    let (offset_ms, uncertainty_ms) = (reading.offset_ms, reading.uncertainty_ms);
    match now {
        ClockState::Fenced => tracing::error!(
            source,
            offset_ms,
            uncertainty_ms,
            fence_ms = settings.fence_ms,
            "this server's clock is {} ms off {}: refusing time-stamped IDs until \
             the clocks agree again",
            offset_ms.unsigned_abs(),
            whose(source)
        ),
        ClockState::Warning => tracing::warn!(
            source,
            offset_ms,
            uncertainty_ms,
            warn_ms = settings.warn_ms,
            "this server's clock is {} ms off {}, past clock_watch.warn_ms; check \
             its time synchronisation",
            offset_ms.unsigned_abs(),
            whose(source)
        ),
        ClockState::Ok if matches!(was, ClockState::Warning | ClockState::Fenced) => {
            tracing::info!(
                source,
                offset_ms,
                uncertainty_ms,
                "this server's clock agrees with {} again",
                whose(source)
            );
        }
        _ => {}
    }
    if was == ClockState::Fenced {
        tracing::info!(source, offset_ms, "issuing time-stamped IDs again");
    }
}

/// This host's clock, ms since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    uidgen_core::Clock::now_millis(&uidgen_core::SystemClock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> ClockWatch {
        ClockWatch::new(ClockWatchSettings::default())
    }

    #[test]
    fn a_reading_past_the_fence_refuses_ids_naming_the_offset_and_one_back_under_it_resumes() {
        let clock = watch();
        clock.record(STORE, Ok(Some(ClockReading::measure(0, 30, 20))), 1);
        assert!(clock.admit().is_ok());
        assert_eq!(clock.status().sources[0].state, ClockState::Ok);
        // This host 9 s ahead of the store.
        clock.record(
            STORE,
            Ok(Some(ClockReading::measure(10_000, 1_010, 10_020))),
            2,
        );
        let refused = clock.admit().unwrap_err();
        assert_eq!(
            (refused.status.as_u16(), refused.code),
            (503, "clock_skewed")
        );
        assert!(
            refused.message.contains("9000 ms ahead of the store's"),
            "{}",
            refused.message
        );
        assert!(clock.readiness().is_err());
        // The store not answering keeps the fence.
        clock.record(STORE, Err("down".into()), 3);
        assert!(clock.admit().is_err());
        assert!(!clock.status().sources[0].answered);
        clock.record(STORE, Ok(Some(ClockReading::measure(0, 700, 20))), 4);
        assert!(clock.admit().is_ok() && clock.readiness().is_ok());
        assert_eq!(clock.status().sources[0].state, ClockState::Warning);
    }

    #[test]
    fn the_uncertainty_is_deducted_before_any_threshold() {
        let clock = watch();
        // 6 s apart, but a 4 s round trip: at least 3.999 s apart, which only warns.
        clock.record(STORE, Ok(Some(ClockReading::measure(0, 8_000, 4_000))), 1);
        assert!(clock.admit().is_ok());
        assert_eq!(clock.status().sources[0].state, ClockState::Warning);
    }

    #[test]
    fn a_coordinator_s_clock_fences_by_its_own_name_while_the_store_s_agrees() {
        let clock = watch();
        clock.record(STORE, Ok(Some(ClockReading::measure(0, 10, 20))), 1);
        clock.record(
            ZOOKEEPER,
            Ok(Some(ClockReading::measure(10_000, 3_010, 10_020))),
            2,
        );
        let refused = clock.admit().unwrap_err();
        assert!(
            refused.message.contains("7000 ms ahead of ZooKeeper's"),
            "{}",
            refused.message
        );
        let status = clock.status();
        assert_eq!(status.sources[0].state, ClockState::Ok);
        assert_eq!(
            (status.sources[1].source, status.sources[1].state),
            (ZOOKEEPER, ClockState::Fenced)
        );
    }

    #[test]
    fn a_local_source_is_never_compared() {
        let clock = watch();
        clock.record(STORE, Ok(None), 1);
        let status = clock.status();
        assert_eq!(status.sources[0].state, ClockState::Local);
        assert_eq!(status.sources[0].offset_ms, None);
        assert!(!status.fenced);
    }
}
