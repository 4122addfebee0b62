//! The compact form of an [`IdBatch`]: runs of consecutive IDs instead of a list.
//!
//! A cached generator fills its ring one time unit at a time, and on layouts with the sequence
//! in the lowest bits (baidu, snowflake, leaf) one unit's IDs are consecutive integers: a batch
//! of 100,000 baidu IDs is about 13 runs, some 200 bytes on the wire instead of 900 KB of
//! varints encoded and decoded one by one. The server writes the form
//! ([`IdBatch::from_ids`]); the client reads either form through [`IdBatch::into_checked`],
//! which refuses a batch that could hand out a wrong or repeated ID.
//!
//! Invariants a checked batch holds:
//! - every run has at least one ID and its last ID fits in 64 bits;
//! - runs follow each other in increasing order without overlapping, and the first run
//!   starts above the last listed ID: no ID of the runs repeats another of the batch;
//! - the batch holds at most the number of IDs asked for.

use crate::v1::{IdBatch, IdRun};

/// Why a client refuses a batch of IDs: the server that sent it is faulty.
///
/// ```
/// use uidgen_proto::v1::{IdBatch, IdRun};
/// use uidgen_proto::BatchError;
///
/// let batch = IdBatch { ids: vec![], runs: vec![IdRun { first: 7, count: 0 }] };
/// assert_eq!(batch.into_checked(10).unwrap_err(), BatchError::EmptyRun { first: 7 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BatchError {
    /// A run with no ID in it.
    #[error("a run of IDs from {first} holds no ID (count 0)")]
    EmptyRun {
        /// The run's first ID.
        first: u64,
    },
    /// A run whose last ID does not fit in 64 bits.
    #[error("the run of {count} IDs from {first} goes past the largest 64-bit ID")]
    RunOverflows {
        /// The run's first ID.
        first: u64,
        /// Its count.
        count: u32,
    },
    /// A run that starts at or below an ID the batch already holds (overlapping or out of
    /// order): some ID could repeat.
    #[error("a run starts at {first}, not above {previous}, an ID the batch already holds")]
    NotIncreasing {
        /// The highest ID before the run.
        previous: u64,
        /// The run's first ID.
        first: u64,
    },
    /// More IDs than the request asked for.
    #[error("the batch holds more than the {asked} IDs asked for")]
    TooMany {
        /// How many IDs the request asked for.
        asked: u64,
    },
}

impl IdBatch {
    /// A batch of `ids` (in increasing order, as a generator issues them): as runs when
    /// `runs` is set and runs are the smaller form, else as the plain list.
    ///
    /// ```
    /// use uidgen_proto::v1::{IdBatch, IdRun};
    ///
    /// let batch = IdBatch::from_ids(vec![10, 11, 12, 40, 41], true);
    /// assert!(batch.ids.is_empty());
    /// assert_eq!(batch.runs, [IdRun { first: 10, count: 3 }, IdRun { first: 40, count: 2 }]);
    /// // A client that did not ask for runs gets the list, whatever the IDs.
    /// assert_eq!(IdBatch::from_ids(vec![10, 11], false).ids, [10, 11]);
    /// ```
    pub fn from_ids(ids: Vec<u64>, runs: bool) -> Self {
        // A run costs some 15 bytes to a listed ID's 9: runs pay only when they average two
        // IDs or more (Vesta's layouts, worker in the lowest bits, have runs of one).
        match runs.then(|| to_runs(&ids, ids.len() / 2)).flatten() {
            Some(runs) => Self { ids: vec![], runs },
            None => Self { ids, runs: vec![] },
        }
    }

