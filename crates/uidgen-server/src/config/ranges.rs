//! The worker id ranges of `[worker]`: the servers' own (`worker.range`, or Vesta's server
//! range on Vesta layouts) and the *embedded range* leased to clients' fallbacks
//! (`worker.fallback_range`), kept apart.
//!
//! Vesta splits a 10-bit machine id between its release modes: the embedded library and CLI
//! take 0–923, the server 924–1023 (<https://github.com/robertmilowski/vesta-id-generator>,
//! `MachineIdsProvider`'s ranges; `uidgen_zk::VESTA_SERVER_RANGE`). On the Vesta layouts the
//! servers therefore default to 924–1023 for every assigner (but `machine`, whose ids are fixed
//! at 0–1023) and lease 0–923 to clients, so the two never overlap. Other layouts lease
//! nothing unless `worker.fallback_range` is set.

use uidgen_core::Layout;
use uidgen_etcd::{EtcdOptions, EtcdWorkerIdAssigner};
use uidgen_store::{DisposableWorkerIdAssigner, LeasedWorkerIdAssigner};
use uidgen_worker::{MachineWorkerIdAssigner, StaticWorkerIdAssigner, WorkerIdRange};
use uidgen_zk::{ReleaseMode, ZooKeeperWorkerIdAssigner};

use super::error::{ConfigError, invalid};
use super::vesta::is_vesta;
use super::worker::{AssignerKind, WorkerConfig, WorkerSettings};

/// What `worker.fallback_range` says to lease nothing.
const OFF: &str = "off";

/// The embedded range: `worker.fallback_range` (`"off"` for none), else Vesta's embedded
/// range (0-923) on a Vesta layout when the assigner is not `machine`, else `None`.
fn fallback_range(
    config: &WorkerConfig,
    layout: &Layout,
) -> Result<Option<WorkerIdRange>, ConfigError> {
    match config.fallback_range.as_deref().map(str::trim) {
        Some(text) if text.is_empty() || text.eq_ignore_ascii_case(OFF) => Ok(None),
        Some(text) => text
            .parse::<WorkerIdRange>()
            .map(Some)
            .map_err(|e| invalid("worker.fallback_range", format!("{e}, or \"off\""))),
        None if is_vesta(layout) && config.assigner != AssignerKind::Machine => {
            Ok(Some(ReleaseMode::Embedded.default_range(layout)))
        }
        None => Ok(None),
    }
}

/// The worker ids this server's assigner may hand out, fitted to the layout, and where that
/// range comes from (for messages).
pub(super) fn effective_server_range(
    worker: &WorkerSettings,
    layout: &Layout,
) -> Result<(WorkerIdRange, String), ConfigError> {
    let (range, source) = match worker.server_range {
        Some(range) if worker.range.is_some() => (range, "`worker.range`".to_owned()),
        Some(range) => (range, "the default on Vesta layouts".to_owned()),
        None => {
            // Each coordinator's default and name are its crate's; the store's and the worker
            // crate's assigners name theirs by their registry names too.
            let (range, name) = match worker.assigner {
                AssignerKind::Disposable => (
                    DisposableWorkerIdAssigner::default_range(),
                    DisposableWorkerIdAssigner::REGISTRY_NAME,
                ),
                AssignerKind::Zookeeper => (
                    ReleaseMode::Server.default_range(layout),
                    ZooKeeperWorkerIdAssigner::REGISTRY_NAME,
                ),
                AssignerKind::Machine => (
                    WorkerIdRange::full(layout),
                    MachineWorkerIdAssigner::REGISTRY_NAME,
                ),
                AssignerKind::Etcd => (
                    EtcdOptions::default_range(layout),
                    EtcdWorkerIdAssigner::REGISTRY_NAME,
                ),
                AssignerKind::Leased => (
                    LeasedWorkerIdAssigner::default_range(),
                    LeasedWorkerIdAssigner::REGISTRY_NAME,
                ),
                AssignerKind::Static => (
                    StaticWorkerIdAssigner::default_range(),
                    StaticWorkerIdAssigner::REGISTRY_NAME,
                ),
                // Its ids are leased as static ids are, in the static range.
                AssignerKind::Statefulset => {
                    (StaticWorkerIdAssigner::default_range(), "statefulset")
                }
            };
            (range, format!("the {name} assigner's default"))
        }
    };
    let range = range
        .within(layout)
        .map_err(|e| invalid("worker.range", e.to_string()))?;
    Ok((range, source))
}

/// The embedded range, which must fit the layout and keep clear of this server's own range
/// (the store would refuse one of the two at the first claim) and of a static worker id.
pub(super) fn checked_fallback_range(
    config: &WorkerConfig,
    worker: &WorkerSettings,
    layout: &Layout,
) -> Result<Option<WorkerIdRange>, ConfigError> {
    let Some(configured) = fallback_range(config, layout)? else {
        return Ok(None);
    };
    let embedded = configured
        .within(layout)
        .map_err(|e| invalid("worker.fallback_range", e.to_string()))?;
    let (servers, source) = effective_server_range(worker, layout)?;
    if servers.overlaps(embedded) {
        let default = if config.fallback_range.is_none() {
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
    if worker.assigner == AssignerKind::Static
        && let Some(id) = worker.id
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
    // Returned as configured, as the leasing service has always taken it.
    Ok(Some(configured))
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{assert_refused, parse};

    fn ranges(text: &str) -> (Option<String>, Option<String>) {
        let worker = parse(text, &[]).unwrap().settings().unwrap().worker;
        (
            worker.server_range.map(|r| r.to_string()),
            worker.fallback_range.map(|r| r.to_string()),
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
