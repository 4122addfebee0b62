//! Per-caller tokens (issue 22, Tinyid's `tiny_id_token`): who may call the ID routes, and for
//! which route families, segment tags, sharded apps and spaces. The HTTP layer
//! (`http::callers`) and the gRPC gate ask [`Callers::authenticate`] and
//! [`Caller::check`]; neither parses a token itself.
//!
//! Invariants:
//! - A presented token is hashed (SHA-256) and the hash compared with *every* valid token's hash
//!   in constant time ([`find`]): no early exit, no comparison of the secret itself, so timing
//!   tells nothing about how close a guess came. The store keeps only hashes.
//! - The valid tokens are cached in memory and re-read every `auth.refresh_secs` (default 5 s),
//!   so no request reaches the database; a token created or revoked through this server's admin
//!   API takes effect here at once, on other servers within one refresh. While the store does
//!   not answer, the last set read stays in force (logged), so a database outage does not lock
//!   every caller out; a revoke made meanwhile takes effect once it answers again.
//! - Metrics are labelled by the token's *name*, never by anything a request chose: names are
//!   made by an admin, so their number is bounded by what the admin creates.
//! - A token's expiry is checked against the clock at every request, not at the refresh: a
//!   token expires on time whenever the set was read, and its caller is told it *expired*
//!   (401), not that it is unknown.
//! - A token's `routes` name families of [`RouteFamily::ALL`] (or `*`) and its `apps` are app
//!   ids (or `*`), checked when it is made ([`check_scopes`]): a misspelt entry would make a
//!   token that silently allows nothing.

use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::http::StatusCode;
use parking_lot::RwLock;
use subtle::ConstantTimeEq;
use uidgen_store::{ActiveCallerToken, Store, TokenScopes, token_hash};

use super::error::ApiError;
use crate::metrics::{CallerCounters, CallerFamilies};

/// A group of ID routes a token may be allowed: fixed, so a route cannot invent one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RouteFamily {
    /// Snowflake-style IDs: `/v1/ids*`, Leaf's `/api/snowflake/get`, Vesta's routes; gRPC
    /// `NextId`, `NextIds`, `StreamIds`, `NextIdTexts`, `ExplainId`, `MakeId`.
    Ids,
    /// Leaf segments: `/v1/segments*`, `/api/segment/get`, leases; gRPC `SegmentIds`,
    /// `LeaseSegment`.
    Segments,
    /// The sharded mode: `/v1/apps*`, `/api/shard/get`.
    Sharded,
    /// Clients' embedded fallbacks: `/v1/fallback/leases*` and gRPC's fallback calls.
    Fallback,
    /// Named spaces (`/v1/spaces/...`).
    Spaces,
}

impl RouteFamily {
    /// Every family, in the order the docs list them.
    pub const ALL: [Self; 5] = [
        Self::Ids,
        Self::Segments,
        Self::Sharded,
        Self::Fallback,
        Self::Spaces,
    ];

    /// The name a token's `routes` list uses.
    ///
    /// ```
    /// use uidgen_server::service::callers::RouteFamily;
    /// assert_eq!(RouteFamily::Segments.name(), "segments");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Self::Ids => "ids",
            Self::Segments => "segments",
            Self::Sharded => "sharded",
            Self::Fallback => "fallback",
            Self::Spaces => "spaces",
        }
    }

    /// The family a token's `routes` entry names; `None` for anything but a family's name.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|family| family.name() == name)
    }

    /// The family of a `uidgen.v1.IdService` method; `None` for methods in no family
    /// (`GetInfo`), which any valid token may call.
    pub fn of_grpc_method(method: &str) -> Option<Self> {
        match method {
            "NextId" | "NextIds" | "StreamIds" | "NextIdTexts" | "ExplainId" | "MakeId" => {
                Some(Self::Ids)
            }
            "SegmentIds" | "LeaseSegment" => Some(Self::Segments),
            "ClaimFallbackLease" | "RenewFallbackLease" | "ReleaseFallbackLease" => {
                Some(Self::Fallback)
            }
            _ => None,
        }
    }
}

