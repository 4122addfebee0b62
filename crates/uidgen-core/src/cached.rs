//! Baidu's `CachedUidGenerator`: IDs made ahead of demand by a padding thread and handed out
//! from a [`RingBuffer`].

use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, Thread};
use std::time::{Duration, Instant};

use crate::clock::{Clock, SystemClock};
use crate::error::{Result, UidError};
use crate::fence::{FenceRefusal, TimeFence, admit, first_unit_from};
use crate::fields::FieldKind;
use crate::generator::{PaddedHook, ReadyStock, UidGenerator, WorkerLanes, check_count};
use crate::layout::Layout;
use crate::local::{DEFAULT_LOCAL_BATCH, LocalIds, UnitIds, UnitSource};
use crate::ring::{RejectPut, RejectTake, RingBuffer, policy};
use crate::sync::{self, AtomicBool, AtomicU64, Mutex, Ordering};

/// The largest [`CachedOptions::boost_power`].
///
/// A full ring holds `2^boost_power` time units of IDs, and padding fills it from the clock's
/// current unit onwards, so the generator runs up to that many units ahead of the clock. A
/// reused worker id (leased, static) must wait out every unit its previous holder borrowed
/// before it issues again (ARCHITECTURE.md, invariant 1): at 10, that is at most 1,024 units,
/// 17 minutes on Baidu's second-based layout; at 16 it would be 18 hours.
///
/// ```
/// assert_eq!(uidgen_core::cached::MAX_BOOST_POWER, 10);
/// ```
pub const MAX_BOOST_POWER: u32 = 10;

/// Options of a [`CachedUidGenerator`]; `Default` gives Baidu's defaults.
///
/// ```
/// use std::time::Duration;
/// use uidgen_core::CachedOptions;
/// let options = CachedOptions {
///     boost_power: 4,
///     ..CachedOptions::waiting(Duration::from_secs(1))
/// };
/// assert_eq!(options.padding_factor, 50);
/// ```
#[derive(Clone)]
pub struct CachedOptions {
    /// The ring holds `(max_sequence + 1) << boost_power` IDs (Baidu: 3; at most
    /// [`MAX_BOOST_POWER`]).
    pub boost_power: u32,
    /// Pad when fewer than this percentage of the ring holds IDs (Baidu: 50).
    pub padding_factor: u32,
    /// Also pad on this period, whether or not takes asked (Baidu's `scheduleInterval`).
    pub schedule_interval: Option<Duration>,
    /// How many time units ahead of the clock padding may borrow before it waits for the clock;
    /// `None` borrows without bound, as Baidu does.
    pub max_borrow_units: Option<u64>,
    /// What a full ring does with an ID given to [`RingBuffer::put`] (default: drop and log).
    pub reject_put: Option<RejectPut>,
    /// What an empty ring returns (default: [`UidError::RingEmpty`], Baidu's policy).
    pub reject_take: Option<RejectTake>,
    /// For a reused worker id (leased, static): padding never puts a unit that does not end
    /// within the fence, and waits for it to rise instead; its
    /// [`max_borrow_ms`](TimeFence::max_borrow_ms) also bounds borrowing.
    pub fence: Option<Arc<dyn TimeFence>>,
}

impl Default for CachedOptions {
    fn default() -> Self {
        Self {
            boost_power: 3,
            padding_factor: 50,
            schedule_interval: None,
            max_borrow_units: None,
            reject_put: None,
            reject_take: None,
            fence: None,
        }
    }
}

impl std::fmt::Debug for CachedOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedOptions")
            .field("boost_power", &self.boost_power)
            .field("padding_factor", &self.padding_factor)
            .field("schedule_interval", &self.schedule_interval)
            .field("max_borrow_units", &self.max_borrow_units)
            .field("reject_put", &self.reject_put.is_some())
            .field("reject_take", &self.reject_take.is_some())
            .field("fence", &self.fence)
            .finish()
    }
}

impl CachedOptions {
    /// Defaults, except that an empty ring waits up to `timeout` for padding instead of failing:
    /// what a service wants under sustained load.
    pub fn waiting(timeout: Duration) -> Self {
        Self {
            reject_take: Some(policy::wait(timeout)),
            ..Self::default()
        }
    }
}

/// A worker id the ring is padded from, and the fence its units must pass.
#[derive(Debug)]
struct Lane {
    worker_id: u64,
    /// For a reused worker id: no unit of it ends past the fence's limit.
    fence: Option<Arc<dyn TimeFence>>,
    /// The first time unit that ends after the fence's floor: where the id's earlier holders
    /// stopped. Units below it are skipped for this worker id.
    first_unit: u64,
}

