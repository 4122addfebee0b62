//! Friendly forms of an ID, and their parsers.
//!
//! - [`IdForm`]: the ID itself written in decimal, base 36 or base 62. The two radix forms are
//!   fixed-width for a layout (as many digits as its largest ID needs, zero-padded) and their
//!   digits run in ASCII order (`0-9`, then `A-Z`, then `a-z`), so sorting the text sorts the
//!   IDs. A layout renders and reads them back: [`Layout::render`], [`Layout::decode_form`].
//! - [`DatedForm`]: a prefix, a calendar date and a zero-padded number, `ORD20261125-000123`,
//!   as order numbers are often printed (Leaf issues
//!   [#96](https://github.com/Meituan-Dianping/Leaf/issues/96) and
//!   [#172](https://github.com/Meituan-Dianping/Leaf/issues/172) ask for date-based numbers).
//!   The number is whatever the caller draws for that day (a daily segment, for instance); the
//!   form only writes and reads it.

use std::fmt;
use std::str::FromStr;

use crate::calendar::CivilDate;
use crate::error::{Result, UidError};
use crate::layout::Layout;
use crate::layout::decoded::DecodedUid;
use crate::zone::Zone;

/// Digits in ASCII order, so that fixed-width text sorts as its numbers do. Base 36 uses the
/// first 36 with lowercase letters (below); base 62 all of them.
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BASE36: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// How an ID is written.
///
/// ```
/// use uidgen_core::{IdForm, Layout};
/// let layout = Layout::snowflake()?;
/// let id = 1_234_567_890_123_456_789;
/// let text = layout.render(id, IdForm::Base62)?;
/// assert_eq!(text, "1TCKi1nFuNh");
/// assert_eq!(layout.decode_form(&text, IdForm::Base62)?.id, id);
/// assert_eq!(layout.render(id, IdForm::Base36)?, "09do1sj396nf9");
/// assert_eq!("base62".parse::<IdForm>()?, IdForm::Base62);
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum IdForm {
    /// The decimal number, without padding: what every API returns.
    #[default]
    Decimal,
    /// Base 36 (`0-9a-z`, read in either case), zero-padded to the layout's width.
    Base36,
    /// Base 62 (`0-9A-Za-z`, case matters), zero-padded to the layout's width.
    Base62,
}

impl IdForm {
    /// Every form, for listings.
    pub const ALL: [IdForm; 3] = [IdForm::Decimal, IdForm::Base36, IdForm::Base62];

    /// The form's name: `decimal`, `base36`, `base62`.
    pub fn name(self) -> &'static str {
        match self {
            IdForm::Decimal => "decimal",
            IdForm::Base36 => "base36",
            IdForm::Base62 => "base62",
        }
    }

    fn alphabet(self) -> Option<&'static [u8]> {
        match self {
            IdForm::Decimal => None,
            IdForm::Base36 => Some(BASE36),
            IdForm::Base62 => Some(BASE62),
        }
    }

    /// How many digits the radix forms write for IDs up to `max` (the decimal form's longest).
    ///
    /// ```
    /// use uidgen_core::IdForm;
    /// assert_eq!(IdForm::Base62.width(u64::MAX), 11);
    /// assert_eq!(IdForm::Base36.width(i64::MAX as u64), 13);
    /// assert_eq!(IdForm::Base62.width((1 << 53) - 1), 9);
    /// ```
    pub fn width(self, max: u64) -> usize {
        let radix = self.alphabet().map_or(10, |a| a.len() as u64);
        let mut width = 1;
        let mut rest = max / radix;
        while rest > 0 {
            width += 1;
            rest /= radix;
        }
        width
    }

    /// Write `id` in this form, radix forms zero-padded to `width` digits (at least as many as
    /// `id` needs).
    pub fn encode(self, id: u64, width: usize) -> String {
        let Some(alphabet) = self.alphabet() else {
            return id.to_string();
        };
        let radix = alphabet.len() as u64;
        let mut digits = Vec::with_capacity(width.max(13));
        let mut rest = id;
        loop {
            let digit = rest % radix;
            debug_assert!(
                digit < radix,
                "a remainder is below the radix, so it indexes the alphabet"
            );
            digits.push(alphabet[usize::try_from(digit).unwrap_or(0)]);
            rest /= radix;
            if rest == 0 {
                break;
            }
        }
        digits.resize(digits.len().max(width), b'0');
        digits.iter().rev().map(|&b| char::from(b)).collect()
    }

    /// Read an ID written in this form. Radix forms must have exactly `width` digits, so that
    /// each ID has one text; base 36 reads either case.
    pub fn decode(self, text: &str, width: usize) -> Result<u64> {
        let malformed = |reason| UidError::MalformedForm {
            form: self.name(),
            input: text.chars().take(64).collect(),
            reason,
        };
        let Some(alphabet) = self.alphabet() else {
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed("expected decimal digits"));
            }
            return text.parse().map_err(|_| malformed("larger than 64 bits"));
        };
        if text.len() != width || !text.is_ascii() {
            return Err(malformed(match self {
                IdForm::Base36 => "expected the layout's fixed number of base36 digits",
                _ => "expected the layout's fixed number of base62 digits",
            }));
        }
        let radix = alphabet.len() as u64;
        let mut id = 0u64;
        for byte in text.bytes() {
            let byte = if self == IdForm::Base36 {
                byte.to_ascii_lowercase()
            } else {
                byte
            };
            let digit = alphabet
                .iter()
                .position(|&d| d == byte)
                .ok_or_else(|| malformed("a character is not a digit of this form"))?;
            id = id
                .checked_mul(radix)
                .and_then(|id| id.checked_add(digit as u64))
                .ok_or_else(|| malformed("larger than 64 bits"))?;
        }
        Ok(id)
    }
}

