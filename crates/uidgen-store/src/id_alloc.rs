//! The `id_alloc` table (the sharded mode): one row per app and shard; a claim moves `max_id`
//! forward by the row's step and hands the caller the indexes it passed over.
//!
//! `max_id` means what the original sharded service (the seed this table comes from) makes it
//! mean: the highest index handed out. Its rows start at 0, and a claim that adds `step` hands
//! out `max_id - step + 1 ..= max_id` (issue 31: reading such a row as Leaf reads `leaf_alloc`,
//! `max_id .. max_id + step`, handed the original's last index out again). Rows an older uidgen
//! wrote, which kept `max_id` as the next index to hand out (rows started at 1), are listed in
//! `id_alloc_exclusive` (migration 0010) and keep that meaning, read and written, so older
//! servers still running during an upgrade and newer ones never hand out one index twice; a
//! row read the original's way that was written the other way skips one index, never repeats
//! one. [`AppShard::next_index`] is the first index the next claim hands out, either way.
//!
//! Invariants:
//! - An app is all 64 of its shard rows: [`Store::create_or_update_app`] writes them in one
//!   transaction, so no reader sees half an app.
//! - A claim is one `UPDATE ... SET max_id = max_id + step` read back in the same transaction,
//!   so concurrent claimers (threads, processes, servers) get disjoint segments.
//! - A claim never starts above the shard's ceiling (the largest index whose ID stays at or
//!   below `max_limit_id`, the caller's largest representable index, and `i64::MAX`): such a
//!   claim is refused with the row unchanged, rather than handing out indexes that would have
//!   to be wrapped or cut.
//!
//! `max_limit_id` is a ceiling on the whole ID, as in the original service, where it exists so
//! that IDs fit a protocol's range (an unsigned 32-bit column: 4,294,967,295). The original
//! wraps (`id % maxLimitId`), which repeats IDs; this refuses instead. An ID is
//! `index << 14 | shard << 8 | app_id` ([`ID_ALLOC_INDEX_SHIFT`]), so a shard's largest index
//! is `(max_limit_id - (shard << 8 | app_id)) >> 14` ([`index_ceiling`]).
//!
//! Every value reaches the database as a bind parameter, never spliced into SQL text.

pub(crate) mod claim;

use crate::error::{Result, StoreError, StoreFuture};
use crate::session::Session;
use crate::store::{Sql, Store, with_pool};
use crate::url::Dialect;
use crate::worker_node::{check_len, check_step};

/// Shards per app: each app has one `id_alloc` row for each shard `0..ID_ALLOC_SHARDS`.
pub const ID_ALLOC_SHARDS: u8 = 64;
/// The step an app gets unless told otherwise (the original service's default).
pub const DEFAULT_ID_ALLOC_STEP: i64 = 1000;
/// The largest step of an app. A segment is pushed to Redis in one command and every shard of
/// every app holds up to about one step in memory there: 64 shards × 100,000 numbers is a few
/// hundred MB per app at most.
pub const MAX_ID_ALLOC_STEP: i64 = 100_000;
/// The longest app name, in characters (`VARCHAR(128)`).
pub const MAX_APP_NAME_LEN: usize = 128;
/// How far an index is shifted in a sharded ID: above 6 bits of shard and 8 bits of app id.
/// The SQL of a claim computes a shard's ceiling with it (`/ 16384`).
pub const ID_ALLOC_INDEX_SHIFT: u32 = 14;

