//! Tinyid's `tiny_id_info` and `tiny_id_token`, and the move of its biz types to `leaf_alloc`.
//!
//! Tinyid keeps one row per biz type (`tinyid-server/db.sql`): `max_id` is the highest number
//! it handed out, a claim reads the row and moves `max_id` by `step` under an optimistic lock
//! (`update tiny_id_info set max_id = ?, update_time = now(), version = version + 1 where id =
//! ? and max_id = ? and version = ? and biz_type = ?`) and hands out the numbers of
//! `(old max_id, new max_id]` that are `≡ remainder (mod delta)` (`SegmentId.nextId`).
//!
//! [`Store::adopt_tinyid`] moves every biz type to a `leaf_alloc` tag of the same name, in one
//! transaction that locks Tinyid's rows first:
//! - the tag continues above every number Tinyid handed out: `leaf_alloc.max_id` (where uidgen's
//!   next segment starts) is at least Tinyid's `max_id + 1`, with Tinyid's step, delta and
//!   remainder, so the same residue is served and every new number is above every old one;
//! - Tinyid's row is *fenced*: its `biz_type` gets the suffix [`TINYID_FENCE`] and its
//!   `version` moves, so a Tinyid server left running finds no such biz type (`can not find
//!   biztype`) and claims nothing more. A claim Tinyid committed before the lock is read by the
//!   move; one it tries after the commit matches no row. Segments Tinyid's servers and clients
//!   already hold lie below the new tag's start.
//!
//! Tinyid and uidgen cannot serve one biz type side by side: each would move its own table's
//! counter. The fence is what makes a forgotten Tinyid server harmless.

use crate::caller_token::TokenScopes;
use crate::error::{StoreError, StoreFuture};
use crate::leaf_alloc::{self, validate_step, validate_tag};
use crate::residue::Residue;
use crate::session::Session;
use crate::store::{Sql, Store, run_sql, with_pool};

/// What a fenced Tinyid row's `biz_type` ends with.
pub const TINYID_FENCE: &str = "@uidgen";

/// The longest `biz_type` Tinyid allows (`varchar(63)`).
const TINYID_BIZ_TYPE_LEN: usize = 63;

/// A `tiny_id_info` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TinyIdInfo {
    /// Tinyid's row id.
    pub id: i64,
    /// The biz type (with [`TINYID_FENCE`] once moved to uidgen).
    pub biz_type: String,
    /// Where the biz type began (a note; Tinyid does not read it).
    pub begin_id: i64,
    /// The highest number handed out (Tinyid's segments are `(max_id - step, max_id]`).
    pub max_id: i64,
    /// How far one claim moves `max_id` (`None` when the column is NULL).
    pub step: Option<i64>,
    /// Tinyid's `delta`: numbers handed out step by this.
    pub delta: i64,
    /// Tinyid's `remainder`: numbers handed out are `≡ remainder (mod delta)`.
    pub remainder: i64,
    /// The optimistic lock's version.
    pub version: i64,
}

impl TinyIdInfo {
    /// Whether the row was moved to uidgen already ([`Store::adopt_tinyid`]).
    pub fn fenced(&self) -> bool {
        self.biz_type.ends_with(TINYID_FENCE)
    }

    /// The first number uidgen may hand out for this biz type: above Tinyid's `max_id`.
    pub fn next(&self) -> i64 {
        self.max_id.saturating_add(1)
    }

    /// Why uidgen cannot continue this row, if it cannot.
    pub fn refusal(&self) -> Option<String> {
        let biz = &self.biz_type;
        if let Err(error) = validate_tag(biz) {
            return Some(format!(
                "biz_type `{biz}` is not a tag uidgen can hold: {error}"
            ));
        }
        if biz.chars().count() + TINYID_FENCE.len() > TINYID_BIZ_TYPE_LEN {
            return Some(format!(
                "biz_type `{biz}` is too long to be fenced (`{biz}{TINYID_FENCE}` passes Tinyid's \
                 63 characters); rename it in Tinyid first"
            ));
        }
        match self.step {
            Some(step) if validate_step(step).is_ok() => {}
            step => {
                return Some(format!(
                    "biz_type `{biz}` has step {step:?}; set it to 1 or more in tiny_id_info first"
                ));
            }
        }
        if let Err(error) = Residue::new(self.delta, self.remainder) {
            return Some(format!("biz_type `{biz}`: {error}"));
        }
        if self.max_id < 0 || self.max_id == i64::MAX {
            return Some(format!("biz_type `{biz}` has max_id {}", self.max_id));
        }
        None
    }
}

/// A `tiny_id_token` row: a token and one biz type it may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TinyIdToken {
    /// Tinyid's row id.
    pub id: i64,
    /// The token text, as Tinyid's clients send it (`token=` in the URL).
    pub token: String,
    /// A biz type it may use.
    pub biz_type: String,
}

