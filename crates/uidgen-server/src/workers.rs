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

/// The least time between two steps of growth: long enough to see a step's effect on the
/// borrowed lead before the next.
const GROW_STEP: Duration = Duration::from_millis(500);

/// What the pool may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolOptions {
    /// The most worker ids the generator holds at once, the first included (`worker.max_ids`);
    /// 1 holds the first only.
    pub max_workers: u64,
    /// How long demand stays low before an extra worker id is given back
    /// (`worker.release_idle_secs`).
    pub release_idle: Duration,
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
    /// The extra worker ids held, oldest first, with the number each was claimed under.
    extras: tokio::sync::Mutex<Vec<(u32, WorkerAssignment)>>,
    /// The last measured demand, in milli-IDs per second (for status; f64 has no atomic).
    demand_milli: AtomicU64,
    /// The space's order fence, which every extra lane's units must pass as the first's do.
    order: Option<uidgen_worker::OrderFence>,
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
    /// named `space`.
    pub fn new(
        space: impl Into<String>,
        generator: Arc<dyn UidGenerator>,
        assigner: Arc<dyn WorkerIdAssigner>,
        options: PoolOptions,
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
            extras: tokio::sync::Mutex::new(Vec::new()),
            demand_milli: AtomicU64::new(0),
            order: None,
        }
    }

    /// Fence every worker id the pool adds with `order` too (the space's order mark, which
    /// fences the first), so no lane stamps past the mark.
    #[must_use]
    pub fn with_order(mut self, order: Option<uidgen_worker::OrderFence>) -> Self {
        self.order = order;
        self
    }

    /// Whether the pool can add worker ids at all: a generator with lanes (the cached one),
    /// an assigner that hands out several, and room for more than one.
    pub fn can_grow(&self) -> bool {
        self.generator.lanes().is_some()
            && self.assigner.holds_several()
            && self.options.max_workers > 1
    }

    /// Say at start what the space sustains and whether it can grow: an operator sees the
    /// headroom before callers wait.
    pub fn announce(&self) {
        let max = self.options.max_workers;
        let per_worker = self.per_worker;
        if self.can_grow() {
            #[allow(clippy::cast_precision_loss)] // small counts
            let most = max as f64 * per_worker;
            tracing::info!(space = %self.space, per_worker_id = per_worker, max_worker_ids = max,
                "sustains {per_worker} IDs/s per worker id; claims more worker ids under load, \
                 up to {max} ({most} IDs/s)");
        } else if self.generator.lanes().is_none() {
            tracing::info!(space = %self.space, per_worker_id = per_worker,
                "sustains {per_worker} IDs/s: this generator stamps with one worker id (only \
                 the cached generator pads from several)");
        } else if !self.assigner.holds_several() {
            tracing::info!(space = %self.space, per_worker_id = per_worker,
                "sustains {per_worker} IDs/s: this assigner holds one worker id per process; \
                 run more processes, or use one that hands out several (disposable, leased, \
                 etcd, zookeeper), for more");
        } else {
            tracing::info!(space = %self.space, per_worker_id = per_worker,
                "sustains {per_worker} IDs/s: `worker.max_ids` = 1 keeps one worker id");
        }
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
        let stock = self.generator.stock();
        let lead = stock.as_ref().map_or(0, |s| s.borrowed_units);
        let bound = stock.and_then(|s| s.max_borrow_units);
        #[allow(clippy::cast_precision_loss)] // small counts and rates
        PoolStatus {
            sustained_ids_per_second: count as f64 * self.per_worker,
            workers,
            borrowed_lead_ms: lead.saturating_mul(unit_ms),
            max_borrow_ms: bound.map(|u| u.saturating_mul(unit_ms)),
            // Relaxed: a status figure.
            demand_ids_per_second: self.demand_milli.load(Ordering::Relaxed) as f64 / 1000.0,
            holds_several: self.can_grow(),
            max_workers: self.options.max_workers,
        }
    }

    /// Watch the stock and grow or shrink until `stop` resolves. Run it as one task per pool;
    /// [`release`](Self::release) gives the extra ids back afterwards.
    ///
    /// Growing: when demand nears what the held ids sustain (90%), enough for 125% of it
    /// (a borrowed lead that climbs shows as demand above them, since the ring hands out
    /// borrowed units too); at the borrowing bound, where demand is only what the clock lets
    /// through, at least twice as many. A step every half second, so each step's effect is
    /// seen before the next.
    ///
    /// Shrinking: an extra id that returns to a pool (a lease, a coordinator's claim) is given
    /// back once demand has stayed below half of what one id fewer sustains for
    /// `release_idle`, the newest first, then one every tenth of that. A disposable id is
    /// kept for the life of the process: it never returns to any pool, so giving it back
    /// would only use new rows up when demand comes back.
    ///
    /// Cancel safety: dropped midway, the extra ids stay held until [`release`](Self::release)
    /// (or their leases run out, as a crashed server's do).
    pub async fn run(self: Arc<Self>, stop: impl std::future::Future<Output = ()>) {
        if !self.can_grow() {
            return;
        }
        tokio::pin!(stop);
        let mut demand_meter = Meter::default();
        let mut low_since: Option<Instant> = None;
        let mut next_grow = Instant::now();
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
            let demand = demand_meter.observe(stock.taken);
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a rate ≥ 0
            self.demand_milli
                .store((demand * 1000.0) as u64, Ordering::Relaxed);
            self.forget_lost().await;
            let held = stock.workers.max(1);
            let lead = stock.borrowed_units;
            let want = self.wanted(held, demand, lead, stock.max_borrow_units);
            if want > held {
                low_since = None;
                if Instant::now() >= next_grow {
                    next_grow = Instant::now() + GROW_STEP;
                    if !self.grow(want - held).await {
                        // The assigner refused (no free id, a store down, lost races): not
                        // again for a second.
                        next_grow = Instant::now() + Duration::from_secs(1);
                    }
                }
                continue;
            }
            #[allow(clippy::cast_precision_loss)] // small counts
            let fewer = (held.saturating_sub(1)) as f64 * self.per_worker;
            if held > 1 && lead == 0 && demand < fewer * 0.5 {
                let since = *low_since.get_or_insert_with(Instant::now);
                let idle = self.options.release_idle;
                if since.elapsed() >= idle {
                    self.shrink().await;
                    // One at a time, each after a tenth of another quiet spell.
                    low_since = Instant::now().checked_sub(idle - idle / 10);
                }
            } else {
                low_since = None;
            }
        }
    }

    /// How many worker ids the stock wants: see [`run`](Self::run). Growth only while the
    /// held ids are nearly used up (demand above 90% of what they sustain, borrowing
    /// included: a lead that climbs shows as demand above them); a lead still high from
    /// earlier, with capacity to spare, asks for nothing.
    fn wanted(&self, held: u64, demand: f64, lead: u64, bound: Option<u64>) -> u64 {
        #[allow(clippy::cast_precision_loss)] // small counts
        let capacity = held as f64 * self.per_worker;
        if demand <= capacity * 0.9 {
            return 0;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // ≥ 0, small
        let mut want = (demand * 1.25 / self.per_worker).ceil() as u64;
        // At the bound demand is what the clock lets through, not what callers ask: double.
        if bound.is_some_and(|bound| lead >= 2 && lead + 1 >= bound) {
            want = want.max(held * 2);
        }
        want.min(self.options.max_workers)
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
                        "cannot claim another worker id to keep up with demand; retrying in 1 s");
                    self.log_grown(added, extras.len());
                    return false;
                }
            };
            let worker_id = assignment.worker_id;
            let fence = match &self.order {
                Some(order) => Some(order.over(assignment.fence.clone())),
                None => assignment.fence.clone(),
            };
            if let Err(error) = lanes.add_worker(worker_id, fence) {
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
        // The newest that returns to a pool; disposable ids are kept (see `run`).
        let Some(at) = extras
            .iter()
            .rposition(|(_, assignment)| assignment.keeper.is_some())
        else {
            return;
        };
        let (_, assignment) = extras.remove(at);
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

/// A count's rate, as a moving average over about a second: IDs taken per second.
#[derive(Debug, Default)]
struct Meter {
    last: Option<(Instant, u64)>,
    rate: f64,
}

impl Meter {
    /// The rate of a count that only rises.
    fn observe(&mut self, count: u64) -> f64 {
        let now = Instant::now();
        if let Some((at, before)) = self.last {
            let dt = now.duration_since(at).as_secs_f64();
            if dt > 0.0 {
                #[allow(clippy::cast_precision_loss)] // counts far below 2^52 per tick
                let rate = count.saturating_sub(before) as f64 / dt;
                let alpha = dt.min(1.0);
                self.rate += alpha * (rate - self.rate);
            }
        }
        self.last = Some((now, count));
        self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool on a cached generator of Baidu's layout, disposable-like (no store needed: the
    /// assigner is never asked here).
    fn pool(max_workers: u64) -> WorkerPool {
        #[derive(Debug)]
        struct Never;
        impl WorkerIdAssigner for Never {
            fn assign<'a>(
                &'a self,
                _: &'a Layout,
            ) -> uidgen_worker::BoxFuture<'a, uidgen_worker::Result<WorkerAssignment>> {
                Box::pin(async { Err(uidgen_worker::WorkerError::InvalidInput("never".into())) })
            }
        }
        let generator = uidgen_core::CachedUidGenerator::new(
            Layout::baidu_default().unwrap(),
            1,
            uidgen_core::SystemClock,
            uidgen_core::CachedOptions::default(),
        )
        .unwrap();
        WorkerPool::new(
            "default",
            Arc::new(generator),
            Arc::new(Never),
            PoolOptions {
                max_workers,
                release_idle: crate::config::worker::DEFAULT_RELEASE_IDLE,
            },
        )
    }

    #[test]
    fn the_pool_grows_with_demand_and_doubles_at_the_bound() {
        let wide = pool(512);
        // 8,192 IDs/s a worker id.
        assert_eq!(wide.wanted(1, 1_000.0, 0, Some(60)), 0);
        // 90% of capacity: 125% of demand, in one step.
        assert_eq!(wide.wanted(10, 80_000.0, 0, Some(60)), 13);
        assert_eq!(wide.wanted(1, 2_000_000.0, 30, Some(60)), 306);
        // At the bound, demand is what the clock lets through: double.
        assert_eq!(wide.wanted(4, 32_768.0, 59, Some(60)), 8);
        // A high lead left from earlier, with capacity to spare, asks for nothing.
        assert_eq!(wide.wanted(40, 100_000.0, 59, Some(60)), 0);
        // Never past the most.
        assert_eq!(pool(3).wanted(2, 1_000_000.0, 0, None), 3);
    }

    #[test]
    fn the_meter_follows_a_rate() {
        let mut meter = Meter::default();
        assert_eq!(meter.observe(0), 0.0);
        std::thread::sleep(Duration::from_millis(20));
        assert!(meter.observe(1_000) > 0.0);
    }
}
