//! The masked form of an ID: a keyed permutation of its bits, so that the IDs a business shows
//! outside do not tell how many it issued, when, or on which worker.
//!
//! A plain ID is a count in disguise: two order numbers a day apart give the orders per day
//! (Leaf [#78](https://github.com/Meituan-Dianping/Leaf/issues/78), whose maintainers point to
//! bit permutation; yitter [#42](https://github.com/yitter/IdGenerator/issues/42)). The masked
//! form permutes the layout's bits with a secret key. It is a **bijection** on the layout's IDs
//! (two IDs never mask alike, and every masked value unmasks to one ID), and it is reversible
//! only with the key.
//!
//! **Construction.** An alternating Feistel network on the layout's `w` bits (63 for `baidu`,
//! 53 for `safe_js`), the structure of NIST SP 800-38G's FF1: the bits are split into a left
//! half of `w / 2` bits and a right half of the rest; round `r` adds, modulo the half's size, a
//! pseudorandom function of the other half to one half (left on even rounds, right on odd), for
//! [`ROUNDS`] rounds. Each round is undone by subtracting the same value, so the whole is a
//! permutation whatever the round function is. The round function is SipHash-2-4 (a PRF keyed
//! with the key's 128 bits) of the round number, the width and the other half. FF1 itself uses
//! AES as its round function; this is not FF1, it is FF1's shape with a PRF made for short
//! inputs (about 20 ns a call, so masking costs some 0.2 µs an ID).
//!
//! **What it hides**: the time, worker and sequence of an ID, and so the volume and the rate,
//! from anyone without the key; masked values of consecutive IDs look unrelated. **What it does
//! not**: masked texts do not sort as the IDs do; one ID always masks to the same text under one
//! key (equality shows; it is not encryption with a nonce); the key id and the layout's width
//! (the text's length) show; a masked text is not authenticated (any well-formed text unmasks
//! to some ID, so look the ID up before trusting it); whoever holds the key reads everything.
//!
//! **Keys and rotation.** A [`Masker`] holds several [`MaskKey`]s: the current one masks, every
//! one unmasks, and the text carries its key id (`{key id}_{base62}`). Store plain IDs and mask
//! at the edge: after a rotation the same ID masks to a new text, while the old texts still
//! unmask as long as their key is kept.
//!
//! ```
//! use uidgen_core::mask::{MaskKey, Masker};
//! use uidgen_core::Layout;
//! let layout = Layout::baidu_default()?;
//! let key = MaskKey::from_hex(1, "000102030405060708090a0b0c0d0e0f")?;
//! let masker = Masker::new(vec![key], 1)?;
//! let id = layout.compose(&layout.parts(1_000, 7, 3))?;
//! let text = masker.mask(&layout, id)?;
//! assert!(text.starts_with("1_") && text.len() == 2 + 11);
//! assert_eq!(masker.unmask(&layout, &text)?.parts.worker, 7);
//! # Ok::<(), uidgen_core::UidError>(())
//! ```

use std::fmt;

use siphasher::sip::SipHasher24;

use crate::error::{Result, UidError};
use crate::forms::IdForm;
use crate::layout::Layout;
use crate::layout::decoded::DecodedUid;

/// Rounds of the Feistel network: FF1's number. Four rounds with a PRF already make a
/// pseudorandom permutation of balanced halves (Luby–Rackoff); the extra rounds cover the
/// unbalanced halves of odd widths and the small domains of narrow layouts.
pub const ROUNDS: u8 = 10;

/// The narrowest and widest domains a key permutes: one bit a half at least, an ID at most.
const MIN_BITS: u32 = 2;
const MAX_BITS: u32 = 64;

/// What separates the key id from the masked digits in the text.
const SEPARATOR: char = '_';

/// The form's name in errors.
const FORM: &str = "masked";

/// One masking key: an id, carried in every text it masks, and a 128-bit secret.
///
/// Its `Debug` shows the id only: a key in a log line would undo the masking.
///
/// ```
/// use uidgen_core::mask::MaskKey;
/// let key = MaskKey::from_hex(3, "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b")?;
/// let masked = key.permute(12_345, 63)?;
/// assert_ne!(masked, 12_345);
/// assert_eq!(key.unpermute(masked, 63)?, 12_345);
/// assert_eq!(format!("{key:?}"), "MaskKey { id: 3, secret: \"(hidden)\" }");
/// assert!(MaskKey::from_hex(3, "not hex").is_err());
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Clone)]
pub struct MaskKey {
    id: u16,
    prf: SipHasher24,
}

