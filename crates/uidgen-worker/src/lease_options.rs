//! [`LeaseOptions`]: how a leased worker id is kept, and the one place where the two bounds a
//! successor depends on meet.
//!
//! A holder's last IDs may lie ahead of its clock: its cached generator borrows future units
//! (bounded by the lease's fence, [`LeaseOptions::max_borrow`]), the unit being stamped ends
//! up to one unit later, and with a cache the reserved-until mark is written a step further.
//! A successor (a takeover of a released id, a restart from the cache) waits until its clock
//! has passed that point, but at most [`LeaseOptions::max_takeover_wait`]. The borrowing bound
//! is derived from the wait, so that the wait always covers it: a restart right after a burst
//! waits for the burst's units instead of being refused for a clock that seems behind.
//! Any bound configured on the generator itself (`ring.max_borrow_seconds`) can only lower
//! the borrowing further, so the rule holds for every configured bound.

use std::path::PathBuf;
use std::time::Duration;

use uidgen_core::Layout;
use uidgen_core::clock::saturating_millis;

use crate::error::{Result, WorkerError};
use crate::mark::mark_step_ms;
use crate::range::WorkerIdRange;

/// The longest configured holder name: the `worker_lease.holder` column holds 128 characters,
/// and each claim appends `#` and a 16-hex-digit token.
pub const MAX_HOLDER_NAME_LEN: usize = 128 - 17;

/// The longest lease ttl (and cache reserve) accepted: a day. Longer values gain nothing and
/// would overflow the database's BIGINT columns near the end of time.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// How the store's `LeasedWorkerIdAssigner` leases.
///
/// ```
/// use std::time::Duration;
/// use uidgen_worker::LeaseOptions;
/// let options = LeaseOptions {
///     cache_path: Some("/var/lib/uidgen/worker.cache".into()),
///     ..Default::default()
/// };
/// assert_eq!(options.ttl, Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOptions {
    /// How long a lease lasts without renewal (default 30 s).
    pub ttl: Duration,
    /// Renew this often from a background task (default 10 s; must be shorter than `ttl`);
    /// `None` leaves renewal to the caller (the store's `LeaseGuard::renew`).
    pub heartbeat_interval: Option<Duration>,
    /// The longest a new holder waits for its clock to pass the previous holder's last issued
    /// time (or, restarting from the cache, its mark) before refusing (default 15 s, half the
    /// ttl; must be shorter than `ttl`). It also bounds how far the holder borrows
    /// ([`max_borrow`](Self::max_borrow)), so that a successor on the same clock never has to
    /// wait longer than this.
    pub max_takeover_wait: Duration,
    /// A local file caching the worker id, its holder string, the lease's expiry and a
    /// reserved-until mark, for start-up while the database is unreachable (default none).
    pub cache_path: Option<PathBuf>,
    /// With a cache: how long past its own expiry a lease stays recorded in the database, the
    /// window in which this host may restart on the cached id while the database is
    /// unreachable. Other processes wait that much longer to take over a crashed holder's id
    /// (default 60 s; ignored without a cache).
    pub cache_reserve: Duration,
    /// The holder's name (1 to [`MAX_HOLDER_NAME_LEN`] characters); default `<ip>/<pid>`.
    /// Each claim appends `#` and a random token, so two processes given the same name
    /// still hold distinct leases.
    pub holder: Option<String>,
    /// The worker ids to lease from (default `None`: `0-max`, every id of the layout).
    /// Registered in the store before a claim, so that other assigners on the same store keep
    /// out of it; every leased service on one store must use the same range.
    pub range: Option<WorkerIdRange>,
}

