//! The `worker_id_range` table: which worker ids each assigner sharing a store may hand out.
//!
//! The disposable, leased and static assigners draw from one worker-id space without knowing
//! about each other (a disposable row id 3 and a leased id 3 are the same worker id). Each
//! therefore registers the [`WorkerIdRange`] it hands ids from, with
//! [`Store::register_worker_range`], before it takes an id. Invariants:
//!
//! - The recorded ranges of different assigners never overlap: a registration that would
//!   overlap is refused ([`StoreError::WorkerRangeConflict`]) and records nothing.
//! - An assigner has one range per store: every service of it must register the same one
//!   ([`StoreError::WorkerRangeChanged`] otherwise). A row changes only by hand, because
//!   changing it is only safe once every service of that assigner has been reconfigured.
//! - Registrations are serialised across processes (see [`Store::register_worker_range`]), so
//!   two overlapping ranges registered at the same moment cannot both be recorded.
//!
//! These are also the ranges Vesta's embedded/server machine-id split needs.

use std::fmt;
use std::str::FromStr;

use sqlx::Connection;
use uidgen_core::Layout;

use crate::error::{Result, StoreError};
use crate::store::{BEGIN_WRITE, Sql, Store, run_sql, with_pool};
use crate::url::Dialect;
use crate::worker_node::check_len;

/// The longest assigner name the `worker_id_range.assigner` column holds.
const MAX_ASSIGNER_NAME_LEN: usize = 32;

/// How long a registration waits on MySQL/MariaDB for another one to finish.
const MYSQL_LOCK_WAIT_SECS: i32 = 30;

/// An inclusive range of worker ids, `low..=high`, with `low <= high`.
///
/// Written and parsed as `"LO-HI"` (also read as Rust's `"LO..=HI"`; a single `"N"` is the
/// range of one id), as in the `worker.range` configuration key. `"LO-max"` reaches up to
/// whatever the layout's largest worker id is: the assigners' default ranges are of this kind,
/// so a service that changes its layout still registers the same range.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_store::WorkerIdRange;
/// let range: WorkerIdRange = "100-199".parse()?;
/// assert_eq!((range.low(), range.high(), range.count()), (100, 199, 100));
/// assert!(range.contains(150) && !range.contains(200));
/// assert_eq!(range.to_string(), "100-199");
/// assert_eq!("7".parse::<WorkerIdRange>()?, WorkerIdRange::new(7, 7)?);
/// assert!("199-100".parse::<WorkerIdRange>().is_err());
///
/// let layout = Layout::snowflake()?; // worker ids 0 to 1023
/// assert_eq!(WorkerIdRange::full(&layout).to_string(), "0-1023");
/// let rest: WorkerIdRange = "512-max".parse()?;
/// assert_eq!(rest, WorkerIdRange::from_low(512));
/// assert_eq!(rest.within(&layout)?.to_string(), "512-1023");
/// # Ok::<(), uidgen_store::StoreError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerIdRange {
    /// The lowest worker id in the range.
    low: u64,
    /// The highest worker id in the range (inclusive); never below `low`, never above
    /// [`WorkerIdRange::MAX`], which stands for "the layout's maximum".
    high: u64,
}

impl WorkerIdRange {
    /// The largest worker id of any layout (a 63-bit worker field), which is also the largest
    /// a BIGINT column holds. A range ending here ends at the layout's maximum, written `max`.
    pub const MAX: u64 = i64::MAX.unsigned_abs();

    /// `low..=high`; [`StoreError::InvalidWorkerRange`] when `low > high` or `high` is past
    /// [`MAX`](Self::MAX).
    pub fn new(low: u64, high: u64) -> Result<Self> {
        let invalid = |reason: String| StoreError::InvalidWorkerRange {
            input: format!("{low}-{high}"),
            reason,
        };
        if low > high {
            return Err(invalid(
                "the low end is above the high end; write LO-HI with LO <= HI".to_owned(),
            ));
        }
        if high > Self::MAX {
            return Err(invalid(format!(
                "no layout has worker ids above {}; write LO-max for \"up to the layout's \
                 maximum\"",
                Self::MAX
            )));
        }
        Ok(Self { low, high })
    }

    /// `low` up to the layout's largest worker id, whatever the layout (`"LO-max"`).
    /// A `low` past [`MAX`](Self::MAX) is clamped to it.
    pub fn from_low(low: u64) -> Self {
        Self {
            low: low.min(Self::MAX),
            high: Self::MAX,
        }
    }

