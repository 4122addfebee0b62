//! Moving a live ID space from one layout to another: can the new layout ever issue an ID the
//! old one issued, and do all of its IDs sort above the old ones? The proof
//! [`Layout::baidu_continued`] makes for Baidu's 2016 layout, for any pair.
//!
//! The reasoning is exact on bit fields ([`IdSet`]): what the old layout may have issued is
//! every ID whose time field lies between its first time value and the unit of its high mark
//! (or every ID up to its highest issued ID); what the new one may issue is every ID whose time
//! field lies from the unit of the switch to the end of its field. The worker, sequence,
//! datacenter and Vesta's method take any value (each server and channel stamps its own);
//! the sign and Vesta's version and type bits are the layout's own. Both sets are supersets of what was or will be issued, so the answer
//! errs one way only: "never equal" is said only when no ID is in both sets, "sorts above" only
//! when the smallest ID the new layout can issue is above the largest the old one can have.
//! When an ID is in both, the check names one, and both layouts' reading of it.

use super::id_set::{Bounded, IdSet};
use super::types::{Layout, low_mask};
use crate::error::{Result, UidError};
use crate::fields::FieldKind::{Sign, Time, Type, Version};

/// How far a live ID space has issued under its layout: what bounds the IDs it issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HighMark {
    /// Every ID was stamped before this instant, ms since the Unix epoch: a generator's
    /// [`issued_until_ms`](crate::UidGenerator::issued_until_ms), a lease row's recorded
    /// issued-until time or expiry, whichever is later.
    IssuedUntil(u64),
    /// The highest ID issued: every ID issued is at most this (as an unsigned number).
    HighestId(u64),
}

/// What [`Layout::succession`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Succession {
    /// The largest ID the old layout can have issued up to its high mark (an upper bound of
    /// the real one); `None` when it can have issued none (a high mark before its epoch).
    pub old_largest: Option<u64>,
    /// The smallest ID the new layout can issue from the switch on.
    pub new_smallest: u64,
    /// The largest ID the new layout can ever issue.
    pub new_largest: u64,
    /// The new layout's first time value from the switch on (units since its epoch).
    pub new_first_time: u64,
    /// The old layout's last time value up to its high mark, if it issued any.
    pub old_last_time: Option<u64>,
    /// An ID both layouts can issue, the smallest there is; `None` proves there is none.
    pub common: Option<u64>,
}

impl Succession {
    /// No ID the new layout issues from the switch on can equal one the old layout issued.
    pub fn never_equal(&self) -> bool {
        self.common.is_none()
    }

    /// Every ID the new layout issues from the switch on is above (as an unsigned 64-bit
    /// number) every ID the old layout issued.
    pub fn sorts_above(&self) -> bool {
        self.old_largest.is_none_or(|old| self.new_smallest > old)
    }

    /// Both hold: the switch is safe and keeps the IDs' order.
    pub fn is_safe(&self) -> bool {
        self.never_equal() && self.sorts_above()
    }

    /// Every ID the new layout can issue fits a signed 64-bit integer (Java `long`, SQL
    /// `BIGINT`); `false` for a continued layout, whose IDs have bit 63 set, so a signed
    /// reader sees them negative and below the old ones.
    pub fn fits_signed(&self) -> bool {
        i64::try_from(self.new_largest).is_ok()
    }
}

impl Layout {
    /// Every ID this layout can stamp with a time value in `first..=last` (see the module
    /// documentation for what the other fields may hold).
    fn stamped(&self, first: u64, last: u64) -> IdSet {
        let width_mask = low_mask(self.width);
        let mut fixed = (!width_mask, 0);
        // The sign and Vesta's version and type: the same in every ID of the layout (the
        // layout carries them, `layout.version` and `layout.type` in the configuration).
        for kind in [Sign, Version, Type] {
            if let Some(slot) = self.slots[kind.index()].filter(|s| s.bits > 0) {
                fixed.0 |= slot.max() << slot.shift;
                fixed.1 |= (self.defaults.get(kind) & slot.max()) << slot.shift;
            }
        }
        let set = IdSet::fixed(fixed.0, fixed.1);
        match self.slots[Time.index()] {
            Some(slot) => set.bound(Bounded {
                shift: slot.shift,
                bits: slot.bits,
                lo: first,
                hi: last.min(slot.max()),
            }),
            None => set,
        }
    }

