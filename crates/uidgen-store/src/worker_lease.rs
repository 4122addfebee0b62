//! The `worker_lease` table: which holder leases which worker id of which ID space, until when,
//! and up to which instant IDs were issued under it. Every change is one conditional statement
//! whose affected row count says whether it won, so racing processes get exactly one winner.
//! Renewal and release match the holder string, which carries a random per-claim token, so two
//! processes configured with the same holder name never act on each other's lease.
//!
//! A row is keyed by (space, worker id) (migration 0008): IDs of two spaces may be equal, so a
//! worker id need only be unique within its space, and each space leases its ids apart. The
//! default space ([`DEFAULT_SPACE`]) holds every row written before, every exact lease (static,
//! machine, statefulset) and every client fallback lease; only the leased assigner of a named
//! space (`[spaces.<name>]`) writes others. `worker_lease_before_spaces` keeps, per worker id
//! leased before 0008, where every ID stamped with it then lies below
//! ([`Store::lease_floors_before_spaces`]).

use std::collections::HashMap;

use crate::error::{Result, StoreError, StoreFuture};
use crate::store::{Sql, Store, run_sql};

/// The ID space of the top-level generator, and of every lease that names none: exact leases,
/// client fallback leases, and rows written before leases were kept per space.
pub const DEFAULT_SPACE: &str = "default";

/// The longest space name the `worker_lease.space` column holds.
pub const MAX_SPACE_LEN: usize = 32;

/// A `worker_lease` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLeaseRow {
    /// The ID space the worker id is leased in ([`DEFAULT_SPACE`] unless a named space's).
    pub space: String,
    /// The leased worker id.
    pub worker_id: u64,
    /// Who holds it (the configured name, `#`, and a random token unique to the claim); empty
    /// when released.
    pub holder: String,
    /// Expiry, ms since the Unix epoch (0 when released).
    pub expires_at_ms: u64,
    /// Every ID issued under this worker id in this space was stamped before this instant.
    pub last_issued_ms: u64,
}

const SELECT_LEASES: Sql = Sql {
    sqlite: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease
             WHERE space = ?1 AND worker_id <= ?2 ORDER BY worker_id",
    mysql: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease
            WHERE space = ? AND worker_id <= ? ORDER BY worker_id",
    postgres: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease
               WHERE space = $1 AND worker_id <= $2 ORDER BY worker_id",
};

/// Claim a never-used worker id of a space; a concurrent insert of the same id makes this a
/// no-op.
const INSERT_LEASE: Sql = Sql {
    sqlite: "INSERT OR IGNORE INTO worker_lease (space, worker_id, holder, expires_at_ms, \
             last_issued_ms, updated)
             VALUES (?1, ?2, ?3, ?4, 0, CURRENT_TIMESTAMP)",
    mysql: "INSERT IGNORE INTO worker_lease (space, worker_id, holder, expires_at_ms, \
            last_issued_ms, updated)
            VALUES (?, ?, ?, ?, 0, CURRENT_TIMESTAMP)",
    postgres: "INSERT INTO worker_lease (space, worker_id, holder, expires_at_ms, last_issued_ms, \
               updated)
               VALUES ($1, $2, $3, $4, 0, CURRENT_TIMESTAMP)
               ON CONFLICT (space, worker_id) DO NOTHING",
};

/// Take over an expired (or released) lease; a live one is left alone.
const TAKE_OVER_LEASE: Sql = Sql {
    sqlite: "UPDATE worker_lease SET holder = ?1, expires_at_ms = ?2, updated = CURRENT_TIMESTAMP
             WHERE space = ?3 AND worker_id = ?4 AND expires_at_ms < ?5",
    mysql: "UPDATE worker_lease SET holder = ?, expires_at_ms = ?, updated = CURRENT_TIMESTAMP
            WHERE space = ? AND worker_id = ? AND expires_at_ms < ?",
    postgres: "UPDATE worker_lease SET holder = $1, expires_at_ms = $2, updated = CURRENT_TIMESTAMP
               WHERE space = $3 AND worker_id = $4 AND expires_at_ms < $5",
};

const SELECT_LEASE: Sql = Sql {
    sqlite: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease \
             WHERE space = ?1 AND worker_id = ?2",
    mysql: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease \
            WHERE space = ? AND worker_id = ?",
    postgres: "SELECT space, worker_id, holder, expires_at_ms, last_issued_ms FROM worker_lease \
               WHERE space = $1 AND worker_id = $2",
};

