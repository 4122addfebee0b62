//! Wiring: an assigner plus a layout and a clock make a ready generator.

use std::sync::Arc;

use uidgen_core::{
    CachedOptions, CachedUidGenerator, Clock, DEFAULT_MAX_BACKWARD_MS, DecodedUid,
    DefaultUidGenerator, Layout, PaddedHook, ReadyStock, SnowflakeGenerator, TimeFence, UidError,
    UidGenerator,
};

use crate::assigner::{WorkerAssignment, WorkerIdAssigner};
use crate::error::{Result, WorkerError};
use crate::keeper::WorkerKeeper;

/// A generator that refuses to let an ID out once its worker id's keeper ended (a lease
/// released or taken over, a ZooKeeper node lost), and reports a lapsed keeper as the reason
/// it cannot issue. Without a keeper it passes straight through.
///
/// How far ahead the generator may stamp is not checked here but by the generator itself,
/// through the assignment's [`TimeFence`] (the lease): it never makes an ID the keeper would
/// refuse, so none is taken and then dropped.
///
/// Refusals are [`UidError::GeneratorStopped`] carrying the keeper's
/// [`check`](WorkerKeeper::check) message (a lease's "lease on worker id 3 lost: ...").
#[derive(Debug)]
pub struct GuardedGenerator<G> {
    inner: G,
    keeper: Option<Arc<dyn WorkerKeeper>>,
}

impl<G: UidGenerator> GuardedGenerator<G> {
    /// Guard `inner` with `keeper` (none: pass through).
    pub fn new(inner: G, keeper: Option<Arc<dyn WorkerKeeper>>) -> Self {
        Self { inner, keeper }
    }

    /// The wrapped generator.
    pub fn inner(&self) -> &G {
        &self.inner
    }

    /// The keeper, if the worker id is held from an authority.
    pub fn keeper(&self) -> Option<&Arc<dyn WorkerKeeper>> {
        self.keeper.as_ref()
    }

    /// Call after an ID was made and before letting it out: `Ok` unless the keeper ended.
    ///
    /// [`WorkerKeeper::release`] ends the keeper and then reads how far the generator issued;
    /// with a SeqCst fence on both sides, either this sees the end or the release sees the ID.
    #[inline]
    pub fn check_issued(&self) -> uidgen_core::Result<()> {
        let Some(keeper) = &self.keeper else {
            return Ok(());
        };
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        if keeper.is_ended() {
            return Err(self.keeper_error(keeper.as_ref()));
        }
        Ok(())
    }

    /// An error from the generator, told as the keeper's when the keeper is why: an empty ring
    /// or a unit past the fence means nothing while the id is lost or lapsed.
    #[cold]
    pub fn explain(&self, error: UidError) -> UidError {
        match (&self.keeper, &error) {
            (
                Some(keeper),
                UidError::RingEmpty(_)
                | UidError::BeyondFence { .. }
                | UidError::GeneratorStopped(_),
            ) => keeper.check().err().map_or(error, stopped),
            _ => error,
        }
    }

    #[cold]
    fn keeper_error(&self, keeper: &dyn WorkerKeeper) -> UidError {
        keeper.check().err().map_or_else(
            || UidError::GeneratorStopped("the worker lease ended".to_owned()),
            stopped,
        )
    }
}

fn stopped(error: WorkerError) -> UidError {
    UidError::GeneratorStopped(error.to_string())
}

impl<G> std::ops::Deref for GuardedGenerator<G> {
    type Target = G;
    fn deref(&self) -> &G {
        &self.inner
    }
}

impl<G: UidGenerator> UidGenerator for GuardedGenerator<G> {
    fn next_id(&self) -> uidgen_core::Result<u64> {
        let id = self.inner.next_id().map_err(|e| self.explain(e))?;
        self.check_issued()?;
        Ok(id)
    }

    fn next_ids(&self, n: usize) -> uidgen_core::Result<Vec<u64>> {
        let ids = self.inner.next_ids(n).map_err(|e| self.explain(e))?;
        self.check_issued()?;
        Ok(ids)
    }

    fn layout(&self) -> &Layout {
        self.inner.layout()
    }

    fn issued_until_ms(&self) -> Option<u64> {
        self.inner.issued_until_ms()
    }

    fn parse(&self, id: u64) -> uidgen_core::Result<DecodedUid> {
        self.inner.parse(id)
    }

    fn stock(&self) -> Option<ReadyStock> {
        self.inner.stock()
    }

    #[inline]
    fn take_one_ready(&self) -> uidgen_core::Result<Option<u64>> {
        let Some(id) = self.inner.take_one_ready()? else {
            return Ok(None);
        };
        // The stock only holds IDs inside the fence; what is left to check is that the keeper
        // has not ended since.
        self.check_issued()?;
        Ok(Some(id))
    }

