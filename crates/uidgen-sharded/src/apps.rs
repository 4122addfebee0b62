//! The app and shard configuration as this server last read it from `id_alloc`, and
//! [`AppInfo`], what the admin call answers.

use uidgen_store::IdAllocApp;

use crate::error::{Result, ShardedError};
use crate::layout::{MAX_INDEX, SHARDS};
use crate::options::ShardedOptions;

/// One shard as the hot path needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardEntry {
    /// The shard's step.
    pub(crate) step: i64,
    /// Refill once the list holds this many numbers or fewer.
    pub(crate) threshold: u64,
    /// The largest index the shard may hand out: `max_limit_id` when set, never above
    /// [`MAX_INDEX`].
    pub(crate) ceiling: u64,
    /// The shard's `max_id` is above its ceiling: no segment can be claimed any more.
    pub(crate) exhausted: bool,
}

/// One app: its shards by shard id (`None`: the row is missing).
#[derive(Debug, Clone)]
pub(crate) struct AppEntry {
    pub(crate) shards: [Option<ShardEntry>; SHARDS as usize],
}

/// Every app, by app id.
#[derive(Debug, Clone)]
pub(crate) struct AppTable {
    apps: Box<[Option<AppEntry>]>,
}

/// The largest index a `max_limit_id` allows: the limit itself when set (0 is none), never
/// above the 49 index bits.
///
/// ```
/// use uidgen_sharded::{MAX_INDEX, largest_index};
/// assert_eq!(largest_index(0), MAX_INDEX);
/// assert_eq!(largest_index(5000), 5000);
/// assert_eq!(largest_index(i64::MAX), MAX_INDEX);
/// ```
pub fn largest_index(max_limit_id: i64) -> u64 {
    match u64::try_from(max_limit_id) {
        Ok(limit) if limit > 0 => limit.min(MAX_INDEX),
        _ => MAX_INDEX,
    }
}

impl AppTable {
    /// The table of `apps` as read from the store.
    pub(crate) fn new(apps: &[IdAllocApp], options: &ShardedOptions) -> Self {
        let mut table: Vec<Option<AppEntry>> = vec![None; 256];
        for app in apps {
            let mut shards = [None; SHARDS as usize];
            for shard in &app.shards {
                let ceiling = largest_index(shard.max_limit_id);
                let exhausted = u64::try_from(shard.max_id).map_or(true, |max_id| max_id > ceiling);
                if let Some(slot) = shards.get_mut(usize::from(shard.shard_id)) {
                    *slot = Some(ShardEntry {
                        step: shard.step,
                        threshold: options.refill_threshold(shard.step),
                        ceiling,
                        exhausted,
                    });
                }
            }
            table[usize::from(app.app_id)] = Some(AppEntry { shards });
        }
        Self {
            apps: table.into_boxed_slice(),
        }
    }

    /// The entry of one shard, or why there is none.
    pub(crate) fn shard(&self, app_id: u8, shard: u8) -> Result<ShardEntry> {
        if shard >= SHARDS {
            return Err(ShardedError::ShardOutOfRange { shard });
        }
        let app = self
            .app(app_id)
            .ok_or(ShardedError::AppNotFound { app_id })?;
        app.shards[usize::from(shard)].ok_or(ShardedError::ShardNotFound { app_id, shard })
    }

    /// The app `app_id`, if it exists.
    pub(crate) fn app(&self, app_id: u8) -> Option<&AppEntry> {
        self.apps.get(usize::from(app_id)).and_then(Option::as_ref)
    }

    /// Every `(app, shard, entry)`.
    pub(crate) fn shards(&self) -> impl Iterator<Item = (u8, u8, ShardEntry)> + '_ {
        (0..=u8::MAX).flat_map(move |app_id| {
            self.app(app_id).into_iter().flat_map(move |app| {
                (0..SHARDS).filter_map(move |shard| {
                    app.shards[usize::from(shard)].map(|entry| (app_id, shard, entry))
                })
            })
        })
    }

    /// How many apps there are.
    pub(crate) fn len(&self) -> usize {
        self.apps.iter().flatten().count()
    }
}

/// An app as created or updated: what `PUT /v1/admin/apps/{app_id}` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AppInfo {
    /// The app id.
    pub app_id: u8,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its step (of shard 0; an app's shards share it unless edited by hand).
    pub step: i64,
    /// Its `max_limit_id` (0: none).
    pub max_limit_id: i64,
    /// The largest index its limit allows ([`largest_index`]): no ID of the app has a larger
    /// index; past it, the app's shards answer [`AppExhausted`](ShardedError::AppExhausted).
    pub largest_index: u64,
    /// How many shard rows it has (64).
    pub shards: usize,
}

impl From<&IdAllocApp> for AppInfo {
    fn from(app: &IdAllocApp) -> Self {
        let first = app.shards.first();
        let max_limit_id = first.map_or(0, |s| s.max_limit_id);
        Self {
            app_id: app.app_id,
            name: app.app_name.clone(),
            description: app.description.clone(),
            step: first.map_or(0, |s| s.step),
            max_limit_id,
            largest_index: largest_index(max_limit_id),
            shards: app.shards.len(),
        }
    }
}
