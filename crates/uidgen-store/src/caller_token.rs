//! The `caller_token` table: per-caller bearer tokens (Tinyid's `tiny_id_token`), each with the
//! route families, segment tags, sharded apps and spaces it may use.
//!
//! Invariants:
//! - The token itself is never stored: [`Store::create_caller_token`] draws 32 bytes from the
//!   operating system's random source, returns the token text once, and keeps only the SHA-256
//!   of it ([`token_hash`]). A copy of the table (a backup, a read replica) lets no one call the
//!   service, and a token cannot be shown again; a lost one is revoked and replaced.
//! - Listing ([`Store::list_caller_tokens`]) never returns a hash or a token: [`CallerToken`]
//!   has no field for either. Only [`Store::active_caller_token_hashes`], which a server
//!   caches to check requests, reads the hashes.
//! - A revoked token keeps its row (`revoked_at_ms` set): its name stays taken, so metrics
//!   labelled by a name always mean one token. Revoking cannot be undone.
//! - A name is 1 to [`MAX_CALLER_NAME_LEN`] characters of `[A-Za-z0-9._-]`, safe as a metric
//!   label and in a log line.
//!
//! - A token may carry an expiry (`expires_ms`, migration 0011; 0 in the row for never). It must
//!   lie in the future when the token is made ([`validate_expiry`]). An expired token keeps its
//!   row, as a revoked one does, and is still read by [`Store::active_caller_token_hashes`], so
//!   a server can tell its caller that the token *expired* rather than that it is unknown.
//!
//! Scopes are stored as newline-separated lists; `*` in a list allows anything of that kind, an
//! empty list nothing.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql};

/// The longest token name, in characters (`VARCHAR(64)`).
pub const MAX_CALLER_NAME_LEN: usize = 64;
/// The most entries one scope list may hold.
pub const MAX_SCOPE_ENTRIES: usize = 256;
/// The longest entry of a scope list, in characters.
pub const MAX_SCOPE_ENTRY_LEN: usize = 128;
/// What every token's text starts with, so one found in a log or a repository is recognisable
/// (as GitHub's `ghp_` tokens are) and a typo'd admin token is not mistaken for one.
pub const CALLER_TOKEN_PREFIX: &str = "uidgen_";

/// What a token may do: each list names what it allows; `*` allows anything of its kind.
///
/// ```
/// use uidgen_store::TokenScopes;
/// let scopes = TokenScopes { routes: vec!["segments".into()], tags: vec!["order".into()],
///                            ..TokenScopes::default() };
/// assert!(scopes.allows_route("segments"));
/// assert!(scopes.allows_tag("order") && !scopes.allows_tag("user"));
/// assert!(!scopes.allows_app("7"), "an empty list allows nothing");
/// assert!(TokenScopes::everything().allows_space("anything"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenScopes {
    /// Route families (`ids`, `segments`, `sharded`, `fallback`, `spaces`; the server names
    /// them).
    pub routes: Vec<String>,
    /// Segment tags (Leaf's biz tags).
    pub tags: Vec<String>,
    /// Sharded-mode app ids, as decimal text.
    pub apps: Vec<String>,
    /// Space names.
    pub spaces: Vec<String>,
}

impl TokenScopes {
    /// Every scope: `*` in each list.
    pub fn everything() -> Self {
        let all = || vec!["*".to_owned()];
        Self {
            routes: all(),
            tags: all(),
            apps: all(),
            spaces: all(),
        }
    }

    /// Whether the token may use the route family `family`.
    pub fn allows_route(&self, family: &str) -> bool {
        allows(&self.routes, family)
    }

    /// Whether the token may take IDs of segment tag `tag`.
    pub fn allows_tag(&self, tag: &str) -> bool {
        allows(&self.tags, tag)
    }

    /// Whether the token may take IDs of sharded app `app` (its id as decimal text).
    pub fn allows_app(&self, app: &str) -> bool {
        allows(&self.apps, app)
    }

