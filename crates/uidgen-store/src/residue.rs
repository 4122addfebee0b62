//! [`Residue`]: Tinyid's `delta` and `remainder` of a `leaf_alloc` row, and the arithmetic that
//! picks a database's numbers out of a segment.
//!
//! A tag served from N databases (Tinyid's multi-database segments,
//! <https://github.com/didi/tinyid/wiki>) holds `delta = N` in every database and its own
//! `remainder` k (0 to N-1) in the k-th. Each database's `max_id` advances by `step` as usual;
//! of a segment `[max_id - step, max_id)` its service hands out only the numbers `x` with
//! `x mod N = k` (Tinyid's `SegmentId.init`/`nextId`: start at the first number of the remainder,
//! then add `delta`). Two databases of one group therefore never hand out the same number,
//! however far apart their `max_id`s drift, so the tag keeps serving from whichever answers.
//! Tinyid's segments are `(max_id - step, max_id]`; ours keep Leaf's `[max_id - step, max_id)`,
//! with the same filter.
//!
//! The defaults `(1, 0)` serve every number: a single-database tag is unchanged.
//!
//! The checked constructor, [`Residue::new`], is in `leaf_alloc` with the other checks of a
//! row's values: it answers a `StoreError`, whose variants name `Residue`, so this file stays
//! below the error type.

/// The most databases one group may have: a bound on typos, far above any real deployment
/// (Tinyid runs two).
pub const MAX_DELTA: i64 = 1024;

/// Which numbers of its segments a database hands out: those `≡ remainder (mod delta)`.
///
/// ```
/// use uidgen_store::Residue;
/// let odd = Residue::new(2, 1).unwrap();
/// assert_eq!(odd.first_at_or_after(10), Some(11));
/// assert_eq!(odd.count_in(10..20), 5); // 11, 13, 15, 17, 19
/// assert!(odd.contains(7) && !odd.contains(8));
/// assert!(Residue::new(2, 2).is_err()); // a remainder is below delta
/// assert_eq!(Residue::SINGLE.count_in(1..1001), 1000); // one database: every number
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Residue {
    /// How many databases serve the tag (Tinyid's `delta`); 1 to [`MAX_DELTA`].
    pub delta: i64,
    /// This database's numbers are `≡ remainder (mod delta)`; 0 to `delta - 1`.
    pub remainder: i64,
}

impl Default for Residue {
    fn default() -> Self {
        Self::SINGLE
    }
}

impl std::fmt::Display for Residue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} mod {}", self.remainder, self.delta)
    }
}

impl Residue {
    /// One database serving every number: `delta` 1, `remainder` 0 (the columns' defaults).
    pub const SINGLE: Self = Self {
        delta: 1,
        remainder: 0,
    };

    /// Whether `id` is one of this residue's numbers.
    pub fn contains(&self, id: i64) -> bool {
        id.rem_euclid(self.delta) == self.remainder
    }

    /// The first of this residue's numbers at or after `start`; `None` past `i64::MAX`.
    pub fn first_at_or_after(&self, start: i64) -> Option<i64> {
        // rem_euclid: 0 to delta - 1 for negative `start` too; the gap is below delta.
        let gap = (self.remainder - start.rem_euclid(self.delta)).rem_euclid(self.delta);
        start.checked_add(gap)
    }

    /// How many of this residue's numbers lie in `range`.
    pub fn count_in(&self, range: std::ops::Range<i64>) -> i64 {
        match self.first_at_or_after(range.start) {
            // (end - 1 - first) / delta + 1 numbers: first, first + delta, ... below end.
            Some(first) if first < range.end => (range.end - 1 - first) / self.delta + 1,
            _ => 0,
        }
    }

    /// Whether some number belongs to both residues (`r ≡ r' (mod gcd(d, d'))`). Two databases
    /// of one group (same delta, distinct remainders) never overlap.
    ///
    /// ```
    /// use uidgen_store::Residue;
    /// let (even, odd) = (Residue::new(2, 0).unwrap(), Residue::new(2, 1).unwrap());
    /// assert!(!even.overlaps(&odd));
    /// assert!(Residue::SINGLE.overlaps(&odd));
    /// assert!(Residue::new(4, 3).unwrap().overlaps(&odd));
    /// ```
    pub fn overlaps(&self, other: &Self) -> bool {
        let gcd = gcd(self.delta, other.delta);
        self.remainder.rem_euclid(gcd) == other.remainder.rem_euclid(gcd)
    }
}

fn gcd(mut a: i64, mut b: i64) -> i64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The arithmetic against a plain filter, over small segments at every offset.
    #[test]
    fn first_and_count_match_a_filter() {
        for delta in 1..=5 {
            for remainder in 0..delta {
                let residue = Residue::new(delta, remainder).unwrap();
                for start in -7..13 {
                    for len in 0..12 {
                        let wanted: Vec<i64> = (start..start + len)
                            .filter(|x| residue.contains(*x))
                            .collect();
                        assert_eq!(
                            residue.count_in(start..start + len),
                            i64::try_from(wanted.len()).unwrap()
                        );
                        if let Some(&first) = wanted.first() {
                            assert_eq!(residue.first_at_or_after(start), Some(first));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_top_of_the_id_space_does_not_overflow() {
        let odd = Residue {
            delta: 2,
            remainder: 1,
        };
        let even = Residue {
            delta: 2,
            remainder: 0,
        };
        assert_eq!(odd.first_at_or_after(i64::MAX), Some(i64::MAX));
        assert_eq!(even.first_at_or_after(i64::MAX), None);
        assert_eq!(even.count_in(i64::MAX - 3..i64::MAX), 2);
    }
}
