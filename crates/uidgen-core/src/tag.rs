//! Leaf's biz tags: the one rule for what a tag may be, shared by the store that keeps
//! `leaf_alloc` rows and by the client that checks a tag before asking for it.

/// The longest biz tag (`leaf_alloc.biz_tag` is `VARCHAR(128)`).
pub const MAX_TAG_LEN: usize = 128;

/// Check a biz tag: non-empty, at most [`MAX_TAG_LEN`] characters, no surrounding whitespace or
/// control characters (MySQL compares `'a'` and `'a '` as equal, so such tags would collide).
/// The error is the reason, for the caller's own error type.
///
/// ```
/// use uidgen_core::check_biz_tag;
/// assert!(check_biz_tag("order").is_ok());
/// assert_eq!(check_biz_tag("").unwrap_err(), "biz tag is empty");
/// assert!(check_biz_tag(" order").is_err());
/// assert!(check_biz_tag(&"x".repeat(129)).is_err());
/// ```
pub fn check_biz_tag(biz_tag: &str) -> Result<(), String> {
    if biz_tag.is_empty() {
        return Err("biz tag is empty".to_owned());
    }
    let len = biz_tag.chars().count();
    if len > MAX_TAG_LEN {
        return Err(format!(
            "biz tag is {len} characters long; at most {MAX_TAG_LEN} fit"
        ));
    }
    if biz_tag.trim() != biz_tag || biz_tag.chars().any(char::is_control) {
        return Err(format!(
            "biz tag {biz_tag:?} has surrounding whitespace or control characters"
        ));
    }
    Ok(())
}
