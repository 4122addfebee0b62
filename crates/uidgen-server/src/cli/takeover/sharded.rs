//! Taking over from the original sharded service (seed 004): its `id_alloc` rows and its Redis
//! lists.
//!
//! The original keeps `id_alloc.max_id` as the last index it pushed (rows start at 0; a claim
//! adds `step` and pushes `max_id - step + 1 ..= max_id`), and so does uidgen (`uidgen-store`'s
//! `id_alloc.rs`), but for rows an older uidgen wrote (`id_alloc_exclusive`), which it keeps as
//! their exclusive end. The takeover reads every row the original's way from then on (emptying
//! `id_alloc_exclusive`: a row an older uidgen wrote skips one index, never repeats one), so the
//! original's servers and uidgen's may claim from one table, push to one Redis and take the same
//! locks (`id.gen.lock_{app}_{shard}`, `id.gen.idList_`) side by side: each push is a segment
//! claimed just before it, and each pop an atomic `LPOP`.

use clap::Args;
use serde::{Deserialize, Serialize};
use uidgen_sharded::MAX_INDEX;
use uidgen_store::Store;

use super::assessment::{Assessment, Report};
use crate::config::Settings;

/// `uidgen takeover sharded`.
#[derive(Debug, Args)]
pub struct ShardedArgs {
    /// The original's servers keep running beside uidgen during the switch.
    #[arg(long)]
    pub beside: bool,
}

/// What a sharded takeover recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardedDecision {
    /// The key prefix the original's lists and locks live under, when Redis was read.
    pub key_prefix: Option<String>,
    /// Whether the original's servers keep running beside uidgen.
    pub beside: bool,
}

impl ShardedDecision {
    /// Why `settings` contradicts the decision.
    pub fn contradiction(&self, settings: &Settings) -> Option<String> {
        let (Some(recorded), Some(options)) = (&self.key_prefix, &settings.sharded) else {
            return None;
        };
        (options.key_prefix != *recorded).then(|| {
            format!(
                "`sharded.key_prefix` is {:?}, but the original service's lists and locks live \
                 under {recorded:?}: set `sharded.key_prefix = {recorded:?}`, so both take the \
                 same locks and no list is left behind",
                options.key_prefix
            )
        })
    }
}

