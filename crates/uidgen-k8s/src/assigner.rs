//! [`StatefulSetWorkerIdAssigner`]: worker id = pod ordinal + offset, leased in a shared store.

use std::path::PathBuf;
use std::sync::Arc;

use uidgen_core::Layout;
use uidgen_worker::{
    AssignmentKind, BoxFuture, ExactLeaseRegistry, LeaseOptions, StaticWorkerIdAssigner,
    WorkerAssignment, WorkerIdAssigner, WorkerIdRange,
};

use crate::error::{Result, StatefulSetError};
use crate::ordinal::PodOrdinal;

/// Worker id = the pod's [`PodOrdinal`] + an offset, inside the configured range and the
/// layout's worker field.
///
/// The fence is the static assigner's with a shared store, reused as it is: the range is
/// recorded under the static assigner's name (a StatefulSet's ids and configured static ids
/// are one set of exact leases, so a static process and a pod cannot both hold one id), the
/// id is leased exactly in the store (a second live pod with the same ordinal is refused with
/// [`WorkerError::WorkerIdHeld`](uidgen_worker::WorkerError::WorkerIdHeld), naming the holder),
/// the lease is kept by heartbeats and its issued-until time is the successor's floor, and a
/// local state file keeps a reserved-until mark. Without a store every pod shares it refuses to
/// start ([`StatefulSetError::NoSharedStore`]).
///
/// ```no_run
/// # async fn demo(store: impl uidgen_worker::ExactLeaseRegistry + 'static) -> Result<(), Box<dyn std::error::Error>> {
/// use uidgen_core::Layout;
/// use uidgen_k8s::{PodOrdinal, StatefulSetWorkerIdAssigner};
/// use uidgen_worker::WorkerIdAssigner;
/// let assigner = StatefulSetWorkerIdAssigner::new(PodOrdinal::from_env()?, "/data/worker.state")
///     .with_offset(16)
///     .registered_in(store);
/// let assignment = assigner.assign(&Layout::snowflake()?).await?;
/// assert_eq!(assignment.kind, StatefulSetWorkerIdAssigner::KIND);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StatefulSetWorkerIdAssigner {
    ordinal: PodOrdinal,
    /// Added to the ordinal, so that several StatefulSets (or a StatefulSet and static ids)
    /// can share one worker-id space.
    offset: u64,
    state_path: PathBuf,
    range: Option<WorkerIdRange>,
    store: Option<Arc<dyn ExactLeaseRegistry>>,
    /// Whether `store` is seen by every pod (the zero-config SQLite file is not).
    store_shared: bool,
    lease: LeaseOptions,
}

impl StatefulSetWorkerIdAssigner {
    /// How its assignments report themselves (`GET /v1/status`).
    pub const KIND: AssignmentKind = AssignmentKind::new("statefulset");

    /// Assign `ordinal` (+ [`with_offset`](Self::with_offset)), keeping the local
    /// reserved-until mark in `state_path`. It needs [`registered_in`](Self::registered_in)
    /// to start.
    pub fn new(ordinal: PodOrdinal, state_path: impl Into<PathBuf>) -> Self {
        Self {
            ordinal,
            offset: 0,
            state_path: state_path.into(),
            range: None,
            store: None,
            store_shared: true,
            lease: LeaseOptions::default(),
        }
    }

    /// Add `offset` to the ordinal (default 0).
    #[must_use]
    pub fn with_offset(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }

    /// The range the worker id must lie in (default: every id of the layout), recorded in the
    /// store as the static assigner's.
    #[must_use]
    pub fn with_range(mut self, range: WorkerIdRange) -> Self {
        self.range = Some(range);
        self
    }

    /// Lease the worker id in `store`, which every pod of the StatefulSet must share.
    #[must_use]
    pub fn registered_in(self, store: impl ExactLeaseRegistry + 'static) -> Self {
        self.registered_in_shared(Arc::new(store))
    }

    uidgen_worker::exact_lease_setters!();