    /// Every worker id of `layout`: `0..=layout.max_worker_id()`.
    pub fn full(layout: &Layout) -> Self {
        Self {
            low: 0,
            high: layout.max_worker_id().min(Self::MAX),
        }
    }

    /// The lowest worker id in the range.
    pub fn low(self) -> u64 {
        self.low
    }

    /// The highest worker id in the range (inclusive); [`MAX`](Self::MAX) for a range that
    /// reaches the layout's maximum (see [`within`](Self::within)).
    pub fn high(self) -> u64 {
        self.high
    }

    /// How many worker ids the range holds.
    pub fn count(self) -> u64 {
        // high <= MAX < u64::MAX, so this cannot overflow.
        self.high - self.low + 1
    }

    /// Whether `worker_id` lies in the range.
    pub fn contains(self, worker_id: u64) -> bool {
        (self.low..=self.high).contains(&worker_id)
    }

    /// Whether the two ranges share at least one worker id.
    ///
    /// ```
    /// use uidgen_store::WorkerIdRange;
    /// let a = WorkerIdRange::new(0, 99)?;
    /// assert!(a.overlaps(WorkerIdRange::new(99, 120)?));
    /// assert!(!a.overlaps(WorkerIdRange::new(100, 120)?));
    /// assert!(a.overlaps(WorkerIdRange::from_low(50)));
    /// # Ok::<(), uidgen_store::StoreError>(())
    /// ```
    pub fn overlaps(self, other: Self) -> bool {
        self.low <= other.high && other.low <= self.high
    }

    /// The ids of the range that `layout`'s worker field holds: a `LO-max` range ends at the
    /// layout's maximum; any other range must fit entirely, else
    /// [`StoreError::WorkerRangeOutsideLayout`].
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_store::{StoreError, WorkerIdRange};
    /// let layout = Layout::snowflake()?; // worker ids 0 to 1023
    /// assert_eq!(WorkerIdRange::new(512, 1023)?.within(&layout)?.high(), 1023);
    /// assert_eq!(WorkerIdRange::from_low(512).within(&layout)?.high(), 1023);
    /// let error = WorkerIdRange::new(512, 1024)?.within(&layout).unwrap_err();
    /// assert!(matches!(error, StoreError::WorkerRangeOutsideLayout { max: 1023, .. }));
    /// assert!(WorkerIdRange::from_low(1024).within(&layout).is_err());
    /// # Ok::<(), StoreError>(())
    /// ```
    pub fn within(self, layout: &Layout) -> Result<Self> {
        let max = layout.max_worker_id();
        let high = if self.high == Self::MAX {
            max.min(Self::MAX)
        } else {
            self.high
        };
        if high > max || self.low > high {
            return Err(StoreError::WorkerRangeOutsideLayout { range: self, max });
        }
        Ok(Self {
            low: self.low,
            high,
        })
    }

    /// `Ok` when [`within`](Self::within) is.
    pub fn check_layout(self, layout: &Layout) -> Result<()> {
        self.within(layout).map(|_| ())
    }
}

impl fmt::Display for WorkerIdRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.high == Self::MAX {
            write!(f, "{}-max", self.low)
        } else {
            write!(f, "{}-{}", self.low, self.high)
        }
    }
}

impl FromStr for WorkerIdRange {
    type Err = StoreError;

    /// `"LO-HI"` (inclusive), `"LO-max"` or a single `"N"`; spaces around the parts are
    /// ignored.
    fn from_str(text: &str) -> Result<Self> {
        let invalid = |reason: &str| StoreError::InvalidWorkerRange {
            input: text.to_owned(),
            reason: reason.to_owned(),
        };
        let number = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| {
                invalid(
                    "expected LO-HI (e.g. 100-199), LO-max or a single worker id, in whole numbers \
                     from 0",
                )
            })
        };
        // `LO..=HI` too: Rust's inclusive range, as issue #9 writes `worker.range = "924..=1023"`.
        let range = match text.split_once("..=").or_else(|| text.split_once('-')) {
            Some((low, high)) if high.trim().eq_ignore_ascii_case("max") => {
                Ok(Self::from_low(number(low)?))
            }
            Some((low, high)) => Self::new(number(low)?, number(high)?),
            None => {
                let id = number(text)?;
                Self::new(id, id)
            }
        };
        // Name the text as it was written, not as the numbers were read.
        range.map_err(|error| match error {
            StoreError::InvalidWorkerRange { reason, .. } => invalid(&reason),
            other => other,
        })
    }
}

