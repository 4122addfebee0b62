//! The masked form is a bijection on every layout's IDs, undone only by its key: exhaustively on
//! narrow domains, by property tests on the real widths, and with known answers so that a text
//! masked today still unmasks after an upgrade.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use proptest::prelude::*;
use uidgen_core::layout::PRESET_NAMES;
use uidgen_core::mask::{MaskKey, Masker, ROUNDS};
use uidgen_core::{Layout, UidError};

const SECRET: &str = "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
const OTHER: &str = "00112233445566778899aabbccddeeff";

fn key(id: u16, hex: &str) -> MaskKey {
    MaskKey::from_hex(id, hex).unwrap()
}

/// Every value of every width from 2 to 18 bits, under two keys: each maps to a distinct value
/// of the same width, and back. A permutation of a finite set is exactly that.
#[test]
fn every_narrow_domain_is_permuted_exhaustively() {
    for secret in [SECRET, OTHER] {
        let key = key(1, secret);
        for bits in 2..=18u32 {
            let size = 1usize << bits;
            let mut seen = vec![false; size];
            let mut fixed_points = 0usize;
            for value in 0..size as u64 {
                let masked = key.permute(value, bits).unwrap();
                let slot = usize::try_from(masked).unwrap();
                assert!(
                    slot < size,
                    "{bits} bits: {value} masked to {masked}, out of the domain"
                );
                assert!(!seen[slot], "{bits} bits: {masked} reached twice");
                seen[slot] = true;
                assert_eq!(key.unpermute(masked, bits).unwrap(), value);
                fixed_points += usize::from(masked == value);
            }
            // A random permutation has one fixed point on average; many would mean rounds that
            // cancel out.
            assert!(
                fixed_points <= 8 + size / 1024,
                "{bits} bits: {fixed_points} fixed points"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// At the widths IDs have, unpermuting undoes permuting, and two values never meet.
    #[test]
    fn real_widths_round_trip(a in any::<u64>(), b in any::<u64>(), bits in prop::sample::select(vec![31u32, 41, 53, 62, 63, 64])) {
        let key = key(9, SECRET);
        let domain = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let (a, b) = (a & domain, b & domain);
        let (ma, mb) = (key.permute(a, bits).unwrap(), key.permute(b, bits).unwrap());
        prop_assert!(ma <= domain && mb <= domain);
        prop_assert_eq!(key.unpermute(ma, bits).unwrap(), a);
        prop_assert_eq!(a == b, ma == mb);
    }

    /// Every preset: the text has one length per layout, unmasks to the ID with its parts, and
    /// the masked number stays inside the layout (a safe_js ID masks below 2^53).
    #[test]
    fn every_preset_masks_and_unmasks(preset in 0..PRESET_NAMES.len(), raw in any::<u64>()) {
        let layout = Layout::preset(PRESET_NAMES[preset]).unwrap();
        let mut id = raw & layout.max_id();
        while layout.decompose(id).is_err() {
            id >>= 1;
        }
        let masker = Masker::new(vec![key(7, SECRET)], 7).unwrap();
        let text = masker.mask(&layout, id).unwrap();
        let longest = masker.mask(&layout, layout.max_id()).unwrap();
        prop_assert_eq!(text.len(), longest.len());
        let decoded = masker.unmask(&layout, &text).unwrap();
        prop_assert_eq!(decoded.id, id);
        prop_assert_eq!(decoded.parts, layout.decompose(id).unwrap());
    }
}

/// Consecutive IDs (what a busy second issues) look unrelated once masked: about half the bits
/// change from one to the next, and the masked values rise as often as they fall.
#[test]
fn consecutive_ids_mask_to_unrelated_values() {
    let layout = Layout::baidu_default().unwrap();
    let key = key(1, SECRET);
    let first = layout.compose(&layout.parts(86_400, 42, 0)).unwrap();
    let masked: Vec<u64> = (first..first + 4_096)
        .map(|id| key.permute(id, 63).unwrap())
        .collect();
    let flipped: u32 = masked.windows(2).map(|w| (w[0] ^ w[1]).count_ones()).sum();
    let mean = f64::from(flipped) / 4_095.0;
    assert!(
        (28.0..=35.0).contains(&mean),
        "{mean} of 63 bits change on average"
    );
    let rises = masked.windows(2).filter(|w| w[1] > w[0]).count();
    assert!(
        (1_800..=2_300).contains(&rises),
        "{rises} of 4,095 steps rise"
    );
    // Not a property of a constant xor or a rotation: the differences vary.
    let steps: std::collections::HashSet<u64> = masked.windows(2).map(|w| w[0] ^ w[1]).collect();
    assert!(steps.len() > 4_000);
}

/// Two keys permute differently, and one key permutes each width differently.
#[test]
fn keys_and_widths_give_unrelated_permutations() {
    let (one, two) = (key(1, SECRET), key(2, OTHER));
    let same = (0..1_000u64)
        .filter(|&v| one.permute(v, 63).unwrap() == two.permute(v, 63).unwrap())
        .count();
    assert_eq!(same, 0);
    let across = (0..1_000u64)
        .filter(|&v| one.permute(v, 63).unwrap() & ((1 << 53) - 1) == one.permute(v, 53).unwrap())
        .count();
    assert!(across < 5, "{across} values agree between 63 and 53 bits");
}

/// Texts masked by this version must unmask in every later one: the construction (ten rounds of
/// SipHash-2-4 over round, width and half; `{key id}_{base62}`) is pinned by known answers.
#[test]
fn known_answers_pin_the_construction() {
    assert_eq!(ROUNDS, 10);
    let layout = Layout::baidu_default().unwrap();
    let masker = Masker::new(vec![key(1, SECRET)], 1).unwrap();
    let id = layout.compose(&layout.parts(1_000, 7, 3)).unwrap();
    let text = masker.mask(&layout, id).unwrap();
    assert_eq!(text, KNOWN_BAIDU);
    assert_eq!(masker.unmask(&layout, KNOWN_BAIDU).unwrap().id, id);
    let js = Layout::safe_js().unwrap();
    let id = js.compose(&js.parts(5, 1, 0)).unwrap();
    assert_eq!(masker.mask(&js, id).unwrap(), KNOWN_SAFE_JS);
}

/// Computed apart from this crate, by a Python transcription of the construction (SipHash-2-4
/// from its paper, checked against the paper's vector), so the two agree bit for bit.
const KNOWN_BAIDU: &str = "1_AvqW6OVcB97";
const KNOWN_SAFE_JS: &str = "1_4ep0R0eC5";

/// The round function is SipHash-2-4: the reference vector of its paper (key 00..0f, message
/// 00..0e), through the same crate the masks use.
#[test]
fn the_round_function_is_siphash_2_4() {
    let key: [u8; 16] = std::array::from_fn(|i| u8::try_from(i).unwrap());
    let message: Vec<u8> = (0..15).collect();
    let hash = siphasher::sip::SipHasher24::new_with_key(&key).hash(&message);
    assert_eq!(hash, 0xa129_ca61_49be_45e5);
}

#[test]
fn rotation_keeps_old_texts_readable() {
    let layout = Layout::baidu_default().unwrap();
    let id = layout.compose(&layout.parts(77, 3, 9)).unwrap();
    let before = Masker::new(vec![key(1, SECRET)], 1).unwrap();
    let after = Masker::new(vec![key(1, SECRET), key(2, OTHER)], 2).unwrap();
    let old = before.mask(&layout, id).unwrap();
    let new = after.mask(&layout, id).unwrap();
    assert_ne!(old, new);
    assert!(new.starts_with("2_"));
    assert_eq!(after.unmask(&layout, &old).unwrap().id, id);
    assert_eq!(after.unmask(&layout, &new).unwrap().id, id);
    // Retired: key 1 dropped, its texts no longer read.
    let retired = Masker::new(vec![key(2, OTHER)], 2).unwrap();
    assert!(matches!(
        retired.unmask(&layout, &old),
        Err(UidError::MalformedForm { form: "masked", .. })
    ));
}

#[test]
fn bad_keys_and_texts_are_refused_with_their_reason() {
    let reason = |err: UidError| err.to_string();
    for hex in [
        "",
        "0011",
        "zz112233445566778899aabbccddeeff",
        "00112233445566778899aabbccddeeff00",
    ] {
        let err = reason(MaskKey::from_hex(4, hex).unwrap_err());
        assert!(
            err.contains("key 4: the secret must be 32 hex digits"),
            "{err}"
        );
    }
    let err = reason(MaskKey::from_hex(5, &"0".repeat(32)).unwrap_err());
    assert!(err.contains("all zeros"), "{err}");
    assert!(reason(Masker::new(vec![], 1).unwrap_err()).contains("at least one key"));
    let twice = Masker::new(vec![key(3, SECRET), key(3, OTHER)], 3).unwrap_err();
    assert!(reason(twice).contains("key id 3 is given twice"));
    let absent = Masker::new(vec![key(3, SECRET)], 4).unwrap_err();
    assert!(reason(absent).contains("current key 4 is not among the keys"));
    let wide = key(1, SECRET).permute(1 << 53, 53).unwrap_err();
    assert!(matches!(wide, UidError::MalformedForm { .. }));
    for bits in [0, 1, 65] {
        assert!(matches!(
            key(1, SECRET).permute(0, bits),
            Err(UidError::InvalidOption { name: "mask", .. })
        ));
    }

    let layout = Layout::safe_js().unwrap();
    let masker = Masker::new(vec![key(1, SECRET)], 1).unwrap();
    let good = masker.mask(&layout, 12_345).unwrap();
    let digits = good.split_once('_').unwrap().1.to_owned();
    for (text, why) in [
        (digits.clone(), "expected a key id"),
        (format!("_{digits}"), "must be decimal digits"),
        (format!("+1_{digits}"), "must be decimal digits"),
        (format!("70000_{digits}"), "larger than any key's"),
        (format!("2_{digits}"), "no configured mask key"),
        (format!("1_{digits}0"), "fixed number of base62 digits"),
        ("1_zzzzzzzzz".to_owned(), "above the layout's largest ID"),
        ("1_!!!!!!!!!".to_owned(), "fixed number of base62 digits"),
    ] {
        let err = reason(masker.unmask(&layout, &text).unwrap_err());
        assert!(err.contains(why), "{text:?}: {err}");
        assert!(err.starts_with("malformed masked form"), "{err}");
    }
    // An ID the layout cannot hold is not masked.
    assert!(matches!(
        masker.mask(&layout, 1 << 53),
        Err(UidError::MalformedId { .. })
    ));
    // Whitespace around a text is forgiven, as for the other forms.
    assert_eq!(
        masker.unmask(&layout, &format!(" {good}\n")).unwrap().id,
        12_345
    );
}
