#![allow(clippy::unwrap_used)]
//! The shard of a gate pass matches the original Java service's
//! `Math.abs(gatePass.hashCode()) % 64` exactly: vectors for ASCII, Chinese, emoji (surrogate
//! pairs) and strings whose hash is `Integer.MIN_VALUE`, each checked against a second,
//! independent computation written the long way (explicit surrogates, arithmetic mod 2^32).

use uidgen_sharded::{java_string_hash, shard_of};

/// Java's `String.hashCode`, computed without `encode_utf16` or wrapping `i32` arithmetic:
/// surrogate pairs by the Unicode formula, the sum in `u64` reduced mod 2^32, then read as a
/// two's-complement `i32`.
fn reference_hash(text: &str) -> i64 {
    let mut units = Vec::new();
    for c in text.chars() {
        let code = u32::from(c);
        if code >= 0x1_0000 {
            let v = code - 0x1_0000;
            units.push(0xD800 + (v >> 10));
            units.push(0xDC00 + (v & 0x3FF));
        } else {
            units.push(code);
        }
    }
    let mut h: u64 = 0;
    for unit in units {
        h = (h * 31 + u64::from(unit)) % (1 << 32);
    }
    let h = i64::try_from(h).unwrap();
    if h >= 1 << 31 { h - (1 << 32) } else { h }
}

/// Java's `Math.abs(h) % 64` on an int: `abs(MIN_VALUE)` stays `MIN_VALUE`, and `%` truncates
/// towards zero.
fn reference_shard(hash: i64) -> i64 {
    let abs = if hash == -(1 << 31) { hash } else { hash.abs() };
    abs - 64 * (abs / 64) // i64 division truncates towards zero, as Java's
}

/// (gate pass, Java's hashCode, Java's shard): the hashes as Java prints them.
const VECTORS: &[(&str, i32, u8)] = &[
    ("", 0, 0),
    ("a", 97, 33),
    ("hello", 99_162_322, 18),
    // A classic Java collision: both hash to 2112.
    ("Aa", 2112, 0),
    ("BB", 2112, 0),
    ("alice@example.com", 2_145_772_861, 61),
    ("13800138000", 1_430_905_456, 48),
    // Negative hashes: abs first, then % (rem_euclid would say 52).
    ("zhangsan", -1_432_604_556, 12),
    // Chinese: one UTF-16 unit per character.
    ("张三", 774_889, 41),
    ("中文", 646_394, 58),
    ("用户名@例子.中国", 684_162_295, 55),
    // Emoji and a CJK extension-B character: surrogate pairs, two units each.
    ("😀", 1_772_899, 35),
    ("a😀b", 57_849_694, 30),
    ("👨\u{200d}👩\u{200d}👧", 338_679_017, 41),
    ("𠮷野家", 1_705_507_357, 29),
    // hashCode == Integer.MIN_VALUE: Math.abs leaves it negative; MIN_VALUE % 64 == 0.
    ("polygenelubricants", i32::MIN, 0),
    ("GydZG_", i32::MIN, 0),
    ("DESIGNING WORKHOUSES", i32::MIN, 0),
];

#[test]
fn java_hashes_and_shards_match_the_original_service() {
    for &(text, hash, shard) in VECTORS {
        assert_eq!(java_string_hash(text), hash, "hashCode of {text:?}");
        assert_eq!(shard_of(text), shard, "shard of {text:?}");
    }
}

#[test]
fn the_vectors_agree_with_an_independent_computation() {
    for &(text, hash, shard) in VECTORS {
        let reference = reference_hash(text);
        assert_eq!(reference, i64::from(hash), "reference hashCode of {text:?}");
        assert_eq!(
            reference_shard(reference),
            i64::from(shard),
            "reference shard of {text:?}"
        );
    }
}

#[test]
fn strings_hashing_to_integer_min_value_are_in_shard_zero() {
    let texts: Vec<&str> = VECTORS
        .iter()
        .filter(|(_, hash, _)| *hash == i32::MIN)
        .map(|(text, _, _)| *text)
        .collect();
    assert_eq!(texts.len(), 3);
    for text in texts {
        assert_eq!(
            reference_hash(text),
            -(1 << 31),
            "{text:?} really hashes to MIN_VALUE"
        );
        // Java: Math.abs(MIN_VALUE) == MIN_VALUE, still negative ...
        assert_eq!(java_string_hash(text).wrapping_abs(), i32::MIN);
        // ... and MIN_VALUE % 64 == 0 (it is -2^25 * 64), so the shard is 0, not negative.
        assert_eq!(i32::MIN % 64, 0);
        assert_eq!(shard_of(text), 0);
    }
}

#[test]
fn every_shard_is_in_range_and_all_are_reached() {
    let mut seen = [false; 64];
    for n in 0..10_000 {
        let shard = shard_of(&format!("user{n}@example.com"));
        assert!(shard < 64);
        seen[usize::from(shard)] = true;
    }
    assert!(seen.iter().all(|&s| s), "10,000 users reach every shard");
}
