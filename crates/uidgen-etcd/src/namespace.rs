//! `{prefix}/namespace`: reading the [`NamespaceRecord`] and recording a loss in it, for the
//! assigner (a claim compares its revision) and the holder (which records the losses it sees).
//! Apart from both so that neither imports the other; the argument is in `assigner.rs`.

use uidgen_worker::{NamespaceRecord, Origin};

use crate::error::{EtcdError, Result};
use crate::gateway::{Gateway, compare_mod, put};
use crate::options::EtcdOptions;
use uidgen_core::clock::saturating_millis as ms;

/// How many rounds a claim (or a namespace record's write) may lose to other writers before
/// giving up.
pub(crate) const CLAIM_ATTEMPTS: u32 = 8;

/// The namespace record as read, with the revision a claim compares.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    pub(crate) record: NamespaceRecord,
    pub(crate) mod_revision: i64,
}

/// The namespace record under `key`, if any. A value that is not a record is an error: it is
/// not ours to overwrite, and reading it as absent could unfence lost ids.
pub(crate) async fn read_namespace(gateway: &Gateway, key: &str) -> Result<Option<Namespace>> {
    let Some(kv) = gateway.get("reading the namespace record", key).await? else {
        return Ok(None);
    };
    let record = NamespaceRecord::parse(&kv.value).ok_or_else(|| EtcdError::Etcd {
        endpoint: String::new(),
        action: "reading the namespace record",
        reason: format!("{key} does not hold a namespace record; remove or fix it by hand"),
    })?;
    Ok(Some(Namespace {
        record,
        mod_revision: kv.mod_revision,
    }))
}

/// Make the namespace record fence a loss seen at `now_ms` (this clock): write an
/// [`Origin::DataLoss`] record with floor `now + reservation + max_start_wait`, unless the
/// record in force already covers it (written by another observer after `last_accepted_ms`,
/// the observer's last accepted round, and fencing at least as far). Returns the record in
/// force.
pub(crate) async fn record_loss(
    gateway: &Gateway,
    options: &EtcdOptions,
    now_ms: u64,
    last_accepted_ms: u64,
    why: &str,
) -> Result<NamespaceRecord> {
    let key = options.namespace_key();
    let fresh = NamespaceRecord::fenced(
        Origin::DataLoss,
        now_ms,
        ms(options.reservation),
        ms(options.max_start_wait),
        options.holder.clone(),
    )
    .because(why);
    for _ in 0..CLAIM_ATTEMPTS {
        let existing = read_namespace(gateway, &key).await?;
        let revision = match &existing {
            Some(ns) if last_accepted_ms > 0 && ns.record.covers_loss_after(last_accepted_ms) => {
                return Ok(ns.record.clone());
            }
            Some(ns) => ns.mod_revision,
            None => 0,
        };
        let mut record = fresh.clone();
        if let Some(ns) = &existing {
            record.floor_ms = record.floor_ms.max(ns.record.floor_ms);
        }
        let txn = gateway
            .txn(
                "recording etcd's data loss in the namespace record",
                vec![compare_mod(&key, revision)],
                vec![put(&key, &record.to_json(), 0)],
                Vec::new(),
            )
            .await?;
        if txn.succeeded {
            tracing::error!(
                prefix = %options.prefix,
                fenced_until_ms = record.floor_ms,
                "etcd lost data ({why}): recorded in {key}; worker ids without a newer mark are \
                 fenced until fenced_until_ms"
            );
            return Ok(record);
        }
    }
    Err(EtcdError::Contention {
        attempts: CLAIM_ATTEMPTS,
    })
}
