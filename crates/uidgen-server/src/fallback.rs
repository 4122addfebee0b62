//! The servers' half of the clients' embedded fallback: the *embedded range* of worker ids a
//! client's fallback may lease (`worker.fallback_range`), the servers' own default range beside
//! it on Vesta layouts, and the leasing service behind the fallback lease routes.
//!
//! Vesta splits a 10-bit machine id between its release modes: the embedded library and CLI
//! take 0–923, the server 924–1023 (<https://github.com/robertmilowski/vesta-id-generator>,
//! `MachineIdsProvider`'s ranges; `uidgen_zk::VESTA_SERVER_RANGE`). On the Vesta layouts the
//! servers therefore default to 924–1023 for every assigner (but `machine`, whose ids are fixed
//! at 0–1023) and lease 0–923 to clients, so the two never overlap; the store records both
//! ranges and refuses any other assigner in them. Other layouts lease nothing unless
//! `worker.fallback_range` is set.

use std::sync::Arc;

use uidgen_core::{FieldKind, Layout};
use uidgen_store::{FallbackLeases, Store, StoreError};
use uidgen_worker::WorkerIdRange;
use uidgen_zk::{ReleaseMode, VESTA_SERVER_RANGE};

use crate::config::{AssignerKind, Config, ConfigError};

/// The key of the embedded range.
pub const RANGE_KEY: &str = "worker.fallback_range";

/// What `worker.fallback_range` says to lease nothing.
const OFF: &str = "off";

/// Whether `layout` is one of Vesta's: a genMethod field and 1,024 machine ids, split between
/// servers and embedded generators.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_server::fallback::is_vesta;
/// assert!(is_vesta(&Layout::vesta_max_peak()?));
/// assert!(!is_vesta(&Layout::snowflake()?)); // 10 worker bits, but no genMethod
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub fn is_vesta(layout: &Layout) -> bool {
    layout.has(FieldKind::Method) && layout.max_worker_id() == VESTA_SERVER_RANGE.1
}

fn invalid(key: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        reason: reason.into(),
    }
}

/// The range this server's assigner registers: `worker.range`, else Vesta's server range
/// (924-1023) on a Vesta layout, else `None` (the assigner's own default). The `machine`
/// assigner's range is fixed, so it gets `worker.range` only (which it refuses).
///
/// # Errors
/// A `worker.range` that is not a range.
pub fn server_range(
    config: &Config,
    layout: &Layout,
) -> Result<Option<WorkerIdRange>, ConfigError> {
    let configured = config.worker.id_range()?;
    if configured.is_some() || config.worker.assigner == AssignerKind::Machine || !is_vesta(layout)
    {
        return Ok(configured);
    }
    Ok(Some(ReleaseMode::Server.default_range(layout)))
}

/// The embedded range this server leases to clients: `worker.fallback_range` (`"off"` for
/// none), else Vesta's embedded range (0-923) on a Vesta layout when the assigner is not
/// `machine`, else `None`.
///
/// # Errors
/// A value that is neither a range nor `off`.
pub fn fallback_range(
    config: &Config,
    layout: &Layout,
) -> Result<Option<WorkerIdRange>, ConfigError> {
    match config.worker.fallback_range.as_deref().map(str::trim) {
        Some(text) if text.is_empty() || text.eq_ignore_ascii_case(OFF) => Ok(None),
        Some(text) => text
            .parse::<WorkerIdRange>()
            .map(Some)
            .map_err(|e| invalid("worker.fallback_range", format!("{e}, or \"off\""))),
        None if is_vesta(layout) && config.worker.assigner != AssignerKind::Machine => {
            Ok(Some(ReleaseMode::Embedded.default_range(layout)))
        }
        None => Ok(None),
    }
}