    fn take_ready(&self, out: &mut Vec<u64>, max: usize) -> uidgen_core::Result<usize> {
        let before = out.len();
        let taken = self.inner.take_ready(out, max)?;
        if let Err(refused) = self.check_issued() {
            // The keeper ended: these IDs are dropped, as next_ids drops them.
            out.truncate(before);
            return Err(refused);
        }
        Ok(taken)
    }

    fn on_padded(&self, hook: PaddedHook) -> bool {
        self.inner.on_padded(hook)
    }

    fn lanes(&self) -> Option<&dyn uidgen_core::WorkerLanes> {
        self.inner.lanes()
    }
}

/// A built generator and the assignment behind it.
#[derive(Debug)]
pub struct Built<G> {
    /// The generator, guarded by the keeper when the worker id has one.
    pub generator: Arc<GuardedGenerator<G>>,
    /// The worker id and, for a kept id, the keeper to release on shutdown.
    pub assignment: WorkerAssignment,
}

impl<G: UidGenerator + 'static> Built<G> {
    /// The worker id.
    pub fn worker_id(&self) -> u64 {
        self.assignment.worker_id
    }

    /// On clean shutdown, after the last ID was let out: see [`AnyBuilt::release`].
    pub async fn release(&self) -> Result<()> {
        release(&self.assignment, self.generator.as_ref()).await
    }

    /// The same, with the generator's kind forgotten: what a service that picks the kind by
    /// configuration holds.
    pub fn into_any(self) -> AnyBuilt {
        AnyBuilt {
            generator: self.generator,
            assignment: self.assignment,
        }
    }
}

/// A built generator of any kind and the assignment behind it ([`Built::into_any`]).
#[derive(Clone)]
pub struct AnyBuilt {
    /// The generator, guarded by the keeper when the worker id has one.
    pub generator: Arc<dyn UidGenerator>,
    /// The worker id and, for a kept id, the keeper to release on shutdown.
    pub assignment: WorkerAssignment,
}

impl std::fmt::Debug for AnyBuilt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnyBuilt")
            .field("layout", self.generator.layout())
            .field("assignment", &self.assignment)
            .finish()
    }
}

impl AnyBuilt {
    /// The worker id.
    pub fn worker_id(&self) -> u64 {
        self.assignment.worker_id
    }

    /// On clean shutdown, after the last ID was let out: write down how far the generator
    /// issued, then release the assignment's keeper, if it has one (see
    /// [`WorkerKeeper::release`]). IDs asked for after this are refused by the guard.
    pub async fn release(&self) -> Result<()> {
        release(&self.assignment, self.generator.as_ref()).await
    }
}

/// The one release every built generator goes through: how far it issued first (the keeper's
/// record must cover every ID let out), then the keeper's own release.
async fn release(assignment: &WorkerAssignment, generator: &dyn UidGenerator) -> Result<()> {
    let Some(keeper) = &assignment.keeper else {
        return Ok(());
    };
    if let Some(until) = generator.issued_until_ms() {
        keeper.record_issued_until(until);
    }
    keeper.release().await
}

/// Builds a generator: gets a worker id from an assigner, then makes the generator.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
/// use uidgen_core::{Layout, SystemClock, UidGenerator};
/// use uidgen_worker::{GeneratorBuilder, StaticWorkerIdAssigner};
/// let dir = tempfile::tempdir().expect("a temporary directory");
/// let built = GeneratorBuilder::new(Layout::snowflake()?)
///     .assigner(StaticWorkerIdAssigner::new(3, dir.path().join("worker-3.state")))
///     .build_snowflake(SystemClock)
///     .await?;
/// let id = built.generator.next_id()?;
/// assert_eq!(built.generator.parse(id)?.parts.worker, 3);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct GeneratorBuilder {
    layout: Layout,
    source: Option<Source>,
}

/// Where the builder's worker id comes from.
#[derive(Debug, Clone)]
enum Source {
    /// Asked of the assigner at each build.
    Assigner(Arc<dyn WorkerIdAssigner>),
    /// Obtained already by the caller.
    Assigned(WorkerAssignment),
}

impl GeneratorBuilder {
    /// A builder for IDs of `layout`; set an assigner before building.
    pub fn new(layout: Layout) -> Self {
        Self {
            layout,
            source: None,
        }
    }

    /// Take worker ids from `assigner`.
    pub fn assigner(mut self, assigner: impl WorkerIdAssigner + 'static) -> Self {
        self.source = Some(Source::Assigner(Arc::new(assigner)));
        self
    }

    /// Take worker ids from a shared assigner.
    pub fn shared_assigner(mut self, assigner: Arc<dyn WorkerIdAssigner>) -> Self {
        self.source = Some(Source::Assigner(assigner));
        self
    }