/// What the padding lock guards: the worker ids padded from, the time unit being handed out
/// slice by slice, and the slice a run that filled the ring mid-way resumes.
///
/// A **slice** is one worker id's IDs of one time unit (`max_sequence + 1` of them). Every time
/// unit claimed (`last_second`) is cut into one slice per worker id its fence admits, handed
/// out lowest worker id first; only then is the next unit claimed. So `k` worker ids give `k`
/// slices per unit of borrowing, and no slice goes to two claimants (the padding run and the
/// [`UnitIds`] handles both take slices here, under this one lock).
#[derive(Debug, Default)]
struct PadState {
    /// The slice being put into the ring, and its next sequence: (unit, worker id, sequence).
    pending: Option<(u64, u64, u64)>,
    /// The worker ids padded from, lowest first.
    lanes: Vec<Lane>,
    /// The worker ids whose slice of the unit `last_second` is still to be taken, highest
    /// first (so `pop` takes the lowest).
    left: Vec<u64>,
    /// How many units ahead of the clock padding may borrow: the options' bound, tightened
    /// by every lane's fence.
    max_borrow_units: Option<u64>,
}

/// How a padding run ended.
#[derive(Debug, PartialEq, Eq)]
enum Padded {
    /// The ring is full.
    Full,
    /// Padding may not borrow further ahead of the clock (or past the fence) yet.
    BorrowLimit,
    /// A consumer has claimed a slot but not read it yet, so the put stopped short of a full
    /// ring: look again soon instead of waiting for the next take to ask (which may never come,
    /// leaving the ring part-filled after a burst).
    SlotBusy,
    /// A [`UnitIds`] handle held the lock to claim a unit: look again soon, since the take that
    /// asked for this run will not ask again while its request is pending.
    Busy,
}

/// State shared by the generator and its padding thread.
#[derive(Debug)]
struct Shared<C> {
    layout: Layout,
    /// The worker id the generator was made with (its other lanes come and go).
    worker_id: u64,
    clock: C,
    ring: RingBuffer,
    /// The last time unit claimed for the ring or a [`UnitIds`] handle (Baidu's `lastSecond`).
    last_second: AtomicU64,
    pad: Mutex<PadState>,
    /// How many worker ids padding draws from (for status: the lanes live under `pad`).
    lane_count: AtomicU64,
    /// The borrowing bound in force (`u64::MAX`: none), for status: it lives under `pad`.
    borrow_bound: AtomicU64,
    /// Where the sequence field starts (bit 0 in Baidu's layout, above the machine in Vesta's).
    sequence_shift: u32,
    stopping: AtomicBool,
    padding_runs: AtomicU64,
    /// Told when padding delivered IDs or stopped (set at most once).
    padded: OnceLock<Announcer>,
}

/// A [`PaddedHook`], which has no `Debug` of its own.
struct Announcer(PaddedHook);

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PaddedHook")
    }
}

impl<C: Clock> Shared<C> {
    /// Tell the hook, if one is set, that IDs arrived or the padding stopped.
    fn announce(&self) {
        if let Some(Announcer(hook)) = self.padded.get() {
            hook();
        }
    }

    /// The clock's time unit, saturating at both ends: before the epoch counts as 0 (padding goes
    /// on from `last_second`), past the layout's range counts as the overflowing value (the range
    /// check on what is composed reports it).
    fn now_unit(&self) -> u64 {
        match self.layout.time_at(self.clock.now_millis()) {
            Ok(unit) => unit,
            Err(UidError::TimestampExhausted { elapsed, .. }) => elapsed,
            Err(_) => 0,
        }
    }

    /// The next slice for whoever holds `pad` (proved by `state`, the lock's contents): a
    /// worker id's share of the unit `last_second`, lowest worker id first, claiming the next
    /// unit when the current one is used up; `None` while the borrowing bound or every lane's
    /// fence or floor says not yet. A time field that ran out, or fences that closed on every
    /// lane, stop the ring with the typed error.
    fn claim_slice(&self, state: &mut PadState) -> Result<Option<(u64, u64)>> {
        loop {
            if let Some(worker_id) = state.left.pop() {
                // Relaxed: only holders of `pad` write it, and the caller holds it.
                return Ok(Some((self.last_second.load(Ordering::Relaxed), worker_id)));
            }
            if !self.claim_unit(state)? {
                return Ok(None);
            }
        }
    }

