//! Admin authentication: a layer on the admin sub-router (axum's `examples/key-value-store`), so
//! no admin handler can forget the check.
//!
//! Invariants:
//! - The token is checked before any extractor of the route runs: a client without the token
//!   learns nothing from how its path or body would have been parsed.
//! - The comparison takes time that depends only on the lengths, never on where the bytes differ.
//! - A request without credentials is 401 whatever the configuration, as the document's
//!   security scheme says (issue 32: schemathesis expects 401 for the missing header); with
//!   credentials, no configured token means the admin API does not exist (404), not that it is
//!   open.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::Response;
use serde_json::{Value, json};
use subtle::{Choice, ConstantTimeEq};
use utoipa::ToSchema;

use super::described::Routes;
use super::error::ErrorBody;
use super::gates::Gates;
use crate::service::callers::bearer_token;
use crate::service::error::ApiError;
use crate::service::state::AppState;

/// Put `admin` behind the token check, and say so in its OpenAPI description: every admin
/// operation asks for the bearer token and may answer 401 or 403 from the layer. One home for
/// both, so the description cannot drift from the gate. (The 404 of a server with no token stays
/// with each route, which also names its own mode in it.)
pub(super) fn admin_only<'s>(
    mut admin: Routes<'s>,
    state: &Arc<AppState>,
    gates: &mut Gates,
) -> Routes<'s> {
    document_refusals(
        &mut admin,
        json!([{ "admin_token": [] }]),
        "No bearer token",
        "A wrong token",
    );
    gates.install(
        admin,
        middleware::from_fn_with_state(state.clone(), require_admin),
    )
}

/// Say of every operation of `router` that it asks for `security` and may answer 401 and 403
/// (with these descriptions) from a layer: one home for the description of every gate, so it
/// cannot drift from the gate.
pub(super) fn document_refusals(
    router: &mut Routes<'_>,
    security: Value,
    unauthorized: &str,
    forbidden: &str,
) {
    let error = format!("#/components/schemas/{}", ErrorBody::name());
    let refusal = |description: &str| {
        json!({
            "description": description,
            "content": { "application/json": { "schema": { "$ref": error } } },
        })
    };
    let items = router.paths_mut().values_mut();
    for item in items.filter_map(Value::as_object_mut) {
        for operation in item.values_mut().filter_map(Value::as_object_mut) {
            operation.insert("security".to_owned(), security.clone());
            if let Some(responses) = operation
                .get_mut("responses")
                .and_then(Value::as_object_mut)
            {
                responses.insert("401".to_owned(), refusal(unauthorized));
                responses.insert("403".to_owned(), refusal(forbidden));
            }
        }
    }
}

/// Let the request through to the admin route only with `Authorization: Bearer <admin_token>`.
async fn require_admin(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    authorise(&state, request.headers())?;
    Ok(next.run(request).await)
}

/// 401 without credentials, 404 when no token is configured, 403 with wrong ones.
fn authorise(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "send the admin token as `Authorization: Bearer <token>`",
            )
        })?;
    let Some(expected) = &state.admin_token else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "admin_disabled",
            "the admin API is disabled; set admin_token to enable it",
        ));
    };
    if ct_eq(given.as_bytes(), expected.as_bytes()) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the admin token is wrong",
        ))
    }
}

/// Whether `given` equals `secret`, in time that depends only on the lengths, never on where
/// the bytes differ. `subtle`'s slice comparison returns early on a length mismatch, which
/// tells an attacker the secret's length; here every byte of the secret is compared whatever
/// was given, and the length difference is folded into the result.
pub fn ct_eq(given: &[u8], secret: &[u8]) -> bool {
    let mut equal: Choice = (given.len() as u64).ct_eq(&(secret.len() as u64));
    for (i, s) in secret.iter().enumerate() {
        // A shorter `given` is padded with zeros; the length check above already failed it.
        let g = given.get(i).copied().unwrap_or(0);
        equal &= g.ct_eq(s);
    }
    bool::from(equal)
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_bearer_scheme_is_read_in_any_case() {
        for value in [
            "Bearer t0ken",
            "bearer t0ken",
            "BEARER  t0ken ",
            " Bearer t0ken",
        ] {
            assert_eq!(bearer_token(value), Some("t0ken"), "{value:?}");
        }
        for value in ["Basic t0ken", "Bearert0ken", "t0ken", ""] {
            assert_eq!(bearer_token(value), None, "{value:?}");
        }
    }
}