    /// The batch's IDs, checked: refused when a run is empty or overflows, when runs overlap
    /// or go backwards, or when it holds more than the `asked` IDs. Listed IDs are taken as
    /// the server sent them (only their number is checked), as before runs existed.
    ///
    /// ```
    /// use uidgen_proto::v1::{IdBatch, IdRun};
    ///
    /// let batch = IdBatch { ids: vec![3], runs: vec![IdRun { first: 8, count: 2 }] };
    /// let checked = batch.into_checked(3)?;
    /// assert_eq!(checked.len(), 3);
    /// assert_eq!(checked.into_iter().collect::<Vec<_>>(), [3, 8, 9]);
    /// # Ok::<(), uidgen_proto::BatchError>(())
    /// ```
    pub fn into_checked(self, asked: u64) -> Result<CheckedBatch, BatchError> {
        let mut len = self.ids.len() as u64;
        if len > asked {
            return Err(BatchError::TooMany { asked });
        }
        // The highest ID so far, which the next run must start above.
        // Listed IDs come in any order, so the highest of them, not the last: a run starting
        // above the last listed ID could still cover an earlier, larger one.
        let mut previous = self.ids.iter().copied().max();
        for run in &self.runs {
            let IdRun { first, count } = *run;
            if count == 0 {
                return Err(BatchError::EmptyRun { first });
            }
            let Some(run_last) = first.checked_add(u64::from(count) - 1) else {
                return Err(BatchError::RunOverflows { first, count });
            };
            if let Some(previous) = previous.filter(|&previous| first <= previous) {
                return Err(BatchError::NotIncreasing { previous, first });
            }
            len += u64::from(count);
            if len > asked {
                return Err(BatchError::TooMany { asked });
            }
            previous = Some(run_last);
        }
        Ok(CheckedBatch {
            first: self
                .ids
                .first()
                .copied()
                .or_else(|| self.runs.first().map(|run| run.first)),
            last: if self.runs.is_empty() {
                self.ids.last().copied()
            } else {
                previous
            },
            len,
            ids: BatchIds {
                listed: self.ids.into_iter(),
                runs: self.runs.into_iter(),
                next: 0,
                left: 0,
            },
        })
    }
}

/// `ids` as runs of consecutive IDs, a run cut where its count would pass `u32::MAX`; `None`
/// as soon as it takes more than `most` runs (the list is then the smaller form), so a batch
/// that is not worth it costs one short pass and no large allocation.
fn to_runs(ids: &[u64], most: usize) -> Option<Vec<IdRun>> {
    let mut runs: Vec<IdRun> = Vec::new();
    for &id in ids {
        if let Some(run) = runs.last_mut() {
            // One past the run's last ID (None: the run ends at u64::MAX).
            let after = run.first.checked_add(u64::from(run.count));
            if run.count < u32::MAX && after == Some(id) {
                run.count += 1;
                continue;
            }
            // Runs must increase, or the client refuses the batch: IDs out of order (a
            // generator that hands out a newer unit before an older one) go as the list.
            if after.is_none_or(|after| id < after) {
                return None;
            }
        }
        if runs.len() == most {
            return None;
        }
        runs.push(IdRun {
            first: id,
            count: 1,
        });
    }
    Some(runs)
}

/// A batch that passed [`IdBatch::into_checked`]: its size, ends and IDs.
#[derive(Debug, Clone)]
pub struct CheckedBatch {
    first: Option<u64>,
    last: Option<u64>,
    len: u64,
    ids: BatchIds,
}

impl CheckedBatch {
    /// How many IDs it holds.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when it holds no ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Its first ID (the first listed, else the first run's).
    pub fn first(&self) -> Option<u64> {
        self.first
    }

    /// Its last ID (the last run's end, else the last listed).
    pub fn last(&self) -> Option<u64> {
        self.last
    }
}

impl IntoIterator for CheckedBatch {
    type Item = u64;
    type IntoIter = BatchIds;

    fn into_iter(self) -> BatchIds {
        self.ids
    }
}

/// The IDs of a [`CheckedBatch`], in order: the listed ones, then each run's.
#[derive(Debug, Clone)]
pub struct BatchIds {
    listed: std::vec::IntoIter<u64>,
    runs: std::vec::IntoIter<IdRun>,
    /// The current run's next ID, and how many of it are left.
    next: u64,
    left: u32,
}

impl Iterator for BatchIds {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        if self.left == 0 {
            if let Some(id) = self.listed.next() {
                return Some(id);
            }
            let run = self.runs.next()?;
            self.next = run.first;
            self.left = run.count;
        }
        let id = self.next;
        self.left -= 1;
        // Wrapping: a run ending at u64::MAX steps past it only after its last ID is out.
        self.next = id.wrapping_add(1);
        Some(id)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let runs: u64 = self
            .runs
            .as_slice()
            .iter()
            .map(|r| u64::from(r.count))
            .sum();
        let left = self.listed.len() as u64 + u64::from(self.left) + runs;
        let left = usize::try_from(left).unwrap_or(usize::MAX);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(first: u64, count: u32) -> IdRun {
        IdRun { first, count }
    }

    fn runs(runs: Vec<IdRun>) -> IdBatch {
        IdBatch { ids: vec![], runs }
    }

    #[test]
    fn consecutive_ids_travel_as_runs_and_come_back_the_same() {
        let ids: Vec<u64> = (100..108).chain(200..203).chain([u64::MAX]).collect();
        let batch = IdBatch::from_ids(ids.clone(), true);
        assert_eq!(batch.runs, [run(100, 8), run(200, 3), run(u64::MAX, 1)]);
        let checked = batch.into_checked(12).unwrap();
        assert_eq!(
            (checked.first(), checked.last()),
            (Some(100), Some(u64::MAX))
        );
        assert_eq!(checked.into_iter().collect::<Vec<_>>(), ids);
    }

