//! The app and shard configuration as this server last read it from `id_alloc`, and
//! [`AppInfo`], what the admin call answers.

use uidgen_store::{IdAllocApp, index_ceiling};

use crate::error::{Result, ShardedError};
use crate::layout::{MAX_INDEX, SHARDS, ShardedId};
use crate::options::ShardedOptions;

/// One shard as the hot path needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardEntry {
    /// The shard's step.
    pub(crate) step: i64,
    /// Refill once the list holds this many numbers or fewer.
    pub(crate) threshold: u64,
    /// The largest index the shard may hand out: the last whose ID stays at or below
    /// `max_limit_id` when set, never above [`MAX_INDEX`]; `None` when not even index 0 does.
    pub(crate) ceiling: Option<u64>,
    /// The shard's next index is above its ceiling: no segment can be claimed any more.
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

impl ShardEntry {
    /// Whether `index` stays within the shard's ceiling.
    pub(crate) fn fits(&self, index: u64) -> bool {
        self.ceiling.is_some_and(|ceiling| index <= ceiling)
    }
}

/// The largest index shard `shard` of app `app_id` may hand out under `max_limit_id`, a
/// ceiling on the whole ID (0 is none): never above the 49 index bits; `None` when even index
/// 0 would make an ID above the limit.
///
/// ```
/// use uidgen_sharded::{MAX_INDEX, ShardedId, shard_ceiling};
/// assert_eq!(shard_ceiling(7, 3, 0), Some(MAX_INDEX));
/// // IDs that fit an unsigned 32-bit column:
/// let top = shard_ceiling(7, 3, u32::MAX.into()).unwrap();
/// assert!(ShardedId::new(7, 3, top)?.to_u64() <= u32::MAX.into());
/// assert!(ShardedId::new(7, 3, top + 1)?.to_u64() > u32::MAX.into());
/// assert_eq!(shard_ceiling(7, 3, 700), None);
/// # Ok::<(), uidgen_sharded::ShardedError>(())
/// ```
pub fn shard_ceiling(app_id: u8, shard: u8, max_limit_id: i64) -> Option<u64> {
    u64::try_from(index_ceiling(max_limit_id, app_id, shard))
        .ok()
        .map(|ceiling| ceiling.min(MAX_INDEX))
}

/// The largest ID app `app_id` may hand out: `max_limit_id` when set (0 is none), never above
/// the largest ID its 49 index bits, 64 shards and app id can make.
///
/// ```
/// use uidgen_sharded::largest_id;
/// assert_eq!(largest_id(7, 0), ((1 << 49) - 1) << 14 | 63 << 8 | 7);
/// assert_eq!(largest_id(7, 4_294_967_295), 4_294_967_295);
/// ```
pub fn largest_id(app_id: u8, max_limit_id: i64) -> u64 {
    let largest = ShardedId {
        app_id,
        shard: SHARDS - 1,
        index: MAX_INDEX,
    }
    .to_u64();
    match u64::try_from(max_limit_id) {
        Ok(limit) if limit > 0 => limit.min(largest),
        _ => largest,
    }
}

impl AppTable {
    /// The table of `apps` as read from the store.
    pub(crate) fn new(apps: &[IdAllocApp], options: &ShardedOptions) -> Self {
        let mut table: Vec<Option<AppEntry>> = vec![None; 256];
        for app in apps {
            let mut shards = [None; SHARDS as usize];
            for shard in &app.shards {
                let ceiling = shard_ceiling(app.app_id, shard.shard_id, shard.max_limit_id);
                let exhausted = u64::try_from(shard.next_index())
                    .map_or(true, |next| ceiling.is_none_or(|ceiling| next > ceiling));
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
    /// Its `max_limit_id`, the largest ID it may hand out (0: none).
    pub max_limit_id: i64,
    /// The largest ID it may hand out ([`largest_id`]): a shard whose next index would make
    /// a larger one answers [`AppExhausted`](ShardedError::AppExhausted); nothing is wrapped.
    pub largest_id: u64,
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
            largest_id: largest_id(app.app_id, max_limit_id),
            shards: app.shards.len(),
        }
    }
}
