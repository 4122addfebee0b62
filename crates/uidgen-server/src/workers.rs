//! [`WorkerPool`]: the worker ids one ID space's generator holds beyond its first, claimed
//! when demand outruns them and given back when it falls (issue 30).
//!
//! A worker id yields one layout unit of IDs per time unit: 8,192 a second on `baidu`. The
//! cached generator borrows future units for bursts, bounded (`ring.max_borrow_seconds`) so
//! the time field stays near the clock; sustained demand above one worker id's rate would
//! then wait for the clock. So the pool watches the generator's stock and pads it from more
//! worker ids when the borrowed lead grows or demand nears what the held ids sustain, and
//! gives the extra ones back when demand has stayed low for a while.
//!
//! Every extra id comes through the assigner's [`WorkerIdAssigner::assign_extra`]: claimed,
//! fenced and kept exactly as the first (a fresh `worker_node` row, a lease with its
//! heartbeat, a coordinator's claim), its fence handed to the generator's lane, its keeper
//! released with the id's last stamped instant when the lane is retired or the server
//! stops. An assigner whose process holds one id (static, machine, statefulset) gives none;
//! the pool then only reports the rate that one id sustains.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use uidgen_core::{Layout, UidGenerator};
use uidgen_worker::{WorkerAssignment, WorkerIdAssigner};

/// How often the pool looks at the generator's stock.
pub const TICK: Duration = Duration::from_millis(100);

/// How long demand must stay below half of what one worker id fewer sustains before one is
/// given back: long enough that a dip between bursts keeps the ids (a disposable id given
/// back is used up for good), short enough that an idle server holds few.
pub const SHRINK_AFTER: Duration = Duration::from_secs(60);

/// What the pool may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// The most worker ids the generator holds at once, the first included (`worker.max_ids`);
    /// 1 holds the first only.
    pub max_workers: u64,
}

/// A snapshot for `/v1/status` and metrics.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolStatus {
    /// The worker ids the generator stamps with, lowest first.
    pub workers: Vec<u64>,
    /// What they sustain without borrowing: IDs per second.
    pub sustained_ids_per_second: f64,
    /// How far the IDs' time runs ahead of the clock (ms).
    pub borrowed_lead_ms: u64,
    /// The most it may run ahead (ms), if bounded.
    pub max_borrow_ms: Option<u64>,
    /// IDs taken per second, as last measured (a moving average over about a second).
    pub demand_ids_per_second: f64,
    /// Whether the assigner can hand out more worker ids (else the first is all there is).
    pub holds_several: bool,
    /// The most worker ids held at once.
    pub max_workers: u64,
}

/// The worker ids of one generator beyond its first: see the module documentation.
pub struct WorkerPool {
    space: String,
    layout: Layout,
    generator: Arc<dyn UidGenerator>,
    assigner: Arc<dyn WorkerIdAssigner>,
    options: PoolOptions,
    /// IDs one worker id sustains per second.
    per_worker: f64,
    /// The borrowing bound in time units, if any.
    max_borrow_units: Option<u64>,
    /// The extra worker ids held, oldest first, with the number each was claimed under.
    extras: tokio::sync::Mutex<Vec<(u32, WorkerAssignment)>>,
    /// The last measured demand, in milli-IDs per second (for status; f64 has no atomic).
    demand_milli: AtomicU64,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("space", &self.space)
            .field("options", &self.options)
            .field("holds_several", &self.assigner.holds_several())
            .finish_non_exhaustive()
    }
}

impl WorkerPool {
    /// A pool for `generator` (whose first worker id came from `assigner`), in the ID space
    /// named `space`, borrowing at most `max_borrow_units` ahead.
    pub fn new(
        space: impl Into<String>,
        generator: Arc<dyn UidGenerator>,
        assigner: Arc<dyn WorkerIdAssigner>,
        options: PoolOptions,
        max_borrow_units: Option<u64>,
    ) -> Self {
        let layout = generator.layout().clone();
        // Sequences per unit over the unit's length: 8,192 a second on baidu.
        #[allow(clippy::cast_precision_loss)] // rates far below 2^52
        let per_worker =
            layout.max_sequence().saturating_add(1) as f64 * 1000.0 / layout.unit().millis() as f64;
        Self {
            space: space.into(),
            layout,
            generator,
            assigner,
            options,
            per_worker,
            max_borrow_units,
            extras: tokio::sync::Mutex::new(Vec::new()),
            demand_milli: AtomicU64::new(0),
        }
    }