    #[test]
    fn scattered_ids_stay_a_list_even_when_runs_are_asked_for() {
        let ids = vec![1, 3, 5, 7, 8];
        let batch = IdBatch::from_ids(ids.clone(), true);
        assert!(batch.runs.is_empty());
        assert_eq!(batch.ids, ids);
    }

    #[test]
    fn ids_out_of_order_go_as_the_list_the_client_takes_as_sent() {
        // A newer unit before an older one: as runs, the client would refuse the batch.
        let ids: Vec<u64> = (200..210).chain(100..110).collect();
        let batch = IdBatch::from_ids(ids.clone(), true);
        assert!(batch.runs.is_empty());
        assert_eq!(batch.ids, ids);
        let repeated = IdBatch::from_ids(vec![5, 6, 7, 7, 8, 9], true);
        assert_eq!(repeated.ids, [5, 6, 7, 7, 8, 9]);
        assert_eq!(repeated.into_checked(6).unwrap().len(), 6);
    }

    #[test]
    fn a_run_covering_any_listed_id_is_refused_not_only_the_last() {
        let batch = IdBatch {
            ids: vec![100, 5],
            runs: vec![run(50, 60)], // 50..=109 covers the listed 100
        };
        assert_eq!(
            batch.into_checked(62).unwrap_err(),
            BatchError::NotIncreasing {
                previous: 100,
                first: 50
            }
        );
    }

    #[test]
    fn a_listed_batch_reads_as_before() {
        let batch = IdBatch {
            ids: vec![5, 9, 2],
            runs: vec![],
        };
        let checked = batch.into_checked(3).unwrap();
        assert_eq!(checked.len(), 3);
        assert_eq!(checked.into_iter().collect::<Vec<_>>(), [5, 9, 2]);
    }

    #[test]
    fn a_run_ending_at_the_largest_id_is_accepted_one_past_it_is_not() {
        let ok = runs(vec![run(u64::MAX - 1, 2)]).into_checked(2).unwrap();
        assert_eq!(ok.into_iter().collect::<Vec<_>>(), [u64::MAX - 1, u64::MAX]);
        let err = runs(vec![run(u64::MAX - 1, 3)])
            .into_checked(3)
            .unwrap_err();
        assert_eq!(
            err,
            BatchError::RunOverflows {
                first: u64::MAX - 1,
                count: 3
            }
        );
    }

    #[test]
    fn an_empty_run_is_refused() {
        let err = runs(vec![run(1, 1), run(5, 0)])
            .into_checked(9)
            .unwrap_err();
        assert_eq!(err, BatchError::EmptyRun { first: 5 });
    }

    #[test]
    fn overlapping_or_backward_runs_are_refused() {
        let overlap = runs(vec![run(10, 5), run(14, 1)])
            .into_checked(9)
            .unwrap_err();
        assert_eq!(
            overlap,
            BatchError::NotIncreasing {
                previous: 14,
                first: 14
            }
        );
        let backward = runs(vec![run(10, 1), run(3, 1)])
            .into_checked(9)
            .unwrap_err();
        assert_eq!(
            backward,
            BatchError::NotIncreasing {
                previous: 10,
                first: 3
            }
        );
        let below_listed = IdBatch {
            ids: vec![20],
            runs: vec![run(20, 1)],
        };
        assert!(matches!(
            below_listed.into_checked(9),
            Err(BatchError::NotIncreasing { .. })
        ));
    }

    #[test]
    fn more_ids_than_asked_are_refused_in_either_form() {
        let listed = IdBatch {
            ids: vec![1, 2, 3],
            runs: vec![],
        };
        assert_eq!(
            listed.into_checked(2).unwrap_err(),
            BatchError::TooMany { asked: 2 }
        );
        let big = runs(vec![run(1, u32::MAX), run(1 << 40, u32::MAX)]);
        assert_eq!(
            big.into_checked(u64::from(u32::MAX)).unwrap_err(),
            BatchError::TooMany {
                asked: u64::from(u32::MAX)
            }
        );
    }

    #[test]
    fn size_hint_counts_what_is_left() {
        let mut ids = runs(vec![run(1, 3), run(10, 2)])
            .into_checked(5)
            .unwrap()
            .into_iter();
        assert_eq!(ids.size_hint(), (5, Some(5)));
        ids.next();
        assert_eq!(ids.size_hint(), (4, Some(4)));
    }
}