/// What a request names that a token's scopes may not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoped<'a> {
    /// A segment tag.
    Tag(&'a str),
    /// A sharded app id, as decimal text.
    App(&'a str),
    /// A space name.
    Space(&'a str),
}

/// Check what the store cannot know of a new token's scopes: each `routes` entry is `*` or a
/// family's name, each `apps` entry `*` or a sharded app id (0 to 255). The 400 names the bad
/// entry and what is allowed.
///
/// ```
/// use uidgen_server::service::callers::check_scopes;
/// use uidgen_store::TokenScopes;
/// let ok = TokenScopes { routes: vec!["ids".into(), "*".into()], apps: vec!["7".into()],
///                        ..TokenScopes::default() };
/// assert!(check_scopes(&ok).is_ok());
/// let typo = TokenScopes { routes: vec!["idz".into()], ..TokenScopes::default() };
/// let refused = check_scopes(&typo).unwrap_err();
/// assert!(refused.message.contains("\"idz\"") && refused.message.contains("segments"));
/// ```
pub fn check_scopes(scopes: &TokenScopes) -> Result<(), ApiError> {
    if let Some(bad) = scopes
        .routes
        .iter()
        .find(|entry| *entry != "*" && RouteFamily::named(entry).is_none())
    {
        let allowed: Vec<&str> = RouteFamily::ALL.iter().map(|f| f.name()).collect();
        return Err(ApiError::bad_parameter(format!(
            "routes entry {bad:?} is not a route family; use {} or `*`",
            allowed.join(", ")
        )));
    }
    // Canonical decimal only ("07" is not app 7's entry: `allows_app` compares text).
    let app_id = |entry: &str| entry.parse::<u8>().is_ok_and(|n| n.to_string() == entry);
    if let Some(bad) = scopes
        .apps
        .iter()
        .find(|entry| *entry != "*" && !app_id(entry))
    {
        return Err(ApiError::bad_parameter(format!(
            "apps entry {bad:?} is not a sharded app id; use a decimal app id from 0 to 255 or `*`"
        )));
    }
    Ok(())
}

/// An authenticated caller: the token's name, what it may do, and its metrics.
#[derive(Debug)]
pub struct Caller {
    /// The token's row id.
    pub id: i64,
    /// The token's name.
    pub name: Arc<str>,
    /// What it may do.
    pub scopes: TokenScopes,
    /// When it stops being accepted, ms since the Unix epoch; `None` for never.
    pub expires_ms: Option<i64>,
    hash: [u8; 32],
    /// `uidgen_caller_requests_total` and `uidgen_caller_ids_total` of this name.
    pub counters: CallerCounters,
}

impl Caller {
    /// 403 unless the token may use `family` and everything in `named`.
    pub fn check(&self, family: RouteFamily, named: &[Scoped<'_>]) -> Result<(), ApiError> {
        if !self.scopes.allows_route(family.name()) {
            return Err(forbidden(format!(
                "the caller token `{}` may not use the {} routes",
                self.name,
                family.name()
            )));
        }
        for scoped in named {
            let (allowed, what, value) = match *scoped {
                Scoped::Tag(tag) => (self.scopes.allows_tag(tag), "tag", tag),
                Scoped::App(app) => (self.scopes.allows_app(app), "app", app),
                Scoped::Space(space) => (self.scopes.allows_space(space), "space", space),
            };
            if !allowed {
                return Err(forbidden(format!(
                    "the caller token `{}` may not use {what} `{value}`",
                    self.name
                )));
            }
        }
        Ok(())
    }
}

#[cold]
fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "forbidden", message)
}

#[cold]
fn unauthorized(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

#[cold]
fn expired(name: &str, at_ms: i64) -> ApiError {
    let at = uidgen_core::calendar::format_iso8601(u64::try_from(at_ms).unwrap_or(0));
    unauthorized(format!(
        "the caller token `{name}` expired at {at}; ask for a new one"
    ))
}

/// The valid caller tokens, cached from the store; see the module's invariants.
#[derive(Debug)]
pub struct Callers {
    store: Store,
    required: bool,
    refresh: Duration,
    metrics: CallerFamilies,
    /// The valid tokens as last read. A std lock: held only to clone an `Arc`, never across an
    /// await.
    tokens: RwLock<Arc<Vec<Arc<Caller>>>>,
}

/// The one valid token whose hash is `hash`, every entry compared in constant time and none
/// skipped, so the time taken depends on the number of tokens only.
pub fn find<'a, T>(
    entries: &'a [T],
    hash: &[u8; 32],
    hash_of: impl Fn(&T) -> &[u8; 32],
) -> Option<&'a T> {
    let mut found = None;
    for entry in entries {
        if bool::from(hash_of(entry).ct_eq(hash)) {
            found = Some(entry);
        }
    }
    found
}

