//! The app sync: re-read `id_alloc` every `sync_interval` (new apps become usable, changed
//! steps and limits apply), and let the one server that wins the config lock delete the lists
//! of apps that are gone.

use std::sync::Weak;
use std::sync::atomic::Ordering;

use tracing::{info, warn};

use crate::apps::AppTable;
use crate::error::{Result, ShardedError};
use crate::link::Retry;
use crate::state::{ShardedService, flag_index};
use crate::stats::Stats;

impl ShardedService {
    /// Re-read the app list now, as the schedule does every `sync_interval`; then, if this
    /// server wins the config lock, delete the lists of apps (or shards) that no longer exist.
    ///
    /// Cancel safety: dropped mid-way, the app table is either the old one or the new one, and
    /// the config lock, if taken, expires after `lock_ttl`.
    pub async fn sync_apps(&self) -> Result<()> {
        let table = {
            let _sync = self.sync_lock.lock().await;
            self.load_apps().await?
        };
        self.remove_orphan_lists(&table).await
    }

    /// Load the app table from the store and install it. The caller holds `sync_lock`.
    pub(crate) async fn load_apps(&self) -> Result<std::sync::Arc<AppTable>> {
        let apps = match self.timed("reading the app list", self.store.apps()).await {
            Ok(apps) => apps,
            Err(error) => {
                if self.apps.read().is_none() {
                    *self.init_error.lock() = error.to_string();
                }
                return Err(error);
            }
        };
        let table = std::sync::Arc::new(AppTable::new(&apps, &self.options));
        for (app_id, shard, entry) in table.shards() {
            // Relaxed: a per-shard hint, reset by every app sync; no other memory depends on it.
            self.exhausted[flag_index(app_id, shard)].store(entry.exhausted, Ordering::Relaxed);
        }
        let first = self
            .apps
            .write()
            .replace(std::sync::Arc::clone(&table))
            .is_none();
        if first {
            info!(apps = table.len(), "sharded mode: app list loaded");
        }
        Ok(table)
    }

    /// Under the config lock: delete every list whose app or shard is not in `table` and is
    /// still missing from the database when checked again (so an app created meanwhile on
    /// another server keeps its lists). Deleting a list only loses numbers.
    async fn remove_orphan_lists(&self, table: &AppTable) -> Result<()> {
        let lock_key = self.keys.config_lock();
        let lock = self
            .link
            .try_lock("taking the config lock", &lock_key, self.options.lock_ttl)
            .await?;
        let Some(lock) = lock else {
            return Ok(());
        };
        let removed = self.remove_orphans_locked(table).await;
        let _ = self.link.unlock("releasing the config lock", lock).await;
        let removed = removed?;
        if removed > 0 {
            Stats::add(&self.stats.removed_lists, removed);
            info!(removed, "deleted the lists of removed apps");
        }
        Ok(())
    }

    async fn remove_orphans_locked(&self, table: &AppTable) -> Result<u64> {
        let pattern = self.keys.list_pattern();
        let mut orphans = Vec::new();
        let mut cursor = 0_u64;
        loop {
            let (next, keys): (u64, Vec<String>) = self
                .link
                .run("listing lists", Retry::Once, |mut conn| {
                    let pattern = pattern.clone();
                    async move {
                        redis::cmd("SCAN")
                            .arg(cursor)
                            .arg("MATCH")
                            .arg(&pattern)
                            .arg("COUNT")
                            .arg(1000)
                            .query_async(&mut conn)
                            .await
                    }
                })
                .await?;
            for key in keys {
                let missing = match self.keys.parse_list(&key) {
                    Some((app_id, shard)) => matches!(
                        table.shard(app_id, shard),
                        Err(ShardedError::AppNotFound { .. }
                            | ShardedError::ShardNotFound { .. }
                            | ShardedError::ShardOutOfRange { .. })
                    ),
                    None => false,
                };
                if missing {
                    orphans.push(key);
                }
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        if orphans.is_empty() {
            return Ok(0);
        }
        // Ask the database again: an app created since `table` was read keeps its lists.
        let fresh = AppTable::new(
            &self
                .timed("reading the app list", self.store.apps())
                .await?,
            &self.options,
        );
        orphans.retain(|key| {
            self.keys
                .parse_list(key)
                .is_some_and(|(app_id, shard)| fresh.shard(app_id, shard).is_err())
        });
        if orphans.is_empty() {
            return Ok(0);
        }
        self.link
            .run(
                "deleting the lists of removed apps",
                Retry::Once,
                |mut conn| {
                    let orphans = orphans.clone();
                    async move {
                        redis::cmd("UNLINK")
                            .arg(&orphans)
                            .query_async(&mut conn)
                            .await
                    }
                },
            )
            .await
    }
}

/// Re-read the app list every `sync_interval` (every `init_retry_interval` while it has never
/// loaded).
pub(crate) async fn sync_loop(service: Weak<ShardedService>) {
    loop {
        let Some(strong) = service.upgrade() else {
            return;
        };
        let interval = if strong.table().is_some() {
            strong.options.sync_interval
        } else {
            strong.options.init_retry_interval
        };
        drop(strong);
        tokio::time::sleep(interval).await;
        let Some(strong) = service.upgrade() else {
            return;
        };
        if strong.is_shut_down() {
            return;
        }
        if let Err(error) = strong.sync_apps().await {
            warn!(%error, "sharded mode: app sync failed; retrying at the next interval");
        }
    }
}