/// Hand a lease from the holder string a crashed life of this host recorded in its cache to
/// the restart's own, extending it and raising the issued-until instant. Matches the old
/// holder, so exactly one of several restarts (two copies of one cache) wins, and none once the
/// lease was taken over or released. A renewal is a hand-over from the holder to itself.
///
/// Neither the expiry nor the issued-until instant ever moves backwards: a holder whose clock
/// stepped back must not shorten the expiry a successor waits for, while its generator still
/// stamps up to the expiry written before.
const HAND_OVER_LEASE: Sql = Sql {
    sqlite: "UPDATE worker_lease SET holder = ?1, expires_at_ms = MAX(expires_at_ms, ?2),
             last_issued_ms = MAX(last_issued_ms, ?3), updated = CURRENT_TIMESTAMP
             WHERE space = ?4 AND worker_id = ?5 AND holder = ?6",
    mysql: "UPDATE worker_lease SET holder = ?, expires_at_ms = GREATEST(expires_at_ms, ?),
            last_issued_ms = GREATEST(last_issued_ms, ?), updated = CURRENT_TIMESTAMP
            WHERE space = ? AND worker_id = ? AND holder = ?",
    postgres: "UPDATE worker_lease SET holder = $1, expires_at_ms = GREATEST(expires_at_ms, $2),
               last_issued_ms = GREATEST(last_issued_ms, $3), updated = CURRENT_TIMESTAMP
               WHERE space = $4 AND worker_id = $5 AND holder = $6",
};

/// Give our lease back, keeping the issued-until instant for the next holder.
const RELEASE_LEASE: Sql = Sql {
    sqlite: "UPDATE worker_lease SET holder = '', expires_at_ms = 0, \
             last_issued_ms = MAX(last_issued_ms, ?1), updated = CURRENT_TIMESTAMP
             WHERE space = ?2 AND worker_id = ?3 AND holder = ?4",
    mysql: "UPDATE worker_lease SET holder = '', expires_at_ms = 0, \
            last_issued_ms = GREATEST(last_issued_ms, ?), updated = CURRENT_TIMESTAMP
            WHERE space = ? AND worker_id = ? AND holder = ?",
    postgres: "UPDATE worker_lease SET holder = '', expires_at_ms = 0, \
               last_issued_ms = GREATEST(last_issued_ms, $1), updated = CURRENT_TIMESTAMP
               WHERE space = $2 AND worker_id = $3 AND holder = $4",
};

/// Where the IDs stamped with each worker id of a range before leases were kept per space lie
/// below (migration 0008).
const SELECT_FLOORS_BEFORE_SPACES: Sql = Sql {
    sqlite: "SELECT worker_id, floor_ms FROM worker_lease_before_spaces
             WHERE worker_id >= ?1 AND worker_id <= ?2",
    mysql: "SELECT worker_id, floor_ms FROM worker_lease_before_spaces
            WHERE worker_id >= ? AND worker_id <= ?",
    postgres: "SELECT worker_id, floor_ms FROM worker_lease_before_spaces
               WHERE worker_id >= $1 AND worker_id <= $2",
};

fn to_db(what: &str, value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| StoreError::InvalidInput(format!("{what} {value} does not fit a BIGINT")))
}

/// The key of a lease row: `space`, checked, and `worker_id` as stored.
fn lease_key(space: &str, worker_id: u64) -> Result<i64> {
    check_space(space)?;
    to_db("worker id", worker_id)
}

fn from_db(value: i64) -> u64 {
    // Negative values are never written; read one as 0 (the distant past).
    u64::try_from(value).unwrap_or(0)
}

/// `space` as a lease key: 1 to [`MAX_SPACE_LEN`] characters.
///
/// ```
/// use uidgen_store::{DEFAULT_SPACE, check_space};
/// assert!(check_space(DEFAULT_SPACE).is_ok());
/// assert!(check_space("").is_err());
/// assert!(check_space(&"s".repeat(33)).is_err());
/// ```
pub fn check_space(space: &str) -> Result<()> {
    let len = space.chars().count();
    if len == 0 || len > MAX_SPACE_LEN {
        return Err(StoreError::InvalidInput(format!(
            "the ID space {space:?} must be 1 to {MAX_SPACE_LEN} characters (it is {len})"
        )));
    }
    Ok(())
}

type LeaseTuple = (String, i64, String, i64, i64);

fn row_of((space, worker_id, holder, expires_at_ms, last_issued_ms): LeaseTuple) -> WorkerLeaseRow {
    WorkerLeaseRow {
        space,
        worker_id: from_db(worker_id),
        holder,
        expires_at_ms: from_db(expires_at_ms),
        last_issued_ms: from_db(last_issued_ms),
    }
}

