//! Civil-calendar arithmetic (proleptic Gregorian, UTC): parse epochs and timestamps, print the
//! time an ID encodes, name a calendar day. The arithmetic is written in this crate rather than
//! taken from a date library; only looking an IANA zone name up needs one (see [`crate::zone`]).
//!
//! The arithmetic that cannot fail (and the printing) lives in `civil`, which the error type
//! prints times with; this module adds what checks its input.

pub use crate::civil::{format_baidu, format_iso8601};

use crate::civil::{Civil, MS_PER_DAY, civil, days_from_civil, days_in_month};
use crate::error::{Result, UidError};

impl Civil {
    /// The calendar day, if within [`CivilDate`]'s range.
    pub(crate) fn date(&self) -> Result<CivilDate> {
        let bad = |reason| UidError::InvalidDate {
            input: format!("{:04}-{:02}-{:02}", self.year, self.month, self.day),
            reason,
        };
        let year = u16::try_from(self.year).map_err(|_| bad("year out of range"))?;
        let month = u8::try_from(self.month).map_err(|_| bad("month out of range"))?;
        let day = u8::try_from(self.day).map_err(|_| bad("day out of range"))?;
        CivilDate::new(year, month, day)
    }
}

/// A calendar day from 1970-01-01 to 9999-12-31: the date part of a dated ID form
/// ([`DatedForm`](crate::forms::DatedForm)). Its order is the calendar's.
///
/// ```
/// use uidgen_core::calendar::CivilDate;
/// let day = CivilDate::new(2026, 11, 25)?;
/// assert_eq!((day.to_string(), day.compact()), ("2026-11-25".to_owned(), "20261125".to_owned()));
/// assert_eq!(CivilDate::of_millis(day.start_ms())?, day);
/// assert!(CivilDate::new(2026, 2, 29).is_err());
/// assert!(CivilDate::new(1969, 12, 31).is_err());
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CivilDate {
    year: u16,
    month: u8,
    day: u8,
}

impl CivilDate {
    /// The first year a date may have: IDs count time from the Unix epoch on.
    pub const MIN_YEAR: u16 = 1970;
    /// The last year a date may have: four digits.
    pub const MAX_YEAR: u16 = 9999;

    /// The day `year-month-day`, checked against the calendar and the range.
    pub fn new(year: u16, month: u8, day: u8) -> Result<Self> {
        let bad = |reason| UidError::InvalidDate {
            input: format!("{year:04}-{month:02}-{day:02}"),
            reason,
        };
        if !(Self::MIN_YEAR..=Self::MAX_YEAR).contains(&year) {
            return Err(bad("the year is outside 1970 to 9999"));
        }
        if !(1..=12).contains(&month)
            || day < 1
            || i64::from(day) > days_in_month(i64::from(year), i64::from(month))
        {
            return Err(bad("no such calendar date"));
        }
        Ok(Self { year, month, day })
    }

    /// The UTC day of `ms` milliseconds since the Unix epoch.
    pub fn of_millis(ms: u64) -> Result<Self> {
        civil(ms).date()
    }

    /// The year.
    pub fn year(self) -> u16 {
        self.year
    }

    /// The month, 1 to 12.
    pub fn month(self) -> u8 {
        self.month
    }

    /// The day of the month, 1 to 31.
    pub fn day(self) -> u8 {
        self.day
    }

    /// Midnight UTC at the start of the day, in milliseconds since the Unix epoch.
    pub fn start_ms(self) -> u64 {
        let days = days_from_civil(
            i64::from(self.year),
            i64::from(self.month),
            i64::from(self.day),
        );
        debug_assert!(days >= 0, "`new` keeps the year at 1970 or later");
        u64::try_from(days * MS_PER_DAY).unwrap_or(0)
    }

    /// `YYYYMMDD`, as the dated ID form writes it.
    pub fn compact(self) -> String {
        format!("{:04}{:02}{:02}", self.year, self.month, self.day)
    }

    /// Read `YYYYMMDD` (eight ASCII digits).
    pub(crate) fn parse_compact(text: &str) -> Result<Self> {
        let bad = |reason| UidError::InvalidDate {
            input: text.chars().take(16).collect(),
            reason,
        };
        if text.len() != 8 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("expected eight digits, YYYYMMDD"));
        }
        let field = |range: std::ops::Range<usize>| text[range].parse::<u16>();
        match (field(0..4), field(4..6), field(6..8)) {
            (Ok(year), Ok(month), Ok(day)) => Self::new(
                year,
                u8::try_from(month).map_err(|_| bad("no such calendar date"))?,
                u8::try_from(day).map_err(|_| bad("no such calendar date"))?,
            ),
            _ => Err(bad("expected eight digits, YYYYMMDD")),
        }
    }
}

impl std::fmt::Display for CivilDate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

fn bad(input: &str, reason: &'static str) -> UidError {
    UidError::InvalidEpoch {
        input: input.to_owned(),
        reason,
    }
}

fn number(input: &str, s: &str, len: usize) -> Result<i64> {
    if s.len() != len || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(
            input,
            "expected digits in YYYY-MM-DD[THH:MM:SS[.mmm]][Z|+HH:MM]",
        ));
    }
    s.parse().map_err(|_| bad(input, "number out of range"))
}