/// The largest index shard `shard_id` of app `app_id` may hand out so that its IDs stay at or
/// below `max_limit_id` (an ID is `index << 14 | shard << 8 | app_id`): `i64::MAX` when
/// `max_limit_id` is 0 (no limit), and -1 when not even index 0 fits.
///
/// ```
/// use uidgen_store::index_ceiling;
/// assert_eq!(index_ceiling(0, 7, 3), i64::MAX);
/// // IDs below 2^32: index 262,143 of shard 63, app 255 is 4,294,967,295 itself.
/// assert_eq!(index_ceiling(u32::MAX.into(), 255, 63), 262_143);
/// assert_eq!(262_143_u64 << 14 | 63 << 8 | 255, u64::from(u32::MAX));
/// assert_eq!(index_ceiling(100, 7, 3), -1, "shard 3 of app 7 starts at ID 775");
/// ```
pub fn index_ceiling(max_limit_id: i64, app_id: u8, shard_id: u8) -> i64 {
    if max_limit_id <= 0 {
        return i64::MAX;
    }
    let low = i64::from(shard_id) << 8 | i64::from(app_id);
    if max_limit_id < low {
        return -1;
    }
    (max_limit_id - low) >> ID_ALLOC_INDEX_SHIFT
}

/// What [`Store::create_or_update_app`] writes to each of an app's 64 rows.
///
/// ```
/// let spec = uidgen_store::AppSpec::new(7, "orders");
/// assert_eq!((spec.step, spec.max_limit_id), (1000, 0));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSpec {
    /// The app id, the low 8 bits of its IDs.
    pub app_id: u8,
    /// A name for people: 1 to 128 characters.
    pub name: String,
    /// How many indexes one claim takes: 1 to [`MAX_ID_ALLOC_STEP`].
    pub step: i64,
    /// The largest ID the app may hand out (every shard's IDs stay at or below it); 0 for no
    /// limit but the caller's. See [`index_ceiling`].
    pub max_limit_id: i64,
    /// Free text; `None` keeps what an existing app has.
    pub description: Option<String>,
}

impl AppSpec {
    /// An app with the default step and no limit.
    pub fn new(app_id: u8, name: impl Into<String>) -> Self {
        Self {
            app_id,
            name: name.into(),
            step: DEFAULT_ID_ALLOC_STEP,
            max_limit_id: 0,
            description: None,
        }
    }

    /// Check the name, step and limit; [`StoreError::InvalidInput`] names the field.
    pub fn validate(&self) -> Result<()> {
        if self.name.trim().is_empty() {
            return Err(StoreError::InvalidInput("app name is empty".to_owned()));
        }
        check_len("app name", &self.name, MAX_APP_NAME_LEN)?;
        if self.name.chars().any(char::is_control) {
            return Err(StoreError::InvalidInput(
                "app name has control characters".to_owned(),
            ));
        }
        check_step(self.step, MAX_ID_ALLOC_STEP)?;
        if self.max_limit_id < 0 {
            return Err(StoreError::InvalidInput(format!(
                "max_limit_id {} is negative; use 0 for no limit, or the largest ID to hand out",
                self.max_limit_id
            )));
        }
        if let Some(description) = &self.description {
            crate::leaf_alloc::validate_description(description)?;
        }
        Ok(())
    }
}

/// One shard's row of an app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppShard {
    /// The shard, `0..64`.
    pub shard_id: u8,
    /// The highest index handed out (the original's meaning); for an
    /// [`exclusive`](Self::exclusive) row, the next index to hand out.
    pub max_id: i64,
    /// Whether the row is listed in `id_alloc_exclusive`: written by a uidgen from before
    /// migration 0010, whose `max_id` is an exclusive end.
    pub exclusive: bool,
    /// How far one claim moves `max_id`.
    pub step: i64,
    /// The largest ID the app may hand out; 0: no limit. See [`index_ceiling`].
    pub max_limit_id: i64,
}

impl AppShard {
    /// The first index the shard's next claim hands out: `max_id + 1`, or `max_id` for an
    /// [`exclusive`](Self::exclusive) row.
    ///
    /// ```
    /// let shard = uidgen_store::AppShard {
    ///     shard_id: 3,
    ///     max_id: 1000,
    ///     exclusive: false,
    ///     step: 1000,
    ///     max_limit_id: 0,
    /// };
    /// assert_eq!(shard.next_index(), 1001);
    /// assert_eq!(uidgen_store::AppShard { exclusive: true, ..shard }.next_index(), 1000);
    /// ```
    pub fn next_index(&self) -> i64 {
        self.max_id.saturating_add(i64::from(!self.exclusive))
    }
}