    /// Claim the next time unit, `max(last_second + 1, now)`, once the borrowing bound and the
    /// time field admit it, and cut it into the slices of the lanes whose fence and floor admit
    /// it. `false` (nothing claimed) while the bound holds or no lane may take the unit yet. A
    /// lane whose fence closed is dropped; the ring stops only when none is left.
    fn claim_unit(&self, state: &mut PadState) -> Result<bool> {
        let now = self.now_unit();
        // Relaxed: only holders of `pad` write it, and the caller holds it.
        let next = (self.last_second.load(Ordering::Relaxed) + 1).max(now);
        if let Some(bound) = state.max_borrow_units
            && next > now.saturating_add(bound)
        {
            return Ok(false);
        }
        if let Err(error) = self.layout.check_time(next) {
            // Baidu went on and spilled into the sign bit (#100, #52); stop instead, and keep
            // the error typed so takes report the exhaustion as such.
            // https://github.com/baidu/uid-generator/issues/100,
            // https://github.com/baidu/uid-generator/pull/52
            self.ring.stop_with(error.clone());
            return Err(error);
        }
        let unit_end = self.layout.millis_of(next + 1);
        // The admitted worker ids go straight into `left` (empty here: slices are claimed only
        // once it is), whose buffer is kept from unit to unit: a claim allocates nothing, which
        // per-thread unit handles pay for on every 8,192 IDs.
        let PadState { lanes, left, .. } = state;
        left.clear();
        let lanes_before = lanes.len();
        let mut closed = None;
        lanes.retain(|lane| {
            if next < lane.first_unit {
                return true; // its earlier holders' units: later
            }
            match lane.fence.as_deref().map(|fence| admit(fence, unit_end)) {
                None | Some(Ok(())) => left.push(lane.worker_id),
                // The ring keeps what it has; this lane sits the unit out until it rises.
                Some(Err(FenceRefusal::NotYet { .. })) => {}
                Some(Err(refusal)) => {
                    closed = Some(refusal.into_error(lane.worker_id, unit_end));
                    return false;
                }
            }
            true
        });
        if lanes.len() != lanes_before {
            // Relaxed: a status figure; the lanes themselves are read under `pad`. Stored only
            // on a change: the line is read by status while claims run.
            self.lane_count.store(lanes.len() as u64, Ordering::Relaxed);
        }
        if lanes.is_empty() {
            // The fence that closed last, or (a claim after the lanes were gone) the reason
            // the ring was stopped with then: every claimant reports the one cause.
            let error = closed
                .or_else(|| self.ring.stop_error())
                .unwrap_or_else(|| {
                    UidError::GeneratorStopped("no worker id is left to pad from".to_owned())
                });
            self.ring.stop_with(error.clone());
            return Err(error);
        }
        if left.is_empty() {
            return Ok(false);
        }
        // Release: readers of `issued_until_ms` see a unit at least this late.
        self.last_second.store(next, Ordering::Release);
        // Lowest worker id first: `pop` takes from the end.
        left.reverse();
        Ok(true)
    }

    /// Fill the ring. Each new unit is `max(last_second + 1, now)`: it borrows future units
    /// when demand outruns the clock, and catches up with the clock when demand is light (Baidu
    /// never re-synced, so its IDs drifted from the clock:
    /// [#8](https://github.com/baidu/uid-generator/issues/8),
    /// [#89](https://github.com/baidu/uid-generator/issues/89)).
    fn pad(&self) -> Result<Padded> {
        // One run at a time; the guard unlocks on every exit path, errors included (Baidu's
        // `running` flag stayed set when a put threw).
        let Some(mut state) = sync::try_lock(&self.pad) else {
            return Ok(Padded::Busy);
        };
        // Relaxed: a monitoring counter; it is counted before `padding_started` so that its SeqCst
        // store publishes the count to whoever sees the request cleared.
        self.padding_runs.fetch_add(1, Ordering::Relaxed);
        self.ring.padding_started();
        let max_sequence = self.layout.max_sequence();
        loop {
            let (unit, worker_id, sequence) = match state.pending {
                Some(pending) => pending,
                None => {
                    if self.ring.is_full() {
                        return Ok(Padded::Full);
                    }
                    match self.claim_slice(&mut state)? {
                        Some((unit, worker_id)) => (unit, worker_id, 0),
                        None => return Ok(Padded::BorrowLimit),
                    }
                }
            };
            // Fields never overlap, so every ID of the slice is its sequence-0 ID with the
            // sequence or-ed in: one compose per slice instead of one per ID (the padding thread
            // is what caps sustained throughput, see docs/BENCHMARKS.md).
            let base = self.layout.compose_unchecked(unit, worker_id, 0);
            // The shift is copied into the closure: read through `self` it was loaded from the
            // shared struct on every ID, on a line the takers' side also touches.
            let shift = self.sequence_shift;
            let mut uids = (sequence..=max_sequence).map(move |s| base | (s << shift));
            // At most the ring size, which fits a u64.
            let put = u64::try_from(self.ring.put_batch(&mut uids)).unwrap_or(u64::MAX);
            if sequence.saturating_add(put) > max_sequence {
                state.pending = None;
            } else {
                state.pending = Some((unit, worker_id, sequence + put));
                return Ok(if self.ring.is_full() {
                    Padded::Full
                } else {
                    Padded::SlotBusy
                });
            }
        }
    }
}

impl<C: Clock> UnitSource for Shared<C> {
    fn ring(&self) -> &RingBuffer {
        &self.ring
    }

    fn claim_first_id(&self) -> Result<Option<u64>> {
        let slice = {
            // Blocking: a padding run holds the lock for one fill of the ring, and for a fence's
            // extension when it asks for one (a handle's own claim may ask too).
            let mut state = sync::lock(&self.pad);
            self.claim_slice(&mut state)?
        };
        Ok(slice.map(|(unit, worker_id)| self.layout.compose_unchecked(unit, worker_id, 0)))
    }

    fn sequence_step(&self) -> (u64, u64) {
        (1 << self.sequence_shift, self.layout.max_sequence())
    }
}