    /// Check a move of a live ID space from this layout (whose IDs were issued up to `high`)
    /// to `next`, which issues from `switch_ms` on (ms since the Unix epoch: when the first
    /// server with `next` starts, or later): whether any ID `next` can issue equals one this
    /// layout issued, and whether all of them sort above this layout's. See the module
    /// documentation for how exact the answer is.
    ///
    /// `next` starts at the time unit holding `switch_ms`, or at its first time value if it
    /// continues a layout ([`Layout::continued`]), whichever is later. An error when `next`'s
    /// time field has run out by then ([`UidError::TimestampExhausted`]), or when `high` is an
    /// ID this layout cannot have made ([`UidError::MalformedId`]).
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_core::layout::HighMark;
    /// // Baidu's 2016 layout ran until 2024-11-20; `baidu_continued` goes on from there.
    /// let legacy = Layout::baidu_legacy()?;
    /// let end = legacy.runs_out_at_ms();
    /// let check = legacy.succession(HighMark::IssuedUntil(end), &Layout::baidu_continued()?, end)?;
    /// assert!(check.is_safe());
    /// assert!(!check.fits_signed(), "bit 63 is the new top time bit");
    /// // A fresh `baidu` from 2026 over the same space: its small IDs collide with old ones.
    /// let fresh = Layout::baidu("2026-01-01")?;
    /// let check = legacy.succession(HighMark::IssuedUntil(end), &fresh, 1_800_000_000_000)?;
    /// assert!(!check.sorts_above() && !check.never_equal());
    /// let id = check.common.expect("an ID both can issue");
    /// assert!(legacy.decode(id).is_ok() && fresh.decode(id).is_ok());
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn succession(&self, high: HighMark, next: &Layout, switch_ms: u64) -> Result<Succession> {
        let old = self.issued_under(high)?;
        let new_first_time = next.first_time_from(switch_ms)?;
        let new = next.stamped(new_first_time, next.max_time());
        // Neither is empty: `next`'s time range is not (checked above) and its other fields
        // take every value; a layout's own fields never conflict.
        let (Some(new_smallest), Some(new_largest)) = (new.min(), new.max()) else {
            return Err(UidError::MalformedLayout(
                "the new layout can issue no ID; this is a bug in the check",
            ));
        };
        let (old_set, old_last_time) =
            old.map_or((None, None), |(set, last)| (Some(set), Some(last)));
        let old_largest = old_set.as_ref().and_then(IdSet::max);
        let common = old_set
            .as_ref()
            .and_then(|set| set.intersect(&new))
            .and_then(|both| both.min());
        Ok(Succession {
            old_largest,
            new_smallest,
            new_largest,
            new_first_time,
            old_last_time: old_last_time.filter(|_| old_largest.is_some()),
            common,
        })
    }

    /// What this layout can have issued up to `high`, and its last time value; `None` when
    /// it can have issued nothing.
    fn issued_under(&self, high: HighMark) -> Result<Option<(IdSet, u64)>> {
        match high {
            HighMark::IssuedUntil(until_ms) => {
                // `until_ms` is exclusive: the last unit stamped holds the instant before it.
                let Some(last_ms) = until_ms.checked_sub(1).filter(|&ms| ms >= self.epoch_ms)
                else {
                    return Ok(None);
                };
                let last = ((last_ms - self.epoch_ms) / self.unit.millis()).min(self.max_time());
                if last < self.first_time {
                    return Ok(None);
                }
                Ok(Some((self.stamped(self.first_time, last), last)))
            }
            HighMark::HighestId(id) => {
                let last = self.decompose(id)?.time;
                let set = self
                    .stamped(self.first_time, self.max_time())
                    .bound(Bounded {
                        shift: 0,
                        bits: 64,
                        lo: 0,
                        hi: id,
                    });
                Ok(Some((set, last)))
            }
        }
    }

    /// The first time value this layout stamps from `switch_ms` on.
    fn first_time_from(&self, switch_ms: u64) -> Result<u64> {
        let units = switch_ms.saturating_sub(self.epoch_ms) / self.unit.millis();
        let first = units.max(self.first_time);
        self.check_time(first)?;
        Ok(first)
    }
}