/// Parse an epoch: milliseconds since the Unix epoch as digits, or an ISO-8601-like date
/// `YYYY-MM-DD`, optionally followed by `T`/space and `HH:MM[:SS[.mmm]]`, and by `Z` or `±HH:MM`.
/// Without an offset the time is UTC (Baidu parsed it in the JVM's local zone, which made the
/// same configuration mean different epochs on different hosts).
///
/// ```
/// use uidgen_core::calendar::parse_epoch_ms;
/// assert_eq!(parse_epoch_ms("2016-05-20+08:00").unwrap(), 1_463_673_600_000);
/// assert_eq!(parse_epoch_ms("1463673600000").unwrap(), 1_463_673_600_000);
/// assert!(parse_epoch_ms("2016-02-30").is_err());
/// ```
pub fn parse_epoch_ms(input: &str) -> Result<u64> {
    let s = input.trim();
    if s.is_empty() {
        return Err(bad(input, "empty"));
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse()
            .map_err(|_| bad(input, "milliseconds out of range"));
    }
    // The date is ten ASCII bytes; checking the boundary first keeps a multi-byte character
    // near the start (user input, "2016-05-2€") an error rather than a panic in `split_at`.
    if s.len() < 10 {
        return Err(bad(input, "too short for a date"));
    }
    if !s.is_char_boundary(10) || !s.as_bytes()[..10].is_ascii() {
        return Err(bad(input, "date must be YYYY-MM-DD"));
    }
    let (date, rest) = s.split_at(10);
    let b = date.as_bytes();
    if b[4] != b'-' || b[7] != b'-' {
        return Err(bad(input, "date must be YYYY-MM-DD"));
    }
    let year = number(input, &date[0..4], 4)?;
    let month = number(input, &date[5..7], 2)?;
    let day = number(input, &date[8..10], 2)?;
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad(input, "no such calendar date"));
    }

    // Split the remainder into an optional time of day and an optional offset.
    let (time, offset) = match rest.find(['Z', 'z', '+', '-']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let mut ms_of_day = 0i64;
    if !time.is_empty() {
        let t = time
            .strip_prefix('T')
            .or_else(|| time.strip_prefix(' '))
            .ok_or_else(|| bad(input, "time of day must follow 'T' or a space"))?;
        let (hms, frac) = match t.split_once('.') {
            Some((hms, frac)) => (hms, Some(frac)),
            None => (t, None),
        };
        let mut parts = hms.split(':');
        let hour = number(input, parts.next().unwrap_or(""), 2)?;
        let minute = number(input, parts.next().unwrap_or(""), 2)?;
        let second = match parts.next() {
            Some(sec) => number(input, sec, 2)?,
            None => 0,
        };
        if parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
            return Err(bad(input, "time of day out of range"));
        }
        let millis = match frac {
            Some(f) => number(input, f, 3)?,
            None => 0,
        };
        ms_of_day = ((hour * 60 + minute) * 60 + second) * 1000 + millis;
    }
    let offset_ms = match offset {
        "" | "Z" | "z" => 0,
        o => {
            let sign = if o.starts_with('-') { -1 } else { 1 };
            let (h, m) = o[1..]
                .split_once(':')
                .ok_or_else(|| bad(input, "offset must be ±HH:MM"))?;
            let (h, m) = (number(input, h, 2)?, number(input, m, 2)?);
            if h > 23 || m > 59 {
                return Err(bad(input, "offset out of range"));
            }
            sign * (h * 60 + m) * 60_000
        }
    };
    let ms = days_from_civil(year, month, day) * MS_PER_DAY + ms_of_day - offset_ms;
    u64::try_from(ms).map_err(|_| bad(input, "before 1970-01-01T00:00:00Z"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::civil::civil_from_days;

    #[test]
    fn parses_dates_as_utc_unless_an_offset_is_given() {
        for (input, ms) in [
            ("1970-01-01", 0),
            ("2016-05-20", 1_463_702_400_000),
            ("2016-05-20+08:00", 1_463_673_600_000),
            ("2015-01-01T00:00:00+08:00", 1_420_041_600_000),
            ("2010-11-04T01:42:54.657Z", 1_288_834_974_657),
            ("2024-02-29 12:00", 1_709_208_000_000),
            ("1288834974657", 1_288_834_974_657),
        ] {
            assert_eq!(parse_epoch_ms(input).unwrap(), ms, "{input}");
        }
    }

    #[test]
    fn rejects_impossible_dates_with_a_reason() {
        for (input, reason) in [
            ("", "empty"),
            ("2016-5-20", "too short for a date"),
            ("2023-02-29", "no such calendar date"),
            ("2016/05/20", "date must be YYYY-MM-DD"),
            ("2016-05-2€", "date must be YYYY-MM-DD"),
            ("2016-05-€0", "date must be YYYY-MM-DD"),
            ("2016-05-20T25:00", "time of day out of range"),
            ("2016-05-20+0800", "offset must be ±HH:MM"),
            ("1969-12-31", "before 1970-01-01T00:00:00Z"),
        ] {
            match parse_epoch_ms(input) {
                Err(UidError::InvalidEpoch { reason: r, .. }) => assert_eq!(r, reason, "{input}"),
                other => panic!("{input}: {other:?}"),
            }
        }
    }

    #[test]
    fn formats_round_trip_through_the_calendar() {
        assert_eq!(
            format_iso8601(1_288_834_974_657),
            "2010-11-04T01:42:54.657Z"
        );
        assert_eq!(format_baidu(1_463_702_400_000), "2016-05-20 00:00:00");
        for days in [-1, 0, 59, 365, 11_016, 20_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