impl Callers {
    /// The tokens of `store`, read now and then every `refresh` by a task that ends when the
    /// returned value is dropped. `required` is whether the ID routes ask for a token,
    /// `admin` whether this server has an admin token to make them with.
    ///
    /// With `required` and no valid token in the store the server starts anyway (every ID
    /// request is refused until one is made), and says how to make one; `uidgen serve` has
    /// refused to start before this when there is no admin token either
    /// ([`check_tokens_can_be_made`]).
    pub async fn start(
        store: Store,
        required: bool,
        admin: bool,
        refresh: Duration,
        metrics: CallerFamilies,
    ) -> Arc<Self> {
        let callers = Arc::new(Self {
            store,
            required,
            refresh,
            metrics,
            tokens: RwLock::new(Arc::new(Vec::new())),
        });
        match callers.reload().await {
            Ok(0) if required => tracing::warn!(
                "auth.required is on and the store holds no caller token: every ID request \
                 is refused until one is made with POST /v1/admin/tokens, sending admin_token \
                 as the bearer token (docs/OPERATIONS.md, Callers and tokens)"
            ),
            Ok(count) if required && !admin => tracing::warn!(
                count,
                "auth.required is on and admin_token is unset: the caller tokens in the store \
                 are checked, but none can be made or revoked through this server"
            ),
            Ok(count) => tracing::info!(count, required, "caller tokens loaded"),
            Err(error) => tracing::warn!(%error, "cannot read the caller tokens yet; retrying"),
        }
        tokio::spawn(refresh_loop(Arc::downgrade(&callers), refresh));
        callers
    }

    /// Whether the ID routes ask for a token (`auth.required`).
    pub fn required(&self) -> bool {
        self.required
    }

    /// How often the tokens are re-read (`auth.refresh_secs`).
    pub fn refresh(&self) -> Duration {
        self.refresh
    }

    /// The store the tokens live in, for the admin routes.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Read the valid tokens again; how many there are. Cancel safety: cancelling keeps the
    /// previous set.
    pub async fn reload(&self) -> uidgen_store::Result<usize> {
        let rows = self.store.active_caller_token_hashes().await?;
        let callers: Vec<Arc<Caller>> = rows
            .into_iter()
            .map(
                |ActiveCallerToken {
                     id,
                     name,
                     hash,
                     scopes,
                     expires_ms,
                 }| {
                    let counters = self.metrics.caller(&name);
                    Arc::new(Caller {
                        id,
                        name: name.into(),
                        scopes,
                        expires_ms,
                        hash,
                        counters,
                    })
                },
            )
            .collect();
        let count = callers.len();
        let fresh = Arc::new(callers);
        *self.tokens.write() = fresh;
        Ok(count)
    }

    /// The caller whose token is in `authorization` (an `Authorization` header's value:
    /// `Bearer <token>`); 401 without one, with one that is unknown or revoked, or with one
    /// that has expired (saying so).
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Arc<Caller>, ApiError> {
        let token = authorization.and_then(bearer_token).ok_or_else(|| {
            unauthorized("send a caller token as `Authorization: Bearer <token>`")
        })?;
        let hash = token_hash(token);
        let tokens = Arc::clone(&self.tokens.read());
        let caller = find(&tokens, &hash, |caller| &caller.hash)
            .cloned()
            .ok_or_else(|| unauthorized("the caller token is unknown or revoked"))?;
        match caller.expires_ms {
            Some(at) if at <= now_ms() => Err(expired(&caller.name, at)),
            _ => Ok(caller),
        }
    }
}

