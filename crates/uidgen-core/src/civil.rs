//! Civil-calendar arithmetic and printing (proleptic Gregorian, UTC), which cannot fail: kept
//! apart from [`crate::calendar`]'s parsing and checked dates, so that the error type can print
//! a time without importing what reports errors through it.
//!
//! The day/civil conversions are Howard Hinnant's `days_from_civil` / `civil_from_days`
//! (<https://howardhinnant.github.io/date_algorithms.html>).

pub(crate) const MS_PER_DAY: i64 = 86_400_000;

/// Days since 1970-01-01 for a proleptic Gregorian date.
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day) for days since 1970-01-01.
pub(crate) fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

pub(crate) fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Broken-down time of `ms` milliseconds since the Unix epoch (UTC, or local time when the
/// milliseconds are shifted by an offset).
pub(crate) struct Civil {
    pub(crate) year: i64,
    pub(crate) month: i64,
    pub(crate) day: i64,
    pub(crate) hour: i64,
    pub(crate) minute: i64,
    pub(crate) second: i64,
    pub(crate) millis: i64,
}

pub(crate) fn civil(ms: u64) -> Civil {
    civil_at(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// [`civil`] for a signed instant: local times just before 1970 (UTC midnight seen from a zone
/// west of Greenwich) are negative.
pub(crate) fn civil_at(ms: i64) -> Civil {
    let days = ms.div_euclid(MS_PER_DAY);
    let rem = ms.rem_euclid(MS_PER_DAY);
    let (year, month, day) = civil_from_days(days);
    Civil {
        year,
        month,
        day,
        hour: rem / 3_600_000,
        minute: rem / 60_000 % 60,
        second: rem / 1000 % 60,
        millis: rem % 1000,
    }
}

/// ISO-8601 in UTC with milliseconds.
///
/// ```
/// assert_eq!(uidgen_core::calendar::format_iso8601(1_732_089_600_000),
///     "2024-11-20T08:00:00.000Z");
/// ```
pub fn format_iso8601(ms: u64) -> String {
    format!("{}Z", civil(ms).iso8601())
}

/// Baidu's `yyyy-MM-dd HH:mm:ss`, in UTC.
///
/// ```
/// assert_eq!(uidgen_core::calendar::format_baidu(0), "1970-01-01 00:00:00");
/// ```
pub fn format_baidu(ms: u64) -> String {
    civil(ms).baidu()
}

impl Civil {
    /// `YYYY-MM-DDTHH:MM:SS.mmm`, without an offset.
    pub(crate) fn iso8601(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}",
            self.year, self.month, self.day, self.hour, self.minute, self.second, self.millis
        )
    }

    /// Baidu's `yyyy-MM-dd HH:mm:ss`.
    pub(crate) fn baidu(&self) -> String {
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}
