//! [`Record`]: what a holder writes into its claim key and its id's mark key.

use serde::{Deserialize, Serialize};

/// A holder's report, written into `{prefix}/workers/{id}` (under its lease) and
/// `{prefix}/marks/{id}` (kept after the lease is gone) in one transaction.
///
/// ```
/// use uidgen_etcd::Record;
/// let record = Record { holder: "10.0.0.7:8080".into(), life: 9, timestamp: 1_000, reserved_until: 601_000 };
/// assert_eq!(Record::parse(&record.to_json()), Some(record));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Who holds (or last held) the id: `host:port`.
    pub holder: String,
    /// The holder's random life number: tells two starts with one address apart.
    pub life: u64,
    /// The holder's clock when it wrote this (ms since the Unix epoch).
    pub timestamp: u64,
    /// The holder stamps nothing past this instant (ms since the Unix epoch, its clock)
    /// unless etcd accepts a later record first; the id's next holder starts above it.
    pub reserved_until: u64,
}

impl Record {
    /// The JSON written to etcd.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings and integers always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A record read back; `None` when it is not one (then the id is left alone).
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}
