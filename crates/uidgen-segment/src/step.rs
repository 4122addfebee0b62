//! Leaf's dynamic step: size the next segment by how long the previous one lasted, so a busy
//! tag goes to the database less often and a quiet one wastes fewer IDs on restart.

/// The step for the next segment.
///
/// Leaf (`SegmentIDGenImpl.updateSegmentFromDb`): the previous segment lasted
/// - less than `segment_duration_ms`: double the step, but not above `max_step` (a step already
///   above `max_step`, because the table says so, is kept);
/// - less than twice that: keep it;
/// - longer: halve it.
///
/// The result is never below `min_step`, the step stored in the table. Leaf keeps the step when
/// halving would go below the table's; we clamp to the table's step instead, which also lifts a
/// dynamic step back up after an admin raised the stored one.
///
/// ```
/// use uidgen_segment::next_step;
/// const MIN: u64 = 60_000;
/// assert_eq!(next_step(1_000, 1_000, 1_000_000, 5 * MIN, 15 * MIN), 2_000); // busy: double
/// assert_eq!(next_step(2_000, 1_000, 1_000_000, 20 * MIN, 15 * MIN), 2_000); // keep
/// assert_eq!(next_step(2_000, 1_000, 1_000_000, 45 * MIN, 15 * MIN), 1_000); // quiet: halve
/// // Not below the table's step:
/// assert_eq!(next_step(1_000, 1_000, 1_000_000, 45 * MIN, 15 * MIN), 1_000);
/// assert_eq!(next_step(800_000, 1_000, 1_000_000, MIN, 15 * MIN), 1_000_000); // capped
/// ```
pub fn next_step(
    step: i64,
    min_step: i64,
    max_step: i64,
    lasted_ms: u64,
    segment_duration_ms: u64,
) -> i64 {
    let next = if lasted_ms < segment_duration_ms {
        step.saturating_mul(2).min(max_step).max(step)
    } else if lasted_ms < segment_duration_ms.saturating_mul(2) {
        step
    } else {
        step / 2
    };
    next.max(min_step).max(1)
}

#[cfg(test)]
mod tests {
    use super::next_step;

    const MIN: u64 = 60_000;
    const SEG: u64 = 15 * MIN;

    #[test]
    fn a_segment_used_up_in_under_fifteen_minutes_doubles_the_step() {
        assert_eq!(next_step(1_000, 1_000, 1_000_000, SEG - 1, SEG), 2_000);
    }

    #[test]
    fn a_segment_lasting_fifteen_to_thirty_minutes_keeps_the_step() {
        assert_eq!(next_step(4_000, 1_000, 1_000_000, SEG, SEG), 4_000);
        assert_eq!(next_step(4_000, 1_000, 1_000_000, 2 * SEG - 1, SEG), 4_000);
    }

    #[test]
    fn a_segment_lasting_thirty_minutes_or_more_halves_the_step_down_to_the_table_step() {
        assert_eq!(next_step(4_000, 1_000, 1_000_000, 2 * SEG, SEG), 2_000);
        assert_eq!(next_step(1_500, 1_000, 1_000_000, 2 * SEG, SEG), 1_000);
    }

    #[test]
    fn doubling_stops_at_max_step_and_a_larger_table_step_is_kept() {
        assert_eq!(next_step(600_000, 1_000, 1_000_000, 0, SEG), 1_000_000);
        assert_eq!(next_step(1_000_000, 1_000, 1_000_000, 0, SEG), 1_000_000);
        assert_eq!(
            next_step(10_000_000, 10_000_000, 1_000_000, 0, SEG),
            10_000_000
        );
    }

    #[test]
    fn a_raised_table_step_lifts_the_dynamic_step() {
        assert_eq!(next_step(1_000, 5_000, 1_000_000, 3 * SEG, SEG), 5_000);
    }
}