impl fmt::Display for IdForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for IdForm {
    type Err = UidError;

    fn from_str(s: &str) -> Result<Self> {
        IdForm::ALL
            .into_iter()
            .find(|form| form.name() == s)
            .ok_or_else(|| UidError::InvalidOption {
                name: "form",
                reason: format!("unknown ID form {s:?}; expected decimal, base36 or base62"),
            })
    }
}

impl Layout {
    /// Write an ID of this layout in `form`; radix forms are as wide as the layout's largest ID
    /// needs ([`Layout::max_id`]), so every ID of the layout has the same length and the texts
    /// sort as the IDs do. An ID the layout cannot hold is refused.
    pub fn render(&self, id: u64, form: IdForm) -> Result<String> {
        self.decompose(id)?;
        Ok(form.encode(id, form.width(self.max_id())))
    }

    /// Read an ID written in `form` (surrounding whitespace is ignored) and decode it.
    ///
    /// ```
    /// use uidgen_core::{IdForm, Layout, UidError};
    /// let layout = Layout::safe_js()?;
    /// let id = layout.compose(&layout.parts(1_000, 7, 3))?;
    /// let text = layout.render(id, IdForm::Base36)?;
    /// assert_eq!(text.len(), 11);
    /// assert_eq!(layout.decode_form(&text.to_uppercase(), IdForm::Base36)?.parts.worker, 7);
    /// assert!(matches!(
    ///     layout.decode_form("zzzzzzzzzzz", IdForm::Base36),
    ///     Err(UidError::MalformedId { .. }) // above 2^53: not a safe_js ID
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn decode_form(&self, text: &str, form: IdForm) -> Result<DecodedUid> {
        let text = text.trim();
        self.decode(form.decode(text, form.width(self.max_id()))?)
    }
}

/// The longest prefix a [`DatedForm`] takes.
pub const MAX_PREFIX_LEN: usize = 32;

/// A prefix, a date and a zero-padded number: `ORD20261125-000123`.
///
/// The prefix is up to [`MAX_PREFIX_LEN`] ASCII letters, digits or `_` (URL- and file-safe);
/// the date is `YYYYMMDD`; the number has exactly `digits` digits (1 to 20). With a fixed
/// prefix and width, the texts of one day sort as their numbers, and days sort by date.
///
/// ```
/// use uidgen_core::calendar::CivilDate;
/// use uidgen_core::forms::DatedForm;
/// use uidgen_core::Zone;
/// let form = DatedForm::new("ORD", 6)?;
/// let day = CivilDate::new(2026, 11, 25)?;
/// assert_eq!(form.render(day, 123)?, "ORD20261125-000123");
/// let parsed = form.parse("ORD20261125-000123")?;
/// assert_eq!((parsed.date, parsed.number), (day, 123));
/// // The day a number is drawn on, in the zone the business counts days in.
/// let ms = 1_795_622_400_000; // 2026-11-25T16:00:00Z
/// let shanghai = Zone::parse("+08:00")?;
/// assert_eq!(form.render_at(ms, &shanghai, 7)?, "ORD20261126-000007");
/// assert!(form.render(day, 1_000_000).is_err()); // seven digits do not fit six
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DatedForm {
    prefix: String,
    digits: u32,
}

/// What a [`DatedForm`] text holds: its date and its number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatedNumber {
    /// The date part.
    pub date: CivilDate,
    /// The number part.
    pub number: u64,
}