/// A filled generator's shared state, and where its padding thread's handle goes (the ring's
/// padding trigger wakes the thread put there).
type Filled<C> = (Arc<Shared<C>>, Arc<OnceLock<Thread>>);

/// Baidu's cached generator: a background thread fills a [`RingBuffer`] with whole time units of
/// IDs ahead of demand, and [`next_id`](UidGenerator::next_id) takes from it without a lock.
///
/// IDs carry the time unit they were padded for, which runs ahead of the clock when demand
/// outruns `max_sequence + 1` IDs per unit ("borrowed" units, see
/// [`borrowed_units`](Self::borrowed_units)). That is safe only if no other process uses this
/// worker id for that time: give it a fresh worker id per start (Baidu's disposable assigner) or
/// hand a leased id over at [`issued_until_ms`](UidGenerator::issued_until_ms).
///
/// Dropping the generator stops and joins the padding thread.
///
/// ```
/// use std::time::Duration;
/// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
/// let layout = Layout::baidu_default()?;
/// let options = CachedOptions::waiting(Duration::from_secs(1));
/// let generator = CachedUidGenerator::new(layout, 7, SystemClock, options)?;
/// let ids = generator.next_ids(100_000)?;
/// assert_eq!(generator.parse(ids[0])?.parts.worker, 7);
/// assert!(ids.windows(2).all(|w| w[0] < w[1]));
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub struct CachedUidGenerator<C: Clock + 'static = SystemClock> {
    shared: Arc<Shared<C>>,
    padder: Option<JoinHandle<()>>,
}

impl<C: Clock + 'static> std::fmt::Debug for CachedUidGenerator<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedUidGenerator")
            .field("worker_id", &self.shared.worker_id)
            .field("ring", &self.shared.ring)
            .field("last_second", &self.shared.last_second)
            .finish_non_exhaustive()
    }
}