impl MaskKey {
    /// A key from its id and its 16 secret bytes. An all-zero secret is refused: it is the
    /// placeholder a configuration is copied with, not a secret.
    pub fn new(id: u16, secret: [u8; 16]) -> Result<Self> {
        if secret == [0; 16] {
            return Err(bad_key(
                id,
                "the secret is all zeros; generate one (openssl rand -hex 16)",
            ));
        }
        Ok(Self {
            id,
            prf: SipHasher24::new_with_key(&secret),
        })
    }

    /// A key from its id and its secret written as 32 hex digits (`openssl rand -hex 16`).
    pub fn from_hex(id: u16, hex: &str) -> Result<Self> {
        let hex = hex.trim().as_bytes();
        if hex.len() != 32 {
            return Err(bad_key(id, "the secret must be 32 hex digits (128 bits)"));
        }
        let mut secret = [0u8; 16];
        for (byte, pair) in secret.iter_mut().zip(hex.chunks_exact(2)) {
            let (Some(high), Some(low)) = (hex_digit(pair[0]), hex_digit(pair[1])) else {
                return Err(bad_key(id, "the secret must be 32 hex digits (128 bits)"));
            };
            *byte = (high << 4) | low;
        }
        Self::new(id, secret)
    }

    /// The key's id, as the texts it masks carry it.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Permute `value`, a number of `bits` bits (2 to 64), into another of `bits` bits.
    pub fn permute(&self, value: u64, bits: u32) -> Result<u64> {
        let halves = Halves::split(value, bits)?;
        Ok(self.rounds(halves, true).join())
    }

    /// Undo [`MaskKey::permute`].
    pub fn unpermute(&self, value: u64, bits: u32) -> Result<u64> {
        let halves = Halves::split(value, bits)?;
        Ok(self.rounds(halves, false).join())
    }

    fn rounds(&self, mut h: Halves, forward: bool) -> Halves {
        for step in 0..ROUNDS {
            let round = if forward { step } else { ROUNDS - 1 - step };
            // Even rounds move the left half by a function of the right; odd ones the right by
            // a function of the left. The moved half is not an input of its own round, which is
            // what lets the inverse subtract the very value the forward pass added.
            if round % 2 == 0 {
                let f = self.round_function(round, h.bits, h.right);
                h.left = shift(h.left, f, h.left_bits(), forward);
            } else {
                let f = self.round_function(round, h.bits, h.left);
                h.right = shift(h.right, f, h.right_bits, forward);
            }
        }
        h
    }

    /// SipHash-2-4 of the round, the domain's width (so one key gives unrelated permutations
    /// on layouts of different widths) and the half.
    fn round_function(&self, round: u8, bits: u32, half: u64) -> u64 {
        let mut input = [0u8; 10];
        input[0] = round;
        input[1] = u8::try_from(bits).unwrap_or(u8::MAX);
        input[2..].copy_from_slice(&half.to_le_bytes());
        self.prf.hash(&input)
    }
}

impl fmt::Debug for MaskKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MaskKey")
            .field("id", &self.id)
            .field("secret", &"(hidden)")
            .finish()
    }
}

/// A value split into the Feistel network's two halves.
#[derive(Debug, Clone, Copy)]
struct Halves {
    bits: u32,
    right_bits: u32,
    left: u64,
    right: u64,
}

impl Halves {
    fn split(value: u64, bits: u32) -> Result<Self> {
        if !(MIN_BITS..=MAX_BITS).contains(&bits) {
            return Err(UidError::InvalidOption {
                name: "mask",
                reason: format!("a mask permutes {MIN_BITS} to {MAX_BITS} bits, not {bits}"),
            });
        }
        if value & !low_bits(bits) != 0 {
            return Err(UidError::MalformedForm {
                form: FORM,
                input: value.to_string(),
                reason: "the value is wider than the layout",
            });
        }
        let right_bits = bits - bits / 2;
        Ok(Self {
            bits,
            right_bits,
            // right_bits <= 63 since bits / 2 >= 1: the shift is in range.
            left: value >> right_bits,
            right: value & low_bits(right_bits),
        })
    }

    fn left_bits(&self) -> u32 {
        self.bits - self.right_bits
    }

    fn join(self) -> u64 {
        (self.left << self.right_bits) | self.right
    }
}

/// `half ± f` modulo `2^bits`.
fn shift(half: u64, f: u64, bits: u32, forward: bool) -> u64 {
    let moved = if forward {
        half.wrapping_add(f)
    } else {
        half.wrapping_sub(f)
    };
    moved & low_bits(bits)
}

/// The `bits` low bits set (1 to 64).
fn low_bits(bits: u32) -> u64 {
    u64::MAX >> (64 - bits.clamp(1, 64))
}

