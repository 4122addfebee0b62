//! Properties of the calendar: parsing undoes formatting over the whole supported range
//! (1970-01-01T00:00:00.000Z to 9999-12-31T23:59:59.999Z, the dates a four-digit year can
//! write), and every date agrees with an independent civil-date reference.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use proptest::prelude::*;
use uidgen_core::calendar::{format_baidu, format_iso8601, parse_epoch_ms};

const MS_PER_DAY: u64 = 86_400_000;

/// 9999-12-31T23:59:59.999Z: the last instant with a four-digit year.
const LAST_MS: u64 = 253_402_300_799_999;

/// The reference: days since 1970-01-01 counted year by year and month by month (leap years
/// counted in closed form), not with the era arithmetic `civil.rs` uses.
fn reference_days(year: u64, month: u64, day: u64) -> u64 {
    let leaps_through = |y: u64| y / 4 - y / 100 + y / 400;
    let before_year = 365 * (year - 1970) + leaps_through(year - 1) - leaps_through(1969);
    const BEFORE_MONTH: [u64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let month_index = usize::try_from(month - 1).unwrap();
    let leap_day = u64::from(month > 2 && is_leap(year));
    before_year + BEFORE_MONTH[month_index] + leap_day + day - 1
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// The month's length by the reference: the days until the first of the next month.
fn days_in_month(year: u64, month: u64) -> u64 {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    reference_days(next_year, next_month, 1) - reference_days(year, month, 1)
}

/// A calendar date of the supported range with a time of day: (y, m, d, h, min, s, ms).
fn civil_time() -> impl Strategy<Value = (u64, u64, u64, u64, u64, u64, u64)> {
    (1970..=9999u64, 1..=12u64)
        .prop_flat_map(|(y, m)| (Just(y), Just(m), 1..=days_in_month(y, m)))
        .prop_flat_map(|(y, m, d)| {
            (
                Just(y),
                Just(m),
                Just(d),
                0..24u64,
                0..60u64,
                0..60u64,
                0..1000u64,
            )
        })
}

#[test]
fn the_reference_agrees_with_known_dates() {
    for ((y, m, d), days) in [
        ((1970, 1, 1), 0),
        ((1972, 2, 29), 789),
        ((2000, 3, 1), 11_017),
        ((2001, 9, 9), 11_574), // 1_000_000_000 s
        ((2024, 2, 29), 19_782),
        ((2038, 1, 19), 24_855), // 2^31 s
        ((2100, 3, 1), 47_541),
        ((9999, 12, 31), 2_932_896),
    ] {
        assert_eq!(reference_days(y, m, d), days, "{y}-{m}-{d}");
    }
}

#[test]
fn the_supported_range_ends_where_four_digit_years_do() {
    assert_eq!(format_iso8601(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(format_iso8601(LAST_MS), "9999-12-31T23:59:59.999Z");
    assert_eq!(parse_epoch_ms("9999-12-31T23:59:59.999Z").unwrap(), LAST_MS);
    assert_eq!(
        format_iso8601(2_147_483_647_000),
        "2038-01-19T03:14:07.000Z"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn parsing_an_iso8601_timestamp_returns_the_formatted_milliseconds(ms in 0..=LAST_MS) {
        prop_assert_eq!(parse_epoch_ms(&format_iso8601(ms)).unwrap(), ms);
    }

    #[test]
    fn parsing_a_baidu_timestamp_returns_the_milliseconds_down_to_the_second(ms in 0..=LAST_MS) {
        prop_assert_eq!(parse_epoch_ms(&format_baidu(ms)).unwrap(), ms - ms % 1000);
    }

    #[test]
    fn digits_parse_as_milliseconds(ms in any::<u64>()) {
        prop_assert_eq!(parse_epoch_ms(&ms.to_string()).unwrap(), ms);
    }

    #[test]
    fn a_formatted_day_is_the_reference_date_of_that_day(day in 0..=LAST_MS / MS_PER_DAY) {
        let text = format_iso8601(day * MS_PER_DAY);
        prop_assert!(text.ends_with("T00:00:00.000Z"), "{}", text);
        let field = |range: std::ops::Range<usize>| text[range].parse::<u64>().unwrap();
        let (y, m, d) = (field(0..4), field(5..7), field(8..10));
        prop_assert!((1..=12).contains(&m) && (1..=days_in_month(y, m)).contains(&d), "{}", text);
        prop_assert_eq!(reference_days(y, m, d), day, "{}", text);
    }

    #[test]
    fn a_civil_time_parses_and_formats_as_the_reference_says((y, m, d, h, min, s, milli) in civil_time()) {
        let text = format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z");
        let ms = reference_days(y, m, d) * MS_PER_DAY + ((h * 60 + min) * 60 + s) * 1000 + milli;
        prop_assert_eq!(parse_epoch_ms(&text).unwrap(), ms);
        prop_assert_eq!(format_iso8601(ms), text);
    }

    #[test]
    fn an_offset_is_subtracted_from_the_local_time(
        (y, m, d, h, min, s, milli) in civil_time(),
        east in any::<bool>(),
        (off_h, off_m) in (0..24u64, 0..60u64),
    ) {
        let sign = if east { '+' } else { '-' };
        let text = format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}.{milli:03}{sign}{off_h:02}:{off_m:02}");
        let local = reference_days(y, m, d) * MS_PER_DAY + ((h * 60 + min) * 60 + s) * 1000 + milli;
        let offset = (off_h * 60 + off_m) * 60_000;
        let expected = if east { local.checked_sub(offset) } else { Some(local + offset) };
        match expected {
            Some(ms) => prop_assert_eq!(parse_epoch_ms(&text).unwrap(), ms),
            // East of Greenwich, the first hours of 1970-01-01 are still 1969 in UTC.
            None => prop_assert!(parse_epoch_ms(&text).is_err(), "{}", text),
        }
    }
}