    /// The worker id: ordinal + offset, unchecked against a layout
    /// ([`StatefulSetError::OverWidth`] only when the sum overflows).
    pub fn worker_id(&self) -> Result<u64> {
        let (ordinal, offset) = (self.ordinal.value(), self.offset);
        ordinal
            .checked_add(offset)
            .ok_or(StatefulSetError::OverWidth {
                ordinal,
                offset,
                max: u64::MAX,
            })
    }

    /// The worker id checked against `layout`'s worker field and the configured range.
    pub fn worker_id_for(&self, layout: &Layout) -> Result<u64> {
        let (ordinal, offset) = (self.ordinal.value(), self.offset);
        let max = layout.max_worker_id();
        let id = self.worker_id()?;
        if id > max {
            return Err(StatefulSetError::OverWidth {
                ordinal,
                offset,
                max,
            });
        }
        if let Some(range) = self.range
            && !range.within(layout)?.contains(id)
        {
            return Err(StatefulSetError::OverRange {
                ordinal,
                offset,
                range,
            });
        }
        Ok(id)
    }

    async fn assign_checked(&self, layout: &Layout) -> Result<WorkerAssignment> {
        let id = self.worker_id_for(layout)?;
        let store = match &self.store {
            Some(store) if self.store_shared => Arc::clone(store),
            _ => return Err(StatefulSetError::NoSharedStore),
        };
        let fenced = StaticWorkerIdAssigner::new(id, self.state_path.clone())
            .registered_in_shared(store)
            .with_store_shared(true)
            .with_lease_options(self.lease.clone());
        let fenced = match self.range {
            Some(range) => fenced.with_range(range),
            None => fenced,
        };
        let assignment = fenced.assign(layout).await?;
        Ok(WorkerAssignment {
            kind: Self::KIND,
            ..assignment
        })
    }
}

impl WorkerIdAssigner for StatefulSetWorkerIdAssigner {
    fn assign<'a>(
        &'a self,
        layout: &'a Layout,
    ) -> BoxFuture<'a, uidgen_worker::Result<WorkerAssignment>> {
        Box::pin(async move { self.assign_checked(layout).await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assigner(ordinal: u64, offset: u64) -> StatefulSetWorkerIdAssigner {
        StatefulSetWorkerIdAssigner::new(PodOrdinal::new(ordinal), "unused.state")
            .with_offset(offset)
    }

    #[test]
    fn the_worker_id_is_the_ordinal_plus_the_offset() {
        let layout = Layout::snowflake().unwrap();
        assert_eq!(assigner(3, 0).worker_id_for(&layout).unwrap(), 3);
        assert_eq!(assigner(3, 100).worker_id_for(&layout).unwrap(), 103);
    }

    #[test]
    fn an_id_past_the_worker_field_is_refused() {
        let layout = Layout::snowflake().unwrap();
        let refused = assigner(24, 1000).worker_id_for(&layout).unwrap_err();
        assert!(
            matches!(
                refused,
                StatefulSetError::OverWidth {
                    ordinal: 24,
                    offset: 1000,
                    max: 1023
                }
            ),
            "{refused}"
        );
        assert!(matches!(
            assigner(1, u64::MAX).worker_id(),
            Err(StatefulSetError::OverWidth { .. })
        ));
    }

    #[test]
    fn an_id_outside_the_range_is_refused() {
        let layout = Layout::snowflake().unwrap();
        let range = WorkerIdRange::new(100, 103).unwrap();
        let inside = assigner(3, 100).with_range(range);
        assert_eq!(inside.worker_id_for(&layout).unwrap(), 103);
        let refused = assigner(4, 100).with_range(range).worker_id_for(&layout);
        assert!(
            matches!(
                refused,
                Err(StatefulSetError::OverRange {
                    ordinal: 4,
                    offset: 100,
                    ..
                })
            ),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_store_private_to_one_host_is_refused() {
        let layout = Layout::snowflake().unwrap();
        let refused = assigner(0, 0).assign(&layout).await.unwrap_err();
        assert!(matches!(
            refused.downcast_backend::<StatefulSetError>(),
            Some(StatefulSetError::NoSharedStore)
        ));
    }
}
