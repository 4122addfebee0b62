//! `[[segment.groups]]`: tags served from several databases at once (Tinyid's multi-database
//! segments). Each entry names its databases and its tags; the library
//! ([`uidgen_segment::SegmentGroup`]) checks them, this layer only names the key.

use serde::{Deserialize, Serialize};

/// One `[[segment.groups]]` entry: `name`, `stores` (database URLs, 1 to 1024; database k holds
/// remainder k of new tags) and `tags` (served by this group; any other tag comes from `store`).
///
/// ```
/// use uidgen_server::config::Config;
/// let toml = r#"
/// [[segment.groups]]
/// name = "orders"
/// stores = ["postgres://postgres@10.0.0.1:5432/ids", "mysql://root@10.0.0.2:3306/ids"]
/// tags = ["order"]
/// "#;
/// let config = Config::from_toml_str(toml, std::iter::empty()).unwrap();
/// assert_eq!(config.segment.groups[0].stores.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentGroupConfig {
    /// The group's name, in logs, errors and `/v1/segments`.
    pub name: String,
    /// The databases, in the order their remainders are given to new tags.
    pub stores: Vec<String>,
    /// The biz tags the group serves.
    pub tags: Vec<String>,
}
