//! Sets of 64-bit IDs described bit by bit, for reasoning exactly about what two layouts can
//! issue ([`Layout::succession`](super::Layout::succession)).
//!
//! An [`IdSet`] is every `u64` whose fixed bits have the given values and whose bounded runs
//! of bits (a time field, or the whole ID under a highest issued ID) each read as a number in
//! an inclusive interval. The intersection of two such sets is again one (fixed bits merge, the
//! runs are kept side by side), so "can a new layout issue an ID an old one issued" is "is the
//! intersection empty", and "do the new IDs sort above" compares the smallest of one set with
//! the largest of the other.
//!
//! Invariant: every answer is exact for the set as described. The search goes through the 64
//! bit positions from the top, carrying for each run whether its bits so far equal its lower
//! bound's and its upper bound's (the digit-by-digit comparison of a number with two bounds);
//! a table of which of these states can still be completed makes the greedy smallest and
//! largest member, and any member, come out in 64 steps without backtracking.

/// One run of bits read as a number that must lie in `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounded {
    /// The run's lowest bit.
    pub shift: u32,
    /// The run's width (1 to 64).
    pub bits: u32,
    /// The least value the run may read as.
    pub lo: u64,
    /// The greatest value the run may read as.
    pub hi: u64,
}

impl Bounded {
    /// Whether bit `q` of an ID lies in the run.
    fn covers(&self, q: u32) -> bool {
        q >= self.shift && q - self.shift < self.bits
    }
}

/// The most runs a set carries: two layouts' time fields and a highest issued ID need three;
/// the search's states number `4^MAX_RUNS`.
const MAX_RUNS: usize = 4;

/// A set of IDs: fixed bits and bounded runs (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IdSet {
    /// The bits whose value is fixed.
    mask: u64,
    /// Their values (zero outside `mask`).
    value: u64,
    /// The bounded runs; runs may overlap each other and fixed bits.
    runs: Vec<Bounded>,
}

impl IdSet {
    /// Every `u64` whose bits in `mask` are those of `value`.
    pub fn fixed(mask: u64, value: u64) -> Self {
        Self {
            mask,
            value: value & mask,
            runs: Vec::new(),
        }
    }

    /// Fix the bits of `mask` to those of `value`; `None` if a bit is already fixed otherwise
    /// (the set is then empty).
    pub fn fix(mut self, mask: u64, value: u64) -> Option<Self> {
        let value = value & mask;
        if (self.value ^ value) & self.mask & mask != 0 {
            return None;
        }
        self.mask |= mask;
        self.value |= value;
        Some(self)
    }

    /// Bound a run of bits to `lo..=hi`.
    pub fn bound(mut self, run: Bounded) -> Self {
        debug_assert!(run.bits >= 1 && run.shift + run.bits <= 64, "{run:?}");
        debug_assert!(self.runs.len() < MAX_RUNS, "at most {MAX_RUNS} runs");
        self.runs.push(run);
        self
    }

    /// The IDs in both sets; `None` when their fixed bits disagree (no ID is in both).
    pub fn intersect(&self, other: &Self) -> Option<Self> {
        let mut both = self.clone().fix(other.mask, other.value)?;
        for run in &other.runs {
            both = both.bound(*run);
        }
        Some(both)
    }

    /// The smallest member, `None` when the set is empty.
    pub fn min(&self) -> Option<u64> {
        self.extreme(false)
    }

    /// The largest member, `None` when the set is empty.
    pub fn max(&self) -> Option<u64> {
        self.extreme(true)
    }

    /// Whether bit `q` may be `b` in state `state` (two flags per run: bit `2i` "run `i`'s
    /// bits so far equal its lower bound's", bit `2i + 1` "equal its upper bound's"), and the
    /// state after it.
    fn step(&self, q: u32, state: usize, b: u64) -> Option<usize> {
        if self.mask >> q & 1 == 1 && self.value >> q & 1 != b {
            return None;
        }
        let mut next = state;
        for (i, run) in self.runs.iter().enumerate().filter(|(_, r)| r.covers(q)) {
            let k = q - run.shift;
            let (lo_bit, hi_bit) = (run.lo >> k & 1, run.hi >> k & 1);
            let (at_lo, at_hi) = (1 << (2 * i), 1 << (2 * i + 1));
            if next & at_lo != 0 {
                if b < lo_bit {
                    return None;
                }
                if b > lo_bit {
                    next &= !at_lo;
                }
            }
            if next & at_hi != 0 {
                if b > hi_bit {
                    return None;
                }
                if b < hi_bit {
                    next &= !at_hi;
                }
            }
        }
        Some(next)
    }

