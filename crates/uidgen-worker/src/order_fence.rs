//! [`OrderFence`], the fence that keeps an ID space's order mark ahead of what its generator
//! stamps (issue 33 item 1, "order across restarts"), over [`OrderMarks`], where the marks are
//! kept: the store's `id_order_mark` table, or the etcd or ZooKeeper the worker ids come from
//! (a fleet whose hosts each keep a store of their own shares only its coordinator).
//!
//! Invariants (what makes the first ID of a new life sort above every earlier life's):
//!
//! 1. The mark only rises: [`OrderMarks::raise_mark`] writes `x` only over a lower value
//!    (a conditional update, a compare on etcd's mod revision, a versioned ZooKeeper write),
//!    so concurrent servers of one space never lower each other's marks.
//! 2. A unit is stamped only once the mark covers its end: the fence's
//!    [`limit_ms`](TimeFence::limit_ms) is the highest value this process has had accepted by
//!    the keeper, and the generator stamps (the cached generator: pads) no unit ending past
//!    it. Nothing needs writing at death: a `kill -9` leaves the mark above the last ID.
//! 3. A new life's floor is the space's mark as read at its start: its generator stamps no
//!    unit starting before it, and the layout is time-major, so its first ID's time field is
//!    above every earlier ID's of the space (of every server sharing the keeper).
//!
//! The mark is written ahead by a lead (a few seconds), in steps, by a background task: no
//! write per ID nor per unit, and a write is only waited for when a burst borrows past the
//! lead. A keeper that does not answer stops the limit where it is: the generator then waits
//! (the cached generator's ring drains, then takes wait) rather than stamp past an unwritten
//! mark, unless the fence is not [`strict`](OrderOptions::strict).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;
use uidgen_core::{Clock, FenceRefusal, TimeFence};

use crate::error::Result;
use crate::future::BoxFuture;
use crate::order_record::MarkRaise;

/// Where the order marks of ID spaces are kept: one number per space (ms since the Unix
/// epoch) that only rises. Implemented by the store (`id_order_mark`), `uidgen-etcd` and
/// `uidgen-zk`; [`OrderFence`] writes it ahead of its generator.
///
/// The contract: [`raise_mark`](Self::raise_mark) never lowers a mark, whoever else raises
/// it at once; on `Ok` the mark is at least the value asked for; [`read_mark`](Self::read_mark)
/// reads a value at least as high as every raise that returned `Ok` before it was called.
///
/// ```
/// use uidgen_worker::order_mark_name;
/// // Keepers that name a key or node after the space use this one spelling.
/// assert_eq!(order_mark_name("default"), "default");
/// assert_eq!(order_mark_name("a/b c"), "a%2Fb%20c");
/// ```
pub trait OrderMarks: Send + Sync + std::fmt::Debug {
    /// Where the marks are kept, for messages: "the store", "etcd", "ZooKeeper".
    fn kept_in(&self) -> &'static str;

    /// The space's mark: no ID of `space` was stamped with a time unit ending after it.
    /// `None` while no server of the space has written one.
    ///
    /// Cancel safety: a read only.
    fn read_mark<'a>(&'a self, space: &'a str) -> BoxFuture<'a, Result<Option<u64>>>;

    /// Raise the space's mark to `raise.until_ms` unless it is higher already, recording
    /// `raise.holder` and `raise.now_ms` as who raised it and when (where the keeper has room
    /// for them). Returns the mark as the raise left it (at least `raise.until_ms`).
    ///
    /// Cancel safety: a raise dropped midway may or may not have been applied; either way the
    /// mark did not fall.
    fn raise_mark<'a>(&'a self, raise: MarkRaise<'a>) -> BoxFuture<'a, Result<u64>>;
}