/// An app as stored: its shared fields and its shard rows (normally all 64).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdAllocApp {
    /// The app id.
    pub app_id: u8,
    /// The app's name.
    pub app_name: String,
    /// Free text.
    pub description: Option<String>,
    /// When the app was created, ms since the Unix epoch (its oldest row).
    pub create_time_ms: Option<i64>,
    /// When a row of the app last changed, ms since the Unix epoch.
    pub update_time_ms: Option<i64>,
    /// The shard rows, by shard id.
    pub shards: Vec<AppShard>,
}

/// Create a shard row with `max_id` 0 (the original's init script: nothing handed out yet, the
/// first claim hands out index 1), or change the app-wide fields of an existing one (its
/// `max_id` is never touched: lowering it would repeat indexes).
const UPSERT_SHARD: Sql = Sql {
    sqlite: "INSERT INTO id_alloc (app_id, shard_id, app_name, max_id, step, description,
                                   max_limit_id, create_time, update_time)
             VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
             ON CONFLICT (app_id, shard_id) DO UPDATE SET app_name = excluded.app_name,
                 step = excluded.step,
                 description = COALESCE(excluded.description, id_alloc.description),
                 max_limit_id = excluded.max_limit_id,
                 update_time = CURRENT_TIMESTAMP",
    mysql: "INSERT INTO id_alloc (app_id, shard_id, app_name, max_id, step, description,
                                  max_limit_id, create_time, update_time)
            VALUES (?, ?, ?, 0, ?, ?, ?, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
            ON DUPLICATE KEY UPDATE app_name = VALUES(app_name), step = VALUES(step),
                description = COALESCE(VALUES(description), description),
                max_limit_id = VALUES(max_limit_id),
                update_time = CURRENT_TIMESTAMP",
    postgres: "INSERT INTO id_alloc (app_id, shard_id, app_name, max_id, step, description,
                                     max_limit_id, create_time, update_time)
               VALUES ($1, $2, $3, 0, $4, $5, $6, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)
               ON CONFLICT (app_id, shard_id) DO UPDATE SET app_name = EXCLUDED.app_name,
                   step = EXCLUDED.step,
                   description = COALESCE(EXCLUDED.description, id_alloc.description),
                   max_limit_id = EXCLUDED.max_limit_id,
                   update_time = CURRENT_TIMESTAMP",
};

/// Every row an app id and shard id of the layout can name (hand-made rows outside 0-255 /
/// 0-63 are ignored), ordered by app and shard.
const LIST_ROWS: Sql = Sql {
    sqlite: "SELECT app_id, shard_id, app_name, max_id, step, max_limit_id, description,
                    CAST(strftime('%s', create_time) AS INTEGER) * 1000 AS create_time_ms,
                    CAST(strftime('%s', update_time) AS INTEGER) * 1000 AS update_time_ms,
                    (SELECT COUNT(*) FROM id_alloc_exclusive x
                     WHERE x.app_id = id_alloc.app_id AND x.shard_id = id_alloc.shard_id)
             FROM id_alloc
             WHERE app_id BETWEEN 0 AND 255 AND shard_id BETWEEN 0 AND 63
               AND (?1 < 0 OR app_id = ?1)
             ORDER BY app_id, shard_id",
    mysql: "SELECT CAST(app_id AS SIGNED), CAST(shard_id AS SIGNED), app_name, max_id,
                   CAST(step AS SIGNED), max_limit_id, description,
                   CAST(UNIX_TIMESTAMP(create_time) * 1000 AS SIGNED) AS create_time_ms,
                   CAST(UNIX_TIMESTAMP(update_time) * 1000 AS SIGNED) AS update_time_ms,
                   (SELECT COUNT(*) FROM id_alloc_exclusive x
                    WHERE x.app_id = id_alloc.app_id AND x.shard_id = id_alloc.shard_id)
            FROM id_alloc
            WHERE app_id BETWEEN 0 AND 255 AND shard_id BETWEEN 0 AND 63
              AND (? < 0 OR app_id = ?)
            ORDER BY app_id, shard_id",
    postgres: "SELECT CAST(app_id AS BIGINT), CAST(shard_id AS BIGINT), app_name, max_id,
                      CAST(step AS BIGINT), max_limit_id, description,
                      CAST(EXTRACT(EPOCH FROM create_time) * 1000 AS BIGINT) AS create_time_ms,
                      CAST(EXTRACT(EPOCH FROM update_time) * 1000 AS BIGINT) AS update_time_ms,
                      (SELECT COUNT(*) FROM id_alloc_exclusive x
                       WHERE x.app_id = id_alloc.app_id AND x.shard_id = id_alloc.shard_id)
               FROM id_alloc
               WHERE app_id BETWEEN 0 AND 255 AND shard_id BETWEEN 0 AND 63
                 AND (CAST($1 AS BIGINT) < 0 OR app_id = $1)
               ORDER BY app_id, shard_id",
};

