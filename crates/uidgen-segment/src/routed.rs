//! The service's source when segment groups are configured: each group's tags go to their
//! group, every other tag to the main store.

use std::collections::HashMap;
use std::sync::Arc;

use uidgen_store::{LeafAlloc, ReturnedRange};

use crate::error::Result;
use crate::group::GroupSource;
use crate::source::{BoxFuture, Claimed, SegmentSource, TagUpsert};

/// Tags routed to their group, or to the main source.
#[derive(Debug)]
pub(crate) struct Routed {
    main: Arc<dyn SegmentSource>,
    groups: Vec<Arc<GroupSource>>,
    /// Tag → index in `groups`.
    by_tag: HashMap<String, usize>,
}

impl Routed {
    /// `groups` must not share a tag (checked by the caller).
    pub(crate) fn new(main: Arc<dyn SegmentSource>, groups: Vec<Arc<GroupSource>>) -> Self {
        let by_tag = groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| g.tags.iter().map(move |t| (t.clone(), i)))
            .collect();
        Self {
            main,
            groups,
            by_tag,
        }
    }

    fn source(&self, tag: &str) -> &dyn SegmentSource {
        match self.by_tag.get(tag) {
            Some(&i) => &*self.groups[i],
            None => &*self.main,
        }
    }
}

impl SegmentSource for Routed {
    fn claim<'a>(&'a self, tag: &'a str, step: Option<i64>) -> BoxFuture<'a, Result<Claimed>> {
        self.source(tag).claim(tag, step)
    }

    /// The main store's tags and every group's: a tag of a group found in the main store too
    /// (the main store may be one of the group's databases) is listed once, and served by its
    /// group.
    fn list_tags(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        Box::pin(async move {
            let mut tags = self.main.list_tags().await?;
            tags.extend(self.by_tag.keys().cloned());
            tags.sort_unstable();
            tags.dedup();
            Ok(tags)
        })
    }

    fn is_group_tag(&self, tag: &str) -> bool {
        self.by_tag.contains_key(tag)
    }

    /// A group's tags are not handed back (`SegmentGroup`'s docs say why); the others go to
    /// the main store.
    fn takes_back(&self, tag: &str) -> bool {
        !self.is_group_tag(tag) && self.main.takes_back(tag)
    }

    fn claim_returned<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<Claimed>>> {
        if self.is_group_tag(tag) {
            return Box::pin(async { Ok(None) });
        }
        self.main.claim_returned(tag)
    }

    fn return_ranges<'a>(
        &'a self,
        ranges: &'a [ReturnedRange],
    ) -> BoxFuture<'a, Result<Vec<ReturnedRange>>> {
        Box::pin(async move {
            let main: Vec<ReturnedRange> = ranges
                .iter()
                .filter(|range| !self.is_group_tag(&range.biz_tag))
                .cloned()
                .collect();
            self.main.return_ranges(&main).await
        })
    }

    fn apply_upsert<'a>(&'a self, upsert: TagUpsert<'a>) -> BoxFuture<'a, Result<LeafAlloc>> {
        self.source(upsert.tag).apply_upsert(upsert)
    }

    fn row<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<LeafAlloc>>> {
        self.source(tag).row(tag)
    }
}