impl<C: Clock + 'static> CachedUidGenerator<C> {
    /// A generator for `worker_id`, with its ring filled and its padding thread running.
    ///
    /// Fails if the worker id does not fit the layout, the options are out of range, or the
    /// clock is already past the layout's time range.
    pub fn new(layout: Layout, worker_id: u64, clock: C, options: CachedOptions) -> Result<Self> {
        let interval = options.schedule_interval;
        let (shared, waker) = Self::filled(layout, worker_id, clock, options)?;
        let worker = Arc::clone(&shared);
        let padder = thread::Builder::new()
            .name(format!("uidgen-padding-{worker_id}"))
            .spawn(move || padding_loop(&worker, interval))
            .map_err(|e| UidError::GeneratorStopped(format!("cannot start padding thread: {e}")))?;
        // Set once, right after spawning; the OnceLock cannot already hold a value.
        let _ = waker.set(padder.thread().clone());
        Ok(Self {
            shared,
            padder: Some(padder),
        })
    }

    /// A generator whose ring is filled once and then only by [`pad_now`](Self::pad_now): the
    /// loom models drive padding from a model thread, since loom cannot run the real padding
    /// thread (it is a std thread parking on the wall clock).
    #[cfg(uidgen_loom)]
    #[doc(hidden)]
    pub fn without_padding_thread(
        layout: Layout,
        worker_id: u64,
        clock: C,
        options: CachedOptions,
    ) -> Result<Self> {
        let (shared, _) = Self::filled(layout, worker_id, clock, options)?;
        Ok(Self {
            shared,
            padder: None,
        })
    }

    /// One padding run on the caller's thread, as the padding thread makes one (loom models).
    #[cfg(uidgen_loom)]
    #[doc(hidden)]
    pub fn pad_now(&self) -> Result<()> {
        self.shared.pad().map(|_| ())
    }

    /// The shared state with its ring filled, and the slot the padding thread's handle goes in
    /// (its trigger wakes whatever thread is put there).
    fn filled(
        layout: Layout,
        worker_id: u64,
        clock: C,
        options: CachedOptions,
    ) -> Result<Filled<C>> {
        layout.check_worker_id(worker_id)?;
        if options.boost_power > MAX_BOOST_POWER {
            return Err(UidError::InvalidOption {
                name: "boost_power",
                reason: format!("{} must be 0 to {MAX_BOOST_POWER}", options.boost_power),
            });
        }
        if let Some(period) = options.schedule_interval
            && period < Duration::from_millis(1)
        {
            // No time unit is finer than a millisecond, so padding more often finds nothing new
            // to pad and only spins the padding thread (a zero period never parks at all).
            return Err(UidError::InvalidOption {
                name: "schedule_interval",
                reason: format!(
                    "{period:?} is shorter than a millisecond; use at least 1 ms, or None to pad \
                     only when takes ask"
                ),
            });
        }
        // checked_shl only refuses shifts of 64 or more, not bits shifted out: multiply instead
        // (a 62-bit sequence with boost 3 must not wrap to a 2-slot ring).
        let size = usize::try_from(layout.max_sequence())
            .ok()
            .and_then(|max| max.checked_add(1))
            .zip(1usize.checked_shl(options.boost_power))
            .and_then(|(units, boost)| units.checked_mul(boost))
            .filter(|&n| n <= RingBuffer::MAX_SIZE)
            .ok_or_else(|| UidError::InvalidOption {
                name: "boost_power",
                reason: format!(
                    "(max_sequence + 1) << {} exceeds the largest ring ({} slots)",
                    options.boost_power,
                    RingBuffer::MAX_SIZE
                ),
            })?;
        // A ring needs at least two slots; a 0-bit sequence with no boost would have one.
        let size = size.max(2);
        let now = layout.time_at(clock.now_millis())?;
        let max_borrow_units = borrow_bound(&layout, &options);
        let floor_unit = options
            .fence
            .as_ref()
            .map_or(0, |fence| first_unit_from(&layout, fence.floor_ms()));

        let waker: Arc<OnceLock<Thread>> = Arc::new(OnceLock::new());
        let wake = Arc::clone(&waker);
        let mut ring = RingBuffer::new(size, options.padding_factor)?.with_padding_trigger(
            Box::new(move || {
                if let Some(thread) = wake.get() {
                    thread.unpark();
                }
            }),
        );
        if let Some(handler) = options.reject_put {
            ring = ring.with_reject_put(handler);
        }
        if let Some(handler) = options.reject_take {
            ring = ring.with_reject_take(handler);
        }
        // Every layout has a sequence field (construction refuses one without).
        let layout_sequence_shift =
            layout
                .shift(FieldKind::Sequence)
                .ok_or(UidError::MalformedLayout(
                    "the layout has no sequence field",
                ))?;
        let lane = Lane {
            worker_id,
            fence: options.fence,
            first_unit: floor_unit,
        };
        let shared = Arc::new(Shared {
            layout,
            worker_id,
            clock,
            ring,
            // The first unit padded is `max(last + 1, now)`: now itself, or the fence's floor
            // when the worker id's earlier holder stamped up to a later instant.
            last_second: AtomicU64::new(now.saturating_sub(1).max(floor_unit.saturating_sub(1))),
            pad: Mutex::new(PadState {
                lanes: vec![lane],
                max_borrow_units,
                ..PadState::default()
            }),
            lane_count: AtomicU64::new(1),
            borrow_bound: AtomicU64::new(max_borrow_units.unwrap_or(u64::MAX)),
            sequence_shift: layout_sequence_shift,
            stopping: AtomicBool::new(false),
            padding_runs: AtomicU64::new(0),
            padded: OnceLock::new(),
        });
        // Baidu fills the whole ring before the first take. Within the ring's span of the time
        // field's end it holds what is left: takes hand that out, then report the exhaustion
        // (the padding stopped the ring with it), as the other generators do at the end.
        match shared.pad() {
            Err(UidError::TimestampExhausted { .. }) if !shared.ring.is_empty() => {}
            padded => {
                padded?;
            }
        }
        Ok((shared, waker))
    }

    /// The worker id the generator was made with (see [`workers`](Self::workers) for every
    /// worker id it pads from).
    pub fn worker_id(&self) -> u64 {
        self.shared.worker_id
    }

    /// Pad from `worker_id` too, from the next time unit on: each time unit then yields
    /// another `max_sequence + 1` IDs (8,192 on Baidu's layout), so the generator sustains
    /// that many more IDs per unit without borrowing further ahead of the clock. `fence` bounds
    /// the units stamped with it, as the options' fence bounds the first worker id's (a reused
    /// id's lease or mark; its floor is where padding starts for it), and its borrowing bound
    /// tightens the generator's. Every ID still carries the worker id it was padded for, so
    /// decoding names it.
    ///
    /// The worker id must be held for this process exactly as the first one is (a fresh
    /// `worker_node` row, a lease, a coordinator's claim): the generator cannot tell. An
    /// [`UidError::InvalidOption`] if it is already padded from; an error if it does not fit
    /// the layout.
    ///
    /// On a layout whose worker field lies below the sequence (Vesta's), the IDs of one time
    /// unit then come worker id by worker id, so the ring's order is no longer increasing
    /// within a unit; they are still unique.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
    /// let generator = CachedUidGenerator::new(
    ///     Layout::baidu_default()?, 7, SystemClock, CachedOptions::waiting(Duration::from_secs(5)))?;
    /// generator.add_worker(8, None)?;
    /// assert_eq!(generator.workers(), vec![7, 8]);
    /// let workers: std::collections::BTreeSet<u64> = generator
    ///     .next_ids(200_000)?
    ///     .iter()
    ///     .map(|id| generator.parse(*id).unwrap().parts.worker)
    ///     .collect();
    /// assert_eq!(workers.into_iter().collect::<Vec<_>>(), vec![7, 8]);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn add_worker(&self, worker_id: u64, fence: Option<Arc<dyn TimeFence>>) -> Result<()> {
        let layout = &self.shared.layout;
        layout.check_worker_id(worker_id)?;
        let first_unit = fence
            .as_ref()
            .map_or(0, |fence| first_unit_from(layout, fence.floor_ms()));
        let fence_bound = fence
            .as_ref()
            .and_then(|fence| fence.max_borrow_ms())
            .map(|ms| (ms / layout.unit().millis()).max(1));
        let mut state = sync::lock(&self.shared.pad);
        let at = match state
            .lanes
            .binary_search_by_key(&worker_id, |lane| lane.worker_id)
        {
            Ok(_) => {
                return Err(UidError::InvalidOption {
                    name: "worker_id",
                    reason: format!("worker id {worker_id} is padded from already"),
                });
            }
            Err(at) => at,
        };
        state.lanes.insert(
            at,
            Lane {
                worker_id,
                fence,
                first_unit,
            },
        );
        if let Some(bound) = fence_bound {
            let tightened = state.max_borrow_units.map_or(bound, |b| b.min(bound));
            state.max_borrow_units = Some(tightened);
            // Relaxed: a status figure; padding reads the bound under `pad`.
            self.shared.borrow_bound.store(tightened, Ordering::Relaxed);
        }
        // Relaxed: a status figure; the lanes themselves are read under `pad`.
        self.shared
            .lane_count
            .store(state.lanes.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Stop padding from `worker_id`: no slice of it is claimed from now on (the rest of a
    /// slice under way is dropped, a gap). Returns how far its IDs may run: the end of the
    /// last time unit claimed, which every ID stamped with it ends by, the ring's included.
    /// Write that down with its keeper before giving the id back, so a successor starts above
    /// it. An [`UidError::InvalidOption`] for a worker id not padded from, or the last one
    /// (the generator would have nothing left).
    ///
    /// ```
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// generator.add_worker(8, None)?;
    /// let until = generator.retire_worker(8)?;
    /// assert!(until >= generator.issued_until_ms().unwrap() - 1_000);
    /// assert_eq!(generator.workers(), vec![7]);
    /// assert!(generator.retire_worker(7).is_err()); // the last one stays
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn retire_worker(&self, worker_id: u64) -> Result<u64> {
        let mut state = sync::lock(&self.shared.pad);
        let at = state
            .lanes
            .binary_search_by_key(&worker_id, |lane| lane.worker_id)
            .map_err(|_| UidError::InvalidOption {
                name: "worker_id",
                reason: format!("worker id {worker_id} is not padded from"),
            })?;
        if state.lanes.len() == 1 {
            return Err(UidError::InvalidOption {
                name: "worker_id",
                reason: format!("worker id {worker_id} is the last one padded from"),
            });
        }
        state.lanes.remove(at);
        state.left.retain(|w| *w != worker_id);
        if state.pending.is_some_and(|(_, w, _)| w == worker_id) {
            state.pending = None;
        }
        // Relaxed: a status figure; the lanes themselves are read under `pad`.
        self.shared
            .lane_count
            .store(state.lanes.len() as u64, Ordering::Relaxed);
        // Relaxed: under the lock, which every writer holds; no slice of it is claimed again.
        let last = self.shared.last_second.load(Ordering::Relaxed);
        Ok(self.shared.layout.millis_of(last + 1))
    }

    /// The worker ids padded from, lowest first.
    pub fn workers(&self) -> Vec<u64> {
        let state = sync::lock(&self.shared.pad);
        state.lanes.iter().map(|lane| lane.worker_id).collect()
    }

    /// How many worker ids are padded from (one atomic load: for status and metrics).
    pub fn worker_count(&self) -> u64 {
        // Relaxed: a status figure.
        self.shared.lane_count.load(Ordering::Relaxed)
    }

    /// The ring the IDs come from (for monitoring: fill level, rejected puts).
    pub fn ring(&self) -> &RingBuffer {
        &self.shared.ring
    }

    /// The last time unit padded into the ring (Baidu's `lastSecond`).
    pub fn last_second(&self) -> u64 {
        // Acquire: pairs with the padding's Release store.
        self.shared.last_second.load(Ordering::Acquire)
    }

    /// How many time units the padded IDs run ahead of the clock.
    pub fn borrowed_units(&self) -> u64 {
        self.last_second().saturating_sub(self.shared.now_unit())
    }

    /// How many padding runs have happened (start-up, takes below the threshold, schedule).
    pub fn padding_runs(&self) -> u64 {
        // Relaxed: a monitoring counter; no other memory is read on the strength of it.
        self.shared.padding_runs.load(Ordering::Relaxed)
    }

    /// The clock the generator reads.
    pub fn clock(&self) -> &C {
        &self.shared.clock
    }

    /// Call `hook` on the padding thread after every padding run that put IDs into the ring,
    /// and once when the padding stops for good, so that a caller waiting for IDs can sleep
    /// until then instead of polling or holding a thread (the service's async handlers wake a
    /// `tokio::sync::Notify` from it). The hook runs on the padding thread: it must be quick and
    /// must not take from the ring. Set once; `false` if a hook was already set.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// let runs = Arc::new(AtomicU64::new(0));
    /// let counted = Arc::clone(&runs);
    /// assert!(generator.on_padded(Arc::new(move || {
    ///     counted.fetch_add(1, Ordering::SeqCst);
    /// })));
    /// let capacity = generator.ring().buffer_size();
    /// generator.next_ids(capacity)?; // drains the ring: padding refills it, and says so
    /// while runs.load(Ordering::SeqCst) == 0 {
    ///     std::thread::yield_now();
    /// }
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn on_padded(&self, hook: PaddedHook) -> bool {
        self.shared.padded.set(Announcer(hook)).is_ok()
    }

    /// How long a taker may wait for padding that delivers nothing before it gives up: padding
    /// adds at least one unit per unit of clock time unless something stops it (a fence that
    /// does not rise), so two units and a few seconds of silence mean it is stuck. A borrowing
    /// bound that was reached makes takers wait up to a unit for the clock, well within it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// assert_eq!(generator.stall_limit(), Duration::from_secs(7));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn stall_limit(&self) -> Duration {
        let unit = Duration::from_millis(self.shared.layout.unit().millis());
        unit * 2 + Duration::from_secs(5)
    }

    /// A handle for one thread that claims [`DEFAULT_LOCAL_BATCH`] IDs (or the whole ring, if
    /// it is smaller) with one CAS on the ring's cursor and hands them out one by one: for a
    /// thread that wants many single IDs and can give up their global order across threads
    /// (see [`LocalIds`] for what it keeps and gives up).
    ///
    /// ```
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// std::thread::scope(|s| {
    ///     for _ in 0..2 {
    ///         s.spawn(|| {
    ///             let mut ids = generator.local();
    ///             let (a, b) = (ids.next_id().unwrap(), ids.next_id().unwrap());
    ///             assert!(a < b); // increasing per handle; not across the two threads
    ///         });
    ///     }
    /// });
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn local(&self) -> LocalIds<'_> {
        LocalIds::clamped(&self.shared.ring, DEFAULT_LOCAL_BATCH)
    }

    /// A handle like [`local`](Self::local) that claims up to `batch` IDs at once; an
    /// [`UidError::InvalidOption`] unless `batch` is 1 to the smaller of
    /// [`MAX_LOCAL_BATCH`](crate::local::MAX_LOCAL_BATCH) and the ring's size.
    ///
    /// ```
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidError};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// assert_eq!(generator.local_with_batch(256)?.batch(), 256);
    /// assert!(matches!(
    ///     generator.local_with_batch(0),
    ///     Err(UidError::InvalidOption { name: "batch", .. })
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn local_with_batch(&self, batch: usize) -> Result<LocalIds<'_>> {
        LocalIds::new(&self.shared.ring, batch)
    }

    /// A handle for one thread that claims a whole time unit at a time (`max_sequence + 1` IDs:
    /// 8,192 on Baidu's layout) under the padding lock, bypassing the ring, and composes its IDs
    /// in the thread itself: nothing is shared per ID, so threads with a handle each scale
    /// alone. It gives up more than [`local`](Self::local) does (see [`UnitIds`]): a dropped
    /// handle leaves up to a whole unit unused, and every claim borrows a unit ahead, so it is
    /// for threads that want IDs in the millions.
    ///
    /// ```
    /// use uidgen_core::{CachedOptions, CachedUidGenerator, Layout, SystemClock, UidGenerator};
    /// let generator =
    ///     CachedUidGenerator::new(Layout::baidu_default()?, 7, SystemClock, CachedOptions::default())?;
    /// let mut ids = generator.local_units();
    /// let (a, b) = (ids.next_id()?, ids.next_id()?);
    /// assert_eq!(b, a + 1); // sequences 0 and 1 of the unit the handle claimed
    /// let unit = generator.parse(a)?.parts.time;
    /// assert!(unit > generator.parse(generator.next_id()?)?.parts.time); // past the ring's units
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn local_units(&self) -> UnitIds<'_> {
        UnitIds::new(self.shared.as_ref())
    }
}

