//! Starting a [`SegmentService`] with segment groups (Tinyid's multi-database segments), and
//! reading their databases' state.

use std::collections::HashMap;
use std::sync::Arc;

use uidgen_core::Clock;
use uidgen_store::Store;

use crate::error::{Result, SegmentError};
use crate::group::{GroupSource, GroupState, SegmentGroup};
use crate::options::SegmentOptions;
use crate::routed::Routed;
use crate::service::SegmentService;
use crate::source::SegmentSource;

impl SegmentService {
    /// [`start`](Self::start) with segment groups: each group's tags are served from all of its
    /// databases (Tinyid's multi-database segments, see [`SegmentGroup`]), every other tag from
    /// `store`.
    ///
    /// Before serving, every tag of every group is checked in each database that answers
    /// within the attempt timeout (`load_timeout` shared among the group's databases): rows
    /// with another `delta` than the group's size, two databases with one remainder, or a row
    /// missing where others have one are [`GroupInconsistent`](SegmentError::GroupInconsistent);
    /// a tag in two groups is [`InvalidGroup`](SegmentError::InvalidGroup). A database that does
    /// not answer is not an error (the group serves from the others); it is checked at the next
    /// start.
    ///
    /// ```no_run
    /// # async fn demo() -> uidgen_segment::Result<()> {
    /// use uidgen_core::SystemClock;
    /// use uidgen_segment::{SegmentGroup, SegmentOptions, SegmentService};
    /// use uidgen_store::Store;
    /// let main = Store::connect("sqlite://uidgen.db").await?;
    /// let a = Store::connect("postgres://postgres@10.0.0.1:5432/ids").await?;
    /// let b = Store::connect("mysql://root@10.0.0.2:3306/ids").await?;
    /// let group = SegmentGroup::new("orders", vec![a, b], vec!["order".into()])?;
    /// let service =
    ///     SegmentService::start_with_groups(main, vec![group], SegmentOptions::default(), SystemClock)
    ///         .await?;
    /// service.upsert_tag("order", 1000, None).await?; // both rows: delta 2, remainders 0 and 1
    /// let id = service.get_async("order").await?; // from whichever database answers
    /// # Ok(()) }
    /// ```
    pub async fn start_with_groups(
        store: Store,
        groups: Vec<SegmentGroup>,
        options: SegmentOptions,
        clock: impl Clock + 'static,
    ) -> Result<Arc<Self>> {
        options.validate()?;
        let mut owner: HashMap<&str, &str> = HashMap::new();
        for group in &groups {
            for tag in group.tags() {
                if let Some(other) = owner.insert(tag, group.name()) {
                    return Err(SegmentError::InvalidGroup {
                        group: group.name().to_owned(),
                        reason: format!("biz tag `{tag}` is also in group `{other}`"),
                    });
                }
            }
        }
        let sources: Vec<Arc<GroupSource>> = groups
            .into_iter()
            .map(|group| {
                let n = u32::try_from(group.len()).unwrap_or(u32::MAX).max(1);
                Arc::new(GroupSource::new(group, options.load_timeout / n))
            })
            .collect();
        Self::start_inner(Arc::new(store), sources, options, Arc::new(clock)).await
    }

    /// `main` with each group's tags routed to the group's databases, once every group's rows
    /// are checked.
    pub(crate) async fn route(
        main: Arc<dyn SegmentSource>,
        groups: &[Arc<GroupSource>],
    ) -> Result<Arc<dyn SegmentSource>> {
        for group in groups {
            for tag in &group.tags {
                group.check_tag(tag).await?;
            }
        }
        Ok(Arc::new(Routed::new(main, groups.to_vec())))
    }

    /// Every segment group's databases, read live (each bounded by the group's attempt
    /// timeout): reachable or not, and each tag's `max_id`, `delta` and `remainder` there.
    pub async fn groups(&self) -> Vec<GroupState> {
        let mut states = Vec::with_capacity(self.groups.len());
        for group in &self.groups {
            states.push(group.state().await);
        }
        states
    }
}