/// Refuse a start that could serve no ID request: `auth.required` on, no `admin_token` to make
/// caller tokens with, and no valid (unexpired, unrevoked) token in the store. Tokens imported
/// from Tinyid (`uidgen takeover tinyid`) are a way in without an admin token, so only the
/// store's answer decides. A start-up check like `takeover::enforce`, so its error is anyhow's.
pub async fn check_tokens_can_be_made(
    required: bool,
    admin: bool,
    store: &Store,
) -> anyhow::Result<()> {
    if !required || admin {
        return Ok(());
    }
    let now = now_ms();
    let tokens = store
        .active_caller_token_hashes()
        .await
        .map_err(|e| anyhow::anyhow!("cannot read the caller tokens: {e}"))?;
    if tokens
        .iter()
        .all(|token| token.expires_ms.is_some_and(|at| at <= now))
    {
        anyhow::bail!(
            "auth.required = true, but admin_token is unset and the store holds no valid caller \
             token: no ID request could ever be served. Set admin_token (UIDGEN_ADMIN_TOKEN, at \
             least 16 characters) to make caller tokens with POST /v1/admin/tokens, or set \
             auth.required = false (UIDGEN_AUTH_REQUIRED)"
        );
    }
    Ok(())
}

/// The wall clock in ms since the Unix epoch, as tokens' expiries are written (signed, as the
/// store keeps them).
pub fn now_ms() -> i64 {
    i64::try_from(uidgen_core::Clock::now_millis(&uidgen_core::SystemClock)).unwrap_or(i64::MAX)
}

/// Re-read the tokens every `refresh` while `callers` lives.
async fn refresh_loop(callers: Weak<Callers>, refresh: Duration) {
    let mut failing = false;
    loop {
        tokio::time::sleep(refresh).await;
        let Some(callers) = callers.upgrade() else {
            return;
        };
        match callers.reload().await {
            Ok(_) if failing => {
                failing = false;
                tracing::info!("caller tokens read again");
            }
            Ok(_) => {}
            Err(error) => {
                if !failing {
                    tracing::warn!(%error, "cannot re-read the caller tokens; the last ones read stay in force");
                }
                failing = true;
            }
        }
    }
}

/// The token of an `Authorization: Bearer <token>` value. The scheme's name is
/// case-insensitive (RFC 9110, section 11.1: <https://www.rfc-editor.org/rfc/rfc9110#section-11.1>),
/// so `bearer` and `BEARER` are as good as `Bearer`; spaces around the token are not part of it.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_one_matching_hash_is_found_whatever_its_place() {
        let hashes: Vec<[u8; 32]> = ["a", "b", "c"].iter().map(|t| token_hash(t)).collect();
        for (i, hash) in hashes.iter().enumerate() {
            assert_eq!(find(&hashes, hash, |h| h), Some(&hashes[i]));
        }
        assert_eq!(find(&hashes, &token_hash("d"), |h| h), None);
        // One differing bit anywhere is no match.
        for byte in 0..32 {
            let mut near = hashes[1];
            near[byte] ^= 1;
            assert_eq!(find(&hashes, &near, |h| h), None, "byte {byte}");
        }
        assert_eq!(find::<[u8; 32]>(&[], &hashes[0], |h| h), None);
    }

    #[test]
    fn grpc_methods_fall_in_their_families() {
        assert_eq!(
            RouteFamily::of_grpc_method("NextIds"),
            Some(RouteFamily::Ids)
        );
        assert_eq!(
            RouteFamily::of_grpc_method("LeaseSegment"),
            Some(RouteFamily::Segments)
        );
        assert_eq!(
            RouteFamily::of_grpc_method("RenewFallbackLease"),
            Some(RouteFamily::Fallback)
        );
        assert_eq!(RouteFamily::of_grpc_method("GetInfo"), None);
    }

    #[test]
    fn a_bearer_token_needs_the_scheme_and_a_token() {
        assert_eq!(bearer_token("bearer  t0k "), Some("t0k"));
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Basic t0k"), None);
    }
}