/// The borrowing bound in time units: the options' own, tightened by the fence's (whole units,
/// at least one, so padding can always reach the unit after the clock's).
fn borrow_bound(layout: &Layout, options: &CachedOptions) -> Option<u64> {
    let fence_units = options
        .fence
        .as_ref()
        .and_then(|fence| fence.max_borrow_ms())
        .map(|ms| (ms / layout.unit().millis()).max(1));
    match (options.max_borrow_units, fence_units) {
        (Some(own), Some(fence)) => Some(own.min(fence)),
        (own, fence) => own.or(fence),
    }
}

/// Stops the ring when the padding thread ends other than by the generator's request, above all
/// when it panics (a panicking [`Clock`]): without it, takes on the emptied ring would report
/// `RingEmpty` or wait out their timeout for padding that can never come.
struct StopRingOnExit<'a, C: Clock> {
    shared: &'a Shared<C>,
}

impl<C: Clock> Drop for StopRingOnExit<'_, C> {
    fn drop(&mut self) {
        // A stop the generator asked for needs no reason: nobody can take from the ring after it.
        if self.shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        // `stop` keeps the first reason, so an error `pad` already reported stays the one shown.
        let reason = if thread::panicking() {
            "the padding thread panicked; no more IDs will be padded"
        } else {
            "the padding thread exited; no more IDs will be padded"
        };
        self.shared.ring.stop(reason);
        // Waiters learn of the stop now rather than at the end of their wait.
        self.shared.announce();
    }
}