impl Store {
    /// Every `worker_lease` row of `space` with a worker id up to `max_worker_id`, by worker id.
    pub fn lease_rows<'a>(
        &'a self,
        space: &'a str,
        max_worker_id: u64,
    ) -> StoreFuture<'a, Vec<WorkerLeaseRow>> {
        Box::pin(async move {
            check_space(space)?;
            let max = to_db("worker id", max_worker_id)?;
            let rows: Vec<LeaseTuple> = run_sql!(
                self,
                fetch_all,
                query_as(SELECT_LEASES),
                [space, max],
                "reading worker leases"
            );
            Ok(rows.into_iter().map(row_of).collect())
        })
    }

    /// The lease row of one worker id of `space`.
    pub fn lease_row<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
    ) -> StoreFuture<'a, Option<WorkerLeaseRow>> {
        Box::pin(async move {
            let id = lease_key(space, worker_id)?;
            let row: Option<LeaseTuple> = run_sql!(
                self,
                fetch_optional,
                query_as(SELECT_LEASE),
                [space, id],
                "reading a worker lease"
            );
            Ok(row.map(row_of))
        })
    }

    /// Lease a never-used worker id of `space` to `holder` until `expires_at_ms`; `false` when
    /// a row for it already exists (someone else got there first).
    pub fn try_insert_lease<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
        holder: &'a str,
        expires_at_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let (id, expires) = (
                lease_key(space, worker_id)?,
                to_db("expiry", expires_at_ms)?,
            );
            let done = run_sql!(
                self,
                execute,
                query(INSERT_LEASE),
                [space, id, holder, expires],
                "claiming a new worker lease",
                then rows_affected
            );
            Ok(done == 1)
        })
    }

    /// Take over the lease of `worker_id` in `space` if it expired before `now_ms`; `true` for
    /// exactly one of several concurrent callers.
    pub fn try_take_over_lease<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
        holder: &'a str,
        expires_at_ms: u64,
        now_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let id = lease_key(space, worker_id)?;
            let (expires, now) = (to_db("expiry", expires_at_ms)?, to_db("time", now_ms)?);
            let done = run_sql!(
                self,
                execute,
                query(TAKE_OVER_LEASE),
                [holder, expires, space, id, now],
                "taking over a worker lease",
                then rows_affected
            );
            Ok(done == 1)
        })
    }

    /// Extend `holder`'s lease on `worker_id` in `space` to at least `expires_at_ms` (an
    /// expiry already higher stays) and record `issued_until_ms`; `false` when `holder` no
    /// longer holds it.
    pub fn renew_lease<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
        holder: &'a str,
        expires_at_ms: u64,
        issued_until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let holders = [holder, holder];
            let what = "renewing a worker lease";
            self.move_lease(
                space,
                worker_id,
                holders,
                expires_at_ms,
                issued_until_ms,
                what,
            )
            .await
        })
    }

    /// Hand `from`'s lease on `worker_id` in `space` to `to`: extend it to at least
    /// `expires_at_ms` and record `issued_until_ms`, in one statement that matches `from`;
    /// `false` when `from` no longer holds it (taken over, released, or handed to another
    /// restart first). For a restart that continues the lease its crashed life recorded in the
    /// local cache.
    pub fn hand_over_lease<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
        from: &'a str,
        to: &'a str,
        expires_at_ms: u64,
        issued_until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let what = "handing over a worker lease";
            self.move_lease(
                space,
                worker_id,
                [from, to],
                expires_at_ms,
                issued_until_ms,
                what,
            )
            .await
        })
    }

    /// [`HAND_OVER_LEASE`] from `holders[0]` to `holders[1]` (the same holder for a renewal);
    /// `what` names the change in an error.
    async fn move_lease(
        &self,
        space: &str,
        worker_id: u64,
        [from, to]: [&str; 2],
        expires_at_ms: u64,
        issued_until_ms: u64,
        what: &'static str,
    ) -> Result<bool> {
        let id = lease_key(space, worker_id)?;
        let expires = to_db("expiry", expires_at_ms)?;
        let issued = to_db("issued-until time", issued_until_ms)?;
        let done = run_sql!(
            self,
            execute,
            query(HAND_OVER_LEASE),
            [to, expires, issued, space, id, from],
            what,
            then rows_affected
        );
        Ok(done == 1)
    }

    /// Release `holder`'s lease on `worker_id` in `space`, recording `issued_until_ms`; `false`
    /// when `holder` no longer held it.
    pub fn release_lease<'a>(
        &'a self,
        space: &'a str,
        worker_id: u64,
        holder: &'a str,
        issued_until_ms: u64,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let id = lease_key(space, worker_id)?;
            let issued = to_db("issued-until time", issued_until_ms)?;
            let done = run_sql!(
                self,
                execute,
                query(RELEASE_LEASE),
                [issued, space, id, holder],
                "releasing a worker lease",
                then rows_affected
            );
            Ok(done == 1)
        })
    }

    /// For each worker id from `low` to `high` that was leased before leases were kept per
    /// space (migration 0008), the instant every ID stamped with it then lies before, in any
    /// space: the later of its lease's expiry and its recorded issued-until time at the
    /// migration. A named space takes such an id for the first time only once its clock passed
    /// it; the default space's rows carry it already.
    pub fn lease_floors_before_spaces(
        &self,
        low: u64,
        high: u64,
    ) -> StoreFuture<'_, HashMap<u64, u64>> {
        Box::pin(async move {
            let (low, high) = (to_db("worker id", low)?, to_db("worker id", high)?);
            let rows: Vec<(i64, i64)> = run_sql!(
                self,
                fetch_all,
                query_as(SELECT_FLOORS_BEFORE_SPACES),
                [low, high],
                "reading the worker leases from before spaces"
            );
            Ok(rows
                .into_iter()
                .map(|(id, floor)| (from_db(id), from_db(floor)))
                .collect())
        })
    }
}