const DELETE_APP: Sql = Sql {
    sqlite: "DELETE FROM id_alloc WHERE app_id = ?1",
    mysql: "DELETE FROM id_alloc WHERE app_id = ?",
    postgres: "DELETE FROM id_alloc WHERE app_id = $1",
};

/// The app's rows leave `id_alloc_exclusive` with it: rows created again under its id start
/// the original's way, at 0.
const DELETE_APP_EXCLUSIVE: Sql = Sql {
    sqlite: "DELETE FROM id_alloc_exclusive WHERE app_id = ?1",
    mysql: "DELETE FROM id_alloc_exclusive WHERE app_id = ?",
    postgres: "DELETE FROM id_alloc_exclusive WHERE app_id = $1",
};

/// A row as selected by `LIST_ROWS`.
type RowTuple = (
    i64,
    i64,
    String,
    i64,
    i64,
    i64,
    Option<String>,
    Option<i64>,
    Option<i64>,
    i64,
);

/// Group rows (ordered by app, then shard) into apps.
fn group_rows(rows: Vec<RowTuple>) -> Result<Vec<IdAllocApp>> {
    let mut apps: Vec<IdAllocApp> = Vec::new();
    for (
        app_id,
        shard_id,
        app_name,
        max_id,
        step,
        max_limit_id,
        description,
        created,
        updated,
        exclusive,
    ) in rows
    {
        // The query keeps both within 0-255 and 0-63; a row outside would be a broken query.
        let (Ok(app_id), Ok(shard_id)) = (u8::try_from(app_id), u8::try_from(shard_id)) else {
            return Err(StoreError::InvalidInput(format!(
                "id_alloc row with app_id {app_id} and shard_id {shard_id} is out of range"
            )));
        };
        let shard = AppShard {
            shard_id,
            max_id,
            exclusive: exclusive > 0,
            step,
            max_limit_id,
        };
        match apps.last_mut() {
            Some(app) if app.app_id == app_id => {
                app.create_time_ms = min_some(app.create_time_ms, created);
                app.update_time_ms = app.update_time_ms.max(updated);
                app.shards.push(shard);
            }
            _ => apps.push(IdAllocApp {
                app_id,
                app_name,
                description,
                create_time_ms: created,
                update_time_ms: updated,
                shards: vec![shard],
            }),
        }
    }
    Ok(apps)
}

