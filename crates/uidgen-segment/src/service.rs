//! [`SegmentService`]: every biz tag's [`SegmentBuffer`], the background tag sync, and the
//! admin and monitoring calls.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::{Mutex, RwLock};
use tokio::task::JoinHandle;
use uidgen_core::Clock;
use uidgen_store::{LeafAlloc, Store};

use crate::buffer::SegmentBuffer;
use crate::buffer::load_state::ServedMax;
use crate::error::{Result, SegmentError};
use crate::group::GroupSource;
use crate::handle::{TagHandle, check_count};
use crate::options::SegmentOptions;
use crate::shared::Shared;
use crate::source::SegmentSource;
use crate::state::TagState;
use crate::tag::validate_tag;

type TagMap = HashMap<Box<str>, Arc<SegmentBuffer>, foldhash::fast::RandomState>;

/// Source of [`SegmentService::id`].
static NEXT_SERVICE_ID: AtomicU64 = AtomicU64::new(1);

/// A per-thread copy of one service's tag map, so [`SegmentService::get`] looks a tag up
/// without touching shared memory (a read lock is two atomic writes to a shared line, which
/// would cost more than taking the ID). It is dropped and refilled whenever the service's map
/// changes (its `version`) or the thread turns to another service. It keeps the buffers of a
/// dropped service alive until the thread next calls `get` on another service or exits.
///
/// The tag asked for last is kept beside the map: a thread mostly asks for one tag over and
/// over, and comparing its bytes is cheaper than hashing it and probing (issue 30 measured the
/// lookup as half of a `get`). An `Rc` so that turning to another tag costs no atomic count on
/// the buffer, whose line every thread taking from the tag shares.
#[derive(Debug, Default)]
struct LocalTags {
    service: u64,
    version: u64,
    last: Option<Rc<LocalTag>>,
    map: HashMap<Box<str>, Rc<LocalTag>, foldhash::fast::RandomState>,
}

/// One tag of a [`LocalTags`] cache.
#[derive(Debug)]
struct LocalTag {
    tag: Box<str>,
    buffer: Arc<SegmentBuffer>,
}

/// One ID of `buffer`'s current segment, or the buffer itself when that segment is used up.
#[inline]
fn take_one(buffer: &Arc<SegmentBuffer>) -> std::result::Result<i64, Arc<SegmentBuffer>> {
    buffer
        .try_take(1)
        .map(|taken| taken.first)
        .map_err(|_| Arc::clone(buffer))
}

thread_local! {
    static LOCAL_TAGS: RefCell<LocalTags> = RefCell::new(LocalTags::default());
}

/// Meituan Leaf's segment mode: IDs from `leaf_alloc` segments, one double buffer per biz tag.
///
/// Each tag's IDs come from segments `[max_id - step, max_id)` claimed from the database; a
/// segment is served only after its claim is committed, so a crash may skip IDs but never
/// repeats one. Taking an ID is one atomic add on the current segment; the next segment is
/// loaded in the background once 10% of the current one is used, with a step sized by how
/// fast the previous one went (dynamic step).
///
/// ```no_run
/// # async fn demo() -> uidgen_segment::Result<()> {
/// use uidgen_core::SystemClock;
/// use uidgen_segment::{SegmentOptions, SegmentService};
/// let store = uidgen_store::Store::connect("sqlite://uidgen.db").await?;
/// let service = SegmentService::start(store, SegmentOptions::default(), SystemClock).await?;
/// service.upsert_tag("order", 1000, Some("order ids")).await?;
/// let id = service.get("order")?; // plain fn: callable from non-async code too
/// let batch = service.get_batch_async("order", 100).await?;
/// assert!(batch.iter().all(|&b| b > id));
/// service.shutdown();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct SegmentService {
    pub(crate) shared: Arc<Shared>,
    /// Unique per service in this process, for the per-thread tag cache.
    id: u64,
    /// Bumped after every change of `tags`, to invalidate the per-thread caches.
    version: crossbeam_utils::CachePadded<AtomicU64>,
    tags: RwLock<TagMap>,
    /// The tag list has been loaded at least once.
    initialised: AtomicBool,
    /// Why the tag list could not be loaded, while not initialised.
    init_error: Mutex<String>,
    /// Serialises tag syncs with `upsert_tag`, so a sync that read the list before an upsert
    /// does not evict the new tag. Held across one database call at most, which `load_timeout`
    /// bounds.
    sync_lock: tokio::sync::Mutex<()>,
    /// The highest `max_id` served of each evicted tag, to seed the buffer of the tag if it
    /// comes back: a re-created row restarts at `max_id` 1, and this service must not repeat
    /// what it served before the deletion.
    evicted: Mutex<HashMap<Box<str>, ServedMax>>,
    sync_task: Mutex<Option<JoinHandle<()>>>,
    /// The segment groups, for monitoring (their tags are routed by `shared.source`).
    pub(crate) groups: Vec<Arc<GroupSource>>,
}

