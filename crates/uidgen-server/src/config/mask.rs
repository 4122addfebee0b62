//! `[mask]`: the keys of the masked form of IDs (`?form=masked`, `uidgen decode --form masked`;
//! issue 33), a keyed permutation that hides an ID's time, worker and sequence
//! ([`uidgen_core::mask`]). Off by default: without keys the form is refused, naming this
//! section. The secrets never reach a log line or an error message.

use std::fmt;

use serde::{Deserialize, Serialize};
use uidgen_core::UidError;
use uidgen_core::mask::{MaskKey, Masker};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// How `mask.keys` is written, for its errors.
const KEYS_SHAPE: &str = "expected `id:secret` pairs separated by commas, each a key id from 0 \
                          to 65535 and 32 hex digits, e.g. `1:` and the output of \
                          `openssl rand -hex 16`";

/// `[mask]`.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MaskConfig {
    /// The keys: `id:secret` pairs separated by commas (`1:<32 hex digits>,2:<32 hex
    /// digits>`). Empty (the default): no masked form. Every key unmasks; keep a retired
    /// key listed for as long as texts it masked may come back.
    pub keys: String,
    /// The id of the key that masks (default: the last one listed).
    pub current: Option<u16>,
}

impl fmt::Debug for MaskConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let listed = self
            .keys
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .count();
        f.debug_struct("MaskConfig")
            .field("keys", &format_args!("({listed} listed, secrets hidden)"))
            .field("current", &self.current)
            .finish()
    }
}

/// The `[mask]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[
    (&["mask", "keys"], Kind::Str),
    (&["mask", "current"], Kind::Int),
];

impl MaskConfig {
    /// The keys, checked, as the [`Masker`] the routes use; `None` when none is listed.
    pub(crate) fn settings(&self) -> Result<Option<Masker>, ConfigError> {
        let pairs: Vec<&str> = self
            .keys
            .split(',')
            .map(str::trim)
            .filter(|pair| !pair.is_empty())
            .collect();
        if pairs.is_empty() {
            return match self.current {
                Some(id) => Err(invalid(
                    "mask.current",
                    format!("names key {id}, but `mask.keys` lists no key"),
                )),
                None => Ok(None),
            };
        }
        let mut keys: Vec<MaskKey> = Vec::with_capacity(pairs.len());
        for pair in pairs {
            // Nothing of a pair is echoed: a misplaced secret would land in the log.
            let (id, secret) = pair
                .split_once(':')
                .ok_or_else(|| invalid("mask.keys", KEYS_SHAPE))?;
            let id: u16 = id
                .trim()
                .parse()
                .map_err(|_| invalid("mask.keys", KEYS_SHAPE))?;
            if keys.iter().any(|key| key.id() == id) {
                return Err(invalid("mask.keys", format!("key id {id} is listed twice")));
            }
            let key = MaskKey::from_hex(id, secret).map_err(|e| invalid("mask.keys", reason(e)))?;
            keys.push(key);
        }
        let current = match self.current {
            Some(id) if keys.iter().any(|key| key.id() == id) => id,
            Some(id) => {
                return Err(invalid(
                    "mask.current",
                    format!("names key {id}, which `mask.keys` does not list"),
                ));
            }
            None => keys.last().map_or(0, MaskKey::id),
        };
        Masker::new(keys, current)
            .map(Some)
            .map_err(|e| invalid("mask.keys", reason(e)))
    }
}

/// The reason of a key's refusal, without the core's "invalid option" wrapping.
fn reason(error: UidError) -> String {
    match error {
        UidError::InvalidOption { reason, .. } => reason,
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    const ONE: &str = "1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
    const TWO: &str = "2:00112233445566778899aabbccddeeff";

    #[test]
    fn no_keys_no_masked_form() {
        assert!(parse("", &[]).unwrap().settings().unwrap().mask.is_none());
        assert!(
            parse("[mask]\nkeys = \" , \"", &[])
                .unwrap()
                .settings()
                .unwrap()
                .mask
                .is_none()
        );
    }

    #[test]
    fn keys_from_the_file_or_the_environment_the_last_one_masking() {
        let file = parse(&format!("[mask]\nkeys = \"{ONE}, {TWO}\""), &[]).unwrap();
        let masker = file.settings().unwrap().mask.unwrap();
        assert_eq!(masker.current().id(), 2);
        assert_eq!(masker.keys().len(), 2);
        let keys = format!("{ONE},{TWO}");
        let env = parse(
            "",
            &[
                ("UIDGEN_MASK_KEYS", keys.as_str()),
                ("UIDGEN_MASK_CURRENT", "1"),
            ],
        )
        .unwrap();
        assert_eq!(env.settings().unwrap().mask.unwrap().current().id(), 1);
        // The configuration's debug form (what a log of it would show) keeps the secrets out.
        let shown = format!("{:?} {:?}", env, env.settings().unwrap());
        assert!(!shown.contains("8f4e1c2a"), "{shown}");
        assert!(!shown.contains("00112233"), "{shown}");
    }

    #[test]
    fn bad_keys_are_refused_without_echoing_a_secret() {
        let secret = "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
        let cases: &[Refusal] = &[
            (
                "[mask]\nkeys = \"8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b\"",
                &[],
                "invalid config key `mask.keys`: expected `id:secret` pairs",
            ),
            (
                "[mask]\nkeys = \"8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b:1\"",
                &[],
                "expected `id:secret` pairs",
            ),
            (
                "[mask]\nkeys = \"1:abc\"",
                &[],
                "key 1: the secret must be 32 hex digits",
            ),
            (
                "[mask]\nkeys = \"1:00000000000000000000000000000000\"",
                &[],
                "key 1: the secret is all zeros",
            ),
            (
                "[mask]\nkeys = \"1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b,1:00112233445566778899aabbccddeeff\"",
                &[],
                "key id 1 is listed twice",
            ),
            (
                "[mask]\nkeys = \"1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b\"\ncurrent = 3",
                &[],
                "invalid config key `mask.current`: names key 3, which `mask.keys` does not list",
            ),
            ("[mask]\ncurrent = 3", &[], "`mask.keys` lists no key"),
            ("[mask]\ncurrent = 70000", &[], "mask.current"),
            ("[mask]\nkey = \"1:x\"", &[], "key"),
        ];
        assert_refused(cases);
        for (text, _, _) in cases {
            let err = parse(text, &[]).unwrap_err().to_string();
            assert!(!err.contains(secret), "{err}");
        }
    }
}
