//! Leaf's biz tags: the one rule for what a tag may be, shared by the store that keeps
//! `leaf_alloc` rows, the server that documents it (`/openapi.json`, docs/API.md) and the
//! client that checks a tag before asking for it.
//!
//! The alphabet (issue 32) is ASCII letters and digits and `_ - . : @`: a tag travels in URL
//! paths (`/api/segment/get/{key}`) and must read the same to every client, log and database.
//! Spaces, emoji and zero-width characters would make two tags that look alike, or a path that
//! needs escaping. It holds what the systems uidgen takes over write (Leaf's
//! `leaf-segment-test`, Tinyid's `test_odd`) and what uidgen derives from a tag (a dated tag's
//! day, `orders:20261125`; Tinyid's fenced row, `test@uidgen`).

/// The longest biz tag (`leaf_alloc.biz_tag` is `VARCHAR(128)`).
pub const MAX_TAG_LEN: usize = 128;

/// The tag rule as a regular expression, for documents that state it (`/openapi.json`, with
/// [`MAX_TAG_LEN`] as the length bound): the alphabet, and at least one letter or digit, so
/// that no tag is a path's `.` or `..`, which clients resolve away before sending.
pub const TAG_PATTERN: &str = "^[A-Za-z0-9_.:@-]*[A-Za-z0-9][A-Za-z0-9_.:@-]*$";

/// The characters a tag may hold besides ASCII letters and digits.
pub const TAG_PUNCTUATION: &str = "_-.:@";

/// Whether `c` may appear in a biz tag.
pub fn is_tag_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || TAG_PUNCTUATION.contains(c)
}

/// Check a biz tag: 1 to [`MAX_TAG_LEN`] characters, each an ASCII letter or digit or one of
/// [`TAG_PUNCTUATION`], at least one a letter or digit ([`TAG_PATTERN`]). The error is the
/// reason, for the caller's own error type.
///
/// ```
/// use uidgen_core::check_biz_tag;
/// assert!(check_biz_tag("order").is_ok());
/// assert!(check_biz_tag("orders:20261125").is_ok());
/// assert_eq!(check_biz_tag("").unwrap_err(), "biz tag is empty");
/// assert!(check_biz_tag(" order").is_err());
/// assert!(check_biz_tag("or\u{200b}der").unwrap_err().contains("U+200B"));
/// assert!(check_biz_tag(&"x".repeat(129)).is_err());
/// assert!(check_biz_tag("..").is_err());
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
    if let Some(c) = biz_tag.chars().find(|&c| !is_tag_char(c)) {
        return Err(format!(
            "biz tag {:?} holds {c:?} (U+{:04X}); a tag holds only ASCII letters, digits and \
             {}",
            biz_tag.chars().take(64).collect::<String>(),
            u32::from(c),
            TAG_PUNCTUATION
                .chars()
                .map(String::from)
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if !biz_tag.chars().any(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "biz tag {biz_tag:?} has no letter or digit; a tag needs one (`.` and `..` would be \
             resolved away in a URL path)"
        ));
    }
    Ok(())
}