fn hex_digit(byte: u8) -> Option<u8> {
    char::from(byte)
        .to_digit(16)
        .and_then(|digit| u8::try_from(digit).ok())
}

fn bad_key(id: u16, reason: &str) -> UidError {
    UidError::InvalidOption {
        name: "mask.keys",
        reason: format!("key {id}: {reason}"),
    }
}

/// The keys of an ID space's masked form: one masks, all unmask.
///
/// ```
/// use uidgen_core::mask::{MaskKey, Masker};
/// use uidgen_core::Layout;
/// let layout = Layout::safe_js()?;
/// let old = MaskKey::from_hex(1, "00112233445566778899aabbccddeeff")?;
/// let new = MaskKey::from_hex(2, "ffeeddccbbaa99887766554433221100")?;
/// let before = Masker::new(vec![old.clone()], 1)?;
/// let after = Masker::new(vec![old, new], 2)?; // rotated: key 2 masks, key 1 still unmasks
/// let id = layout.compose(&layout.parts(5, 1, 0))?;
/// let old_text = before.mask(&layout, id)?;
/// let new_text = after.mask(&layout, id)?;
/// assert!(new_text.starts_with("2_") && old_text.starts_with("1_"));
/// assert_eq!(after.unmask(&layout, &old_text)?.id, id);
/// assert_eq!(after.unmask(&layout, &new_text)?.id, id);
/// assert!(Masker::new(vec![], 1).is_err());
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Masker {
    keys: Vec<MaskKey>,
    current: usize,
}

impl Masker {
    /// The keys, and the id of the one that masks. Key ids are unique.
    pub fn new(keys: Vec<MaskKey>, current: u16) -> Result<Self> {
        let refuse = |reason: String| UidError::InvalidOption {
            name: "mask",
            reason,
        };
        if keys.is_empty() {
            return Err(refuse("the masked form needs at least one key".into()));
        }
        for (i, key) in keys.iter().enumerate() {
            if keys[..i].iter().any(|earlier| earlier.id == key.id) {
                return Err(refuse(format!("key id {} is given twice", key.id)));
            }
        }
        let current = keys
            .iter()
            .position(|key| key.id == current)
            .ok_or_else(|| refuse(format!("the current key {current} is not among the keys")))?;
        Ok(Self { keys, current })
    }

    /// The key that masks.
    pub fn current(&self) -> &MaskKey {
        &self.keys[self.current]
    }

    /// Every key, the current one included.
    pub fn keys(&self) -> &[MaskKey] {
        &self.keys
    }

    /// The masked text of an ID of `layout`: the current key's id, `_`, and the permuted ID in
    /// base 62, as many digits as the layout's largest ID needs (so every text of a layout and
    /// key has one length). An ID the layout cannot hold is refused.
    pub fn mask(&self, layout: &Layout, id: u64) -> Result<String> {
        layout.decompose(id)?;
        let bits = width(layout);
        let masked = self.current().permute(id, bits)?;
        let digits = IdForm::Base62.encode(masked, IdForm::Base62.width(layout.max_id()));
        Ok(format!("{}{SEPARATOR}{digits}", self.current().id))
    }

    /// Read a masked text back (surrounding whitespace ignored) and decode the ID, with
    /// whichever of the keys its id names.
    pub fn unmask(&self, layout: &Layout, text: &str) -> Result<DecodedUid> {
        let text = text.trim();
        let malformed = |reason| UidError::MalformedForm {
            form: FORM,
            input: text.chars().take(64).collect(),
            reason,
        };
        let (key_id, digits) = text
            .split_once(SEPARATOR)
            .ok_or_else(|| malformed("expected a key id, `_` and base62 digits"))?;
        if key_id.is_empty() || !key_id.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed("the key id before `_` must be decimal digits"));
        }
        let key_id: u16 = key_id
            .parse()
            .map_err(|_| malformed("the key id is larger than any key's"))?;
        let key = self
            .keys
            .iter()
            .find(|key| key.id == key_id)
            .ok_or_else(|| malformed("no configured mask key has this key id"))?;
        let masked = IdForm::Base62
            .decode(digits, IdForm::Base62.width(layout.max_id()))
            .map_err(|_| {
                malformed("expected the layout's fixed number of base62 digits after `_`")
            })?;
        if masked > layout.max_id() {
            return Err(malformed("the digits are above the layout's largest ID"));
        }
        layout.decode(key.unpermute(masked, width(layout))?)
    }
}

/// The bits a layout's IDs span: every value below `2^width` is an ID of the layout, so the
/// permutation stays inside it (a `safe_js` ID masks to a number below 2^53).
fn width(layout: &Layout) -> u32 {
    (u64::BITS - layout.max_id().leading_zeros()).max(MIN_BITS)
}
