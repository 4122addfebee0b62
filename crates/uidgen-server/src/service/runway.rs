//! How long each space's time field lasts (issue 33, item 3): one reading for `/v1/status`,
//! gRPC's `Status`, `/metrics` (`uidgen_time_field_runway_seconds`) and the log's warning.
//!
//! Baidu's 2016 layout ran out on 2024-11-20 and its users found out in production
//! (<https://github.com/baidu/uid-generator/issues/100>). Two figures, from
//! [`uidgen_core::layout::Runway`]: the time left at today's rate (from the clock) and at the
//! current borrowed lead (from the furthest instant the generator already issued, which the
//! cached generator's padding keeps ahead of the clock). The warning reads the second, the
//! shorter: it is the one the generator meets first.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use uidgen_core::calendar::format_iso8601;
use uidgen_core::{Clock, SystemClock, UidGenerator};
use utoipa::ToSchema;

use super::state::AppState;
use crate::config::spaces::DEFAULT_SPACE;

/// How often the warning is repeated while it holds: once a day, so a log kept for a week
/// still has it, and a dashboard-less deployment is reminded.
pub const WARN_EVERY: Duration = Duration::from_secs(86_400);

/// One space's runway, as `/v1/status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct RunwayInfo {
    /// When the layout's time field runs out: the first instant it cannot hold, ms since the
    /// Unix epoch.
    pub runs_out_at_ms: u64,
    /// The same instant in ISO-8601 UTC.
    pub runs_out_at: String,
    /// Milliseconds left at today's rate: from the clock's reading to `runs_out_at_ms`.
    pub left_at_clock_ms: u64,
    /// Milliseconds left at the current borrowed lead: from the furthest instant already
    /// issued (the clock's reading if none is ahead of it), never more than
    /// `left_at_clock_ms`.
    pub left_at_lead_ms: u64,
    /// Below this many milliseconds left (`runway_warning_days`), the server warns; 0 never.
    pub warn_below_ms: u64,
    /// Whether `left_at_lead_ms` is below `warn_below_ms`: the log says so once a day.
    pub warning: bool,
}

impl RunwayInfo {
    /// The reading of `generator` at `now_ms`, warned below `threshold`.
    pub fn of(generator: &dyn UidGenerator, now_ms: u64, threshold: Duration) -> Self {
        let runway = generator
            .layout()
            .runway(now_ms, generator.issued_until_ms());
        Self {
            runs_out_at_ms: runway.runs_out_at_ms,
            runs_out_at: format_iso8601(runway.runs_out_at_ms),
            left_at_clock_ms: runway.clock_ms,
            left_at_lead_ms: runway.lead_ms,
            warn_below_ms: u64::try_from(threshold.as_millis()).unwrap_or(u64::MAX),
            warning: runway.is_below(threshold),
        }
    }
}

/// Every space's generator, `default` first, with its name.
pub fn spaces(state: &AppState) -> Vec<(&str, &Arc<dyn UidGenerator>)> {
    std::iter::once((DEFAULT_SPACE, &state.generator))
        .chain(
            state
                .spaces
                .values()
                .map(|space| (space.name.as_str(), &space.generator)),
        )
        .collect()
}

/// Log a warning for every space whose runway is below the threshold; what was logged, for
/// tests.
pub fn warn_if_short(state: &AppState) -> Vec<String> {
    let now_ms = SystemClock.now_millis();
    let mut warned = Vec::new();
    for (space, generator) in spaces(state) {
        let info = RunwayInfo::of(generator.as_ref(), now_ms, state.runway_warning);
        if !info.warning {
            continue;
        }
        let layout = generator.layout();
        let days = |ms: u64| ms / 86_400_000;
        let message = format!(
            "the time field of space {space} (layout {}) runs out at {}: {} days left at today's \
             rate, {} at the current borrowed lead; no ID can be issued after it. Plan the move \
             now: `uidgen layout check --from <this layout> --to <the next>` says whether a \
             layout or epoch continues this ID space without a repeated or lower ID \
             (docs/OPERATIONS.md, \"Runway\")",
            layout.name(),
            info.runs_out_at,
            days(info.left_at_clock_ms),
            days(info.left_at_lead_ms),
        );
        tracing::warn!(
            space,
            layout = layout.name(),
            runs_out_at = %info.runs_out_at,
            left_at_clock_seconds = info.left_at_clock_ms / 1000,
            left_at_lead_seconds = info.left_at_lead_ms / 1000,
            "{message}"
        );
        warned.push(message);
    }
    warned
}

/// Warn at once, then every [`WARN_EVERY`], until `stop` resolves.
///
/// Cancel safety: holds nothing; dropping it only ends the reminders.
pub async fn watch(state: Arc<AppState>, stop: impl std::future::Future<Output = ()>) {
    let reminders = async {
        let mut every = tokio::time::interval(WARN_EVERY);
        loop {
            // The first tick completes at once: the warning comes with the start.
            every.tick().await;
            warn_if_short(&state);
        }
    };
    tokio::select! {
        () = reminders => {}
        () = stop => {}
    }
}