    /// Whether the token may use space `space`.
    pub fn allows_space(&self, space: &str) -> bool {
        allows(&self.spaces, space)
    }

    /// Check every list: at most [`MAX_SCOPE_ENTRIES`] entries, each 1 to
    /// [`MAX_SCOPE_ENTRY_LEN`] characters without control characters (a newline would split
    /// an entry in two when stored). [`StoreError::InvalidInput`] names the list.
    pub fn validate(&self) -> Result<()> {
        for (what, list) in [
            ("routes", &self.routes),
            ("tags", &self.tags),
            ("apps", &self.apps),
            ("spaces", &self.spaces),
        ] {
            if list.len() > MAX_SCOPE_ENTRIES {
                return Err(StoreError::InvalidInput(format!(
                    "{what} has {} entries; at most {MAX_SCOPE_ENTRIES} fit",
                    list.len()
                )));
            }
            for entry in list {
                let len = entry.chars().count();
                if len == 0 || len > MAX_SCOPE_ENTRY_LEN || entry.chars().any(char::is_control) {
                    return Err(StoreError::InvalidInput(format!(
                        "{what} entry {entry:?} must be 1 to {MAX_SCOPE_ENTRY_LEN} characters \
                         without control characters"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn allows(list: &[String], value: &str) -> bool {
    list.iter().any(|entry| entry == "*" || entry == value)
}

/// A token as listed: everything but its secret and hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerToken {
    /// The row id, which revoking names.
    pub id: i64,
    /// The caller's name: unique, and the label of its metrics.
    pub name: String,
    /// What it may do.
    pub scopes: TokenScopes,
    /// When it was created, ms since the Unix epoch.
    pub created_ms: i64,
    /// When it was revoked, ms since the Unix epoch; `None` while it is valid.
    pub revoked_at_ms: Option<i64>,
    /// When it stops being accepted, ms since the Unix epoch; `None` for never.
    pub expires_ms: Option<i64>,
}

/// A token just created: its row and its text, which is never available again.
#[derive(Debug, Clone)]
pub struct NewCallerToken {
    /// The row.
    pub token: CallerToken,
    /// The bearer token to hand to the caller (`uidgen_` and 64 hex digits).
    pub secret: String,
}

/// A valid token as a server checks requests against it: its hash and what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveCallerToken {
    /// The row id.
    pub id: i64,
    /// The caller's name.
    pub name: String,
    /// The SHA-256 of the token text.
    pub hash: [u8; 32],
    /// What it may do.
    pub scopes: TokenScopes,
    /// When it stops being accepted, ms since the Unix epoch; `None` for never. Checked by the
    /// server at each request, not here: a token read before it expired expires on time.
    pub expires_ms: Option<i64>,
}

/// Check a token's expiry when it is made: `None` (never) or an instant after `now_ms`, both in
/// ms since the Unix epoch. A token that would be born expired is a mistake (a time in seconds
/// taken for one in ms, a date in the past), so it is refused rather than stored.
///
/// ```
/// use uidgen_store::validate_expiry;
/// assert!(validate_expiry(None, 1_000).is_ok());
/// assert!(validate_expiry(Some(2_000), 1_000).is_ok());
/// assert!(validate_expiry(Some(1_000), 1_000).is_err());
/// ```
pub fn validate_expiry(expires_ms: Option<i64>, now_ms: i64) -> Result<()> {
    match expires_ms {
        Some(at) if at <= now_ms => Err(StoreError::InvalidInput(format!(
            "expires_ms {at} is not in the future (now is {now_ms} ms since the Unix epoch); \
             give a later time in milliseconds, or ttl_secs"
        ))),
        _ => Ok(()),
    }
}

/// The SHA-256 of a token's text: what is stored, and what a presented token is hashed to
/// before it is compared.
///
/// ```
/// let hash = uidgen_store::token_hash("uidgen_00");
/// assert_eq!(hash.len(), 32);
/// assert_ne!(hash, uidgen_store::token_hash("uidgen_01"));
/// ```
pub fn token_hash(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The bytes of a 64-digit lowercase hex text; `None` for anything else (a row edited by hand).
fn unhex(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    if text.len() != 64 {
        return None;
    }
    let mut out = [0_u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Check a token name: 1 to [`MAX_CALLER_NAME_LEN`] characters of `[A-Za-z0-9._-]`.
///
/// ```
/// assert!(uidgen_store::validate_caller_name("billing-prod").is_ok());
/// assert!(uidgen_store::validate_caller_name("bad name").is_err());
/// ```
pub fn validate_caller_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_CALLER_NAME_LEN {
        return Err(StoreError::InvalidInput(format!(
            "token name must be 1 to {MAX_CALLER_NAME_LEN} characters"
        )));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return Err(StoreError::InvalidInput(format!(
            "token name {name:?} may hold only letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

fn join(list: &[String]) -> String {
    list.join("\n")
}

fn split(text: &str) -> Vec<String> {
    text.split('\n')
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

fn now_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}

const INSERT_TOKEN: Sql = Sql {
    sqlite: "INSERT INTO caller_token (name, token_hash, routes, tags, apps, spaces, created_ms,
                                       revoked_at_ms, expires_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, ?8)",
    mysql: "INSERT INTO caller_token (name, token_hash, routes, tags, apps, spaces, created_ms,
                                      revoked_at_ms, expires_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
    postgres: "INSERT INTO caller_token (name, token_hash, routes, tags, apps, spaces,
                                         created_ms, revoked_at_ms, expires_ms)
               VALUES ($1, $2, $3, $4, $5, $6, $7, 0, $8)",
};

const ID_OF_HASH: Sql = Sql {
    sqlite: "SELECT id FROM caller_token WHERE token_hash = ?1",
    mysql: "SELECT id FROM caller_token WHERE token_hash = ?",
    postgres: "SELECT id FROM caller_token WHERE token_hash = $1",
};

const LIST_TOKENS: Sql = Sql::same(
    "SELECT id, name, routes, tags, apps, spaces, created_ms, revoked_at_ms, expires_ms
     FROM caller_token ORDER BY id",
);

const ACTIVE_TOKENS: Sql = Sql::same(
    "SELECT id, name, token_hash, routes, tags, apps, spaces, expires_ms
     FROM caller_token WHERE revoked_at_ms = 0 ORDER BY id",
);

const REVOKE_TOKEN: Sql = Sql {
    sqlite: "UPDATE caller_token SET revoked_at_ms = ?1 WHERE id = ?2 AND revoked_at_ms = 0",
    mysql: "UPDATE caller_token SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms = 0",
    postgres: "UPDATE caller_token SET revoked_at_ms = $1 WHERE id = $2 AND revoked_at_ms = 0",
};

const TOKEN_EXISTS: Sql = Sql {
    sqlite: "SELECT COUNT(*) FROM caller_token WHERE id = ?1",
    mysql: "SELECT COUNT(*) FROM caller_token WHERE id = ?",
    postgres: "SELECT COUNT(*) FROM caller_token WHERE id = $1",
};

type ListedRow = (i64, String, String, String, String, String, i64, i64, i64);
type ActiveRow = (i64, String, String, String, String, String, String, i64);

/// A stored expiry: 0 is never.
fn expiry_of(stored: i64) -> Option<i64> {
    (stored > 0).then_some(stored)
}

fn scopes_of(routes: &str, tags: &str, apps: &str, spaces: &str) -> TokenScopes {
    TokenScopes {
        routes: split(routes),
        tags: split(tags),
        apps: split(apps),
        spaces: split(spaces),
    }
}

/// What revoking a token found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Revoked {
    /// The token was valid and is revoked from now on.
    Now,
    /// It had been revoked before; nothing changed.
    Already,
    /// No token has this id.
    Unknown,
}

impl Store {
    /// Create a token named `name` allowed `scopes` until `expires_ms` (ms since the Unix
    /// epoch; `None` for never, else checked by [`validate_expiry`]), and return its text: the
    /// only time it is available (only its SHA-256 is stored). A name already taken, by a valid
    /// or a revoked token, is [`StoreError::CallerTokenNameTaken`].
    ///
    /// The 32 random bytes come from the operating system's source (`getrandom`); failing to
    /// read it is an error, never a weaker token.
    ///
    /// Cancel safety: cancelling leaves no row or a complete one whose text is lost (revoke it).
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::TokenScopes;
    /// let created = store
    ///     .create_caller_token("billing", &TokenScopes::everything(), None)
    ///     .await?;
    /// assert!(created.secret.starts_with("uidgen_"));
    /// let listed = store.list_caller_tokens().await?;
    /// assert_eq!(listed[0].name, "billing"); // no secret in the listing
    /// # Ok(()) }
    /// ```
    pub fn create_caller_token<'a>(
        &'a self,
        name: &'a str,
        scopes: &'a TokenScopes,
        expires_ms: Option<i64>,
    ) -> StoreFuture<'a, NewCallerToken> {
        Box::pin(async move {
            validate_caller_name(name)?;
            scopes.validate()?;
            validate_expiry(expires_ms, now_ms())?;
            let mut random = [0_u8; 32];
            getrandom::fill(&mut random)
                .map_err(|e| StoreError::RandomUnavailable(e.to_string()))?;
            let secret = format!("{CALLER_TOKEN_PREFIX}{}", hex(&random));
            let token = self.insert_token(name, &secret, scopes, expires_ms).await?;
            Ok(NewCallerToken { token, secret })
        })
    }

    /// A caller token for a secret another system issued (Tinyid's `tiny_id_token`), so its
    /// callers keep the token they have: only its SHA-256 is stored, as for every token. `None`
    /// when a token with this text exists already (it is left as it is); a name already taken
    /// is [`StoreError::CallerTokenNameTaken`].
    pub fn import_caller_token<'a>(
        &'a self,
        name: &'a str,
        secret: &'a str,
        scopes: &'a TokenScopes,
    ) -> StoreFuture<'a, Option<CallerToken>> {
        Box::pin(async move {
            validate_caller_name(name)?;
            scopes.validate()?;
            if secret.trim().is_empty() || secret.trim() != secret {
                return Err(StoreError::InvalidInput(format!(
                    "the token of `{name}` is empty or has surrounding whitespace"
                )));
            }
            let hash = hex(&token_hash(secret));
            let known: Option<i64> = run_sql!(
                self,
                fetch_optional,
                query_scalar(ID_OF_HASH),
                [&hash],
                "looking a caller token up"
            );
            if known.is_some() {
                return Ok(None);
            }
            self.insert_token(name, secret, scopes, None)
                .await
                .map(Some)
        })
    }

    /// Insert the row of a token whose text is `secret`, keeping only its hash.
    async fn insert_token(
        &self,
        name: &str,
        secret: &str,
        scopes: &TokenScopes,
        expires_ms: Option<i64>,
    ) -> Result<CallerToken> {
        let hash = hex(&token_hash(secret));
        let created_ms = now_ms();
        let inserted = crate::store::with_pool!(
            self,
            pool,
            sqlx::query(INSERT_TOKEN.get(self.dialect()))
                .bind(name)
                .bind(&hash)
                .bind(join(&scopes.routes))
                .bind(join(&scopes.tags))
                .bind(join(&scopes.apps))
                .bind(join(&scopes.spaces))
                .bind(created_ms)
                .bind(expires_ms.unwrap_or(0))
                .execute(pool)
                .await
                .map(drop)
        );
        if let Err(error) = inserted {
            if let sqlx::Error::Database(db) = &error
                && db.is_unique_violation()
            {
                return Err(StoreError::CallerTokenNameTaken(name.to_owned()));
            }
            return Err(self.err("creating a caller token", error));
        }
        let id: i64 = run_sql!(
            self,
            fetch_one,
            query_scalar(ID_OF_HASH),
            [&hash],
            "reading a caller token back"
        );
        Ok(CallerToken {
            id,
            name: name.to_owned(),
            scopes: scopes.clone(),
            created_ms,
            revoked_at_ms: None,
            expires_ms,
        })
    }

    /// Every token, valid and revoked, oldest first; never a secret or a hash.
    pub fn list_caller_tokens(&self) -> StoreFuture<'_, Vec<CallerToken>> {
        Box::pin(async move {
            let rows: Vec<ListedRow> = run_sql!(
                self,
                fetch_all,
                query_as(LIST_TOKENS),
                [],
                "listing caller tokens"
            );
            Ok(rows
                .into_iter()
                .map(
                    |(id, name, routes, tags, apps, spaces, created_ms, revoked, expires)| {
                        CallerToken {
                            id,
                            name,
                            scopes: scopes_of(&routes, &tags, &apps, &spaces),
                            created_ms,
                            revoked_at_ms: (revoked > 0).then_some(revoked),
                            expires_ms: expiry_of(expires),
                        }
                    },
                )
                .collect())
        })
    }

    /// The tokens not revoked, with their hashes and expiries, for a server's cache of them
    /// (expired ones included: the server tells their callers why they are refused). A row
    /// whose hash is not 64 hex digits (edited by hand) is skipped with a warning: it can
    /// match no token.
    pub fn active_caller_token_hashes(&self) -> StoreFuture<'_, Vec<ActiveCallerToken>> {
        Box::pin(async move {
            let rows: Vec<ActiveRow> = run_sql!(
                self,
                fetch_all,
                query_as(ACTIVE_TOKENS),
                [],
                "reading caller tokens"
            );
            Ok(rows
                .into_iter()
                .filter_map(|(id, name, hash, routes, tags, apps, spaces, expires)| {
                    let Some(hash) = unhex(&hash) else {
                        tracing::warn!(id, name, "caller_token row has a malformed hash; skipped");
                        return None;
                    };
                    Some(ActiveCallerToken {
                        id,
                        name,
                        hash,
                        scopes: scopes_of(&routes, &tags, &apps, &spaces),
                        expires_ms: expiry_of(expires),
                    })
                })
                .collect())
        })
    }

    /// Revoke token `id` from now on. Servers stop accepting it once their cache refreshes.
    pub fn revoke_caller_token(&self, id: i64) -> StoreFuture<'_, Revoked> {
        Box::pin(async move {
            let changed = run_sql!(
                self,
                execute,
                query(REVOKE_TOKEN),
                [now_ms(), id],
                "revoking a caller token",
                then rows_affected
            );
            if changed > 0 {
                return Ok(Revoked::Now);
            }
            let found: i64 = run_sql!(
                self,
                fetch_one,
                query_scalar(TOKEN_EXISTS),
                [id],
                "looking a caller token up"
            );
            Ok(if found > 0 {
                Revoked::Already
            } else {
                Revoked::Unknown
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hash_survives_its_hex_text() {
        let hash = token_hash("uidgen_abc");
        assert_eq!(unhex(&hex(&hash)), Some(hash));
        assert_eq!(unhex("xyz"), None);
        assert_eq!(unhex(&"g".repeat(64)), None);
    }

    #[test]
    fn scope_lists_round_trip_and_empty_allows_nothing() {
        let scopes = scopes_of("ids\nsegments", "", "7", "*");
        assert_eq!(scopes.routes, ["ids", "segments"]);
        assert!(scopes.tags.is_empty());
        assert!(!scopes.allows_tag("order"));
        assert!(scopes.allows_app("7") && !scopes.allows_app("8"));
        assert!(scopes.allows_space("any"));
        let bad = TokenScopes {
            tags: vec!["a\nb".into()],
            ..TokenScopes::default()
        };
        assert!(bad.validate().is_err());
    }
}