/// Implement [`OrderMarks`] for `$keeper` from two async methods of its own:
/// `$read(space) -> Result<Option<u64>, E>` and
/// `$raise(`[`MarkRaise`]`) -> Result<u64, E>`, with `E` into
/// [`WorkerError`](crate::error::WorkerError); `$kept_in` names the keeper in messages. One
/// expansion for every keeper, so the trait's boxing lives in one place.
///
/// ```
/// use uidgen_worker::{MarkRaise, OrderMarks, WorkerError};
/// #[derive(Debug, Default)]
/// struct Memory(std::sync::Mutex<u64>);
/// impl Memory {
///     async fn read(&self, _space: &str) -> Result<Option<u64>, WorkerError> {
///         Ok(Some(*self.0.lock().unwrap()))
///     }
///     async fn raise(&self, raise: MarkRaise<'_>) -> Result<u64, WorkerError> {
///         let mut mark = self.0.lock().unwrap();
///         *mark = (*mark).max(raise.until_ms);
///         Ok(*mark)
///     }
/// }
/// uidgen_worker::order_marks_from!(Memory, "memory", read, raise);
/// let marks = Memory::default();
/// assert_eq!(marks.kept_in(), "memory");
/// ```
#[macro_export]
macro_rules! order_marks_from {
    ($keeper:ty, $kept_in:literal, $read:ident, $raise:ident) => {
        impl $crate::OrderMarks for $keeper {
            fn kept_in(&self) -> &'static str {
                $kept_in
            }

            fn read_mark<'a>(
                &'a self,
                space: &'a str,
            ) -> $crate::BoxFuture<'a, ::std::result::Result<Option<u64>, $crate::WorkerError>>
            {
                Box::pin(async move { Ok(self.$read(space).await?) })
            }

            fn raise_mark<'a>(
                &'a self,
                raise: $crate::MarkRaise<'a>,
            ) -> $crate::BoxFuture<'a, ::std::result::Result<u64, $crate::WorkerError>> {
                Box::pin(async move { Ok(self.$raise(raise).await?) })
            }
        }
    };
}

/// The name a keeper gives `space`'s mark in its own tree (an etcd key's last part, a
/// ZooKeeper node's name): letters, digits, `-` and `_` as they are, every other byte as
/// `%XX`, so that no space name makes a path of it (`/`, `.`, `..`).
pub fn order_mark_name(space: &str) -> String {
    let mut name = String::with_capacity(space.len());
    for byte in space.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            name.push(char::from(byte));
        } else {
            // Writing to a String cannot fail.
            let _ = write!(name, "%{byte:02X}");
        }
    }
    name
}

/// How far ahead an [`OrderFence`] writes its space's mark.
///
/// ```
/// use std::time::Duration;
/// use uidgen_worker::OrderOptions;
/// let options = OrderOptions::borrowing(Some(Duration::from_secs(60)));
/// assert_eq!(options.lead, Duration::from_secs(10));
/// assert_eq!(options.max_ahead, Some(Duration::from_secs(61)));
/// assert_eq!(OrderOptions::not_borrowing().lead, Duration::from_secs(2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderOptions {
    /// Each write puts the mark this far past what the generator needs (or the clock): the
    /// step that saves a write per unit, and at most the extra a next life starts ahead.
    pub lead: Duration,
    /// The mark is never written further than this ahead of the clock (the generator's own
    /// borrowing bound and a unit): a next life starting on its own clock then begins within
    /// its borrowing bound, without a wait. `None`: no bound (a generator that borrows without
    /// one).
    pub max_ahead: Option<Duration>,
    /// While the marks' keeper (the store, etcd, ZooKeeper) does not answer: `true` stops the
    /// generator at the last accepted mark (order kept, IDs stop); `false` (the server's
    /// choice) lets it go on past the mark, reported by [`OrderMarkStatus::past_mark`] until a
    /// write covers what it stamped. The order fence never guards uniqueness (worker ids and
    /// their own fences do), so going on costs only this: a life that dies before the keeper
    /// answers again may leave IDs above the mark, and the next life's first IDs may sort
    /// below them.
    pub strict: bool,
}

impl OrderOptions {
    /// For a generator that borrows up to `bound` ahead of the clock (the cached generator):
    /// a 10 s lead, the mark at most `bound` and a second ahead.
    pub fn borrowing(bound: Option<Duration>) -> Self {
        Self {
            lead: Duration::from_secs(10),
            max_ahead: bound.map(|bound| bound + Duration::from_secs(1)),
            strict: false,
        }
    }

    /// For a generator that never stamps ahead of the clock (Default, Snowflake): a 2 s lead,
    /// which a next life waits out at most.
    pub fn not_borrowing() -> Self {
        Self {
            lead: Duration::from_secs(2),
            max_ahead: Some(Duration::from_secs(2)),
            strict: false,
        }
    }
}

