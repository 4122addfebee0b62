//! Dated tags: numbers that restart every day, each day's numbers the IDs of a tag of its own.

use uidgen_core::calendar::CivilDate;

/// The `leaf_alloc` tag that numbers `tag`'s IDs on `date`: `orders:20261125`.
///
/// ```
/// use uidgen_core::calendar::CivilDate;
/// use uidgen_segment::day_tag;
/// assert_eq!(day_tag("orders", CivilDate::new(2026, 11, 25)?), "orders:20261125");
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub fn day_tag(tag: &str, date: CivilDate) -> String {
    format!("{tag}:{}", date.compact())
}