    /// `open[p][state]`: whether the low `p` bits can still be chosen from `state` so that the
    /// ID is a member.
    fn completions(&self) -> Vec<Vec<bool>> {
        let states = 1 << (2 * self.runs.len());
        let mut open = vec![vec![true; states]];
        for p in 1..=64u32 {
            let below = &open[open.len() - 1];
            let row = (0..states)
                .map(|state| {
                    [0, 1]
                        .into_iter()
                        .any(|b| self.step(p - 1, state, b).is_some_and(|next| below[next]))
                })
                .collect();
            open.push(row);
        }
        open
    }

    /// The smallest (`largest == false`) or largest member.
    fn extreme(&self, largest: bool) -> Option<u64> {
        if self.runs.iter().any(|r| r.lo > r.hi) {
            return None;
        }
        let open = self.completions();
        // Every run starts level with both of its bounds.
        let mut state = (1 << (2 * self.runs.len())) - 1;
        if !open[64][state] {
            return None;
        }
        let order = if largest { [1, 0] } else { [0, 1] };
        let mut id = 0u64;
        for q in (0..64u32).rev() {
            let (b, next) = order.into_iter().find_map(|b| {
                self.step(q, state, b)
                    .filter(|&next| open[q as usize][next])
                    .map(|next| (b, next))
            })?;
            id |= b << q;
            state = next;
        }
        Some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Members of `set` among the values below 2^8 (the sets here fix every higher bit to 0).
    fn brute(set: &IdSet) -> Vec<u64> {
        (0..256u64)
            .filter(|&id| {
                id & set.mask == set.value
                    && set.runs.iter().all(|r| {
                        let v = id >> r.shift & (u64::MAX >> (64 - r.bits));
                        (r.lo..=r.hi).contains(&v)
                    })
            })
            .collect()
    }

    /// A small deterministic generator (xorshift), so the exhaustive sweep needs no crate.
    fn xorshift(seed: &mut u64) -> u64 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        *seed
    }

    #[test]
    fn smallest_and_largest_members_match_a_brute_force_count_of_8_bit_sets() {
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..4000 {
            let mask = xorshift(&mut seed) & 0xFF & xorshift(&mut seed);
            let value = xorshift(&mut seed);
            let mut set = IdSet::fixed(!0xFF, 0).fix(mask, value).unwrap();
            for _ in 0..(xorshift(&mut seed) % 4) {
                let shift = u32::try_from(xorshift(&mut seed) % 8).unwrap();
                let bits = 1 + u32::try_from(xorshift(&mut seed) % u64::from(8 - shift)).unwrap();
                let top = u64::MAX >> (64 - bits);
                let (a, b) = (xorshift(&mut seed) & top, xorshift(&mut seed) & top);
                set = set.bound(Bounded {
                    shift,
                    bits,
                    lo: a.min(b),
                    hi: a.max(b),
                });
            }
            let members = brute(&set);
            assert_eq!(set.min(), members.first().copied(), "{set:?}");
            assert_eq!(set.max(), members.last().copied(), "{set:?}");
        }
    }

    #[test]
    fn conflicting_fixed_bits_leave_no_intersection() {
        let ones = IdSet::fixed(0b11, 0b01);
        assert!(ones.clone().fix(0b110, 0b100).is_some());
        assert!(ones.fix(0b01, 0b00).is_none());
    }

    #[test]
    fn a_64_bit_run_bounds_the_whole_id() {
        let set = IdSet::fixed(0, 0).bound(Bounded {
            shift: 0,
            bits: 64,
            lo: 5,
            hi: u64::MAX - 3,
        });
        assert_eq!((set.min(), set.max()), (Some(5), Some(u64::MAX - 3)));
        let empty = IdSet::fixed(0, 0).bound(Bounded {
            shift: 0,
            bits: 64,
            lo: 6,
            hi: 5,
        });
        assert_eq!(empty.min(), None);
    }
}
