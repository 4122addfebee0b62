//! Named ID spaces (`[spaces.<name>]`): list them, take IDs from one, decode with its layout.
//! `default` names the top-level generator, so a client may address every space alike.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::extract::{PathParam, QueryParams};
use super::ids::{Decoded, IdBatch, batch_from, decode_shown};
use super::observe::Issued;
use super::shown::Shown;
use crate::service::error::ApiError;
use crate::service::spaces::{SpaceInfo, list};
use crate::service::state::AppState;

/// `GET /v1/spaces`: every ID space this server serves, `default` first.
pub async fn list_spaces(State(state): State<Arc<AppState>>) -> Json<Vec<SpaceInfo>> {
    Json(list(&state))
}

/// `GET /v1/spaces/{space}/ids?count=N`: a batch of the space's IDs, as `/v1/ids` answers.
pub async fn space_batch(
    State(state): State<Arc<AppState>>,
    PathParam(space, _): PathParam<String>,
    params: QueryParams,
) -> Result<Issued<Json<IdBatch>>, ApiError> {
    batch_from(&state, state.source_of(Some(&space))?, &params).await
}

/// `GET /v1/spaces/{space}/ids/{id}`: an ID decoded with the space's layout.
pub async fn space_decode(
    State(state): State<Arc<AppState>>,
    PathParam((space, text), _): PathParam<(String, String)>,
    params: QueryParams,
) -> Result<Json<Decoded>, ApiError> {
    let layout = state.source_of(Some(&space))?.generator.layout();
    let shown = Shown::from_params(&params, state.masker.as_deref())?;
    Ok(Json(decode_shown(layout, &text, &shown)?))
}