    /// Build on a worker id the caller obtained already (a service that records its range
    /// first, or starts a coordinator's holder itself): no assigner is asked. A build that
    /// fails releases its keeper, as one from an assigner does.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> uidgen_worker::Result<()> {
    /// use uidgen_core::{Layout, SystemClock, UidGenerator};
    /// use uidgen_worker::{AssignmentKind, GeneratorBuilder, WorkerAssignment};
    /// let assignment = WorkerAssignment::fixed(7, AssignmentKind::STATIC);
    /// let built = GeneratorBuilder::new(Layout::snowflake()?)
    ///     .assigned(assignment)
    ///     .build_default(SystemClock)
    ///     .await?;
    /// assert_eq!(built.generator.parse(built.generator.next_id()?)?.parts.worker, 7);
    /// # Ok(()) }
    /// ```
    pub fn assigned(mut self, assignment: WorkerAssignment) -> Self {
        self.source = Some(Source::Assigned(assignment));
        self
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    async fn assign(&self) -> Result<WorkerAssignment> {
        match &self.source {
            Some(Source::Assigner(assigner)) => assigner.assign(&self.layout).await,
            Some(Source::Assigned(assignment)) => Ok(assignment.clone()),
            None => Err(WorkerError::InvalidInput(
                "no worker id assigner configured".to_owned(),
            )),
        }
    }

    async fn finish<G: UidGenerator + 'static>(
        assignment: WorkerAssignment,
        make: impl FnOnce(u64, Option<Arc<dyn TimeFence>>) -> uidgen_core::Result<G>,
    ) -> Result<Built<G>> {
        let generator = match make(assignment.worker_id, assignment.fence.clone()) {
            Ok(generator) => generator,
            Err(error) => {
                if let Some(keeper) = &assignment.keeper {
                    let _ = keeper.release().await;
                }
                return Err(error.into());
            }
        };
        let generator = Arc::new(GuardedGenerator::new(generator, assignment.keeper.clone()));
        if let Some(keeper) = &assignment.keeper {
            keeper.track(Arc::clone(&generator) as Arc<dyn UidGenerator>);
        }
        Ok(Built {
            generator,
            assignment,
        })
    }

    /// Baidu's `CachedUidGenerator` (ring buffer) with the assigned worker id.
    pub async fn build_cached<C: Clock + 'static>(
        &self,
        clock: C,
        options: CachedOptions,
    ) -> Result<Built<CachedUidGenerator<C>>> {
        let assignment = self.assign().await?;
        let layout = self.layout.clone();
        Self::finish(assignment, move |id, fence| {
            let options = CachedOptions {
                fence: fence.or(options.fence.clone()),
                ..options
            };
            CachedUidGenerator::new(layout, id, clock, options)
        })
        .await
    }

    /// Baidu's `DefaultUidGenerator` with the assigned worker id.
    pub async fn build_default<C: Clock + 'static>(
        &self,
        clock: C,
    ) -> Result<Built<DefaultUidGenerator<C>>> {
        let assignment = self.assign().await?;
        let layout = self.layout.clone();
        Self::finish(assignment, move |id, fence| {
            let generator = DefaultUidGenerator::new(layout, id, clock)?;
            Ok(match fence {
                Some(fence) => generator.fenced(fence),
                None => generator,
            })
        })
        .await
    }

    /// A Snowflake generator (Leaf's clock policy) with the assigned worker id.
    pub async fn build_snowflake<C: Clock + 'static>(
        &self,
        clock: C,
    ) -> Result<Built<SnowflakeGenerator<C>>> {
        self.build_snowflake_with(clock, DEFAULT_MAX_BACKWARD_MS, None)
            .await
    }

    /// [`build_snowflake`](Self::build_snowflake) waiting out backward clock steps of up to
    /// `max_backward_ms` (0: refuse all), and starting each unit at a random sequence when
    /// `random_sequence_start` says so (`None`: the layout's default; see
    /// [`SnowflakeGenerator::random_sequence_start`]).
    pub async fn build_snowflake_with<C: Clock + 'static>(
        &self,
        clock: C,
        max_backward_ms: u64,
        random_sequence_start: Option<bool>,
    ) -> Result<Built<SnowflakeGenerator<C>>> {
        let assignment = self.assign().await?;
        let layout = self.layout.clone();
        Self::finish(assignment, move |id, fence| {
            let generator =
                SnowflakeGenerator::with_max_backward_ms(layout, id, clock, max_backward_ms)?;
            let generator = match random_sequence_start {
                Some(random) => generator.random_sequence_start(random),
                None => generator,
            };
            Ok(match fence {
                Some(fence) => generator.fenced(fence),
                None => generator,
            })
        })
        .await
    }

    /// [`build_snowflake`](Self::build_snowflake) for code that is not async (see
    /// [`crate::blocking`]).
    pub fn build_snowflake_blocking<C: Clock + 'static>(
        &self,
        clock: C,
    ) -> Result<Built<SnowflakeGenerator<C>>> {
        crate::blocking::block_on_result(self.build_snowflake(clock))
    }
}
