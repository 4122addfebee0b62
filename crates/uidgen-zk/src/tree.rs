//! The tree under `/snowflake/{name}` and what its nodes hold.
//!
//! ```text
//! /snowflake/{name}/forever/{ip}:{port}-{id:010}   persistent; Leaf's node, JSON data
//!                                                  {"ip","port","timestamp"} + "reserved_until",
//!                                                  "life"
//! /snowflake/{name}/ids/{id}                       persistent claim of the id: "ip:port", or
//!                                                  a tombstone {"free":true,"floor":..} once
//!                                                  reclaimed
//! /snowflake/{name}/live/{id}                      ephemeral: the id's holder is running
//! /snowflake/{name}/namespace                      persistent: the namespace record, which
//!                                                  fences ids whose nodes ZooKeeper lost
//! /snowflake/{name}/clock/{ip}:{port}              ephemeral: written on every reading of
//!                                                  ZooKeeper's clock (`clock.rs`); data: this
//!                                                  host's ms then, `mtime`: ZooKeeper's
//! /snowflake/{name}/order/{space}                  persistent: the ID space's order mark
//!                                                  (`order_mark.rs`); never listed
//! ```
//!
//! Leaf lists `forever/` only, and so do our claims, peer checks and reclaims (with `ids/` and
//! `live/`): nothing lists the namespace's own children, so `namespace`, `clock/` and `order/`
//! are never taken for worker ids.
//!
//! Leaf numbers its forever nodes with ZooKeeper's persistent sequential suffix; we choose the
//! id ourselves (the lowest free one of the range) and write it in the same ten-digit form, so
//! the tree reads the same to a Leaf operator, and Leaf's own nodes (which have no `ids` claim)
//! are read as used ids. ZooKeeper's sequence counter is kept above every id we hold
//! (`assigner/sequence.rs`), so a Leaf server started beside us never numbers its node with
//! one of them.

use serde::{Deserialize, Serialize};

/// How often Java Leaf reports: a Leaf node without `reserved_until` is taken to reserve its
/// id up to its last report plus this.
pub(crate) const LEAF_REPORT_MS: u64 = 3_000;

/// The paths of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tree {
    root: String,
}

impl Tree {
    pub(crate) fn new(root: String) -> Self {
        Self { root }
    }

    pub(crate) fn root(&self) -> &str {
        &self.root
    }

    /// The namespace record (see `namespace.rs`).
    pub(crate) fn namespace(&self) -> String {
        format!("{}/namespace", self.root)
    }

    pub(crate) fn forever_dir(&self) -> String {
        format!("{}/forever", self.root)
    }

    pub(crate) fn ids_dir(&self) -> String {
        format!("{}/ids", self.root)
    }

    pub(crate) fn live_dir(&self) -> String {
        format!("{}/live", self.root)
    }

    /// The parent of the clock nodes (see `clock.rs`).
    pub(crate) fn clock_dir(&self) -> String {
        format!("{}/clock", self.root)
    }

    /// The clock node of the process at `listen_address` (`ip:port`).
    pub(crate) fn clock(&self, listen_address: &str) -> String {
        format!("{}/clock/{listen_address}", self.root)
    }

    pub(crate) fn forever(&self, child: &str) -> String {
        format!("{}/forever/{child}", self.root)
    }

    pub(crate) fn ids(&self, worker_id: u64) -> String {
        format!("{}/ids/{worker_id}", self.root)
    }

    pub(crate) fn live(&self, worker_id: u64) -> String {
        format!("{}/live/{worker_id}", self.root)
    }
}

/// A forever node's name: `{ip}:{port}-{id:010}`, Leaf's `listenAddress-sequence`.
pub(crate) fn forever_name(listen_address: &str, worker_id: u64) -> String {
    format!("{listen_address}-{worker_id:010}")
}

/// The listen address and worker id of a forever node's name; `None` for a name that is not
/// one (nothing of ours or Leaf's).
pub(crate) fn parse_forever_name(name: &str) -> Option<(&str, u64)> {
    let (address, sequence) = name.rsplit_once('-')?;
    if address.is_empty() || sequence.is_empty() || !sequence.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((address, sequence.parse().ok()?))
}

