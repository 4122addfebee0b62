//! [`MarkRaise`], one raise of an ID space's order mark as every keeper takes it, and
//! [`OrderMarkRecord`], the JSON a keeper without columns of its own (an etcd key, a
//! ZooKeeper node) stores for a mark: one spelling of both, so the keepers and the fence
//! cannot drift apart. A leaf: [`OrderMarks`](crate::OrderMarks) names it, it names nothing.

use serde::{Deserialize, Serialize};

/// One raise of `space`'s order mark to `until_ms`, by `holder` at `now_ms` (its clock, ms
/// since the Unix epoch): what [`OrderMarks::raise_mark`](crate::OrderMarks::raise_mark) and
/// every keeper's own raise take.
///
/// ```
/// use uidgen_worker::MarkRaise;
/// let raise = MarkRaise::new("default", "10.0.0.7:8080", 1_800_000_000_000, 1_799_999_990_000);
/// assert_eq!(raise.until_ms, 1_800_000_000_000);
/// assert_eq!(
///     raise.record_json(),
///     br#"{"issued_until_ms":1800000000000,"holder":"10.0.0.7:8080","updated_ms":1799999990000}"#
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkRaise<'a> {
    /// The ID space whose mark rises.
    pub space: &'a str,
    /// Who raises it (`host:port`, worker id, pid), recorded for operators where the keeper
    /// has room for it.
    pub holder: &'a str,
    /// The mark asked for: no unit ending after it will have been stamped.
    pub until_ms: u64,
    /// The raiser's clock when it raises, recorded beside the holder.
    pub now_ms: u64,
}

impl<'a> MarkRaise<'a> {
    /// A raise of `space`'s mark to `until_ms` by `holder`, whose clock reads `now_ms`.
    pub const fn new(space: &'a str, holder: &'a str, until_ms: u64, now_ms: u64) -> Self {
        Self {
            space,
            holder,
            until_ms,
            now_ms,
        }
    }

    /// The [`OrderMarkRecord`] this raise writes, as JSON.
    pub fn record_json(&self) -> Vec<u8> {
        let record = OrderMarkRecord {
            issued_until_ms: self.until_ms,
            holder: self.holder.to_owned(),
            updated_ms: self.now_ms,
        };
        // A struct of strings and integers always serialises.
        serde_json::to_vec(&record).unwrap_or_default()
    }
}

/// The JSON value of a space's mark where the keeper stores a document (etcd's key,
/// ZooKeeper's node); the store keeps the same three in columns of `id_order_mark`.
///
/// ```
/// use uidgen_worker::OrderMarkRecord;
/// let json = br#"{"issued_until_ms":5,"holder":"a","updated_ms":1}"#;
/// assert_eq!(OrderMarkRecord::mark_in(json).unwrap(), 5);
/// assert!(OrderMarkRecord::mark_in(b"{}").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrderMarkRecord {
    /// No ID of the space was stamped with a unit ending after this (ms since the Unix epoch).
    pub issued_until_ms: u64,
    /// Who raised it last (`host:port`, worker id, pid), for operators.
    pub holder: String,
    /// The raiser's clock when it did.
    pub updated_ms: u64,
}

impl OrderMarkRecord {
    /// The mark that `json` records; the parser's error for anything that is not a record
    /// (someone else's key or node), for the keeper's message.
    pub fn mark_in(json: &[u8]) -> Result<u64, serde_json::Error> {
        serde_json::from_slice::<Self>(json).map(|record| record.issued_until_ms)
    }
}