/// A biz type moved to `leaf_alloc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptedTag {
    /// The tag (Tinyid's biz type).
    pub tag: String,
    /// Tinyid's `max_id`: every number it handed out is at most this.
    pub tinyid_max_id: i64,
    /// The tag's `max_id` after the move: uidgen's next segment starts here.
    pub max_id: i64,
    /// The tag's residue (Tinyid's delta and remainder).
    pub residue: Residue,
}

/// Tinyid's `tiny_id_info` rows by id, the query ending in `$lock`. SQLite's has no lock
/// clause: a move's `BEGIN IMMEDIATE` locks the whole file.
macro_rules! info_rows {
    ($lock:literal) => {
        Sql {
            sqlite: "SELECT id, biz_type, begin_id, max_id, step, delta, remainder, version
                     FROM tiny_id_info ORDER BY id",
            mysql: concat!(
                "SELECT CAST(id AS SIGNED), biz_type, CAST(begin_id AS SIGNED),
                        CAST(max_id AS SIGNED), CAST(step AS SIGNED), CAST(delta AS SIGNED),
                        CAST(remainder AS SIGNED), CAST(version AS SIGNED)
                 FROM tiny_id_info ORDER BY id",
                $lock
            ),
            postgres: concat!(
                "SELECT CAST(id AS BIGINT), CAST(biz_type AS TEXT), CAST(begin_id AS BIGINT),
                        CAST(max_id AS BIGINT), CAST(step AS BIGINT), CAST(delta AS BIGINT),
                        CAST(remainder AS BIGINT), CAST(version AS BIGINT)
                 FROM tiny_id_info ORDER BY id",
                $lock
            ),
        }
    };
}

const INFO_ROWS: Sql = info_rows!("");

/// [`INFO_ROWS`], locked until the move commits.
const INFO_ROWS_FOR_MOVE: Sql = info_rows!(" FOR UPDATE");

const FENCE_ROW: Sql = Sql {
    sqlite: "UPDATE tiny_id_info SET biz_type = biz_type || '@uidgen', version = version + 1,
                                     update_time = CURRENT_TIMESTAMP
             WHERE id = ?1",
    mysql: "UPDATE tiny_id_info SET biz_type = CONCAT(biz_type, '@uidgen'), version = version + 1,
                                    update_time = CURRENT_TIMESTAMP
            WHERE id = ?",
    postgres: "UPDATE tiny_id_info SET biz_type = biz_type || '@uidgen', version = version + 1,
                                       update_time = CURRENT_TIMESTAMP
               WHERE id = $1",
};

const TOKEN_ROWS: Sql = Sql {
    sqlite: "SELECT id, token, biz_type FROM tiny_id_token ORDER BY id",
    mysql: "SELECT CAST(id AS SIGNED), token, biz_type FROM tiny_id_token ORDER BY id",
    postgres: "SELECT CAST(id AS BIGINT), CAST(token AS TEXT), CAST(biz_type AS TEXT)
               FROM tiny_id_token ORDER BY id",
};

type InfoRow = (i64, String, i64, i64, Option<i64>, i64, i64, i64);

fn info(row: InfoRow) -> TinyIdInfo {
    let (id, biz_type, begin_id, max_id, step, delta, remainder, version) = row;
    TinyIdInfo {
        id,
        biz_type,
        begin_id,
        max_id,
        step,
        delta,
        remainder,
        version,
    }
}

