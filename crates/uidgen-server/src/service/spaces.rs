//! Named ID spaces (`[spaces.<name>]`): each a generator of its own on a worker id of its own,
//! served next to the default space. A request names its space (`/v1/spaces/{space}/ids`,
//! gRPC's `space` field, Leaf's snowflake `{key}`); IDs of two spaces may be equal, so a
//! consumer keeps them apart by the space they came from. A space itself ([`Space`]) is part
//! of the shared state, in [`super::state`].

use axum::http::StatusCode;
use serde::Serialize;
use uidgen_core::UidGenerator;
use uidgen_worker::WorkerKeeper;
use utoipa::ToSchema;

use super::error::{ApiError, ECHO_CHARS, clip};
use super::generate::Source;
use super::state::{AppState, Space};
use crate::config::spaces::DEFAULT_SPACE;

/// The 404 for a space this server does not serve.
pub fn unknown_space(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "unknown_space",
        format!(
            "unknown space {:?}; GET /v1/spaces lists the spaces served here",
            clip(name, ECHO_CHARS)
        ),
    )
}

impl AppState {
    /// The named space `name`, if this server serves it (never the default space).
    pub fn space(&self, name: &str) -> Option<&Space> {
        self.spaces.get(name)
    }

    /// Where a request for space `name` takes its IDs: the default space for `None`, `""` or
    /// `default`, a named space, or 404 `unknown_space`.
    pub fn source_of(&self, name: Option<&str>) -> Result<Source<'_>, ApiError> {
        match name {
            None | Some("" | DEFAULT_SPACE) => Ok(self.source()),
            Some(name) => self
                .space(name)
                .map(|space| Source::of_space(space, self.empty_ring))
                .ok_or_else(|| unknown_space(name)),
        }
    }
}

/// One space as `GET /v1/spaces` and `GET /v1/status` list it.
#[derive(Debug, Serialize, ToSchema)]
pub struct SpaceInfo {
    /// The space's name: `default` for the top-level generator, else `[spaces.<name>]`'s.
    name: String,
    /// Its layout's name (`GET /v1/spaces/{space}/ids/{id}` decodes with it).
    layout: String,
    /// Its layout's epoch, ms since the Unix epoch.
    epoch_ms: u64,
    /// The worker id its IDs carry: each space holds its own.
    worker_id: u64,
    /// The generator kind: `cached`, `default` or `snowflake`; absent when embedded.
    #[serde(skip_serializing_if = "Option::is_none")]
    generator: Option<&'static str>,
    /// Whether it can issue now (its worker id held, its ring running, time left in its
    /// layout).
    ready: bool,
    /// Why it cannot issue, as a sentence safe to show (the details are in the server log).
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    /// How long its layout's time field lasts (docs/OPERATIONS.md, "Runway").
    runway: super::runway::RunwayInfo,
}

impl SpaceInfo {
    fn of(
        name: &str,
        generator: &dyn UidGenerator,
        worker_id: u64,
        keeper: Option<&dyn WorkerKeeper>,
        kind: Option<&'static str>,
        runway_warning: std::time::Duration,
    ) -> Self {
        let check = super::ready::generator_check(generator, keeper);
        let layout = generator.layout();
        let now_ms = uidgen_core::Clock::now_millis(&uidgen_core::SystemClock);
        Self {
            name: name.to_owned(),
            layout: layout.name().to_owned(),
            epoch_ms: layout.epoch_ms(),
            worker_id,
            generator: kind,
            ready: check.is_ok(),
            reason: check.err().map(|why| why.public.into_owned()),
            runway: super::runway::RunwayInfo::of(generator, now_ms, runway_warning),
        }
    }
}

/// Every space this server serves, the default space first, checked now (no database is
/// asked: a keeper reads its own state).
pub fn list(state: &AppState) -> Vec<SpaceInfo> {
    let mut out = Vec::with_capacity(state.spaces.len() + 1);
    out.push(SpaceInfo::of(
        DEFAULT_SPACE,
        state.generator.as_ref(),
        state.worker_id,
        state.keeper.as_deref(),
        state.generator_kind,
        state.runway_warning,
    ));
    out.extend(state.spaces.values().map(|space| {
        SpaceInfo::of(
            &space.name,
            space.generator.as_ref(),
            space.worker_id,
            space.keeper.as_deref(),
            Some(space.generator_kind),
            state.runway_warning,
        )
    }));
    out
}