    /// Whether the pool can add worker ids at all: a generator with lanes (the cached one),
    /// an assigner that hands out several, and room for more than one.
    pub fn can_grow(&self) -> bool {
        self.generator.lanes().is_some()
            && self.assigner.holds_several()
            && self.options.max_workers > 1
    }

    /// IDs per second one worker id sustains.
    pub fn per_worker(&self) -> f64 {
        self.per_worker
    }

    /// A snapshot for status and metrics.
    pub fn status(&self) -> PoolStatus {
        let workers = self
            .generator
            .lanes()
            .map_or_else(Vec::new, |lanes| lanes.workers());
        let count = workers.len().max(1);
        let unit_ms = self.layout.unit().millis();
        let lead = self.generator.stock().map_or(0, |s| s.borrowed_units);
        #[allow(clippy::cast_precision_loss)] // small counts and rates
        PoolStatus {
            sustained_ids_per_second: count as f64 * self.per_worker,
            workers,
            borrowed_lead_ms: lead.saturating_mul(unit_ms),
            max_borrow_ms: self.max_borrow_units.map(|u| u.saturating_mul(unit_ms)),
            // Relaxed: a status figure.
            demand_ids_per_second: self.demand_milli.load(Ordering::Relaxed) as f64 / 1000.0,
            holds_several: self.can_grow(),
            max_workers: self.options.max_workers,
        }
    }