/// The shared state of an [`OrderFence`].
#[derive(Debug)]
struct OrderState {
    marks: Arc<dyn OrderMarks>,
    clock: Arc<dyn Clock>,
    space: String,
    holder: String,
    /// The space's mark when this life started: it stamps no unit starting before it.
    floor_ms: u64,
    /// The highest mark this process had accepted: units may end up to here.
    limit_ms: AtomicU64,
    /// The highest unit end the generator asked for.
    wanted_ms: AtomicU64,
    lead_ms: u64,
    max_ahead_ms: Option<u64>,
    strict: bool,
    /// Stamping past a mark the keeper has not accepted (not strict, the keeper not answering).
    past_mark: AtomicBool,
    wake: tokio::sync::Notify,
    writes: AtomicU64,
    failures: AtomicU64,
    last_error: Mutex<Option<String>>,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Drop for OrderState {
    fn drop(&mut self) {
        if let Some(task) = self.writer.lock().take() {
            task.abort();
        }
    }
}

/// A [`TimeFence`] that keeps the ID space's order mark (wherever its [`OrderMarks`] keep it) ahead
/// of every time unit its generator stamps, and whose floor is the mark every earlier life of the
/// space left: the first ID of this life sorts above every ID issued in the space before it started
/// (see the module's invariants). Clones share the fence.
///
/// Open it with [`OrderFence::open`] inside a tokio runtime (its writer is a task there), and
/// give it to the generator, combined with the assignment's own fence by
/// [`OrderFence::over`].
#[derive(Debug, Clone)]
pub struct OrderFence {
    state: Arc<OrderState>,
}

/// What a status page shows of an [`OrderFence`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderMarkStatus {
    /// The space's mark when this life started (0: none was written before).
    pub floor_ms: u64,
    /// The mark this process has had accepted: its generator stamps nothing past it.
    pub limit_ms: u64,
    /// Marks written so far.
    pub writes: u64,
    /// Writes that failed (the marks' keeper did not answer).
    pub failures: u64,
    /// This life stamps past the mark the keeper last accepted (the keeper does not answer and
    /// the fence is not [`strict`](OrderOptions::strict)): until a write covers it again, a
    /// next life may start below IDs this one issued.
    pub past_mark: bool,
}

