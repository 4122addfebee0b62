//! `[statefulset]`: the Kubernetes StatefulSet worker-id assigner's section
//! (`worker.assigner = "statefulset"`). The pod's ordinal is read at start
//! ([`uidgen_k8s::PodOrdinal::from_env`]), not here: configuration parses the same on every pod.

use serde::{Deserialize, Serialize};
use uidgen_core::Layout;

use super::env_key::{EnvKey, Kind};
use super::error::{ConfigError, invalid};
use super::worker::{AssignerKind, WorkerSettings};

/// `[statefulset]`: how a pod's ordinal becomes its worker id.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StatefulSetConfig {
    /// Added to the pod's ordinal (default 0), so that several StatefulSets, or a StatefulSet
    /// and static ids, share one worker-id space without overlapping.
    pub offset: u64,
}

/// The `[statefulset]` keys' variables.
pub(crate) const ENV: &[EnvKey] = &[(&["statefulset", "offset"], Kind::Int)];

/// `[statefulset]` parsed.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StatefulSetSettings {
    /// Added to the pod's ordinal.
    pub offset: u64,
}

impl StatefulSetConfig {
    /// The section parsed when the assigner is `statefulset` (`None` otherwise). The offset
    /// alone must leave room for ordinal 0 in the layout's worker field and in `worker.range`
    /// (the library checks ordinal + offset at start).
    pub(crate) fn settings(
        &self,
        worker: &WorkerSettings,
        layout: &Layout,
    ) -> Result<Option<StatefulSetSettings>, ConfigError> {
        if worker.assigner != AssignerKind::Statefulset {
            return Ok(None);
        }
        let first =
            uidgen_k8s::StatefulSetWorkerIdAssigner::new(uidgen_k8s::PodOrdinal::new(0), "unused")
                .with_offset(self.offset);
        let first = match worker.server_range {
            Some(range) => first.with_range(range),
            None => first,
        };
        first
            .worker_id_for(layout)
            .map_err(|e| invalid("statefulset.offset", e.to_string()))?;
        Ok(Some(StatefulSetSettings {
            offset: self.offset,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{Refusal, assert_refused, parse};

    #[test]
    fn the_offset_is_read_from_the_section_and_its_variable() {
        let toml = "[worker]\nassigner = \"statefulset\"\n[statefulset]\noffset = 16\n";
        let settings = parse(toml, &[]).unwrap().settings().unwrap();
        assert_eq!(settings.statefulset.unwrap().offset, 16);
        let env = parse(
            "",
            &[
                ("UIDGEN_WORKER_ASSIGNER", "statefulset"),
                ("UIDGEN_STATEFULSET_OFFSET", "8"),
                ("UIDGEN_POD_ORDINAL", "2"),
            ],
        )
        .unwrap()
        .settings()
        .unwrap();
        assert_eq!(env.statefulset.unwrap().offset, 8);
    }

    #[test]
    fn an_offset_past_the_worker_field_or_range_is_refused_under_its_key() {
        let cases: &[Refusal] = &[
            (
                "[layout]\npreset = \"snowflake\"\n[worker]\nassigner = \"statefulset\"\n\
                 [statefulset]\noffset = 1024\n",
                &[],
                "statefulset.offset",
            ),
            (
                "[layout]\npreset = \"snowflake\"\n[worker]\nassigner = \"statefulset\"\n\
                 range = \"0-9\"\n[statefulset]\noffset = 10\n",
                &[],
                "statefulset.offset",
            ),
        ];
        assert_refused(cases);
    }
}
