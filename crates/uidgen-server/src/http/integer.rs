//! JSON integers as JSON Schema reads them: `5`, `5.0` and `5e0` are all the integer 5.
//!
//! `/openapi.json` types the body fields as `integer`, and JSON Schema counts any number with a
//! zero fractional part as one (<https://json-schema.org/draft/2020-12/json-schema-core#section-4.2.2>),
//! so a client or a fuzzer may well send `1000.0`. serde's `u64` and `i64` refuse a float, so the
//! body fields that are integers read through here instead.

use serde::{Deserialize, Deserializer, de::Error};
use serde_json::{Number, Value};

/// The integer `number` is, if it is one within `T`'s range.
pub(super) fn of<T: TryFrom<i128>>(number: &Number) -> Option<T> {
    let wide = if let Some(n) = number.as_u64() {
        i128::from(n)
    } else if let Some(n) = number.as_i64() {
        i128::from(n)
    } else {
        let f = number.as_f64()?;
        // 2^64 bounds both target types; a float past it, or with a fraction, is no such
        // integer. Below 2^64 an integral f64 converts exactly.
        if f.fract() != 0.0 || f.abs() >= 18_446_744_073_709_551_616.0 {
            return None;
        }
        #[allow(clippy::cast_possible_truncation)] // integral and below 2^64: exact.
        let n = f as i128;
        n
    };
    T::try_from(wide).ok()
}

fn read<'de, D: Deserializer<'de>, T: TryFrom<i128>>(
    value: Value,
    range: &str,
) -> Result<T, D::Error> {
    match &value {
        Value::Number(n) => of(n),
        _ => None,
    }
    .ok_or_else(|| D::Error::custom(format!("expected an integer from {range}, got {value}")))
}

const U64_RANGE: &str = "0 to 18446744073709551615";
const I64_RANGE: &str = "-2^63 to 2^63 - 1";

/// `null` (or absent, with `#[serde(default)]`) as `None`, else an integer of `T`.
fn optional<'de, D: Deserializer<'de>, T: TryFrom<i128>>(
    d: D,
    range: &str,
) -> Result<Option<T>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(None),
        value => read::<D, T>(value, range).map(Some),
    }
}

/// `#[serde(deserialize_with = "integer::u64")]`.
pub(super) fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    read::<D, u64>(Value::deserialize(d)?, U64_RANGE)
}

/// `#[serde(default, deserialize_with = "integer::opt_u64")]`: `null` or absent is `None`.
pub(super) fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    optional(d, U64_RANGE)
}

/// `#[serde(deserialize_with = "integer::i64")]`.
pub(super) fn i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    read::<D, i64>(Value::deserialize(d)?, I64_RANGE)
}

/// `#[serde(default, deserialize_with = "integer::opt_i64")]`: `null` or absent is `None`.
pub(super) fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    optional(d, I64_RANGE)
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Body {
        #[serde(deserialize_with = "super::u64")]
        a: u64,
        #[serde(default, deserialize_with = "super::opt_i64")]
        b: Option<i64>,
    }

    fn parse(text: &str) -> Result<Body, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_numbers_of_any_spelling_are_integers() {
        assert_eq!(parse(r#"{"a": 5}"#), Ok(Body { a: 5, b: None }));
        assert_eq!(
            parse(r#"{"a": 5.0, "b": -2e3}"#),
            Ok(Body {
                a: 5,
                b: Some(-2000)
            })
        );
        assert_eq!(
            parse(r#"{"a": 1e18, "b": null}"#),
            Ok(Body {
                a: 1_000_000_000_000_000_000,
                b: None
            })
        );
        assert_eq!(
            parse(r#"{"a": 18446744073709551615}"#).map(|b| b.a),
            Ok(u64::MAX)
        );
    }

    #[test]
    fn fractions_negatives_and_text_are_refused_in_words() {
        for (text, says) in [
            (
                r#"{"a": 1.5}"#,
                "expected an integer from 0 to 18446744073709551615, got 1.5",
            ),
            (r#"{"a": -1}"#, "got -1"),
            (r#"{"a": 1e20}"#, "got 1e+20"),
            (r#"{"a": "7"}"#, r#"got "7""#),
            (
                r#"{"a": 1, "b": 1e19}"#,
                "expected an integer from -2^63 to 2^63 - 1",
            ),
        ] {
            let error = parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