    /// Watch the stock and grow or shrink until `stop` resolves; then give every extra id
    /// back (its keeper records how far the generator issued). Run it as one task per pool.
    ///
    /// Cancel safety: dropped midway, the extra ids stay held until [`release`](Self::release)
    /// (or their leases run out, as a crashed server's do).
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        if !self.can_grow() {
            return;
        }
        tokio::pin!(stop);
        let mut meter = Meter::default();
        let mut low_since: Option<Instant> = None;
        let mut quiet_until = Instant::now();
        loop {
            tokio::select! {
                () = &mut stop => return,
                () = tokio::time::sleep(TICK) => {}
            }
            let Some(stock) = self.generator.stock() else {
                return;
            };
            if stock.stopped.is_some() {
                return;
            }
            let demand = meter.observe(stock.taken);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a rate ≥ 0
            self.demand_milli
                .store((demand * 1000.0) as u64, Ordering::Relaxed);
            self.forget_lost().await;
            let held = stock.workers.max(1);
            #[allow(clippy::cast_precision_loss)] // small counts
            let capacity = held as f64 * self.per_worker;
            let lead = stock.borrowed_units;
            let bound = self.max_borrow_units.unwrap_or(u64::MAX);
            let pressed = lead >= (bound / 10).max(2) || demand > capacity * 0.9;
            if pressed && Instant::now() >= quiet_until {
                low_since = None;
                let mut want = (demand * 1.25 / self.per_worker).ceil();
                if lead >= bound / 2 {
                    #[allow(clippy::cast_precision_loss)] // small counts
                    let doubled = (held * 2) as f64;
                    want = want.max(doubled);
                }
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // ≥ 0, small
                let want = (want as u64).max(held + 1).min(self.options.max_workers);
                if want > held && !self.grow(want - held).await {
                    // The assigner refused (no free id, a store down): not again for a while.
                    quiet_until = Instant::now() + Duration::from_secs(5);
                }
                continue;
            }
            #[allow(clippy::cast_precision_loss)] // small counts
            let fewer = (held.saturating_sub(1)) as f64 * self.per_worker;
            if held > 1 && lead == 0 && demand < fewer * 0.5 {
                let since = *low_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= SHRINK_AFTER {
                    self.shrink().await;
                    // One at a time, each after another quiet spell.
                    low_since = Some(Instant::now() - SHRINK_AFTER + Duration::from_secs(10));
                }
            } else {
                low_since = None;
            }
        }
    }

    /// Claim `n` more worker ids and pad from them; `false` when the assigner refused one.
    async fn grow(&self, n: u64) -> bool {
        let Some(lanes) = self.generator.lanes() else {
            return false;
        };
        let mut extras = self.extras.lock().await;
        let mut added = 0;
        for _ in 0..n {
            // The lowest number not in use: a restarted server asks for the same ones, so a
            // coordinator that keeps an id per holder name (ZooKeeper) continues them.
            let index = (1..)
                .find(|i| extras.iter().all(|(used, _)| used != i))
                .unwrap_or(u32::MAX);
            let assignment = match self.assigner.assign_extra(&self.layout, index).await {
                Ok(assignment) => assignment,
                Err(error) => {
                    tracing::warn!(space = %self.space, %error, held = extras.len() + 1,
                        "cannot claim another worker id to keep up with demand; retrying in 5 s");
                    self.log_grown(added, extras.len());
                    return false;
                }
            };
            let worker_id = assignment.worker_id;
            if let Err(error) = lanes.add_worker(worker_id, assignment.fence.clone()) {
                tracing::error!(space = %self.space, worker_id, %error,
                    "claimed a worker id the generator refused; giving it back");
                release(&assignment, self.generator.issued_until_ms()).await;
                self.log_grown(added, extras.len());
                return false;
            }
            if let Some(keeper) = &assignment.keeper {
                // Renewals record how far the generator issued, as the first id's do.
                keeper.track(Arc::clone(&self.generator));
            }
            extras.push((index, assignment));
            added += 1;
        }
        self.log_grown(added, extras.len());
        true
    }

    fn log_grown(&self, added: u64, extras: usize) {
        if added == 0 {
            return;
        }
        let held = extras + 1;
        #[allow(clippy::cast_precision_loss)] // small counts
        let sustained = held as f64 * self.per_worker;
        tracing::info!(space = %self.space, added, held, sustained_ids_per_second = sustained,
            "claimed more worker ids to keep up with demand");
    }

    /// Give the newest extra worker id back.
    async fn shrink(&self) {
        let Some(lanes) = self.generator.lanes() else {
            return;
        };
        let mut extras = self.extras.lock().await;
        let Some((_, assignment)) = extras.pop() else {
            return;
        };
        let worker_id = assignment.worker_id;
        match lanes.retire_worker(worker_id) {
            Ok(until) => release(&assignment, Some(until)).await,
            // Already dropped by the generator (its fence closed): nothing stamped past it.
            Err(_) => release(&assignment, self.generator.issued_until_ms()).await,
        }
        tracing::info!(space = %self.space, worker_id, held = extras.len() + 1,
            "demand fell: gave a worker id back");
    }

    /// Drop extra ids whose keeper lost them (the generator stopped padding from them when
    /// their fence closed).
    async fn forget_lost(&self) {
        let mut extras = self.extras.lock().await;
        let before = extras.len();
        extras.retain(|(_, assignment)| {
            assignment
                .keeper
                .as_ref()
                .is_none_or(|keeper| !keeper.is_ended())
        });
        if extras.len() < before {
            tracing::warn!(space = %self.space, lost = before - extras.len(),
                held = extras.len() + 1,
                "extra worker ids were lost (see above); the generator pads from the rest");
        }
    }

    /// Give every extra worker id back (clean shutdown, after the last ID was let out): each
    /// keeper records how far the generator issued, then releases, as the first id's does.
    pub async fn release(&self) {
        let mut extras = self.extras.lock().await;
        let until = self.generator.issued_until_ms();
        for (_, assignment) in extras.drain(..) {
            release(&assignment, until).await;
        }
    }
}

/// Record how far `assignment`'s worker id was stamped, then release its keeper (if any).
async fn release(assignment: &WorkerAssignment, until: Option<u64>) {
    let Some(keeper) = &assignment.keeper else {
        return;
    };
    if let Some(until) = until {
        keeper.record_issued_until(until);
    }
    if let Err(error) = keeper.release().await {
        tracing::warn!(worker_id = assignment.worker_id, %error,
            "could not release an extra worker id; it runs out as a crashed holder's would");
    }
}

/// Demand from the stock's taken count: a moving average over about a second.
#[derive(Debug, Default)]
struct Meter {
    last: Option<(Instant, u64)>,
    rate: f64,
}

impl Meter {
    fn observe(&mut self, taken: u64) -> f64 {
        let now = Instant::now();
        if let Some((at, before)) = self.last {
            let dt = now.duration_since(at).as_secs_f64();
            if dt > 0.0 {
                #[allow(clippy::cast_precision_loss)] // counts far below 2^52 per tick
                let rate = taken.saturating_sub(before) as f64 / dt;
                let alpha = (dt / 1.0).min(1.0);
                self.rate += alpha * (rate - self.rate);
            }
        }
        self.last = Some((now, taken));
        self.rate
    }
}