/// A `worker_id_range` row: the range an assigner registered on this store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRangeRow {
    /// The assigner's name, e.g. `"leased"`.
    pub assigner: String,
    /// Its worker ids.
    pub range: WorkerIdRange,
}

const SELECT_RANGES: Sql =
    Sql::same("SELECT assigner, low, high FROM worker_id_range ORDER BY low, assigner");

const INSERT_RANGE: Sql = Sql {
    sqlite: "INSERT INTO worker_id_range (assigner, low, high, updated)
             VALUES (?1, ?2, ?3, CURRENT_TIMESTAMP)",
    mysql: "INSERT INTO worker_id_range (assigner, low, high, updated)
            VALUES (?, ?, ?, CURRENT_TIMESTAMP)",
    postgres: "INSERT INTO worker_id_range (assigner, low, high, updated)
               VALUES ($1, $2, $3, CURRENT_TIMESTAMP)",
};

/// PostgreSQL, first statement of the transaction: EXCLUSIVE mode conflicts with itself (and
/// with every write), so registrations queue here until the one ahead commits; plain reads
/// elsewhere are not blocked. The lock ends with the transaction. Under READ COMMITTED the
/// SELECT that follows takes a fresh snapshot, so it sees the row just committed.
const POSTGRES_LOCK_RANGES: &str = "LOCK TABLE worker_id_range IN EXCLUSIVE MODE";

/// MySQL/MariaDB, before the transaction: a named lock per database (the name carries the
/// schema, as the migration lock does; MySQL refuses names over 64 characters). InnoDB's
/// `SELECT ... FOR UPDATE` would not serialise two registrations into an empty or gap-free
/// table: gap locks do not conflict with each other (the two inserts then deadlock), and under
/// READ COMMITTED there are none at all. `GET_LOCK` serialises whatever the isolation level.
/// It waits up to [`MYSQL_LOCK_WAIT_SECS`] (bound as the parameter) and answers 1 when granted,
/// 0 on timeout and NULL on error.
const MYSQL_LOCK_RANGES: &str =
    "SELECT GET_LOCK(CONCAT('uidgen_worker_range:', LEFT(COALESCE(DATABASE(), ''), 44)), ?)";

const MYSQL_UNLOCK_RANGES: &str =
    "SELECT RELEASE_LOCK(CONCAT('uidgen_worker_range:', LEFT(COALESCE(DATABASE(), ''), 44)))";

type RangeTuple = (String, i64, i64);

/// A stored row as a range; a row edited by hand into something that is not a range is an
/// error naming it, never silently read as another range.
fn row_of((assigner, low, high): RangeTuple) -> Result<WorkerRangeRow> {
    let bad = |reason: String| StoreError::InvalidWorkerRange {
        input: format!("worker_id_range row of assigner `{assigner}`: {low}-{high}"),
        reason,
    };
    let (Ok(low_id), Ok(high_id)) = (u64::try_from(low), u64::try_from(high)) else {
        return Err(bad("worker ids are never negative; fix the row".to_owned()));
    };
    let range = WorkerIdRange::new(low_id, high_id)
        .map_err(|_| bad("low is above high; fix the row".to_owned()))?;
    Ok(WorkerRangeRow { assigner, range })
}

fn to_db(value: u64) -> Result<i64> {
    i64::try_from(value)
        .map_err(|_| StoreError::InvalidInput(format!("worker id {value} does not fit a BIGINT")))
}

/// Whether `assigner` may record `range` next to `recorded`: `Ok(true)` when its row is still
/// to be inserted, `Ok(false)` when it is already there with this very range.
fn admit(assigner: &str, range: WorkerIdRange, recorded: &[WorkerRangeRow]) -> Result<bool> {
    let own = recorded.iter().find(|row| row.assigner == assigner);
    if let Some(own) = own
        && own.range != range
    {
        return Err(StoreError::WorkerRangeChanged {
            assigner: assigner.to_owned(),
            recorded: own.range,
            requested: range,
        });
    }
    // Checked even when our own row is already there: a row edited by hand may overlap.
    if let Some(other) = recorded
        .iter()
        .find(|row| row.assigner != assigner && row.range.overlaps(range))
    {
        return Err(StoreError::WorkerRangeConflict {
            assigner: assigner.to_owned(),
            range,
            other: other.assigner.clone(),
            other_range: other.range,
        });
    }
    Ok(own.is_none())
}

