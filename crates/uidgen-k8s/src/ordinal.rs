//! [`PodOrdinal`]: which pod of the StatefulSet this is.

use crate::error::{Result, StatefulSetError};

/// The variable that, when set, gives the ordinal instead of the hostname (for a pod whose
/// hostname is overridden, or a test).
pub const ENV_POD_ORDINAL: &str = "UIDGEN_POD_ORDINAL";

/// The variable Kubernetes sets to the pod's name (`<statefulset>-<ordinal>`).
pub const ENV_HOSTNAME: &str = "HOSTNAME";

/// A StatefulSet pod's ordinal: the stable index Kubernetes gives each of its pods (the
/// `3` of `uidgen-3`), kept across reschedules and restarts.
///
/// ```
/// use uidgen_k8s::{PodOrdinal, StatefulSetError};
/// assert_eq!(PodOrdinal::from_hostname("uidgen-12")?.value(), 12);
/// assert!(matches!(
///     PodOrdinal::from_hostname("uidgen"),
///     Err(StatefulSetError::NoOrdinalInHostname { .. })
/// ));
/// assert_eq!(PodOrdinal::from_vars(Some("7"), Some("uidgen-3"))?.value(), 7);
/// # Ok::<(), StatefulSetError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PodOrdinal(u64);

impl PodOrdinal {
    /// An ordinal given as a number.
    pub const fn new(value: u64) -> Self {
        Self(value)
    }

    /// The ordinal.
    pub const fn value(self) -> u64 {
        self.0
    }

    /// The ordinal this process runs as: `UIDGEN_POD_ORDINAL` when set, else the suffix of
    /// `HOSTNAME` (see [`from_vars`](Self::from_vars)).
    pub fn from_env() -> Result<Self> {
        let var = |name| std::env::var(name).ok();
        Self::from_vars(
            var(ENV_POD_ORDINAL).as_deref(),
            var(ENV_HOSTNAME).as_deref(),
        )
    }

    /// The ordinal from the two variables' values: `pod_ordinal` when set (it must be a
    /// non-negative integer: a malformed value is refused, never skipped in favour of the
    /// hostname), else `hostname`'s numeric suffix.
    pub fn from_vars(pod_ordinal: Option<&str>, hostname: Option<&str>) -> Result<Self> {
        match (pod_ordinal, hostname) {
            (Some(text), _) => parse_digits(text.trim()).map(Self).ok_or_else(|| {
                StatefulSetError::MalformedOrdinal {
                    variable: ENV_POD_ORDINAL,
                    value: text.to_owned(),
                }
            }),
            (None, Some(hostname)) => Self::from_hostname(hostname),
            (None, None) => Err(StatefulSetError::NoPodIdentity),
        }
    }

    /// The ordinal a StatefulSet pod's name ends in: the digits after its last `-`.
    pub fn from_hostname(hostname: &str) -> Result<Self> {
        // A pod's hostname is its name; a FQDN-style value keeps the name in the first label.
        let name = hostname.trim().split('.').next().unwrap_or_default();
        name.rsplit_once('-')
            .and_then(|(set, digits)| (!set.is_empty()).then_some(digits))
            .and_then(parse_digits)
            .map(Self)
            .ok_or_else(|| StatefulSetError::NoOrdinalInHostname {
                hostname: hostname.to_owned(),
            })
    }
}

/// `text` as a number when it is only ASCII digits (no sign, no spaces) that fit a `u64`.
fn parse_digits(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ordinal_is_the_hostnames_numeric_suffix() {
        for (hostname, ordinal) in [
            ("uidgen-0", 0),
            ("uidgen-3", 3),
            ("my-id-service-17", 17),
            ("uidgen-4.uidgen.ids.svc.cluster.local", 4),
        ] {
            assert_eq!(
                PodOrdinal::from_hostname(hostname).unwrap().value(),
                ordinal
            );
        }
    }

    #[test]
    fn a_hostname_without_a_numeric_suffix_is_refused_naming_it() {
        for hostname in [
            "uidgen",
            "uidgen-",
            "uidgen-3a",
            "uidgen-+3",
            "-3",
            "",
            "uidgen-x",
        ] {
            let refused = PodOrdinal::from_hostname(hostname).unwrap_err();
            assert!(
                matches!(&refused, StatefulSetError::NoOrdinalInHostname { hostname: h } if h == hostname),
                "{hostname:?}: {refused}"
            );
        }
    }

    #[test]
    fn the_variable_wins_over_the_hostname() {
        let ordinal = PodOrdinal::from_vars(Some("5"), Some("uidgen-3")).unwrap();
        assert_eq!(ordinal, PodOrdinal::new(5));
        assert_eq!(
            PodOrdinal::from_vars(None, Some("uidgen-3")).unwrap(),
            PodOrdinal::new(3)
        );
    }

    #[test]
    fn a_malformed_variable_is_refused_not_skipped() {
        for text in ["", "-1", "three", "3.0", "99999999999999999999999"] {
            let refused = PodOrdinal::from_vars(Some(text), Some("uidgen-3")).unwrap_err();
            assert!(
                matches!(&refused, StatefulSetError::MalformedOrdinal { variable, value }
                    if *variable == ENV_POD_ORDINAL && value == text),
                "{text:?}: {refused}"
            );
        }
    }

    #[test]
    fn no_variable_at_all_is_refused() {
        assert!(matches!(
            PodOrdinal::from_vars(None, None),
            Err(StatefulSetError::NoPodIdentity)
        ));
    }
}