impl DatedForm {
    /// A form with this prefix (possibly empty) and this many number digits.
    ///
    /// ```
    /// use uidgen_core::forms::DatedForm;
    /// assert!(DatedForm::new("", 8).is_ok());
    /// assert!(DatedForm::new("ORD-", 6).is_err()); // `-` separates the number
    /// assert!(DatedForm::new("ORD", 0).is_err());
    /// assert!(DatedForm::new("ORD", 21).is_err()); // u64 has 20 digits
    /// ```
    pub fn new(prefix: &str, digits: u32) -> Result<Self> {
        let bad = |reason: String| UidError::InvalidOption {
            name: "dated_form",
            reason,
        };
        if prefix.len() > MAX_PREFIX_LEN
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(bad(format!(
                "prefix {:?} must be at most {MAX_PREFIX_LEN} ASCII letters, digits or '_'",
                prefix.chars().take(64).collect::<String>()
            )));
        }
        if !(1..=20).contains(&digits) {
            return Err(bad(format!(
                "{digits} number digits; use 1 to 20 (a 64-bit number has at most 20)"
            )));
        }
        Ok(Self {
            prefix: prefix.to_owned(),
            digits,
        })
    }

    /// The prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// How many digits the number has.
    pub fn digits(&self) -> u32 {
        self.digits
    }

    /// The largest number the form writes: `10^digits - 1` (all of `u64` at 20 digits).
    pub fn max_number(&self) -> u64 {
        10u64
            .checked_pow(self.digits)
            .map_or(u64::MAX, |limit| limit - 1)
    }

    /// The text for `number` on `date`.
    pub fn render(&self, date: CivilDate, number: u64) -> Result<String> {
        if number > self.max_number() {
            return Err(UidError::FormOverflow {
                value: number,
                digits: self.digits,
            });
        }
        debug_assert!(self.digits <= 20, "`new` keeps the digits at 1 to 20");
        let width = usize::try_from(self.digits).unwrap_or(20);
        Ok(format!(
            "{}{}-{number:0width$}",
            self.prefix,
            date.compact()
        ))
    }

    /// The text for `number` on the day `ms` (milliseconds since the Unix epoch) falls on in
    /// `zone`.
    pub fn render_at(&self, ms: u64, zone: &Zone, number: u64) -> Result<String> {
        self.render(zone.date_at(ms)?, number)
    }

    /// Read a text of this form back (surrounding whitespace ignored): the prefix exactly, a
    /// valid date, `-`, exactly `digits` digits.
    ///
    /// ```
    /// use uidgen_core::forms::DatedForm;
    /// use uidgen_core::UidError;
    /// let form = DatedForm::new("ORD", 6)?;
    /// for bad in ["INV20261125-000123", "ORD20261131-000123", "ORD20261125-123", "ORD20261125000123"] {
    ///     assert!(matches!(form.parse(bad), Err(UidError::MalformedForm { .. })), "{bad}");
    /// }
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn parse(&self, text: &str) -> Result<DatedNumber> {
        let malformed = |reason| UidError::MalformedForm {
            form: "dated",
            input: text.chars().take(64).collect(),
            reason,
        };
        let rest = text
            .trim()
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(|| malformed("it does not start with the form's prefix"))?;
        let (date, number) = rest
            .split_once('-')
            .ok_or_else(|| malformed("expected YYYYMMDD-number after the prefix"))?;
        let date = CivilDate::parse_compact(date)
            .map_err(|_| malformed("the date is not a calendar day YYYYMMDD from 1970 on"))?;
        if number.len() != self.digits as usize || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed(
                "the number does not have the form's fixed count of digits",
            ));
        }
        let number = number
            .parse()
            .map_err(|_| malformed("the number is larger than 64 bits"))?;
        Ok(DatedNumber { date, number })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn radix_digits_are_in_ascii_order() {
        assert!(BASE62.windows(2).all(|w| w[0] < w[1]));
        assert!(BASE36.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn the_extremes_round_trip_at_full_width() {
        for form in [IdForm::Base36, IdForm::Base62] {
            let width = form.width(u64::MAX);
            for id in [0, 1, 61, 62, u64::MAX - 1, u64::MAX] {
                let text = form.encode(id, width);
                assert_eq!(text.len(), width, "{form} {id}");
                assert_eq!(form.decode(&text, width).unwrap(), id, "{form} {text}");
            }
        }
        // One past u64::MAX in 11 base62 digits (62^11 > 2^64) is refused, not wrapped.
        let over = IdForm::Base62.decode("LygHa16AHYG", 11);
        assert!(
            matches!(over, Err(UidError::MalformedForm { .. })),
            "{over:?}"
        );
        assert_eq!(IdForm::Base62.decode("LygHa16AHYF", 11).unwrap(), u64::MAX);
    }

    #[test]
    fn malformed_radix_text_says_what_is_wrong() {
        assert_eq!(
            IdForm::Base62
                .decode("00000000-01", 11)
                .unwrap_err()
                .to_string(),
            "malformed base62 form \"00000000-01\": a character is not a digit of this form"
        );
        assert!(
            IdForm::Base62.decode("0000000001", 11).is_err(),
            "too short"
        );
        assert!(
            IdForm::Base62.decode("0000000000é", 11).is_err(),
            "not ASCII"
        );
        assert!(IdForm::Decimal.decode("", 0).is_err());
        assert_eq!(IdForm::Decimal.decode("42", 0).unwrap(), 42);
        assert_eq!(
            "base64".parse::<IdForm>().unwrap_err().to_string(),
            "invalid option `form`: unknown ID form \"base64\"; expected decimal, base36 or base62"
        );
    }

    #[test]
    fn twenty_digit_numbers_cover_u64() {
        let form = DatedForm::new("X", 20).unwrap();
        let day = CivilDate::new(9999, 12, 31).unwrap();
        let text = form.render(day, u64::MAX).unwrap();
        assert_eq!(text, "X99991231-18446744073709551615");
        assert_eq!(form.parse(&text).unwrap().number, u64::MAX);
        assert!(form.parse("X99991231-99999999999999999999").is_err());
    }
}
