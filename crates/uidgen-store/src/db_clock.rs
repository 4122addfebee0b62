//! The database's clock, for a server that compares its own with it while it serves
//! (issue 33, "Clocks watched while serving").
//!
//! PostgreSQL answers `clock_timestamp()` (not `now()`, which is the transaction's start and
//! would be as old as a pooled connection's open transaction could make it), MySQL/MariaDB
//! `NOW(3)` (the statement's start: the statement is this one). SQLite is a library inside
//! this process: its clock *is* this host's, so there is nothing to compare and
//! [`Store::server_clock`] says so rather than answering the local time as if it were another.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::StoreFuture;
use crate::store::{Sql, Store, with_pool};
use crate::url::Dialect;

/// The database's time in whole milliseconds since the Unix epoch, read in one statement.
const SERVER_TIME_MS: Sql = Sql {
    // Never run: SQLite has no clock of its own (see `Store::server_clock`).
    sqlite: "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
    mysql: "SELECT CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
    postgres: "SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
};

/// One reading of the database's clock against this host's, measured as NTP does: the local
/// clock read just before (`t0`) and just after (`t1`) the query, the server's time `s` taken
/// somewhere between, so `offset = s - (t0 + t1) / 2` is off by at most `(t1 - t0) / 2` plus
/// the server's rounding to a millisecond.
///
/// ```
/// use uidgen_store::ClockReading;
/// // Asked at 1000 ms, answered at 1040 ms, the server said 3020 ms: 2 s ahead of us, give
/// // or take 21 ms.
/// let reading = ClockReading::measure(1000, 3020, 1040);
/// assert_eq!(reading.offset_ms, 2000);
/// assert_eq!(reading.uncertainty_ms, 21);
/// assert_eq!(reading.excess_ms(), 1979);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockReading {
    /// The database's clock minus this host's, in ms: positive when this host is behind.
    pub offset_ms: i64,
    /// How far the true offset may be from [`offset_ms`](Self::offset_ms) (half the round
    /// trip, plus the server's 1 ms resolution).
    pub uncertainty_ms: u64,
}

impl ClockReading {
    /// The reading of a server time `server_ms` answered between the local times `t0_ms` and
    /// `t1_ms` (a clock stepped back between them counts as no round trip).
    pub fn measure(t0_ms: i64, server_ms: i64, t1_ms: i64) -> Self {
        let round_trip = t1_ms.saturating_sub(t0_ms).max(0);
        let midpoint = t0_ms.saturating_add(round_trip / 2);
        Self {
            offset_ms: server_ms.saturating_sub(midpoint),
            uncertainty_ms: round_trip.unsigned_abs().div_ceil(2) + 1,
        }
    }

    /// How far the clocks are apart at least: `|offset|` less the uncertainty, never below 0.
    /// What thresholds are compared with, so a slow round trip never fences a good clock.
    pub fn excess_ms(&self) -> u64 {
        self.offset_ms
            .unsigned_abs()
            .saturating_sub(self.uncertainty_ms)
    }
}

/// This host's clock in ms since the Unix epoch (before 1970 reads as negative).
fn local_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

impl Store {
    /// Read the database server's clock against this host's ([`ClockReading`]); `Ok(None)` on
    /// SQLite, which runs inside this process and has no clock but this host's.
    ///
    /// A pooled connection is taken first, so the round trip timed is the query's alone.
    ///
    /// ```no_run
    /// # async fn demo() -> uidgen_store::Result<()> {
    /// let store = uidgen_store::Store::connect("postgres://postgres@127.0.0.1/test").await?;
    /// if let Some(reading) = store.server_clock().await? {
    ///     println!("the database is {} ms ahead of this host", reading.offset_ms);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn server_clock(&self) -> StoreFuture<'_, Option<ClockReading>> {
        Box::pin(async move {
            if self.dialect() == Dialect::Sqlite {
                return Ok(None);
            }
            let sql = SERVER_TIME_MS.get(self.dialect());
            with_pool!(self, pool, {
                let mut conn = pool
                    .acquire()
                    .await
                    .map_err(|e| self.err("reading the database's clock", e))?;
                let t0 = local_ms();
                let server: i64 = sqlx::query_scalar(sql)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|e| self.err("reading the database's clock", e))?;
                let t1 = local_ms();
                Ok(Some(ClockReading::measure(t0, server, t1)))
            })
        })
    }
}
