//! A history checker for IDs that must strictly increase in real time (issue 35's ordered
//! tags), the way Jepsen's checkers read a database's history: record every call's start,
//! end, server and answer from many clients, then verify the history, not the servers.
//!
//! The property, for calls that completed with IDs: **if call `a` returned before call `b`
//! started, every ID of `a` is below every ID of `b`** (linearizability of a counter that only
//! goes up, restricted to what a client can observe), and no ID is answered twice. Calls that
//! failed or whose answer was lost are left out: they constrain nothing (their IDs, if any were
//! taken, were never seen). Within one call a batch must be strictly increasing.
//!
//! The check is O(n log n) in the number of calls (plus sorting the IDs for repeats): sort the
//! calls by end and by start; sweep the starts in order while a pointer walks the ends that came
//! strictly before, keeping the largest ID answered by any call that had ended. A call whose
//! smallest ID is not above that maximum is an order violation, reported with the earlier call
//! that holds the maximum. Every pair `a` ended before `b` began is covered, since the maximum
//! ranges over exactly those `a`. Equal instants are concurrent (neither "before" the other).
//!
//! Times are [`Instant`]s of the one process that records the history (its clients' own
//! monotonic clock), so no clock comparison across machines enters the check.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use uidgen_testkit::history::{Call, check};
//!
//! let t = Instant::now();
//! let at = |ms| t + Duration::from_millis(ms);
//! let calls = vec![
//!     Call { start: at(0), end: at(10), server: 0, ids: vec![5] },
//!     Call { start: at(5), end: at(20), server: 1, ids: vec![3] }, // overlaps the first: fine
//!     Call { start: at(30), end: at(40), server: 2, ids: vec![4] }, // after both, yet below 5
//! ];
//! let report = check(&calls);
//! assert_eq!(report.violations.len(), 1);
//! assert_eq!((report.violations[0].earlier, report.violations[0].later), (0, 2));
//! assert!(report.repeats.is_empty());
//! ```

use std::time::Instant;

/// One completed call: when the client sent it and got its answer, which server answered,
/// and the IDs it answered (one, or a batch in the order given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// When the client sent the request.
    pub start: Instant,
    /// When the client had the whole answer.
    pub end: Instant,
    /// Which server answered (an index the test chooses), for the report.
    pub server: usize,
    /// The IDs answered.
    pub ids: Vec<i64>,
}

/// Call `later` began after call `earlier` had returned, yet got an ID not above all of
/// `earlier`'s (indices into the checked slice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Violation {
    /// The call that returned first.
    pub earlier: usize,
    /// The call that started after it.
    pub later: usize,
    /// The largest ID `earlier` answered.
    pub earlier_max: i64,
    /// The smallest ID `later` answered.
    pub later_min: i64,
}

/// What [`check`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Calls checked (those with at least one ID).
    pub calls: usize,
    /// IDs checked.
    pub ids: usize,
    /// Real-time order broken: one entry per later call (with the earlier call that holds the
    /// largest ID answered before it began).
    pub violations: Vec<Violation>,
    /// Calls whose own batch is not strictly increasing.
    pub unsorted_batches: Vec<usize>,
    /// IDs answered more than once (each listed once).
    pub repeats: Vec<i64>,
}

impl Report {
    /// No violation, no unsorted batch, no repeat.
    pub fn is_clean(&self) -> bool {
        self.violations.is_empty() && self.unsorted_batches.is_empty() && self.repeats.is_empty()
    }
}