/// The worker ids this server's assigner may hand out, fitted to the layout, and where that
/// range comes from (for messages).
fn effective_server_range(
    config: &Config,
    layout: &Layout,
) -> Result<(WorkerIdRange, String), ConfigError> {
    let (range, source) = match server_range(config, layout)? {
        Some(range) if config.worker.id_range.is_some() => (range, "`worker.range`".to_owned()),
        Some(range) => (range, "the default on Vesta layouts".to_owned()),
        None => {
            let (range, name) = match config.worker.assigner {
                AssignerKind::Disposable => (WorkerIdRange::from_low(1), "disposable"),
                AssignerKind::Zookeeper => (ReleaseMode::Server.default_range(layout), "zookeeper"),
                AssignerKind::Machine => (WorkerIdRange::full(layout), "machine"),
                AssignerKind::Etcd => (WorkerIdRange::full(layout), "etcd"),
                AssignerKind::Leased => (WorkerIdRange::from_low(0), "leased"),
                AssignerKind::Static => (WorkerIdRange::from_low(0), "static"),
            };
            (range, format!("the {name} assigner's default"))
        }
    };
    let range = range
        .within(layout)
        .map_err(|e| invalid("worker.range", e.to_string()))?;
    Ok((range, source))
}

/// The embedded range must fit the layout and keep clear of this server's own range (the
/// store would refuse one of the two at the first claim) and of a ZooKeeper static fallback.
pub(crate) fn validate(config: &Config) -> Result<(), ConfigError> {
    let layout = config.build_layout()?;
    let Some(configured) = fallback_range(config, &layout)? else {
        return Ok(());
    };
    let embedded = configured
        .within(&layout)
        .map_err(|e| invalid("worker.fallback_range", e.to_string()))?;
    let (servers, source) = effective_server_range(config, &layout)?;
    if servers.overlaps(embedded) {
        let default = if config.worker.fallback_range.is_none() {
            " (the default on Vesta layouts)"
        } else {
            ""
        };
        return Err(invalid(
            "worker.fallback_range",
            format!(
                "the embedded range {embedded}{default} overlaps this server's worker ids \
                 {servers} ({source}): a client's fallback and a server could stamp the same \
                 worker id. Give the clients ids no server uses (e.g. `worker.range = \
                 \"924-1023\"` and `worker.fallback_range = \"0-923\"` on a 10-bit field), or \
                 set `worker.fallback_range = \"off\"` for no leased fallback"
            ),
        ));
    }
    if config.worker.assigner == AssignerKind::Static
        && let Some(id) = config.worker.id
        && embedded.contains(id)
    {
        return Err(invalid(
            "worker.id",
            format!(
                "{id} lies in the embedded range {embedded} (`worker.fallback_range`), whose ids \
                 are leased to clients: pick an id in {servers} ({source})"
            ),
        ));
    }
    Ok(())
}

/// The leasing service for the fallback lease routes, when this server leases fallback ids.
///
/// # Errors
/// An invalid `worker.fallback_range` (already refused when the configuration was loaded).
pub fn start(
    config: &Config,
    store: &Store,
    layout: &Layout,
) -> Result<Option<Arc<FallbackLeases>>, ConfigError> {
    let Some(range) = fallback_range(config, layout)? else {
        return Ok(None);
    };
    tracing::info!(%range, "leasing fallback worker ids to clients (`worker.fallback_range`)");
    Ok(Some(Arc::new(FallbackLeases::new(store.clone(), range))))
}

