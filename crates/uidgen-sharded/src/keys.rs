//! Every Redis key the service uses, built in one place from the configured prefix.
//!
//! - `{prefix}idList_{app}_{shard}`: a shard's list of indexes (the original's names);
//! - `{prefix}popped_{app}_{shard}`: the highest index ever popped from that list, its mark
//!   (see `pop.rs`);
//! - `{prefix}lock_{app}_{shard}`: the refill lock of one list, the original service's key, so
//!   that its servers and uidgen's refilling one Redis side by side (a rolling switch) exclude
//!   each other as the original's servers do among themselves;
//! - `{prefix}idList_`: the lock whose holder deletes the lists of removed apps (the original's
//!   config lock, the list prefix itself);
//! - `{prefix}verified.{run_id}.{replid}`: set once the lists on that server instance were
//!   purged (see `link.rs`).
//!
//! Mark, refill-lock and marker names do not start with `idList_`, so the list pattern never
//! matches them; the config lock does (`idList_*` matches `idList_`), and is no list:
//! [`Keys::parse_list`] is what tells a list, and a purge deletes only what it parses.

/// The key names of one prefix.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
        }
    }

    /// The list of one shard.
    pub(crate) fn list(&self, app_id: u8, shard: u8) -> String {
        format!("{}idList_{app_id}_{shard}", self.prefix)
    }

    /// The mark of one shard's list: the highest index ever popped from it.
    pub(crate) fn popped_mark(&self, app_id: u8, shard: u8) -> String {
        format!("{}popped_{app_id}_{shard}", self.prefix)
    }

    /// The refill lock of one shard's list (the original's `lock_{app}_{shard}`).
    pub(crate) fn refill_lock(&self, app_id: u8, shard: u8) -> String {
        format!("{}lock_{app_id}_{shard}", self.prefix)
    }

    /// The lock of the removed-app cleanup (the original's config lock, on the list prefix).
    pub(crate) fn config_lock(&self) -> String {
        format!("{}idList_", self.prefix)
    }

    /// The marker saying the lists on the server instance `instance` were purged.
    pub(crate) fn verified(&self, instance: &str) -> String {
        format!("{}verified.{instance}", self.prefix)
    }

    /// A `SCAN MATCH` pattern for every list of this prefix: the prefix with glob characters
    /// escaped, then `idList_*`.
    pub(crate) fn list_pattern(&self) -> String {
        let mut pattern = String::with_capacity(self.prefix.len() + 8);
        for c in self.prefix.chars() {
            if matches!(c, '*' | '?' | '[' | ']' | '\\') {
                pattern.push('\\');
            }
            pattern.push(c);
        }
        pattern.push_str("idList_*");
        pattern
    }

    /// The app and shard of a list key of this prefix, if it is one.
    pub(crate) fn parse_list(&self, key: &str) -> Option<(u8, u8)> {
        let rest = key.strip_prefix(&self.prefix)?.strip_prefix("idList_")?;
        let (app, shard) = rest.split_once('_')?;
        Some((app.parse().ok()?, shard.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::Keys;

    #[test]
    fn keys_follow_the_original_names_and_parse_back() {
        let keys = Keys::new("id.gen.");
        assert_eq!(keys.list(7, 63), "id.gen.idList_7_63");
        assert_eq!(keys.popped_mark(7, 63), "id.gen.popped_7_63");
        assert_eq!(keys.parse_list("id.gen.popped_7_63"), None);
        assert_eq!(keys.parse_list("id.gen.idList_7_63"), Some((7, 63)));
        assert_eq!(keys.refill_lock(7, 63), "id.gen.lock_7_63");
        assert_eq!(keys.config_lock(), "id.gen.idList_");
        assert_eq!(keys.parse_list("id.gen.lock_7_63"), None);
        assert_eq!(keys.parse_list(&keys.config_lock()), None);
        assert_eq!(keys.parse_list("other.idList_7_63"), None);
        assert_eq!(keys.parse_list("id.gen.idList_700_1"), None);
        assert_eq!(keys.list_pattern(), "id.gen.idList_*");
        assert_eq!(
            Keys::new("a*[b]?\\.").list_pattern(),
            "a\\*\\[b\\]\\?\\\\.idList_*"
        );
    }
}