impl OrderFence {
    /// Read `space`'s mark, write the first mark of this life (the later of the clock and the
    /// space's mark, plus the lead) and start the writer that keeps it ahead. `holder` names
    /// this process in the row (for operators).
    ///
    /// ```no_run
    /// # async fn demo(marks: std::sync::Arc<dyn uidgen_worker::OrderMarks>)
    /// #     -> Result<(), Box<dyn std::error::Error>> {
    /// use std::sync::Arc;
    /// use uidgen_core::{Layout, SystemClock, UidGenerator, DefaultUidGenerator};
    /// use uidgen_worker::{OrderFence, OrderOptions};
    /// // `marks`: the store, or the etcd or ZooKeeper the worker id comes from.
    /// let fence = OrderFence::open(
    ///     marks, Arc::new(SystemClock), "default", "worker 7", OrderOptions::not_borrowing(),
    /// ).await?;
    /// let generator = DefaultUidGenerator::new(Layout::baidu_default()?, 7, SystemClock)?
    ///     .fenced(Arc::new(fence.clone()));
    /// let id = generator.next_id()?;
    /// # Ok(()) }
    /// ```
    pub async fn open(
        marks: Arc<dyn OrderMarks>,
        clock: Arc<dyn Clock>,
        space: &str,
        holder: &str,
        options: OrderOptions,
    ) -> Result<Self> {
        let floor_ms = marks.read_mark(space).await?.unwrap_or(0);
        let lead_ms = u64::try_from(options.lead.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let max_ahead_ms = options
            .max_ahead
            .map(|ahead| u64::try_from(ahead.as_millis()).unwrap_or(u64::MAX));
        let state = Arc::new(OrderState {
            marks,
            clock,
            space: space.to_owned(),
            holder: holder.to_owned(),
            floor_ms,
            limit_ms: AtomicU64::new(0),
            // The first units come right after the floor.
            wanted_ms: AtomicU64::new(floor_ms),
            lead_ms,
            max_ahead_ms,
            strict: options.strict,
            past_mark: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            writes: AtomicU64::new(0),
            failures: AtomicU64::new(0),
            last_error: Mutex::new(None),
            writer: Mutex::new(None),
        });
        // The first mark before the generator exists: its first units are covered at once.
        write_ahead(&state).await?;
        let task = tokio::spawn(keep_ahead(Arc::downgrade(&state)));
        *state.writer.lock() = Some(task);
        Ok(Self { state })
    }

    /// This fence combined with `other` (the assignment's fence: a lease, a reserved-until
    /// mark), as the one fence a generator lane takes: units must pass both, the floor is the
    /// later, the borrowing bound the tighter.
    pub fn over(&self, other: Option<Arc<dyn TimeFence>>) -> Arc<dyn TimeFence> {
        let order: Arc<dyn TimeFence> = Arc::new(self.clone());
        match other {
            None => order,
            Some(other) => Arc::new(BothFences(other, order)),
        }
    }

    /// The ID space.
    pub fn space(&self) -> &str {
        &self.state.space
    }

    /// The space's mark when this life started (ms since the Unix epoch; 0 when none was
    /// written before): the first ID of this life starts above it.
    pub fn start_mark_ms(&self) -> u64 {
        self.state.floor_ms
    }

    /// Counters and marks, for status and metrics.
    pub fn status(&self) -> OrderMarkStatus {
        let state = &self.state;
        // Relaxed (all): status figures; nothing is read on the strength of them.
        OrderMarkStatus {
            floor_ms: state.floor_ms,
            limit_ms: state.limit_ms.load(Ordering::Relaxed),
            writes: state.writes.load(Ordering::Relaxed),
            failures: state.failures.load(Ordering::Relaxed),
            past_mark: state.past_mark.load(Ordering::Relaxed),
        }
    }
}

/// One write: the mark goes `lead` past the later of what was asked and the clock, at most
/// `max_ahead` past the clock but never short of what was asked; the limit rises only once the
/// keeper accepted it.
async fn write_ahead(state: &OrderState) -> Result<()> {
    let now = state.clock.now_millis();
    // SeqCst: a request stored before the wake-up must be seen by the write it woke.
    let wanted = state.wanted_ms.load(Ordering::SeqCst);
    let mut target = wanted.max(now).saturating_add(state.lead_ms);
    if let Some(ahead) = state.max_ahead_ms {
        target = target.min(now.saturating_add(ahead));
    }
    let target = target.max(wanted);
    match state
        .marks
        .raise_mark(MarkRaise::new(&state.space, &state.holder, target, now))
        .await
    {
        Ok(_) => {
            // SeqCst: the generator's stamping under the limit must not be ordered before
            // the write it rests on.
            state.limit_ms.fetch_max(target, Ordering::SeqCst);
            // Relaxed: a status counter.
            state.writes.fetch_add(1, Ordering::Relaxed);
            let mut last_error = state.last_error.lock();
            *last_error = None;
            // Under the error's lock, which `extend` takes (after raising `wanted`) before it
            // goes past the mark, and with the error cleared, so none goes past from here on:
            // if this mark covers every unit asked for, it covers all that went past.
            // SeqCst (two): pair with the raise and the swap in `extend`.
            if state.wanted_ms.load(Ordering::SeqCst) <= target
                && state.past_mark.swap(false, Ordering::SeqCst)
            {
                tracing::info!(space = %state.space, mark_ms = target,
                    "the ID space's order mark covers what was issued past it again");
            }
            drop(last_error);
            Ok(())
        }
        Err(error) => {
            // Relaxed: a status counter.
            state.failures.fetch_add(1, Ordering::Relaxed);
            *state.last_error.lock() = Some(error.to_string());
            Err(error)
        }
    }
}

/// The writer: keep the limit at least half a lead ahead of the clock, and past what the
/// generator asks for, until the fence is dropped. A failed write is retried after a short
/// pause; meanwhile the limit stays where the keeper last accepted it.
async fn keep_ahead(state: Weak<OrderState>) {
    loop {
        let Some(held) = state.upgrade() else {
            return;
        };
        let now = held.clock.now_millis();
        let lead = held
            .max_ahead_ms
            .map_or(held.lead_ms, |a| a.min(held.lead_ms));
        // SeqCst: see write_ahead.
        let limit = held.limit_ms.load(Ordering::SeqCst);
        let wanted = held.wanted_ms.load(Ordering::SeqCst);
        let pause = if wanted > limit || limit < now.saturating_add(lead / 2) {
            // A keeper that holds a write without answering (a ZooKeeper client waiting for
            // its server, a TCP peer gone silent) must count as failing before the limit is
            // reached, or a lenient fence would stop IDs instead of going on (`strict`).
            // Dropping the raise is safe: it may still land, and marks only rise.
            let bound = write_bound(lead);
            let written = match tokio::time::timeout(bound, write_ahead(&held)).await {
                Ok(written) => written.map_err(|error| error.to_string()),
                Err(_) => {
                    let error = format!(
                        "{} did not answer within {} ms",
                        held.marks.kept_in(),
                        bound.as_millis()
                    );
                    // Relaxed: a status counter.
                    held.failures.fetch_add(1, Ordering::Relaxed);
                    *held.last_error.lock() = Some(error.clone());
                    Err(error)
                }
            };
            match written {
                Ok(()) => Duration::from_millis((lead / 4).max(1)),
                Err(error) => {
                    let kept_in = held.marks.kept_in();
                    let then = if held.strict {
                        "IDs stop there until it answers"
                    } else {
                        "IDs may go past it, unordered for a next life, until it answers"
                    };
                    tracing::warn!(space = %held.space, %error, limit_ms = limit,
                        "cannot raise the ID space's order mark in {kept_in}; {then}");
                    Duration::from_millis(200)
                }
            }
        } else {
            Duration::from_millis((lead / 4).max(1))
        };
        let woken = async {
            held.wake.notified().await;
        };
        // Wake on a request or on the period, without keeping the fence alive while asleep
        // beyond this iteration (the handle is dropped at its end).
        tokio::select! {
            () = woken => {}
            () = tokio::time::sleep(pause) => {}
        }
        drop(held);
    }
}

/// How long the writer waits for one raise of the mark: a quarter of the lead (the writer
/// starts a raise with at least half a lead left), between 100 ms and 2 s.
fn write_bound(lead_ms: u64) -> Duration {
    Duration::from_millis((lead_ms / 4).clamp(100, 2_000))
}

impl TimeFence for OrderFence {
    fn limit_ms(&self) -> u64 {
        // SeqCst: see write_ahead.
        self.state.limit_ms.load(Ordering::SeqCst)
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        let state = &self.state;
        let limit = self.limit_ms();
        if until_ms <= limit {
            return Ok(limit);
        }
        // Not written yet: ask the writer, and let the generator look again (the cached
        // generator retries within a millisecond; the others report the refusal).
        // SeqCst: see write_ahead.
        state.wanted_ms.fetch_max(until_ms, Ordering::SeqCst);
        state.wake.notify_one();
        let last_error = state.last_error.lock();
        if !state.strict
            && let Some(error) = last_error.as_ref()
        {
            // The keeper does not answer: go on rather than stop issuing (OrderOptions::strict).
            // SeqCst: pairs with the swap in write_ahead.
            if !state.past_mark.swap(true, Ordering::SeqCst) {
                tracing::warn!(space = %state.space, limit_ms = limit, %error,
                    kept_in = state.marks.kept_in(),
                    "issuing past the ID space's order mark, which its keeper does not accept: \
                     unique as ever, but a restart before it answers may start below these IDs");
            }
            return Ok(until_ms);
        }
        let reason = match last_error.clone() {
            Some(error) => format!(
                "the ID space `{}`'s order mark is not written that far: {error}",
                state.space
            ),
            None => format!(
                "the ID space `{}`'s order mark is being written ahead",
                state.space
            ),
        };
        Err(FenceRefusal::NotYet {
            limit_ms: limit,
            reason,
        })
    }

    fn floor_ms(&self) -> u64 {
        self.state.floor_ms
    }
}

/// Two fences as one: a unit passes when it passes both.
#[derive(Debug)]
struct BothFences(Arc<dyn TimeFence>, Arc<dyn TimeFence>);

impl TimeFence for BothFences {
    fn limit_ms(&self) -> u64 {
        self.0.limit_ms().min(self.1.limit_ms())
    }

    fn extend(&self, until_ms: u64) -> std::result::Result<u64, FenceRefusal> {
        // The first (the assignment's) may close for good: its refusal comes first.
        let first = self.0.extend(until_ms)?;
        let second = self.1.extend(until_ms)?;
        Ok(first.min(second))
    }

    fn max_borrow_ms(&self) -> Option<u64> {
        match (self.0.max_borrow_ms(), self.1.max_borrow_ms()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn floor_ms(&self) -> u64 {
        self.0.floor_ms().max(self.1.floor_ms())
    }
}