impl LeaseOptions {
    /// Options for leases of `ttl`, the timing derived from it: a heartbeat every third of the
    /// ttl (one lost renewal does not lose the lease), and a takeover wait of half of it, which
    /// lets the holder borrow up to a third of the ttl ([`max_borrow`](Self::max_borrow)) on
    /// every layout with units of at most a second. No cache, the default holder name, every
    /// id of the layout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_worker::LeaseOptions;
    /// let options = LeaseOptions::with_ttl(Duration::from_secs(60));
    /// assert_eq!(options.heartbeat_interval, Some(Duration::from_secs(20)));
    /// assert_eq!(options.max_takeover_wait, Duration::from_secs(30));
    /// assert_eq!(LeaseOptions::default(), LeaseOptions::with_ttl(Duration::from_secs(30)));
    /// ```
    pub fn with_ttl(ttl: Duration) -> Self {
        Self {
            ttl,
            heartbeat_interval: Some(ttl / 3),
            max_takeover_wait: ttl / 2,
            cache_path: None,
            cache_reserve: Duration::from_secs(60),
            holder: None,
            range: None,
        }
    }

    /// How far ahead of its clock a holder on `layout` may let a cached generator borrow:
    /// a third of the ttl (a burst then waits for the clock, never for a renewal), and no more
    /// than leaves [`max_takeover_wait`](Self::max_takeover_wait) room for the rest of the
    /// lead (`lead_beyond_borrow_ms`). The lease's fence reports
    /// it ([`uidgen_core::TimeFence::max_borrow_ms`]); a generator borrows at least one unit
    /// whatever it says, which [`validate_for`](Self::validate_for) accounts for.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::Layout;
    /// use uidgen_worker::LeaseOptions;
    /// let baidu = Layout::baidu_default()?; // units of a second
    /// // ttl 30 s, wait 15 s: a third of the ttl, 10 s.
    /// assert_eq!(LeaseOptions::default().max_borrow(&baidu), Duration::from_secs(10));
    /// // A 5 s wait leaves 5 s - 1 s (the unit being stamped) - 1 ms.
    /// let short = LeaseOptions { max_takeover_wait: Duration::from_secs(5), ..Default::default() };
    /// assert_eq!(short.max_borrow(&baidu), Duration::from_millis(3_999));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn max_borrow(&self, layout: &Layout) -> Duration {
        let third = saturating_millis(self.ttl) / 3;
        let room = saturating_millis(self.max_takeover_wait)
            .saturating_sub(self.lead_beyond_borrow_ms(layout));
        Duration::from_millis(third.min(room))
    }

    /// How far past its clock a holder's last issued time (or, with a cache, its mark) can lie
    /// beyond the units its generator borrowed: the unit being stamped ends up to one unit
    /// after the clock, the mark is written a step past the units it covers, and a successor
    /// waits until its clock is 1 ms *past* that time.
    fn lead_beyond_borrow_ms(&self, layout: &Layout) -> u64 {
        layout
            .unit()
            .millis()
            .saturating_add(self.mark_step_ms(layout))
            .saturating_add(1)
    }

    /// The step the cache's mark is kept ahead by; 0 without a cache.
    fn mark_step_ms(&self, layout: &Layout) -> u64 {
        if self.cache_path.is_some() {
            mark_step_ms(layout)
        } else {
            0
        }
    }

    /// The shortest [`max_takeover_wait`](Self::max_takeover_wait) that covers a holder on
    /// `layout` whose generator borrows the least it can: one unit (the cached generator always
    /// pads the unit after the clock's), the unit being stamped and, with a cache, the mark's
    /// step; with a cache also the two steps the mark's background refresh keeps ahead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::Layout;
    /// use uidgen_worker::LeaseOptions;
    /// let baidu = Layout::baidu_default()?;
    /// assert_eq!(LeaseOptions::default().min_takeover_wait(&baidu), Duration::from_millis(2_001));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn min_takeover_wait(&self, layout: &Layout) -> Duration {
        let one_unit = layout
            .unit()
            .millis()
            .saturating_add(self.lead_beyond_borrow_ms(layout));
        let refreshed = self
            .mark_step_ms(layout)
            .saturating_mul(2)
            .saturating_add(1);
        Duration::from_millis(one_unit.max(refreshed))
    }

    /// [`validate`](Self::validate), and for `layout`: the takeover wait covers the least a
    /// holder can run ahead of its clock ([`min_takeover_wait`](Self::min_takeover_wait)), so
    /// that with [`max_borrow`](Self::max_borrow) bounding the rest, a successor on the same
    /// clock is never refused for a burst its predecessor made. Else
    /// [`WorkerError::InvalidLeaseOptions`] naming both durations.
    ///
    /// Not required by the store's `LeasedWorkerIdAssigner::claim`: a shorter wait is safe, it only
    /// refuses some restarts (a wait of zero refuses every start that would have to wait).
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::Layout;
    /// use uidgen_worker::{LeaseOptions, WorkerError};
    /// let baidu = Layout::baidu_default()?;
    /// assert!(LeaseOptions::default().validate_for(&baidu).is_ok());
    /// let hasty = LeaseOptions::with_ttl(Duration::from_secs(3)); // waits 1.5 s
    /// assert!(matches!(hasty.validate_for(&baidu), Err(WorkerError::InvalidLeaseOptions(_))));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn validate_for(&self, layout: &Layout) -> Result<()> {
        self.validate()?;
        let needed = self.min_takeover_wait(layout);
        if self.max_takeover_wait < needed {
            return Err(WorkerError::InvalidLeaseOptions(format!(
                "max_takeover_wait {:?} is shorter than {needed:?}, the least a holder of layout \
                 `{}` runs ahead of its clock (one borrowed unit, the unit being stamped{}): a \
                 restart would be refused for its predecessor's last IDs; allow a longer wait",
                self.max_takeover_wait,
                layout.name(),
                if self.cache_path.is_some() {
                    " and the cache's mark step"
                } else {
                    ""
                },
            )));
        }
        Ok(())
    }

    /// `Ok` when these options can keep a lease: a positive ttl, a heartbeat and a takeover
    /// wait both shorter than it, and a holder name that fits; else
    /// [`WorkerError::InvalidLeaseOptions`]. The store's `LeasedWorkerIdAssigner::claim` checks this
    /// first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_worker::{LeaseOptions, WorkerError};
    /// assert!(LeaseOptions::default().validate().is_ok());
    /// let slow = LeaseOptions {
    ///     heartbeat_interval: Some(Duration::from_secs(30)),
    ///     ..Default::default()
    /// };
    /// assert!(matches!(slow.validate(), Err(WorkerError::InvalidLeaseOptions(_))));
    /// ```
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(WorkerError::InvalidLeaseOptions(reason));
        let ttl = self.ttl;
        if saturating_millis(ttl) == 0 {
            return invalid(format!("ttl {ttl:?} must be at least 1 ms"));
        }
        if ttl > MAX_LEASE_TTL {
            return invalid(format!(
                "ttl {ttl:?} is longer than the longest accepted, {MAX_LEASE_TTL:?}"
            ));
        }
        if self.cache_reserve > MAX_LEASE_TTL {
            return invalid(format!(
                "cache_reserve {:?} is longer than the longest accepted, {MAX_LEASE_TTL:?}",
                self.cache_reserve
            ));
        }
        if self.max_takeover_wait >= ttl {
            return invalid(format!(
                "max_takeover_wait {:?} must be shorter than the ttl {ttl:?}: the lease would \
                 lapse while waiting",
                self.max_takeover_wait
            ));
        }
        if let Some(interval) = self.heartbeat_interval {
            if interval.is_zero() {
                return invalid("heartbeat_interval must be positive".to_owned());
            }
            if interval >= ttl {
                return invalid(format!(
                    "heartbeat_interval {interval:?} must be shorter than the ttl {ttl:?}, or the \
                     lease lapses between renewals"
                ));
            }
        }
        if let Some(holder) = &self.holder {
            let len = holder.chars().count();
            if len == 0 || len > MAX_HOLDER_NAME_LEN {
                return invalid(format!(
                    "holder {holder:?} must be 1 to {MAX_HOLDER_NAME_LEN} characters (it is {len})"
                ));
            }
        }
        Ok(())
    }
}

impl Default for LeaseOptions {
    fn default() -> Self {
        Self::with_ttl(Duration::from_secs(30))
    }
}