fn min_some(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl Store {
    /// Create app `spec.app_id` with its 64 shard rows (each at `max_id` 1), or change the
    /// name, step, limit and (when `Some`) description of every row of an existing app, in one
    /// transaction; shards' `max_id` are never changed. Returns the app as stored.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::AppSpec;
    /// let app = store
    ///     .create_or_update_app(&AppSpec { step: 500, ..AppSpec::new(7, "orders") })
    ///     .await?;
    /// assert_eq!(app.shards.len(), 64);
    /// assert_eq!((app.shards[0].max_id, app.shards[0].step), (1, 500));
    /// # Ok(()) }
    /// ```
    pub fn create_or_update_app<'a>(&'a self, spec: &'a AppSpec) -> StoreFuture<'a, IdAllocApp> {
        Box::pin(async move {
            spec.validate()?;
            let dialect = self.dialect();
            let action = "creating or updating an app";
            let app_id = i32::from(spec.app_id);
            with_pool!(self, pool, {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                for shard_id in 0..ID_ALLOC_SHARDS {
                    sqlx::query(UPSERT_SHARD.get(dialect))
                        .bind(app_id)
                        .bind(i32::from(shard_id))
                        .bind(spec.name.as_str())
                        .bind(spec.step)
                        .bind(spec.description.as_deref())
                        .bind(spec.max_limit_id)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err(action, e))?;
                }
                tx.commit().await.map_err(|e| self.err(action, e))?;
            });
            self.app(spec.app_id)
                .await?
                .ok_or(StoreError::UnknownAppShard {
                    app_id: spec.app_id,
                    shard_id: 0,
                })
        })
    }

    /// Every app with its shard rows, by app id.
    pub fn apps(&self) -> StoreFuture<'_, Vec<IdAllocApp>> {
        Box::pin(async move { self.app_rows(-1).await })
    }

    /// One app with its shard rows, if it exists.
    pub fn app(&self, app_id: u8) -> StoreFuture<'_, Option<IdAllocApp>> {
        Box::pin(async move { Ok(self.app_rows(i64::from(app_id)).await?.into_iter().next()) })
    }

    /// The rows of `app_id`, or of every app when it is negative.
    async fn app_rows(&self, app_id: i64) -> Result<Vec<IdAllocApp>> {
        let dialect = self.dialect();
        let rows: Vec<RowTuple> = with_pool!(self, pool, {
            let query = sqlx::query_as(LIST_ROWS.get(dialect)).bind(app_id);
            // MySQL's positional `?` needs the value once per occurrence.
            let query = if dialect == Dialect::MySql {
                query.bind(app_id)
            } else {
                query
            };
            query
                .fetch_all(pool)
                .await
                .map_err(|e| self.err("reading id_alloc apps", e))?
        });
        group_rows(rows)
    }

    /// Delete every row of `app_id`; how many were deleted.
    ///
    /// Deleting forgets the shards' `max_id`: an app created again with the same id starts at
    /// index 1 and would repeat IDs the old one handed out. Do not re-create an app whose IDs
    /// are still in use, or raise its `max_id` above the old one by hand first.
    pub fn delete_app(&self, app_id: u8) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let dialect = self.dialect();
            let action = "deleting an app";
            let app = i32::from(app_id);
            let affected = with_pool!(self, pool, {
                let mut tx = Session::begin_write(pool, dialect)
                    .await
                    .map_err(|e| self.err(action, e))?;
                let deleted = sqlx::query(DELETE_APP.get(dialect))
                    .bind(app)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.err(action, e))?
                    .rows_affected();
                sqlx::query(DELETE_APP_EXCLUSIVE.get(dialect))
                    .bind(app)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| self.err(action, e))?;
                tx.commit().await.map_err(|e| self.err(action, e))?;
                deleted
            });
            Ok(affected)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::AppSpec;

    #[test]
    fn app_specs_are_checked_field_by_field() {
        let good = AppSpec::new(1, "orders");
        good.validate().unwrap_or_else(|e| panic!("{e}"));
        let cases = [
            (AppSpec::new(1, " "), "app name is empty"),
            (
                AppSpec {
                    step: 0,
                    ..good.clone()
                },
                "step 0 is out of range; use 1 to 100000",
            ),
            (
                AppSpec {
                    max_limit_id: -1,
                    ..good.clone()
                },
                "max_limit_id -1 is negative",
            ),
            (
                AppSpec::new(1, "x".repeat(129)),
                "app name is 129 characters",
            ),
        ];
        for (spec, expected) in cases {
            let error = spec
                .validate()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(error.contains(expected), "{spec:?}: {error}");
        }
    }
}
