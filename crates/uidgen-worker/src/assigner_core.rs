//! [`AssignerCore`]: what the coordinator-backed assigners (ZooKeeper's, etcd's) hold beside
//! their options, and the steps of a start they take alike: recording the range in a
//! registry, waiting for the clock, and the options of an extra assignment.

use std::sync::Arc;
use std::time::Duration;

use uidgen_core::{Clock, SystemClock};

use crate::error::{Result, WorkerError};
use crate::range::WorkerIdRange;
use crate::registry::RangeRegistry;

/// A start's clock that would have to wait past `max_start_wait` for a worker id's earlier
/// holders ([`WorkerError::ClockBehindLastIssued`] without the wait), for an assigner to turn
/// into its own error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockBehind {
    /// The worker id.
    pub worker_id: u64,
    /// The time (ms since the Unix epoch) the id was used until.
    pub until_ms: u64,
    /// This process's clock.
    pub now_ms: u64,
    /// The allowed wait.
    pub max_wait_ms: u64,
}

/// An assigner's options, its clock, and the registry its range is recorded in, if any.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> uidgen_worker::Result<()> {
/// use std::time::Duration;
/// use uidgen_core::ManualClock;
/// use uidgen_worker::testing::RecordingRegistry;
/// use uidgen_worker::{AssignerCore, ClockBehind, WorkerError, WorkerIdRange};
///
/// /// An assigner's own error.
/// #[derive(Debug)]
/// enum MyError {
///     Behind(ClockBehind),
///     Worker(WorkerError),
/// }
/// impl From<WorkerError> for MyError {
///     fn from(error: WorkerError) -> Self {
///         Self::Worker(error)
///     }
/// }
///
/// let registry = RecordingRegistry::default();
/// let mut core = AssignerCore::new("options");
/// core.registry = Some(std::sync::Arc::new(registry.clone()));
/// core.clock = std::sync::Arc::new(ManualClock::new(1_000));
/// core.register("mine", WorkerIdRange::new(0, 9)?).await?;
/// assert_eq!(registry.asked().len(), 1);
/// // A minute ahead, with a second allowed: refused at once, as the assigner's error.
/// let refused = core.wait_for_clock(7, 61_000, Duration::from_secs(1), MyError::Behind).await;
/// assert!(matches!(refused, Err(MyError::Behind(ClockBehind { until_ms: 61_000, .. }))));
/// assert!(core.extra("other").registry.is_none());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct AssignerCore<O> {
    /// The assigner's options.
    pub options: O,
    /// The clock the generator reads.
    pub clock: Arc<dyn Clock>,
    /// Where the range is recorded before an id is taken, if anywhere.
    pub registry: Option<Arc<dyn RangeRegistry>>,
}

impl<O> AssignerCore<O> {
    /// `options` on the system clock, recorded nowhere.
    pub fn new(options: O) -> Self {
        Self {
            options,
            clock: Arc::new(SystemClock),
            registry: None,
        }
    }

    /// The core of an extra assignment with `options`: the same clock, and no registry (the
    /// first assignment recorded the range an extra draws from too).
    pub fn extra(&self, options: O) -> Self {
        Self {
            options,
            clock: Arc::clone(&self.clock),
            registry: None,
        }
    }

    /// Record `range` under `name` in the registry, if any.
    ///
    /// # Errors
    /// The registry's refusal.
    pub async fn register(&self, name: &str, range: WorkerIdRange) -> Result<()> {
        if let Some(registry) = &self.registry {
            registry.register_worker_range(name, range).await?;
        }
        Ok(())
    }

    /// Wait until the clock has passed `until_ms`, up to `max_wait`: the worker crate's one
    /// wait ([`wait_for_clock`](crate::wait_for_clock)), with a clock too far behind turned
    /// into the assigner's error by `behind` and any other error by `From`.
    ///
    /// # Errors
    /// `behind`'s error when the clock does not pass `until_ms` within `max_wait`.
    pub async fn wait_for_clock<E: From<WorkerError>>(
        &self,
        worker_id: u64,
        until_ms: u64,
        max_wait: Duration,
        behind: impl FnOnce(ClockBehind) -> E,
    ) -> std::result::Result<(), E> {
        crate::wait::wait_for_clock(self.clock.as_ref(), worker_id, until_ms, max_wait)
            .await
            .map_err(|error| match error {
                WorkerError::ClockBehindLastIssued {
                    worker_id,
                    until_ms,
                    now_ms,
                    max_wait_ms,
                    ..
                } => behind(ClockBehind {
                    worker_id,
                    until_ms,
                    now_ms,
                    max_wait_ms,
                }),
                other => E::from(other),
            })
    }
}

/// The constructors every coordinator-backed assigner has, for a struct whose `core` field is
/// an [`AssignerCore`] of `$options`: `new`, `registered_in` (documented by the attributes
/// given, with the assigner's own example), `with_clock` and `options`.
#[macro_export]
macro_rules! assigner_constructors {
    ($options:ty, $(#[$registered_in:meta])*) => {
        /// An assigner with `options`, on the system clock.
        pub fn new(options: $options) -> Self {
            Self {
                core: $crate::AssignerCore::new(options),
            }
        }

        $(#[$registered_in])*
        #[must_use]
        pub fn registered_in(mut self, registry: impl $crate::RangeRegistry + 'static) -> Self {
            self.core.registry = Some(::std::sync::Arc::new(registry));
            self
        }

        /// Read time from `clock` (the one the generator reads).
        #[must_use]
        pub fn with_clock(mut self, clock: impl ::uidgen_core::Clock + 'static) -> Self {
            self.core.clock = ::std::sync::Arc::new(clock);
            self
        }

        /// The options.
        pub fn options(&self) -> &$options {
            &self.core.options
        }
    };
}

/// [`WorkerIdAssigner`](crate::WorkerIdAssigner) for a coordinator-backed assigner that holds
/// several ids: `assign` is its `start`'s assignment, and `assign_extra` starts a copy whose
/// options are `$extra` (with `$this` the assigner and `$index` the extra's index), on the
/// same clock and without registering again; the attributes given document `assign_extra`.
#[macro_export]
macro_rules! impl_coordinated_assigner {
    ($assigner:ty, |$this:ident, $index:ident| $extra:expr, $(#[$doc:meta])*) => {
        impl $crate::WorkerIdAssigner for $assigner {
            fn assign<'a>(
                &'a self,
                layout: &'a ::uidgen_core::Layout,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::WorkerAssignment>> {
                Box::pin(async move { Ok(self.start(layout).await?.assignment) })
            }

            fn holds_several(&self) -> bool {
                true
            }

            $(#[$doc])*
            fn assign_extra<'a>(
                &'a self,
                layout: &'a ::uidgen_core::Layout,
                index: u32,
            ) -> $crate::BoxFuture<'a, $crate::Result<$crate::WorkerAssignment>> {
                Box::pin(async move {
                    let ($this, $index) = (self, index);
                    let extra = Self {
                        core: self.core.extra($extra),
                    };
                    Ok(extra.start(layout).await?.assignment)
                })
            }
        }
    };
}