/// A refused start, with what to do when the refusal comes from the default range of Vesta
/// layouts meeting a store that recorded another range for this assigner (a deployment from
/// before the split).
pub fn explain_refusal(config: &Config, layout: &Layout, error: StoreError) -> anyhow::Error {
    let hint = match &error {
        StoreError::WorkerRangeChanged {
            recorded,
            requested,
            ..
        } if config.worker.id_range.is_none() && is_vesta(layout) => Some(format!(
            "`worker.range` is unset, so this server asks for {requested}, Vesta's server range \
             (the default on Vesta layouts, leaving 0-923 to the clients' leased fallback); the \
             store recorded {recorded} before. To keep {recorded}, set `worker.range = \
             \"{recorded}\"` and `worker.fallback_range` to ids outside it (or \"off\"); to move \
             to the split, follow the steps below"
        )),
        _ => None,
    };
    match hint {
        Some(hint) => anyhow::Error::new(error).context(hint),
        None => error.into(),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{assert_refused, parse};

    use super::*;

    fn ranges(text: &str) -> (Option<String>, Option<String>) {
        let config = parse(text, &[]).unwrap();
        let layout = config.build_layout().unwrap();
        (
            server_range(&config, &layout)
                .unwrap()
                .map(|r| r.to_string()),
            fallback_range(&config, &layout)
                .unwrap()
                .map(|r| r.to_string()),
        )
    }

    #[test]
    fn vesta_layouts_split_the_worker_ids_between_servers_and_client_fallbacks() {
        let vesta = "[layout]\npreset = \"vesta_max_peak\"\n";
        let some = |a: &str, b: &str| (Some(a.to_owned()), Some(b.to_owned()));
        assert_eq!(ranges(vesta), some("924-1023", "0-923"));
        for assigner in ["leased", "zookeeper"] {
            let text = format!("{vesta}[worker]\nassigner = \"{assigner}\"\n");
            assert_eq!(ranges(&text), some("924-1023", "0-923"), "{assigner}");
        }
        let machine = format!("{vesta}[worker]\nassigner = \"machine\"\n");
        assert_eq!(ranges(&machine), (None, None));
        let off = format!("{vesta}[worker]\nrange = \"1-max\"\nfallback_range = \"off\"\n");
        assert_eq!(ranges(&off), (Some("1-max".to_owned()), None));
        // Other layouts keep their defaults and lease nothing unless told.
        assert_eq!(ranges(""), (None, None));
        assert_eq!(ranges("[layout]\npreset = \"snowflake\"\n"), (None, None));
        let set = "[worker]\nrange = \"1-3999999\"\nfallback_range = \"4000000-max\"\n";
        assert_eq!(
            ranges(set),
            (Some("1-3999999".to_owned()), Some("4000000-max".to_owned()))
        );
    }

    #[test]
    fn an_embedded_range_overlapping_the_servers_is_refused_saying_what_to_do() {
        let env = [
            ("UIDGEN_LAYOUT", "vesta_max_peak"),
            ("UIDGEN_WORKER_RANGE", "1-max"),
        ];
        let error = parse("", &env).unwrap_err().to_string();
        assert!(
            error.contains("invalid config key `worker.fallback_range`: the embedded range 0-923 (the default on Vesta layouts) overlaps this server's worker ids 1-1023 (`worker.range`)")
                && error.contains("set `worker.fallback_range = \"off\"`"),
            "{error}"
        );
        assert_refused(&[
            (
                "[worker]\nfallback_range = \"100-200\"",
                &[],
                "overlaps this server's worker ids 1-4194303 (the disposable assigner's default)",
            ),
            (
                "[worker]\nfallback_range = \"9-1\"",
                &[],
                "invalid worker id range `9-1`",
            ),
            (
                "[worker]\nrange = \"1-99\"\nfallback_range = \"100-99999999\"",
                &[],
                "does not fit the layout",
            ),
        ]);
        let env = [
            ("UIDGEN_LAYOUT", "vesta_max_peak"),
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", "900"),
        ];
        let error = parse("", &env).unwrap_err().to_string();
        assert!(
            error.contains("invalid config key `worker.id`: 900 lies in the embedded range 0-923")
                && error.contains("pick an id in 924-1023 (the default on Vesta layouts)"),
            "{error}"
        );
        let env = [
            ("UIDGEN_WORKER_RANGE", "1-99"),
            ("UIDGEN_WORKER_FALLBACK_RANGE", "100-199"),
        ];
        assert!(parse("", &env).is_ok());
    }
}
