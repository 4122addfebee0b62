//! `[tls]`: serve HTTP and gRPC over TLS (rustls) with a PEM certificate chain and key. Off by
//! default: the zero-config start serves plain HTTP and gRPC and needs no certificate. The files
//! are read at `uidgen serve`'s start (the server's private `tls` module), where a bad one stops
//! it naming the key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};

/// `[tls]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// The certificate chain, PEM, leaf first (a relative path is taken in the state
    /// directory). Set together with `key`.
    pub cert: Option<PathBuf>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
}

/// The `[tls]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[(&["tls", "cert"], Kind::Str), (&["tls", "key"], Kind::Str)];

/// `[tls]` when on: both files named.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsSettings {
    /// `tls.cert`.
    pub cert: PathBuf,
    /// `tls.key`.
    pub key: PathBuf,
}

impl TlsConfig {
    /// `None` when neither key is set; both or neither, else the missing one is named.
    pub(crate) fn settings(&self) -> Result<Option<TlsSettings>, ConfigError> {
        let set = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
        match (set(&self.cert), set(&self.key)) {
            (None, None) => Ok(None),
            (Some(cert), Some(key)) => Ok(Some(TlsSettings { cert, key })),
            (Some(_), None) => Err(invalid(
                "tls.key",
                "tls.cert is set without its key; set both (PEM files) or neither",
            )),
            (None, Some(_)) => Err(invalid(
                "tls.cert",
                "tls.key is set without its certificate; set both (PEM files) or neither",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn tls_is_off_by_default_and_needs_both_files() {
        assert!(parse("", &[]).unwrap().settings().unwrap().tls.is_none());
        let on = parse("[tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"", &[])
            .unwrap()
            .settings()
            .unwrap();
        assert_eq!(on.tls.unwrap().key, std::path::Path::new("/k.pem"));
        let env = parse(
            "",
            &[("UIDGEN_TLS_CERT", "/c.pem"), ("UIDGEN_TLS_KEY", "/k.pem")],
        )
        .unwrap();
        assert!(env.settings().unwrap().tls.is_some());
        let cases: &[Refusal] = &[
            (
                "[tls]\ncert = \"/c.pem\"",
                &[],
                "invalid config key `tls.key`: tls.cert is set without its key",
            ),
            (
                "",
                &[("UIDGEN_TLS_KEY", "/k.pem")],
                "invalid config key `tls.cert`",
            ),
        ];
        assert_refused(cases);
    }
}
