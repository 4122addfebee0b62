//! Taking over from Tinyid: its `tiny_id_info` biz types and `tiny_id_token` tokens.
//!
//! Tinyid and uidgen cannot serve one biz type at once (each would move its own table's
//! counter), so the switch is: stop Tinyid's servers, take over, point the clients' host name at
//! uidgen. The takeover moves every biz type to a `leaf_alloc` tag of the same name that starts
//! above Tinyid's `max_id`, with its step, delta and remainder, and fences Tinyid's row (its
//! biz type renamed `{biz_type}@uidgen`, one transaction with the move), so a Tinyid server left
//! running claims nothing more; the segments Tinyid's servers and clients still hold lie below
//! uidgen's start. Its tokens become caller tokens (only their SHA-256 is kept) for the segment
//! routes and their biz types, so its clients keep theirs; uidgen answers Tinyid's routes
//! (`/tinyid/id/nextId`, `nextIdSimple`, `nextSegmentId`, `nextSegmentIdSimple`,
//! `crate::http::tinyid`).

use clap::Args;
use serde::{Deserialize, Serialize};
use uidgen_store::{Residue, Store};

use super::assessment::{Assessment, Report};
use crate::config::Settings;

/// `uidgen takeover tinyid`.
#[derive(Debug, Args)]
pub struct TinyidArgs {
    /// Refused: Tinyid's servers cannot keep running beside uidgen (each would move its own
    /// table's counter for the same biz types).
    #[arg(long)]
    pub beside: bool,
}

/// What a Tinyid takeover recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TinyidDecision {
    /// The biz types moved to `leaf_alloc`.
    pub tags: Vec<String>,
}

impl TinyidDecision {
    /// Why `settings` contradicts the decision.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        (!settings.segment.enabled && !self.tags.is_empty()).then(|| {
            "Tinyid's biz types are leaf_alloc tags now, served by the segment routes and \
             Tinyid's own (/tinyid/id/...): set `segment.enabled = true`"
                .to_owned()
        })
    }
}

/// Read Tinyid's rows and tokens and decide.
pub async fn assess(
    args: &TinyidArgs,
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Assessment<TinyidDecision>> {
    let mut report = Report::default();
    if args.beside {
        report.refused.push(
            "Tinyid's servers cannot keep running beside uidgen: each would move its own \
             table's counter (tiny_id_info, leaf_alloc) for the same biz types. Stop them, then \
             take over without --beside (the segments they and their clients hold stay below \
             uidgen's start)"
                .to_owned(),
        );
    }
    if !settings.segment.enabled {
        report.refused.push(
            "`segment.enabled = false`: Tinyid's biz types are served as segment tags; set it to \
             true"
                .to_owned(),
        );
    }
    let mut tags = Vec::new();
    match store.tinyid_infos().await? {
        None => report
            .found
            .push("no tiny_id_info table in the store".to_owned()),
        Some(infos) => {
            report
                .found
                .push(format!("Tinyid's tiny_id_info: {} biz types", infos.len()));
            for info in &infos {
                if info.fenced() {
                    report.found.push(format!(
                        "{}: moved to uidgen already (max_id {})",
                        info.biz_type, info.max_id
                    ));
                    continue;
                }
                if let Some(refusal) = info.refusal() {
                    report.refused.push(refusal);
                    continue;
                }
                let residue = Residue::new(info.delta, info.remainder)?;
                let existing = store.get_tag(&info.biz_type).await?;
                if let Some(tag) = existing.as_ref().filter(|t| t.residue != residue) {
                    report.refused.push(format!(
                        "the tag `{}` exists in leaf_alloc with residue {}, Tinyid's biz type \
                         with {residue}: rename one of them first",
                        tag.biz_tag, tag.residue
                    ));
                    continue;
                }
                let start = existing
                    .as_ref()
                    .map_or(info.next(), |t| t.max_id.max(info.next()));
                report.found.push(format!(
                    "{}: max_id {} (every number Tinyid handed out is at most this), step {}, \
                     numbers {residue}",
                    info.biz_type,
                    info.max_id,
                    info.step.unwrap_or(0)
                ));
                report.continues.push(format!(
                    "tag {} from {start}, numbers {residue}",
                    info.biz_type
                ));
                tags.push(info.biz_type.clone());
            }
        }
    }
    if let Some(tokens) = store.tinyid_tokens().await? {
        let mut distinct: Vec<&str> = tokens.iter().map(|t| t.token.as_str()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        report.found.push(format!(
            "Tinyid's tiny_id_token: {} rows of {} distinct tokens",
            tokens.len(),
            distinct.len()
        ));
        report.continues.push(format!(
            "its tokens become caller tokens (only their SHA-256 kept), for the segment routes and \
             their biz types: Tinyid's clients keep theirs; they are checked while `auth.required \
             = true` (it is {})",
            settings.auth.required
        ));
    }
    if !tags.is_empty() {
        report.why.push(
            "each tag starts above its biz type's max_id, the highest number Tinyid handed out, \
             with the same residue: every new number is above every old one, and none is equal"
                .to_owned(),
        );
        report.why.push(
            "the move fences Tinyid's rows in the same transaction (biz_type `...@uidgen`): a \
             Tinyid server left running claims no segment after it, and the segments it and its \
             clients hold lie below the tags' start"
                .to_owned(),
        );
    }
    Ok(Assessment {
        report,
        decision: TinyidDecision { tags },
    })
}

/// Move the biz types and import the tokens.
pub async fn apply(store: &Store) -> anyhow::Result<Vec<String>> {
    let mut done: Vec<String> = store
        .adopt_tinyid()
        .await?
        .into_iter()
        .map(|tag| {
            format!(
                "tag {} continues from {} (Tinyid's max_id {}); Tinyid's row is fenced",
                tag.tag, tag.max_id, tag.tinyid_max_id
            )
        })
        .collect();
    for name in store.import_tinyid_tokens().await? {
        done.push(format!("caller token {name} holds one of Tinyid's tokens"));
    }
    Ok(done)
}

/// With a recorded decision: a Tinyid row that is not fenced and names a tag of `leaf_alloc`
/// means a Tinyid server serves that biz type beside uidgen.
pub async fn recorded_state(store: &Store) -> anyhow::Result<Option<String>> {
    let Some(infos) = store.tinyid_infos().await? else {
        return Ok(None);
    };
    let mut both = Vec::new();
    for info in infos.iter().filter(|i| !i.fenced()) {
        if store.get_tag(&info.biz_type).await?.is_some() {
            both.push(info.biz_type.clone());
        }
    }
    Ok((!both.is_empty()).then(|| {
        format!(
            "Tinyid's tiny_id_info holds biz types {both:?} that are leaf_alloc tags too, not \
             moved by the takeover: Tinyid and uidgen would both hand out their numbers; stop \
             Tinyid and run `uidgen takeover tinyid` again"
        )
    }))
}