/// The padding thread: pad when woken, on schedule, and retry while borrowing is bounded. The
/// ring is already full when it starts, so it waits first.
fn padding_loop<C: Clock>(shared: &Shared<C>, interval: Option<Duration>) {
    let _stop_on_exit = StopRingOnExit { shared };
    let mut retry_soon = false;
    loop {
        if retry_soon {
            // Waiting for the clock: look again soon; a unit is at least a millisecond.
            thread::park_timeout(Duration::from_millis(1));
        } else if let Some(period) = interval {
            thread::park_timeout(period);
        } else {
            // Until a take asks (an unpark that came first makes this return at once).
            thread::park();
        }
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let before = shared.ring.tail();
        let padded = shared.pad();
        if shared.ring.tail() != before {
            shared.announce();
        }
        retry_soon = match padded {
            Ok(Padded::Full) => false,
            Ok(Padded::BorrowLimit | Padded::SlotBusy | Padded::Busy) => true,
            // The ring carries the error for takes; nothing more can be padded (the guard
            // announces the stop as the loop ends).
            Err(_) => return,
        };
    }
}

impl<C: Clock + 'static> Drop for CachedUidGenerator<C> {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        if let Some(padder) = self.padder.take() {
            padder.thread().unpark();
            // A panic in the padding thread has nothing left to report to; the ring is gone.
            let _ = padder.join();
        }
    }
}