/// Check a history; see the module docs for the property and the algorithm.
pub fn check(calls: &[Call]) -> Report {
    let answered: Vec<usize> = (0..calls.len())
        .filter(|&i| !calls[i].ids.is_empty())
        .collect();
    let bounds = |i: usize| {
        let ids = &calls[i].ids;
        let (min, max) = ids.iter().fold((i64::MAX, i64::MIN), |(lo, hi), &id| {
            (lo.min(id), hi.max(id))
        });
        (min, max)
    };
    let mut by_start = answered.clone();
    by_start.sort_by_key(|&i| calls[i].start);
    let mut by_end = answered.clone();
    by_end.sort_by_key(|&i| calls[i].end);

    let mut report = Report {
        calls: answered.len(),
        ids: answered.iter().map(|&i| calls[i].ids.len()).sum(),
        ..Report::default()
    };
    // The largest ID of the calls that ended strictly before the current start, and its call.
    let mut ended_max: Option<(i64, usize)> = None;
    let mut next_end = 0;
    for &later in &by_start {
        while let Some(&earlier) = by_end.get(next_end) {
            if calls[earlier].end >= calls[later].start {
                break;
            }
            let (_, max) = bounds(earlier);
            if ended_max.is_none_or(|(seen, _)| max > seen) {
                ended_max = Some((max, earlier));
            }
            next_end += 1;
        }
        let (later_min, _) = bounds(later);
        if let Some((earlier_max, earlier)) = ended_max
            && later_min <= earlier_max
        {
            report.violations.push(Violation {
                earlier,
                later,
                earlier_max,
                later_min,
            });
        }
        if calls[later].ids.windows(2).any(|w| w[0] >= w[1]) {
            report.unsorted_batches.push(later);
        }
    }
    report.unsorted_batches.sort_unstable();

    let mut all: Vec<i64> = answered
        .iter()
        .flat_map(|&i| calls[i].ids.iter().copied())
        .collect();
    all.sort_unstable();
    for pair in all.windows(2) {
        if pair[0] == pair[1] && report.repeats.last() != Some(&pair[0]) {
            report.repeats.push(pair[0]);
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn call(t: Instant, start: u64, end: u64, ids: &[i64]) -> Call {
        Call {
            start: t + Duration::from_millis(start),
            end: t + Duration::from_millis(end),
            server: 0,
            ids: ids.to_vec(),
        }
    }

    /// Every pair, the definition itself: O(n²), for comparison.
    fn brute_force(calls: &[Call]) -> Vec<usize> {
        let mut later: Vec<usize> = (0..calls.len())
            .filter(|&b| {
                (0..calls.len()).any(|a| {
                    !calls[a].ids.is_empty()
                        && !calls[b].ids.is_empty()
                        && calls[a].end < calls[b].start
                        && calls[b].ids.iter().min() <= calls[a].ids.iter().max()
                })
            })
            .collect();
        later.sort_unstable();
        later
    }

    #[test]
    fn overlapping_calls_may_answer_in_any_order_but_sequential_ones_may_not() {
        let t = Instant::now();
        let ok = [
            call(t, 0, 10, &[2]),
            call(t, 5, 15, &[1]),
            call(t, 20, 30, &[3, 4]),
            call(t, 30, 40, &[5]), // starts exactly when the one before ends: concurrent
        ];
        assert!(check(&ok).is_clean(), "{:?}", check(&ok));
        let bad = [call(t, 0, 10, &[7]), call(t, 11, 12, &[7])];
        let report = check(&bad);
        assert_eq!(report.repeats, vec![7]);
        assert_eq!(report.violations.len(), 1);
    }

    #[test]
    fn batches_out_of_order_failed_calls_and_repeats_are_reported() {
        let t = Instant::now();
        let calls = [
            call(t, 0, 10, &[1, 3, 2]),
            call(t, 20, 25, &[]), // a failed call: no constraint
            call(t, 30, 40, &[9, 9]),
        ];
        let report = check(&calls);
        assert_eq!(report.unsorted_batches, vec![0, 2]);
        assert_eq!(report.repeats, vec![9]);
        assert!(report.violations.is_empty());
        assert_eq!((report.calls, report.ids), (2, 5));
    }

    /// The sweep finds exactly the calls the pairwise definition finds, on 300 random
    /// histories of up to 40 calls with overlapping times and small ID ranges (so that
    /// violations are common).
    #[test]
    fn the_sweep_agrees_with_the_pairwise_definition() {
        let t = Instant::now();
        // A fixed LCG: reproducible, no dependency.
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |n: u64| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (state >> 33) % n
        };
        let mut with_violations = 0;
        for _ in 0..300 {
            let n = 1 + next(40);
            let calls: Vec<Call> = (0..n)
                .map(|_| {
                    let start = next(100);
                    let end = start + next(20);
                    let len = next(3);
                    let first = i64::try_from(next(60)).unwrap_or(0);
                    let ids: Vec<i64> = (0..len)
                        .map(|k| first + i64::try_from(k).unwrap_or(0))
                        .collect();
                    call(t, start, end, &ids)
                })
                .collect();
            let found: Vec<usize> = {
                let mut v: Vec<usize> = check(&calls).violations.iter().map(|v| v.later).collect();
                v.sort_unstable();
                v
            };
            assert_eq!(found, brute_force(&calls), "{calls:?}");
            with_violations += usize::from(!found.is_empty());
        }
        assert!(
            with_violations > 50,
            "too few histories with a violation: {with_violations}"
        );
    }
}
