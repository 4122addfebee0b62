//! Which shard a gate pass (a user name, phone number or e-mail) belongs to, computed exactly
//! as the original Java service does: `Math.abs(gatePass.hashCode()) % 64`.
//!
//! Java's `String.hashCode` is `s[0]*31^(n-1) + ... + s[n-1]` over the string's UTF-16 code
//! units in 32-bit two's-complement arithmetic that wraps on overflow. A character outside the
//! Basic Multilingual Plane (an emoji, a rare CJK ideograph) is two code units, a surrogate
//! pair, and counts as two. A Rust `&str` is always valid UTF-8, so it holds no unpaired
//! surrogates; every string a client can send here encodes to the same code units Java sees.
//!
//! `Math.abs(Integer.MIN_VALUE)` is `Integer.MIN_VALUE` (its negation does not fit), so for the
//! strings whose hash is `Integer.MIN_VALUE` ("polygenelubricants" is the famous one) Java
//! takes the remainder of a negative number. Java's `%` truncates towards zero, and
//! `-2^31 = -2^25 * 64` exactly, so the remainder is 0: such strings fall in shard 0. We
//! reproduce that with [`i32::wrapping_abs`] and Rust's `%`, which also truncates towards zero;
//! the result is never negative. Any other negative hash is made positive first, so, e.g.,
//! `"zhangsan"` (hash -1432604556) is in shard 12, not in shard 52 as `rem_euclid` would say.

use crate::layout::SHARDS;

/// Java's `String.hashCode` of `text`: UTF-16 code units, `h = 31 * h + unit`, wrapping.
///
/// ```
/// use uidgen_sharded::java_string_hash;
/// assert_eq!(java_string_hash("hello"), 99162322);
/// assert_eq!(java_string_hash("😀"), 1772899); // two code units: 0xD83D, 0xDE00
/// assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
/// ```
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The shard of a gate pass: `Math.abs(hashCode) % 64`, with Java's semantics for
/// `Integer.MIN_VALUE` (shard 0; see the module doc).
///
/// ```
/// use uidgen_sharded::shard_of;
/// assert_eq!(shard_of("hello"), 18);
/// assert_eq!(shard_of("zhangsan"), 12); // negative hash: abs first, then %
/// assert_eq!(shard_of("polygenelubricants"), 0); // hash is Integer.MIN_VALUE
/// ```
pub fn shard_of(gate_pass: &str) -> u8 {
    let remainder = java_string_hash(gate_pass).wrapping_abs() % i32::from(SHARDS);
    // `wrapping_abs` is non-negative except for i32::MIN, whose remainder is 0; so the value
    // is in 0..64 and converts. The fallback keeps the release build total; the debug assert
    // says it is unreachable.
    debug_assert!((0..i32::from(SHARDS)).contains(&remainder));
    u8::try_from(remainder).unwrap_or(0)
}