/// A forever node's data: Leaf's `Endpoint` JSON plus our `reserved_until`.
///
/// `timestamp` is the holder's clock at its last accepted report (Leaf's meaning).
/// `reserved_until` is the holder's promise: it stamps no time unit ending after it unless it
/// first reports again (it is `timestamp + reservation`, rolling forward with every report and
/// never lowered). Java Leaf does not write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeData {
    /// The holder's IP.
    pub ip: String,
    /// The holder's port (a string, as Leaf writes it; a number is read too).
    #[serde(deserialize_with = "string_or_number")]
    pub port: String,
    /// The holder's clock at its last accepted report (ms since the Unix epoch).
    pub timestamp: u64,
    /// Until when the holder may stamp without reporting again (ms, its clock); absent in
    /// Leaf's nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_until: Option<u64>,
    /// A random number each holder life writes with its reports, so that a holder whose
    /// report's reply was lost knows the write it finds is its own; absent in Leaf's nodes
    /// and in a claim's first write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub life: Option<u64>,
}

impl NodeData {
    /// The instant before which every ID its last writer stamped lies (in its clock's labels):
    /// `reserved_until`, or for a Leaf node its last report plus Leaf's report interval (Leaf
    /// has no fence: stop Leaf while ZooKeeper is up before uidgen takes its ids over).
    pub fn reserved_until_ms(&self) -> u64 {
        self.reserved_until
            .unwrap_or_else(|| self.timestamp.saturating_add(LEAF_REPORT_MS))
    }

    pub(crate) fn to_json(&self) -> Vec<u8> {
        // A struct of strings and integers always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub(crate) fn parse(path: &str, bytes: &[u8]) -> crate::error::Result<Self> {
        serde_json::from_slice(bytes).map_err(|e| crate::error::ZkError::InvalidNode {
            path: path.to_owned(),
            reason: format!("not Leaf's JSON {{ip, port, timestamp}}: {e}"),
        })
    }
}

fn string_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Port {
        Text(String),
        Number(u64),
    }
    Ok(match Port::deserialize(d)? {
        Port::Text(text) => text,
        Port::Number(n) => n.to_string(),
    })
}

/// What an `ids/{id}` node says: claimed by an ip:port, or free since a reclaim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdClaim {
    /// Claimed; the data is the holder's ip:port.
    Held(String),
    /// Freed by a reclaim: a new holder stamps nothing before `floor`.
    Free(Tombstone),
}

/// The data of a reclaimed id's `ids` node: where its previous holder stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tombstone {
    /// Always true: marks the node as a tombstone rather than a claim.
    pub(crate) free: bool,
    /// The previous holder's reserved-until (at least its last report plus the outage
    /// allowance): the next holder's floor.
    pub(crate) floor: u64,
    /// The previous holder's ip:port.
    pub(crate) previous: String,
    /// The reclaimer's clock when it freed the id.
    pub(crate) reclaimed_at: u64,
}

impl IdClaim {
    pub(crate) fn parse(bytes: &[u8]) -> Self {
        match serde_json::from_slice::<Tombstone>(bytes) {
            Ok(tombstone) if tombstone.free => Self::Free(tombstone),
            _ => Self::Held(String::from_utf8_lossy(bytes).into_owned()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn forever_names_read_as_leaf_writes_them() {
        assert_eq!(forever_name("10.0.0.7:8080", 5), "10.0.0.7:8080-0000000005");
        assert_eq!(
            parse_forever_name("10.0.0.7:8080-0000000005"),
            Some(("10.0.0.7:8080", 5))
        );
        assert_eq!(
            parse_forever_name("[::1]:80-0000000017"),
            Some(("[::1]:80", 17))
        );
        for bad in ["nohyphen", "-0000000001", "a:1-", "a:1-x1"] {
            assert_eq!(parse_forever_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn leaf_json_is_read_and_ours_adds_reserved_until() {
        let leaf = br#"{"ip":"10.0.0.7","port":"8080","timestamp":1700000000000}"#;
        let data = NodeData::parse("/x", leaf).unwrap();
        assert_eq!(data.reserved_until, None);
        assert_eq!(data.reserved_until_ms(), 1_700_000_003_000);
        let ours = NodeData {
            reserved_until: Some(9),
            life: Some(7),
            ..data
        };
        let json = String::from_utf8(ours.to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"ip":"10.0.0.7","port":"8080","timestamp":1700000000000,"reserved_until":9,"life":7}"#
        );
        let numeric = br#"{"ip":"h","port":8080,"timestamp":1}"#;
        assert_eq!(NodeData::parse("/x", numeric).unwrap().port, "8080");
        assert!(NodeData::parse("/x", b"garbage").is_err());
    }

    #[test]
    fn an_ids_node_is_a_claim_or_a_tombstone() {
        assert_eq!(
            IdClaim::parse(b"10.0.0.7:8080"),
            IdClaim::Held("10.0.0.7:8080".into())
        );
        let tombstone = br#"{"free":true,"floor":5,"previous":"a:1","reclaimed_at":9}"#;
        assert!(matches!(IdClaim::parse(tombstone), IdClaim::Free(t) if t.floor == 5));
    }
}