impl Store {
    /// Record that `assigner` hands out worker ids from `range`, refusing a range that
    /// overlaps another assigner's ([`StoreError::WorkerRangeConflict`]) or differs from the one
    /// this assigner already recorded ([`StoreError::WorkerRangeChanged`]). Registering the
    /// recorded range again is a no-op, so every start of every service registers.
    ///
    /// The read and the insert run in one transaction that serialises registrations across
    /// processes: SQLite's `BEGIN IMMEDIATE`, PostgreSQL's `LOCK TABLE ... IN EXCLUSIVE MODE`,
    /// MySQL/MariaDB's `GET_LOCK` (which fails with [`StoreError::WorkerRangeLock`] after 30 s).
    ///
    /// Cancel safety: cancelling leaves nothing recorded or a complete row; the transaction is
    /// rolled back, and on MySQL the connection holding the named lock is closed rather than
    /// returned to the pool, which ends the lock.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// use uidgen_store::{StoreError, WorkerIdRange};
    /// store.register_worker_range("leased", WorkerIdRange::new(0, 511)?).await?;
    /// store.register_worker_range("leased", WorkerIdRange::new(0, 511)?).await?; // the same: fine
    /// let overlapping = store
    ///     .register_worker_range("static", WorkerIdRange::new(500, 599)?)
    ///     .await;
    /// assert!(matches!(overlapping, Err(StoreError::WorkerRangeConflict { .. })));
    /// # Ok(()) }
    /// ```
    pub async fn register_worker_range(&self, assigner: &str, range: WorkerIdRange) -> Result<()> {
        if assigner.is_empty() {
            return Err(StoreError::InvalidInput(
                "an assigner name must not be empty".to_owned(),
            ));
        }
        check_len("assigner name", assigner, MAX_ASSIGNER_NAME_LEN)?;
        let (low, high) = (to_db(range.low)?, to_db(range.high)?);
        let dialect = self.dialect();
        with_pool!(self, pool, {
            let mut conn = pool
                .acquire()
                .await
                .map_err(|e| self.err("registering a worker id range", e))?;
            if dialect == Dialect::MySql {
                // The named lock belongs to the session: never hand the session back to the pool,
                // where it would keep the lock if this future were dropped before RELEASE_LOCK.
                conn.close_on_drop();
                let granted: Option<i64> = sqlx::query_scalar(MYSQL_LOCK_RANGES)
                    .bind(MYSQL_LOCK_WAIT_SECS)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|e| self.err("locking worker_id_range", e))?;
                if granted != Some(1) {
                    return Err(StoreError::WorkerRangeLock {
                        url: self.redacted_url().to_owned(),
                        reason: match granted {
                            Some(_) => format!(
                                "another registration held it for {MYSQL_LOCK_WAIT_SECS} s; start \
                                 again once it has finished"
                            ),
                            None => "the server answered NULL to GET_LOCK (out of memory or the \
                                     thread was killed)"
                                .to_owned(),
                        },
                    });
                }
            }
            let registered = async {
                let mut tx = conn
                    .begin_with(BEGIN_WRITE.get(dialect))
                    .await
                    .map_err(|e| self.err("locking worker_id_range", e))?;
                if dialect == Dialect::Postgres {
                    sqlx::query(POSTGRES_LOCK_RANGES)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err("locking worker_id_range", e))?;
                }
                let rows: Vec<RangeTuple> = sqlx::query_as(SELECT_RANGES.get(dialect))
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(|e| self.err("reading worker_id_range", e))?;
                let recorded = rows.into_iter().map(row_of).collect::<Result<Vec<_>>>()?;
                if admit(assigner, range, &recorded)? {
                    sqlx::query(INSERT_RANGE.get(dialect))
                        .bind(assigner)
                        .bind(low)
                        .bind(high)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| self.err("inserting a worker_id_range row", e))?;
                    tracing::info!(assigner, %range, url = %self.redacted_url(),
                        "registered a worker id range");
                }
                tx.commit()
                    .await
                    .map_err(|e| self.err("registering a worker id range", e))
            }
            .await;
            if dialect == Dialect::MySql {
                // Best effort: closing the connection (on drop) ends the lock anyway; releasing
                // it now lets a waiting registration go on at once.
                let _ = sqlx::query(MYSQL_UNLOCK_RANGES).execute(&mut *conn).await;
            }
            registered
        })
    }

    /// Every recorded worker id range, lowest first.
    ///
    /// ```no_run
    /// # async fn demo(store: uidgen_store::Store) -> uidgen_store::Result<()> {
    /// for row in store.worker_ranges().await? {
    ///     println!("{}: {}", row.assigner, row.range);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn worker_ranges(&self) -> Result<Vec<WorkerRangeRow>> {
        let rows: Vec<RangeTuple> = run_sql!(
            self,
            fetch_all,
            query_as(SELECT_RANGES),
            [],
            "reading worker_id_range"
        );
        rows.into_iter().map(row_of).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(low: u64, high: u64) -> WorkerIdRange {
        WorkerIdRange { low, high }
    }

    fn row(assigner: &str, low: u64, high: u64) -> WorkerRangeRow {
        WorkerRangeRow {
            assigner: assigner.to_owned(),
            range: range(low, high),
        }
    }

    #[test]
    fn parsing_accepts_lo_hi_lo_max_and_single_ids_and_names_the_input_otherwise() {
        assert_eq!(" 3 - 9 ".parse::<WorkerIdRange>().ok(), Some(range(3, 9)));
        assert_eq!("0".parse::<WorkerIdRange>().ok(), Some(range(0, 0)));
        assert_eq!(
            "924..=1023".parse::<WorkerIdRange>().ok(),
            Some(range(924, 1023))
        );
        let rest = "4000000-MAX".parse::<WorkerIdRange>().ok();
        assert_eq!(rest, Some(WorkerIdRange::from_low(4_000_000)));
        assert_eq!(rest.map(|r| r.to_string()).as_deref(), Some("4000000-max"));
        let too_high = format!("0-{}", WorkerIdRange::MAX + 1);
        for bad in [
            "", "-", "a-b", "-5", "5-", "1-2-3", "9-3", "1.5", "max", &too_high,
        ] {
            let error = bad.parse::<WorkerIdRange>().err();
            assert!(
                matches!(
                    &error,
                    Some(StoreError::InvalidWorkerRange { input, .. }) if input == bad
                ),
                "{bad:?}: {error:?}"
            );
        }
    }

    #[test]
    fn ranges_touching_at_one_id_overlap_and_adjacent_ones_do_not() {
        assert!(range(0, 5).overlaps(range(5, 9)));
        assert!(range(5, 9).overlaps(range(0, 5)));
        assert!(range(0, 9).overlaps(range(3, 4)));
        assert!(!range(0, 4).overlaps(range(5, 9)));
        assert!(WorkerIdRange::from_low(0).overlaps(WorkerIdRange::from_low(1)));
        assert!(!range(0, 0).overlaps(WorkerIdRange::from_low(1)));
        assert_eq!(WorkerIdRange::from_low(0).count(), WorkerIdRange::MAX + 1);
    }

    #[test]
    fn admit_inserts_a_new_range_accepts_the_same_and_refuses_changes_and_overlaps() {
        let recorded = [row("disposable", 1, 99), row("leased", 100, 199)];
        assert!(admit("static", range(200, 299), &recorded).is_ok_and(|insert| insert));
        assert!(admit("leased", range(100, 199), &recorded).is_ok_and(|insert| !insert));
        assert!(matches!(
            admit("leased", range(100, 150), &recorded),
            Err(StoreError::WorkerRangeChanged { .. })
        ));
        let error = admit("static", range(150, 250), &recorded).err();
        assert!(
            matches!(
                &error,
                Some(StoreError::WorkerRangeConflict { other, .. }) if other == "leased"
            ),
            "{error:?}"
        );
    }

    #[test]
    fn a_hand_edited_row_that_is_no_range_is_an_error_naming_it() {
        let error = row_of(("leased".to_owned(), 9, 3)).unwrap_err().to_string();
        assert!(error.contains("assigner `leased`: 9-3"), "{error}");
        assert!(row_of(("static".to_owned(), -1, 3)).is_err());
    }
}
