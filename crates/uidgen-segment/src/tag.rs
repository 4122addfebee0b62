//! A biz tag's check, in this crate's error.

use crate::error::{Result, SegmentError, display_tag};

/// Check a biz tag with the store's rules, reporting [`SegmentError::InvalidTag`].
///
/// ```
/// use uidgen_segment::{SegmentError, validate_tag};
/// assert!(validate_tag("order").is_ok());
/// assert!(matches!(validate_tag(""), Err(SegmentError::InvalidTag { .. })));
/// assert!(matches!(validate_tag(&"x".repeat(200)), Err(SegmentError::InvalidTag { .. })));
/// // One alphabet (`uidgen_core::TAG_PATTERN`): no spaces, quotes, emoji or zero-width marks.
/// assert!(validate_tag("leaf-segment-test").is_ok());
/// assert!(matches!(validate_tag("o'r\"d;er --"), Err(SegmentError::InvalidTag { .. })));
/// ```
pub fn validate_tag(tag: &str) -> Result<()> {
    uidgen_store::validate_tag(tag).map_err(|error| SegmentError::InvalidTag {
        tag: display_tag(tag),
        reason: match error {
            uidgen_store::StoreError::InvalidInput(reason) => reason,
            other => other.to_string(),
        },
    })
}