impl SegmentService {
    /// Start the service on the current tokio runtime: load the tag list, and re-sync it every
    /// [`sync_interval`](SegmentOptions::sync_interval) in the background. Segments are claimed
    /// lazily, on a tag's first `get`.
    ///
    /// A database that is down at start is not an error: `get` answers
    /// [`NotInitialised`](SegmentError::NotInitialised) (Leaf's -1) until the list loads, retried
    /// every [`init_retry_interval`](SegmentOptions::init_retry_interval). Invalid options are an
    /// error. Must be called within a tokio runtime, which then runs every load.
    pub async fn start(
        store: Store,
        options: SegmentOptions,
        clock: impl Clock + 'static,
    ) -> Result<Arc<Self>> {
        Self::start_with_source(Arc::new(store), options, Arc::new(clock)).await
    }

    pub(crate) async fn start_with_source(
        source: Arc<dyn SegmentSource>,
        options: SegmentOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>> {
        Self::start_inner(source, Vec::new(), options, clock).await
    }

    /// Start over `source`. With segment `groups`, every group's rows are checked first, each
    /// group's tags are then served from its databases, and the groups are kept for monitoring.
    pub(crate) async fn start_inner(
        source: Arc<dyn SegmentSource>,
        groups: Vec<Arc<GroupSource>>,
        options: SegmentOptions,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>> {
        options.validate()?;
        let source = if groups.is_empty() {
            source
        } else {
            Self::route(source, &groups).await?
        };
        let shared = Arc::new(Shared {
            source,
            clock,
            options,
            runtime: tokio::runtime::Handle::current(),
            shut_down: AtomicBool::new(false),
        });
        let service = Arc::new(Self {
            shared,
            // Relaxed: only uniqueness matters.
            id: NEXT_SERVICE_ID.fetch_add(1, Ordering::Relaxed),
            version: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            tags: RwLock::new(TagMap::default()),
            initialised: AtomicBool::new(false),
            init_error: Mutex::new("not loaded yet".to_owned()),
            sync_lock: tokio::sync::Mutex::new(()),
            evicted: Mutex::new(HashMap::new()),
            sync_task: Mutex::new(None),
            groups,
        });
        if let Err(error) = service.sync_tags().await {
            tracing::warn!(%error,
                "segment service starts without its tag list; retrying in the background");
        }
        let task = tokio::spawn(sync_loop(Arc::downgrade(&service)));
        *service.sync_task.lock() = Some(task);
        Ok(service)
    }

    /// The next ID of `tag`.
    ///
    /// A plain function, callable from any thread, async or not: in the common case it is one
    /// atomic add (plus the tag lookup) and never waits. When both of the tag's segments are used
    /// up it blocks this thread up to [`wait_timeout`](SegmentOptions::wait_timeout) for the load
    /// in flight, then fails with [`BothSegmentsNotReady`](SegmentError::BothSegmentsNotReady).
    /// On a current-thread runtime use [`get_async`](Self::get_async).
    ///
    /// ```no_run
    /// # fn demo(service: &uidgen_segment::SegmentService) {
    /// match service.get("order") {
    ///     Ok(id) => println!("{id}"),
    ///     Err(error) => println!("{} ({error})", error.code()), // Leaf's -1/-2/-3
    /// }
    /// # }
    /// ```
    #[inline]
    pub fn get(&self, tag: &str) -> Result<i64> {
        match self.take_now(tag)? {
            Ok(id) => Ok(id),
            // Both segments used up: wait outside the cache's borrow.
            Err(buffer) => buffer.next_id(),
        }
    }

    /// The next ID of `tag` if its current segment has one: never a wait, and after this
    /// thread's first call for the tag (which reads the shared map), one atomic add. `Ok(None)` when that segment is used up: switching to the next one, or awaiting its
    /// load (and saying why it failed), is [`get_async`](Self::get_async)'s. For a caller that
    /// answers at once in the common case and pays for a future only at a segment's end.
    ///
    /// ```no_run
    /// # async fn demo(service: &uidgen_segment::SegmentService) -> uidgen_segment::Result<()> {
    /// let id = match service.try_get("order")? {
    ///     Some(id) => id,
    ///     None => service.get_async("order").await?,
    /// };
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn try_get(&self, tag: &str) -> Result<Option<i64>> {
        Ok(self.take_now(tag)?.ok())
    }

    /// The next ID of `tag` from its current segment (`Ok(Ok(id))`), or the tag's buffer when
    /// that segment is used up (`Ok(Err(buffer))`: switch or wait); an unknown tag is an error.
    #[inline]
    fn take_now(&self, tag: &str) -> Result<std::result::Result<i64, Arc<SegmentBuffer>>> {
        // Acquire: pairs with the Release in `changed`, so a cache built at this version holds
        // the buffers of at least this map.
        let version = self.version.load(Ordering::Acquire);
        let found = LOCAL_TAGS.with(|local| {
            // A re-entrant call (none today) would find the cache borrowed: use the shared map.
            let mut local = local.try_borrow_mut().ok()?;
            if local.service != self.id || local.version != version {
                local.map.clear();
                local.last = None;
                local.service = self.id;
                local.version = version;
            }
            if let Some(last) = &local.last
                && *last.tag == *tag
            {
                return Some(take_one(&last.buffer));
            }
            let entry = match local.map.get(tag) {
                Some(entry) => Rc::clone(entry),
                None => {
                    let buffer = self.tags.read().get(tag).cloned()?;
                    let entry = Rc::new(LocalTag {
                        tag: tag.into(),
                        buffer,
                    });
                    local.map.insert(tag.into(), Rc::clone(&entry));
                    entry
                }
            };
            let taken = take_one(&entry.buffer);
            local.last = Some(entry);
            Some(taken)
        });
        match found {
            Some(taken) => Ok(taken),
            None => match self.tags.read().get(tag) {
                Some(buffer) => Ok(take_one(buffer)),
                None => Err(self.missing(tag)),
            },
        }
    }

    /// The tag map changed: invalidate the per-thread caches (call with the write lock held).
    fn changed(&self) {
        // Release: pairs with the Acquire in `get`.
        self.version.fetch_add(1, Ordering::Release);
    }

    /// [`get`](Self::get), awaiting instead of blocking when it must wait for a load.
    ///
    /// Cancel safety: the load runs as a task of its own; dropping the future only stops
    /// waiting for it.
    pub async fn get_async(&self, tag: &str) -> Result<i64> {
        match self.take_now(tag)? {
            Ok(id) => Ok(id),
            Err(buffer) => buffer.next_id_async().await,
        }
    }

    /// `n` IDs of `tag`, 1 to [`max_batch`](SegmentOptions::max_batch); they may span a segment
    /// switch, so they increase but are not always contiguous. Blocks like [`get`](Self::get).
    pub fn get_batch(&self, tag: &str, n: usize) -> Result<Vec<i64>> {
        check_count(n, self.shared.options.max_batch)?;
        self.tag(tag)?.get_batch(n)
    }

    /// [`get_batch`](Self::get_batch), awaiting instead of blocking.
    ///
    /// Cancel safety: dropping the future while it waits for a load leaves the load running;
    /// the IDs it had already taken are skipped, never issued, never repeated.
    pub async fn get_batch_async(&self, tag: &str, n: usize) -> Result<Vec<i64>> {
        check_count(n, self.shared.options.max_batch)?;
        self.tag(tag)?.get_batch_async(n).await
    }

    /// Lease `size` numbers of `tag` to the caller alone: the range `[start, end)`, claimed in
    /// the database as one segment of `size` (Tinyid's client-side segments: the caller then
    /// issues from it in its own process, with no call per ID).
    ///
    /// The claim is the same atomic `max_id += size` that loads this service's own segments
    /// (committed before this returns), so a leased range never overlaps a segment any
    /// service has buffered or will buffer, nor another lease, across processes and restarts.
    /// The tag need not be in this service's list yet: the database decides whether it exists.
    /// The stored step is not changed.
    ///
    /// Errors: [`InvalidLeaseSize`](SegmentError::InvalidLeaseSize) for 0 or more than
    /// [`max_lease_size`](SegmentOptions::max_lease_size),
    /// [`InvalidTag`](SegmentError::InvalidTag), [`UnknownTag`](SegmentError::UnknownTag),
    /// [`TagExhausted`](SegmentError::TagExhausted), [`TimedOut`](SegmentError::TimedOut) or
    /// [`Store`](SegmentError::Store) when the database fails,
    /// [`Shutdown`](SegmentError::Shutdown).
    ///
    /// Cancel safety: dropping the future before the claim commits changes nothing (its
    /// transaction rolls back). A claim committed by the database but whose answer is dropped
    /// (or abandoned after `load_timeout`) is lost: those numbers are never issued, never
    /// repeated, as after a crash.
    ///
    /// ```no_run
    /// # async fn demo(service: &uidgen_segment::SegmentService) -> uidgen_segment::Result<()> {
    /// let range = service.lease("order", 10_000).await?;
    /// assert_eq!(range.end - range.start, 10_000);
    /// assert!(service.get("order")? < range.start || service.get("order")? >= range.end);
    /// # Ok(()) }
    /// ```
    pub async fn lease(&self, tag: &str, size: u64) -> Result<std::ops::Range<i64>> {
        if self.shared.is_shut_down() {
            return Err(SegmentError::Shutdown);
        }
        validate_tag(tag)?;
        let max = self.shared.options.max_lease_size;
        let step = i64::try_from(size)
            .ok()
            .filter(|s| (1..=max).contains(s))
            .ok_or(SegmentError::InvalidLeaseSize { size, max })?;
        if self.shared.source.is_group_tag(tag) {
            return Err(SegmentError::LeaseOfGroupTag {
                tag: tag.to_owned(),
            });
        }
        let claim = self.shared.source.claim(tag, Some(step));
        let claimed = self.shared.timed("leasing a segment", claim).await?;
        debug_assert_eq!(claimed.step, step, "a claim with a step uses that step");
        if claimed.residue != uidgen_store::Residue::SINGLE {
            // A row set up by hand for several databases: the range holds other databases'
            // numbers. Skipped, never served.
            return Err(SegmentError::LeaseOfGroupTag {
                tag: tag.to_owned(),
            });
        }
        Ok(claimed.max_id - claimed.step..claimed.max_id)
    }

    /// A handle on `tag`'s buffer, to take many IDs without the tag lookup.
    pub fn tag(&self, tag: &str) -> Result<TagHandle> {
        let buffer = self.tags.read().get(tag).cloned();
        buffer.map(TagHandle::new).ok_or_else(|| self.missing(tag))
    }

    /// Create `tag` or change its step (and description, when `Some`); the tag is usable at
    /// once in this service, and in others after their next sync. Tags must be 1 to 128
    /// characters of the tag alphabet ([`uidgen_core::TAG_PATTERN`]); steps 1 to 10^9.
    ///
    /// Cancel safety: dropped after the database committed the row, this service learns of
    /// the change later: a new tag at the next sync, a new step at the tag's next load.
    pub async fn upsert_tag(
        &self,
        tag: &str,
        step: i64,
        description: Option<&str>,
    ) -> Result<LeafAlloc> {
        validate_tag(tag)?;
        if !(1..=uidgen_store::MAX_STEP).contains(&step) {
            return Err(SegmentError::InvalidStep {
                step,
                max: uidgen_store::MAX_STEP,
            });
        }
        let _sync = self.sync_lock.lock().await;
        let upsert = self.shared.source.upsert(tag, step, description);
        let row = self
            .shared
            .timed("creating or updating a biz tag", upsert)
            .await?;
        if self.shared.is_shut_down() {
            return Ok(row);
        }
        let mut tags = self.tags.write();
        match tags.get(tag) {
            Some(buffer) => buffer.tag_upserted(row.step),
            None => {
                let buffer = self.new_buffer(tag);
                // The stored step is known now: monitors show it before the first load.
                buffer.tag_upserted(row.step);
                tags.insert(tag.into(), Arc::new(buffer));
                self.changed();
            }
        }
        Ok(row)
    }

    /// Re-read the tag list now (the background task does this every `sync_interval`): add new
    /// tags, evict deleted ones.
    ///
    /// Cancel safety: dropping the future changes nothing; the tag map changes only after the
    /// list is read, with no await in between.
    pub async fn sync_tags(&self) -> Result<()> {
        let _sync = self.sync_lock.lock().await;
        let list = self.shared.source.list_tags();
        let names = match self.shared.timed("listing biz tags", list).await {
            Ok(names) => names,
            Err(error) => {
                if !self.is_initialised() {
                    *self.init_error.lock() = error.to_string();
                }
                return Err(error);
            }
        };
        if self.shared.is_shut_down() {
            return Err(SegmentError::Shutdown);
        }
        let wanted: HashSet<&str> = names.iter().map(String::as_str).collect();
        let mut tags = self.tags.write();
        tags.retain(|tag, buffer| {
            let keep = wanted.contains(&**tag);
            if keep {
                buffer.tag_listed();
            } else {
                tracing::info!(tag = %tag, "biz tag deleted; evicted");
                let served_max = buffer.evict();
                self.evicted.lock().insert(tag.clone(), served_max);
            }
            keep
        });
        for name in &names {
            if !tags.contains_key(name.as_str()) {
                let buffer = self.new_buffer(name);
                tags.insert(name.as_str().into(), Arc::new(buffer));
            }
        }
        self.changed();
        // Relaxed: read by `missing` and the sync loop; a late view costs one more retry.
        self.initialised.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the tag list has been loaded.
    pub fn is_initialised(&self) -> bool {
        // Relaxed: see `sync_tags`.
        self.initialised.load(Ordering::Relaxed)
    }

    /// The largest range one [`lease`](Self::lease) may take
    /// ([`SegmentOptions::max_lease_size`]): what an API description states as the bound.
    ///
    /// ```no_run
    /// # fn demo(service: &uidgen_segment::SegmentService) {
    /// assert_eq!(service.max_lease_size(), 1_000_000); // the default
    /// # }
    /// ```
    pub fn max_lease_size(&self) -> i64 {
        self.shared.options.max_lease_size
    }

    /// The known tags, sorted.
    pub fn tags(&self) -> Vec<String> {
        let mut tags: Vec<String> = self.tags.read().keys().map(|t| t.to_string()).collect();
        tags.sort_unstable();
        tags
    }

    /// Every tag's buffer, sorted by tag: what Leaf's `/cache` page shows.
    ///
    /// ```no_run
    /// # fn demo(service: &uidgen_segment::SegmentService) {
    /// for state in service.monitor() {
    ///     let current = &state.segments[state.pos];
    ///     println!(
    ///         "{}: {} of {} left, next ready: {}",
    ///         state.tag, current.idle, current.step, state.next_ready
    ///     );
    /// }
    /// # }
    /// ```
    pub fn monitor(&self) -> Vec<TagState> {
        let buffers: Vec<Arc<SegmentBuffer>> = self.tags.read().values().cloned().collect();
        let mut states: Vec<TagState> = buffers.iter().map(|b| b.state()).collect();
        states.sort_unstable_by(|a, b| a.tag.cmp(&b.tag));
        states
    }

    /// Stop: end the tag sync, serve no more IDs (calls fail with
    /// [`Shutdown`](SegmentError::Shutdown), through [`TagHandle`]s too), wake every waiter. A
    /// load in flight finishes in the background; its segment is skipped, never served. The
    /// rest of every buffered segment is skipped too: to hand it back instead, call
    /// [`shutdown_and_hand_back`](Self::shutdown_and_hand_back).
    pub fn shutdown(&self) {
        self.stop_serving();
    }

    /// [`shutdown`](Self::shutdown)'s work; returns the buffers it evicted (each holding the
    /// untouched tails of its segments). A second call finds none.
    pub(crate) fn stop_serving(&self) -> Vec<Arc<SegmentBuffer>> {
        // Relaxed: every reader re-checks under a lock taken below (map or buffer control).
        self.shared.shut_down.store(true, Ordering::Relaxed);
        if let Some(task) = self.sync_task.lock().take() {
            task.abort();
        }
        let mut tags = self.tags.write();
        for buffer in tags.values() {
            buffer.evict();
        }
        let buffers = tags.drain().map(|(_, buffer)| buffer).collect();
        self.changed();
        buffers
    }

    /// A buffer for `tag`, refusing segments below anything served before an eviction.
    fn new_buffer(&self, tag: &str) -> SegmentBuffer {
        let served_max = self.evicted.lock().remove(tag).unwrap_or_default();
        SegmentBuffer::new(tag, Arc::clone(&self.shared), served_max)
    }

    /// The error for a tag not in the map.
    #[cold]
    fn missing(&self, tag: &str) -> SegmentError {
        if self.shared.is_shut_down() {
            return SegmentError::Shutdown;
        }
        if let Err(error) = validate_tag(tag) {
            return error;
        }
        if !self.is_initialised() {
            return SegmentError::NotInitialised {
                reason: self.init_error.lock().clone(),
            };
        }
        SegmentError::UnknownTag(tag.to_owned())
    }
}

impl Drop for SegmentService {
    fn drop(&mut self) {
        if let Some(task) = self.sync_task.get_mut().take() {
            task.abort();
        }
    }
}

/// Re-sync the tag list every `sync_interval` (every `init_retry_interval` until it first
/// loads), for as long as the service lives.
async fn sync_loop(service: Weak<SegmentService>) {
    loop {
        let interval = match service.upgrade() {
            Some(service) if service.is_initialised() => service.shared.options.sync_interval,
            Some(service) => service.shared.options.init_retry_interval,
            None => return,
        };
        tokio::time::sleep(interval).await;
        let Some(service) = service.upgrade() else {
            return;
        };
        if service.shared.is_shut_down() {
            return;
        }
        if let Err(error) = service.sync_tags().await {
            tracing::warn!(%error, "syncing biz tags failed; keeping the known ones");
        }
    }
}
