//! Named ID spaces (`[spaces.<name>]`): list them, take IDs from one, decode with its layout.
//! `default` names the top-level generator, so a client may address every space alike.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::error::ErrorBody;
use super::extract::{PathParam, QueryParams};
use super::ids::{BATCH_REFUSED, Decoded, IdBatch, batch_from, decode_shown};
use super::observe::Issued;
use super::shown::{FORM_DESCRIPTION, READ_FORM_DESCRIPTION, Shown, TZ_DESCRIPTION};
use crate::service::error::ApiError;
use crate::service::spaces::{SpaceInfo, list};
use crate::service::state::AppState;

/// `GET /v1/spaces`: every ID space this server serves, `default` first.
#[utoipa::path(
    get,
    path = "/v1/spaces",
    tag = "spaces",
    responses((
        status = 200,
        description = "Each space: its name, layout, worker id and whether it can issue now",
        body = Vec<SpaceInfo>
    ))
)]
pub async fn list_spaces(State(state): State<Arc<AppState>>) -> Json<Vec<SpaceInfo>> {
    Json(list(&state))
}

/// `GET /v1/spaces/{space}/ids?count=N`: a batch of the space's IDs, as `/v1/ids` answers.
#[utoipa::path(
    get,
    operation_id = "space_id_batch",
    path = "/v1/spaces/{space}/ids",
    tag = "spaces",
    params(
        ("space" = String, Path, description = "The space: `default` or a `[spaces.<name>]`"),
        ("count" = Option<u64>, Query, description = "How many IDs: 1 (default) to `batch_cap`"),
        ("form" = Option<String>, Query, description = FORM_DESCRIPTION),
    ),
    responses(
        (status = 200, description = "A batch of the space's IDs", body = IdBatch),
        (status = 400, description = BATCH_REFUSED, body = ErrorBody),
        (status = 404, description = "No such space (`unknown_space`)", body = ErrorBody),
        (status = 503, description = "The space's generator cannot issue now", body = ErrorBody),
    )
)]
pub async fn space_batch(
    State(state): State<Arc<AppState>>,
    PathParam(space, _): PathParam<String>,
    params: QueryParams,
) -> Result<Issued<Json<IdBatch>>, ApiError> {
    batch_from(&state, state.source_of(Some(&space))?, &params).await
}

/// `GET /v1/spaces/{space}/ids/{id}`: an ID decoded with the space's layout.
#[utoipa::path(
    get,
    operation_id = "space_decode",
    path = "/v1/spaces/{space}/ids/{id}",
    tag = "spaces",
    params(
        ("space" = String, Path, description = "The space: `default` or a `[spaces.<name>]`"),
        ("id" = String, Path, description = "The ID: decimal, or in the form `form` names"),
        ("form" = Option<String>, Query, description = READ_FORM_DESCRIPTION),
        ("tz" = Option<String>, Query, description = TZ_DESCRIPTION),
    ),
    responses(
        (status = 200, description = "The ID's fields under the space's layout", body = Decoded),
        (
            status = 400,
            description = "A malformed ID (`malformed_id`), an unknown form or zone",
            body = ErrorBody
        ),
        (status = 404, description = "No such space (`unknown_space`)", body = ErrorBody),
    )
)]
pub async fn space_decode(
    State(state): State<Arc<AppState>>,
    PathParam((space, text), _): PathParam<(String, String)>,
    params: QueryParams,
) -> Result<Json<Decoded>, ApiError> {
    let layout = state.source_of(Some(&space))?.generator.layout();
    let shown = Shown::from_params(&params, state.masker.as_deref())?;
    Ok(Json(decode_shown(layout, &text, &shown)?))
}
