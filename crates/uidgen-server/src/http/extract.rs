//! Extractors whose rejections are our errors: axum's own answer malformed paths, query strings
//! and bodies with plain text, which would break the `{code, message}` contract of the JSON API
//! (and Leaf's routes answer text on purpose, so they get the text form).

use std::collections::HashMap;
use std::marker::PhantomData;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::TextError;
use crate::service::error::{ApiError, ECHO_CHARS, clip};
use crate::service::generate::batch_count;

/// How a route reports a rejected request: JSON ([`ApiError`]) or Leaf's bare text
/// ([`TextError`]).
pub trait Rejection: From<ApiError> + axum::response::IntoResponse {}

impl Rejection for ApiError {}
impl Rejection for TextError {}

/// [`Path`], rejecting with `E` (a 400 naming what was wrong, e.g. `%FF` is not UTF-8).
#[derive(Debug)]
pub struct PathParam<T, E = ApiError>(pub T, pub(super) PhantomData<E>);

impl<S, T, E> FromRequestParts<S> for PathParam<T, E>
where
    S: Send + Sync,
    T: DeserializeOwned + Send,
    E: Rejection,
{
    type Rejection = E;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, E> {
        match Path::<T>::from_request_parts(parts, state).await {
            Ok(Path(value)) => Ok(Self(value, PhantomData)),
            Err(rejection) => Err(ApiError::from_path(&rejection).into()),
        }
    }
}

/// A path parameter for Leaf's text routes.
pub type LeafPath<T> = PathParam<T, TextError>;

/// The query string as a map, rejecting (400, JSON) a malformed string or a name given twice:
/// `?count=1&count=2` is ambiguous, and silently taking one would hide a client's bug.
#[derive(Debug, Default)]
pub struct QueryParams(pub HashMap<String, String>);

impl QueryParams {
    /// The value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&String> {
        self.0.get(name)
    }

    /// `count=N` of a batch route: 1 when absent, else 1 to `cap`; anything else is a 400
    /// `invalid_count` that echoes what was sent. A number gets the sentence of
    /// [`batch_count`], anything else says what a count is.
    pub fn count(&self, cap: usize) -> Result<usize, ApiError> {
        let Some(raw) = self.get("count").map(|c| c.trim()) else {
            return Ok(1);
        };
        match raw.parse::<u64>() {
            Ok(count) => batch_count(count, cap),
            Err(_) => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_count",
                format!(
                    "`count` must be a whole number from 1 to {cap}, got {:?}",
                    clip(raw, ECHO_CHARS),
                ),
            )),
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::from_request_parts(parts, state)
            .await
            .map_err(|rejection| ApiError::from_query(&rejection))?;
        let mut map = HashMap::with_capacity(pairs.len());
        for (name, value) in pairs {
            if map.contains_key(&name) {
                return Err(ApiError::bad_parameter(format!(
                    "query parameter `{}` is given more than once",
                    clip(&name, ECHO_CHARS)
                )));
            }
            map.insert(name, value);
        }
        Ok(Self(map))
    }
}

/// The raw request body, rejecting with JSON: 413 past
/// [`MAX_BODY_BYTES`](super::error::MAX_BODY_BYTES), 400 when it cannot be read.
#[derive(Debug)]
pub struct Body(pub Bytes);

impl Body {
    /// The body as JSON of type `T`; a 400 `invalid_parameter` naming serde's complaint.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        serde_json::from_slice(&self.0)
            .map_err(|e| ApiError::bad_parameter(format!("invalid JSON body: {e}")))
    }
}

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(request, state)
            .await
            .map(Self)
            .map_err(|rejection| ApiError::from_body(&rejection))
    }
}