impl<C: Clock + 'static> UidGenerator for CachedUidGenerator<C> {
    #[inline]
    fn next_id(&self) -> Result<u64> {
        self.shared.ring.take()
    }

    fn next_ids(&self, n: usize) -> Result<Vec<u64>> {
        check_count(n)?;
        let mut ids = Vec::with_capacity(n);
        let mut progress = (0, Instant::now());
        while ids.len() < n {
            let wanted = n - ids.len();
            if self.shared.ring.take_batch(&mut ids, wanted) > 0 {
                continue;
            }
            // Empty: the policy decides (wait, or fail). A batch may be larger than the ring,
            // and the trait promises up to MAX_BATCH, so a policy that fails fast does not end
            // it while padding keeps delivering: dropping what was taken would only waste IDs.
            match self.shared.ring.take() {
                Ok(id) => ids.push(id),
                Err(UidError::RingEmpty(reason)) => {
                    if ids.len() > progress.0 {
                        progress = (ids.len(), Instant::now());
                    }
                    let stalled = progress.1.elapsed();
                    if stalled >= self.stall_limit() {
                        return Err(UidError::RingEmpty(format!(
                            "{reason}; no ID padded for {stalled:?} with {} of {n} taken",
                            ids.len()
                        )));
                    }
                    thread::sleep(Duration::from_micros(200));
                }
                Err(error) => return Err(error),
            }
        }
        Ok(ids)
    }

    fn layout(&self) -> &Layout {
        &self.shared.layout
    }

    fn issued_until_ms(&self) -> Option<u64> {
        Some(self.shared.layout.millis_of(self.last_second() + 1))
    }

    fn stock(&self) -> Option<ReadyStock> {
        let ring = &self.shared.ring;
        Some(ReadyStock {
            capacity: ring.buffer_size() as u64,
            available: ring.len() as u64,
            padding_runs: self.padding_runs(),
            borrowed_units: self.borrowed_units(),
            stopped: ring.stop_error(),
            stall_limit: self.stall_limit(),
            // The cursor starts at -1 and only rises: IDs taken so far.
            taken: u64::try_from(ring.cursor().saturating_add(1)).unwrap_or(0),
            workers: self.worker_count(),
            // Relaxed: a status figure.
            max_borrow_units: Some(self.shared.borrow_bound.load(Ordering::Relaxed))
                .filter(|bound| *bound != u64::MAX),
        })
    }

    #[inline]
    fn take_one_ready(&self) -> Result<Option<u64>> {
        Ok(self.shared.ring.try_take())
    }

    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> Result<usize> {
        Ok(self.shared.ring.take_batch(out, max))
    }

    fn on_padded(&self, hook: PaddedHook) -> bool {
        CachedUidGenerator::on_padded(self, hook)
    }

    fn lanes(&self) -> Option<&dyn WorkerLanes> {
        Some(self)
    }
}

impl<C: Clock + 'static> WorkerLanes for CachedUidGenerator<C> {
    fn add_worker(&self, worker_id: u64, fence: Option<Arc<dyn TimeFence>>) -> Result<()> {
        CachedUidGenerator::add_worker(self, worker_id, fence)
    }

    fn retire_worker(&self, worker_id: u64) -> Result<u64> {
        CachedUidGenerator::retire_worker(self, worker_id)
    }

    fn workers(&self) -> Vec<u64> {
        CachedUidGenerator::workers(self)
    }
}