/// Read the original's rows and lists and decide.
pub async fn assess(
    args: &ShardedArgs,
    settings: &Settings,
    store: &Store,
) -> anyhow::Result<Assessment<ShardedDecision>> {
    let mut report = Report::default();
    let apps = store.apps().await?;
    let exclusive = store.exclusive_id_alloc_rows().await?;
    let mut shards = Vec::new();
    for app in &apps {
        let (low, high) = app.shards.iter().fold((i64::MAX, i64::MIN), |(l, h), s| {
            (l.min(s.max_id), h.max(s.max_id))
        });
        let step = app.shards.first().map_or(0, |s| s.step);
        report.found.push(format!(
            "id_alloc app {} ({}): {} shard rows, max_id {low} to {high}, step {step}",
            app.app_id,
            app.app_name,
            app.shards.len()
        ));
        shards.extend(app.shards.iter().map(|s| (app.app_id, s.shard_id)));
    }
    if apps.is_empty() {
        report.found.push("id_alloc: no app".to_owned());
    }
    if !exclusive.is_empty() {
        report.found.push(format!(
            "{} rows are listed in id_alloc_exclusive (max_id as an older uidgen kept it, the \
             next index): the takeover reads them the original's way, each skipping one index; \
             stop every uidgen server older than this one first",
            exclusive.len()
        ));
    }
    let mut key_prefix = None;
    match &settings.sharded {
        Some(options) => {
            let (lists, config_lock) = uidgen_sharded::survey(options, &shards).await?;
            let holding: Vec<_> = lists.iter().filter(|l| l.len > 0).collect();
            let numbers: u64 = holding.iter().map(|l| l.len).sum();
            let locks = lists.iter().filter(|l| l.lock_ttl_ms.is_some()).count();
            let stuck = lists.iter().filter(|l| l.lock_ttl_ms == Some(-1)).count();
            report.found.push(format!(
                "Redis {} under {:?}: {} lists hold {numbers} indexes; {locks} refill locks held \
                 ({stuck} without an expiry), config lock {}",
                uidgen_store::redact_url(&options.redis_url),
                options.key_prefix,
                holding.len(),
                if config_lock { "held" } else { "free" }
            ));
            for list in &lists {
                let Some(shard) = apps
                    .iter()
                    .find(|a| a.app_id == list.app_id)
                    .and_then(|a| a.shards.iter().find(|s| s.shard_id == list.shard))
                else {
                    continue;
                };
                let above = [&list.first, &list.last]
                    .into_iter()
                    .flatten()
                    .filter_map(|e| e.parse::<i64>().ok())
                    .find(|&index| index >= shard.next_index());
                if let Some(index) = above {
                    report.refused.push(format!(
                        "list {}idList_{}_{} holds index {index}, which its id_alloc row (max_id \
                         {}) never handed out: this Redis and this database do not belong \
                         together; point uidgen at the original's database, or delete the list",
                        options.key_prefix, list.app_id, list.shard, shard.max_id
                    ));
                }
            }
            if stuck > 0 {
                report.continues.push(format!(
                    "{stuck} refill locks without an expiry (the original died between SETNX \
                     and EXPIRE) get the original's 60 s at uidgen's first refill of their list"
                ));
            }
            key_prefix = Some(options.key_prefix.clone());
        }
        None => report
            .found
            .push("Redis: not read (`sharded.enabled = false`)".to_owned()),
    }
    let next: Vec<String> =
        apps.iter()
            .flat_map(|a| {
                a.shards.iter().take(2).map(move |s| {
                    format!("app {} shard {} at {}", a.app_id, s.shard_id, s.max_id + 1)
                })
            })
            .take(4)
            .collect();
    report.continues.push(format!(
        "every shard from max_id + 1, the original's next index ({}{}), below the 49-bit limit \
         {MAX_INDEX}",
        next.join(", "),
        if next.is_empty() {
            "no app yet"
        } else {
            ", ..."
        }
    ));
    report.why.push(
        "uidgen claims as the original does (max_id = max_id + step, committed, then max_id - \
         step + 1 ..= max_id pushed once): no two claims overlap, and each lies above every \
         index pushed before it, so every new index of a shard is above every index the \
         original handed out"
            .to_owned(),
    );
    report.why.push(
        "the lists hold only indexes claimed in the database; each entry is popped once (LPOP), \
         by the original or by uidgen; both take the same refill and config locks"
            .to_owned(),
    );
    if args.beside {
        report
            .found
            .push("the original's servers keep running beside uidgen (--beside)".to_owned());
    }
    Ok(Assessment {
        report,
        decision: ShardedDecision {
            key_prefix,
            beside: args.beside,
        },
    })
}

/// Read every `id_alloc` row the original's way from now on.
pub async fn apply(store: &Store) -> anyhow::Result<Vec<String>> {
    let cleared = store.clear_exclusive_id_alloc_rows().await?;
    Ok(if cleared > 0 {
        vec![format!(
            "{cleared} rows of id_alloc_exclusive are read the original's way from now on"
        )]
    } else {
        Vec::new()
    })
}

/// With a recorded decision: every row must be read the original's way (a row listed in
/// `id_alloc_exclusive` since, by a migration run by hand, would be read the other way).
pub async fn recorded_state(store: &Store) -> anyhow::Result<Option<String>> {
    let exclusive = store.exclusive_id_alloc_rows().await?;
    Ok((!exclusive.is_empty()).then(|| {
        format!(
            "{} id_alloc rows are listed in id_alloc_exclusive since `uidgen takeover sharded` \
             was recorded, and would be read as an older uidgen wrote them, beside the \
             original's servers: run `uidgen takeover sharded` again",
            exclusive.len()
        )
    }))
}
