//! The sharded ID layout: `index << 14 | shard << 8 | app_id`.
//!
//! From the most significant bit: the sign bit (always 0, so IDs fit a Java `long` and a
//! signed `BIGINT`), 49 bits of index (the number popped from the shard's list), 6 bits of shard
//! (64 shards) and 8 bits of app id. The layout is the original service's, so IDs made by it
//! and by uidgen decode alike.

use crate::error::{Result, ShardedError};

/// Bits of the app id (the lowest bits).
pub const APP_BITS: u32 = 8;
/// Bits of the shard, above the app id.
pub const SHARD_BITS: u32 = 6;
/// Bits of the index, above the shard; the sign bit is above them.
pub const INDEX_BITS: u32 = 63 - APP_BITS - SHARD_BITS;
/// Shards per app: 64.
pub const SHARDS: u8 = 1 << SHARD_BITS;
/// The largest index an ID can hold: 2^49 - 1.
pub const MAX_INDEX: u64 = (1 << INDEX_BITS) - 1;
/// [`MAX_INDEX`] as the store's `i64` (it fits: 2^49 - 1 < 2^63).
pub const MAX_INDEX_I64: i64 = (1 << INDEX_BITS) - 1;

// The store creates one row per shard; both sides must agree on how many there are.
const _: () = assert!(SHARDS == uidgen_store::ID_ALLOC_SHARDS);
const _: () = assert!(INDEX_BITS == 49);

/// An ID taken apart: which app, which shard, which index.
///
/// ```
/// use uidgen_sharded::ShardedId;
/// let id = ShardedId::new(7, 63, 1001)?;
/// assert_eq!(id.to_u64(), 1001 << 14 | 63 << 8 | 7);
/// assert_eq!(ShardedId::decode(id.to_u64())?, id);
/// # Ok::<(), uidgen_sharded::ShardedError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardedId {
    /// The app id, 0 to 255.
    pub app_id: u8,
    /// The shard, 0 to 63.
    pub shard: u8,
    /// The index within the shard, 0 to [`MAX_INDEX`].
    pub index: u64,
}

impl ShardedId {
    /// The parts of an ID, checked: a shard above 63 or an index above [`MAX_INDEX`] is an
    /// error, never cut to fit (cutting would make two indexes one ID).
    pub fn new(app_id: u8, shard: u8, index: u64) -> Result<Self> {
        if shard >= SHARDS {
            return Err(ShardedError::ShardOutOfRange { shard });
        }
        if index > MAX_INDEX {
            return Err(index_too_wide(index));
        }
        Ok(Self {
            app_id,
            shard,
            index,
        })
    }

    /// The 64-bit ID.
    pub fn to_u64(self) -> u64 {
        debug_assert!(self.shard < SHARDS && self.index <= MAX_INDEX);
        self.index << (SHARD_BITS + APP_BITS)
            | u64::from(self.shard) << APP_BITS
            | u64::from(self.app_id)
    }

    /// Take an ID apart. IDs with the sign bit set (above `i64::MAX`) are not sharded IDs.
    pub fn decode(id: u64) -> Result<Self> {
        if id > i64::MAX.unsigned_abs() {
            return Err(ShardedError::MalformedId {
                id: id.to_string(),
                reason: "the sign bit is set; sharded IDs are below 2^63",
            });
        }
        // Both masks leave at most 8 bits, so the conversions cannot fail; a failure would be a
        // broken mask, which the error reports rather than hides.
        let app = id & ((1 << APP_BITS) - 1);
        let shard = (id >> APP_BITS) & ((1 << SHARD_BITS) - 1);
        let (Ok(app_id), Ok(shard)) = (u8::try_from(app), u8::try_from(shard)) else {
            return Err(ShardedError::MalformedId {
                id: id.to_string(),
                reason: "the app or shard field does not fit 8 bits",
            });
        };
        Ok(Self {
            app_id,
            shard,
            index: id >> (SHARD_BITS + APP_BITS),
        })
    }

    /// Parse a decimal ID and take it apart.
    ///
    /// ```
    /// let id = uidgen_sharded::ShardedId::decode_str("16416519")?;
    /// assert_eq!((id.app_id, id.shard, id.index), (7, 63, 1001));
    /// assert!(uidgen_sharded::ShardedId::decode_str("-1").is_err());
    /// # Ok::<(), uidgen_sharded::ShardedError>(())
    /// ```
    pub fn decode_str(text: &str) -> Result<Self> {
        let trimmed = text.trim();
        if trimmed.is_empty() || !trimmed.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ShardedError::MalformedId {
                id: clip(trimmed),
                reason: "not a non-negative decimal integer",
            });
        }
        let id = trimmed
            .parse::<u64>()
            .map_err(|_| ShardedError::MalformedId {
                id: clip(trimmed),
                reason: "larger than 64 bits",
            })?;
        Self::decode(id)
    }
}

/// An index that does not fit the 49 index bits.
#[cold]
fn index_too_wide(index: u64) -> ShardedError {
    ShardedError::IndexOutOfRange {
        index,
        max: MAX_INDEX,
    }
}

/// Client text shortened for an error message.
fn clip(text: &str) -> String {
    const SHOWN: usize = 32;
    match text.char_indices().nth(SHOWN) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_and_decode_are_inverses_at_the_edges() {
        for (app, shard, index) in [
            (0, 0, 0),
            (255, 63, MAX_INDEX),
            (1, 2, 3),
            (128, 32, 1 << 40),
        ] {
            let id = ShardedId::new(app, shard, index).unwrap();
            assert_eq!(ShardedId::decode(id.to_u64()).unwrap(), id);
        }
        assert_eq!(
            ShardedId::new(255, 63, MAX_INDEX).unwrap().to_u64(),
            i64::MAX.unsigned_abs(),
            "the largest ID is i64::MAX"
        );
    }

    #[test]
    fn an_index_or_shard_that_does_not_fit_is_refused_not_cut() {
        assert!(matches!(
            ShardedId::new(1, 0, MAX_INDEX + 1),
            Err(ShardedError::IndexOutOfRange { index, max: MAX_INDEX }) if index == MAX_INDEX + 1
        ));
        assert!(matches!(
            ShardedId::new(1, 64, 1),
            Err(ShardedError::ShardOutOfRange { shard: 64 })
        ));
        assert!(ShardedId::decode(1 << 63).is_err());
        assert!(ShardedId::decode_str("18446744073709551616").is_err());
        assert!(ShardedId::decode_str("12a").is_err());
    }
}