impl Store {
    /// Tinyid's `tiny_id_info` rows, by id; `None` when the store has no such table.
    pub fn tinyid_infos(&self) -> StoreFuture<'_, Option<Vec<TinyIdInfo>>> {
        Box::pin(async move {
            if self.peer_table("tiny_id_info").await?.is_none() {
                return Ok(None);
            }
            let rows: Vec<InfoRow> = run_sql!(
                self,
                fetch_all,
                query_as(INFO_ROWS),
                [],
                "reading Tinyid's tiny_id_info"
            );
            Ok(Some(rows.into_iter().map(info).collect()))
        })
    }

    /// Tinyid's `tiny_id_token` rows, by id; `None` when the store has no such table.
    pub fn tinyid_tokens(&self) -> StoreFuture<'_, Option<Vec<TinyIdToken>>> {
        Box::pin(async move {
            if self.peer_table("tiny_id_token").await?.is_none() {
                return Ok(None);
            }
            let rows: Vec<(i64, String, String)> = run_sql!(
                self,
                fetch_all,
                query_as(TOKEN_ROWS),
                [],
                "reading Tinyid's tiny_id_token"
            );
            Ok(Some(
                rows.into_iter()
                    .map(|(id, token, biz_type)| TinyIdToken {
                        id,
                        token,
                        biz_type,
                    })
                    .collect(),
            ))
        })
    }

    /// Move every biz type of `tiny_id_info` not moved yet to a `leaf_alloc` tag, and fence its
    /// Tinyid row, in one transaction (see the module doc). Returns the tags moved now.
    ///
    /// Errors: [`StoreError::Takeover`] when a row cannot be continued ([`TinyIdInfo::refusal`])
    /// or its tag exists in `leaf_alloc` with another residue; nothing is changed then.
    ///
    /// Cancel safety: dropped before its commit, nothing is changed (the connection is closed,
    /// which rolls the transaction back).
    pub fn adopt_tinyid(&self) -> StoreFuture<'_, Vec<AdoptedTag>> {
        Box::pin(async move {
            if self.peer_table("tiny_id_info").await?.is_none() {
                return Ok(Vec::new());
            }
            let dialect = self.dialect();
            let action = "moving Tinyid's biz types to leaf_alloc";
            with_pool!(self, pool, {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let rows: Vec<InfoRow> = sqlx::query_as(INFO_ROWS_FOR_MOVE.get(dialect))
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let mut adopted = Vec::new();
                for row in rows.into_iter().map(info).filter(|row| !row.fenced()) {
                    if let Some(refusal) = row.refusal() {
                        tx.rollback().await.map_err(|e| self.err(action, e))?;
                        return Err(StoreError::Takeover(refusal));
                    }
                    let residue = Residue::new(row.delta, row.remainder)?;
                    let step = row.step.unwrap_or(1);
                    let tag = row.biz_type.clone();
                    let next = row.next();
                    let existing: Option<(i64, i64, i64)> =
                        sqlx::query_as(leaf_alloc::READ_FOR_ADOPTION.get(dialect))
                            .bind(tag.as_str())
                            .fetch_optional(&mut *tx)
                            .await
                            .map_err(|e| self.err(action, e))?;
                    let max_id = match existing {
                        Some((_, delta, remainder))
                            if (delta, remainder) != (residue.delta, residue.remainder) =>
                        {
                            tx.rollback().await.map_err(|e| self.err(action, e))?;
                            return Err(StoreError::Takeover(format!(
                                "the tag `{tag}` exists in leaf_alloc with residue {remainder} mod \
                                 {delta}, Tinyid's biz type with {residue}: the two would hand \
                                 out other numbers; rename one of them first"
                            )));
                        }
                        // Raised, never lowered: the tag may have served above Tinyid already.
                        Some((max_id, ..)) if max_id >= next => max_id,
                        Some(_) => {
                            sqlx::query(leaf_alloc::RAISE_FOR_ADOPTION.get(dialect))
                                .bind(next)
                                .bind(tag.as_str())
                                .execute(&mut *tx)
                                .await
                                .map_err(|e| self.err(action, e))?;
                            next
                        }
                        None => {
                            sqlx::query(leaf_alloc::INSERT_ADOPTED.get(dialect))
                                .bind(tag.as_str())
                                .bind(next)
                                .bind(step)
                                .bind("from Tinyid's tiny_id_info (uidgen takeover tinyid)")
                                .bind(residue.delta)
                                .bind(residue.remainder)
                                .execute(&mut *tx)
                                .await
                                .map_err(|e| self.err(action, e))?;
                            next
                        }
                    };
                    sqlx::query(FENCE_ROW.get(dialect))
                        .bind(row.id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                    adopted.push(AdoptedTag {
                        tag,
                        tinyid_max_id: row.max_id,
                        max_id,
                        residue,
                    });
                }
                tx.commit().await.map_err(|e| self.err(action, e))?;
                Ok(adopted)
            })
        })
    }

    /// Caller tokens for Tinyid's tokens, so its clients keep theirs: one per distinct token
    /// text, named `tinyid-{its first row id}`, allowed the segment routes and the biz types
    /// `tiny_id_token` lists for it (each one's tag, as [`Store::adopt_tinyid`] names them).
    /// Only the token's SHA-256 is stored. A token whose hash is known already is left as it
    /// is. Returns the names of the tokens created now.
    pub fn import_tinyid_tokens(&self) -> StoreFuture<'_, Vec<String>> {
        Box::pin(async move {
            let Some(rows) = self.tinyid_tokens().await? else {
                return Ok(Vec::new());
            };
            let mut by_token: Vec<(String, i64, Vec<String>)> = Vec::new();
            for row in rows {
                match by_token.iter_mut().find(|(token, ..)| *token == row.token) {
                    Some((_, _, tags)) => {
                        if !tags.contains(&row.biz_type) {
                            tags.push(row.biz_type);
                        }
                    }
                    None => by_token.push((row.token, row.id, vec![row.biz_type])),
                }
            }
            let mut created = Vec::new();
            for (token, id, tags) in by_token {
                let name = format!("tinyid-{id}");
                let scopes = TokenScopes {
                    routes: vec!["segments".to_owned()],
                    tags,
                    ..TokenScopes::default()
                };
                if self
                    .import_caller_token(&name, &token, &scopes)
                    .await?
                    .is_some()
                {
                    created.push(name);
                }
            }
            Ok(created)
        })
    }
}
