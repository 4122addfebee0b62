//! Segment groups: tags served from N databases at once (Tinyid's multi-database segments).
//!
//! Every database of a group holds each of the group's tags with `delta = N` and its own
//! `remainder` (see [`uidgen_store::Residue`]), so database k hands out only numbers `≡ k (mod
//! N)` and no two databases ever hand out the same number. A segment is claimed from the
//! database that answered last (kept while it answers, so one database's `max_id` runs ahead and
//! the others stay as they are); when it fails or does not answer within the attempt timeout,
//! the next database in the list is tried, round the ring. The tag keeps serving while at least
//! one database of its group is alive.
//!
//! Invariants:
//! - a group's rows agree: `delta = N` everywhere, distinct remainders, a row in every
//!   reachable database once one has it. Checked at start ([`SegmentService::start_with_groups`])
//!   and kept by [`SegmentService::upsert_tag`], which writes every database or none.
//! - each database's claims are Leaf's own (committed before served); the buffer refuses a
//!   segment below what it served of an overlapping residue.
//!
//! [`SegmentService::start_with_groups`]: crate::SegmentService::start_with_groups
//! [`SegmentService::upsert_tag`]: crate::SegmentService::upsert_tag

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use serde::Serialize;
use uidgen_store::{LeafAlloc, MAX_DELTA, Residue, Store};

use crate::error::{GroupProblem, Result, SegmentError};
use crate::source::{BoxFuture, Claimed, SegmentSource, TagUpsert};

/// A named list of databases and the tags they serve together.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use uidgen_segment::SegmentGroup;
/// let a = uidgen_store::Store::connect("postgres://postgres@127.0.0.1:5432/a").await?;
/// let b = uidgen_store::Store::connect("mysql://root@127.0.0.1:3306/b").await?;
/// let group = SegmentGroup::new("orders", vec![a, b], vec!["order".into()])?;
/// assert_eq!(group.len(), 2); // each row: delta 2, remainders 0 and 1
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SegmentGroup {
    name: String,
    stores: Vec<Store>,
    tags: Vec<String>,
}

impl SegmentGroup {
    /// A group of `stores` (1 to [`MAX_DELTA`], in the order their remainders are given to new
    /// tags) serving `tags`; an empty list, a bad tag or a tag listed twice is
    /// [`SegmentError::InvalidGroup`].
    pub fn new(name: &str, stores: Vec<Store>, tags: Vec<String>) -> Result<Self> {
        let invalid = |reason: String| SegmentError::InvalidGroup {
            group: name.to_owned(),
            reason,
        };
        let n = i64::try_from(stores.len()).unwrap_or(i64::MAX);
        if !(1..=MAX_DELTA).contains(&n) {
            return Err(invalid(format!(
                "it has {n} stores; list 1 to {MAX_DELTA} database URLs"
            )));
        }
        for (i, tag) in tags.iter().enumerate() {
            crate::tag::validate_tag(tag)?;
            if tags[..i].contains(tag) {
                return Err(invalid(format!("biz tag `{tag}` is listed twice")));
            }
        }
        Ok(Self {
            name: name.to_owned(),
            stores,
            tags,
        })
    }

    /// The group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How many databases (every row's `delta`).
    pub fn len(&self) -> usize {
        self.stores.len()
    }

    /// Always false: a group has at least one database.
    pub fn is_empty(&self) -> bool {
        self.stores.is_empty()
    }

    /// The tags the group serves.
    pub fn tags(&self) -> &[String] {
        &self.tags
    }
}

/// One database of a group as [`SegmentService::groups`](crate::SegmentService::groups) shows
/// it, read live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupDatabaseState {
    /// The database's URL, password redacted.
    pub url: String,
    /// It answered just now.
    pub reachable: bool,
    /// Segments are claimed here first (the database that answered last).
    pub preferred: bool,
    /// Why it did not answer.
    pub error: Option<String>,
    /// Its row of each of the group's tags; empty when unreachable.
    pub tags: Vec<GroupTagRow>,
}

/// One tag's row in one database of a group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupTagRow {
    /// The tag.
    pub tag: String,
    /// The row exists.
    pub exists: bool,
    /// Its `max_id` (0 when absent).
    pub max_id: i64,
    /// Its step (0 when absent).
    pub step: i64,
    /// Its `delta` (0 when absent).
    pub delta: i64,
    /// Its `remainder` (0 when absent).
    pub remainder: i64,
}

/// A group as [`SegmentService::groups`](crate::SegmentService::groups) shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupState {
    /// The group's name.
    pub name: String,
    /// Its tags.
    pub tags: Vec<String>,
    /// Its databases, in configured order.
    pub databases: Vec<GroupDatabaseState>,
}

/// The members of a group as the service drives them: a source per database.
#[derive(Debug)]
pub(crate) struct GroupSource {
    pub(crate) name: String,
    pub(crate) tags: Vec<String>,
    members: Vec<Arc<dyn SegmentSource>>,
    /// Redacted URLs, for messages.
    names: Vec<String>,
    /// The member tried first: the one that answered last.
    preferred: AtomicUsize,
    /// How long one member may take before the next is tried.
    attempt_timeout: Duration,
    /// What each member last said, for monitoring.
    last_error: Mutex<Vec<Option<String>>>,
}

impl GroupSource {
    pub(crate) fn new(group: SegmentGroup, attempt_timeout: Duration) -> Self {
        let names = group
            .stores
            .iter()
            .map(|s| s.redacted_url().to_owned())
            .collect();
        let members = group
            .stores
            .into_iter()
            .map(|s| Arc::new(s) as Arc<dyn SegmentSource>)
            .collect();
        Self::from_members(group.name, group.tags, members, names, attempt_timeout)
    }

    pub(crate) fn from_members(
        name: String,
        tags: Vec<String>,
        members: Vec<Arc<dyn SegmentSource>>,
        names: Vec<String>,
        attempt_timeout: Duration,
    ) -> Self {
        let n = members.len();
        Self {
            name,
            tags,
            members,
            names,
            preferred: AtomicUsize::new(0),
            attempt_timeout,
            last_error: Mutex::new(vec![None; n]),
        }
    }

    fn delta(&self) -> i64 {
        // At most MAX_DELTA members (`SegmentGroup::new`).
        i64::try_from(self.members.len()).unwrap_or(i64::MAX)
    }

    /// One member's call, bounded by the attempt timeout.
    async fn attempt<T>(
        &self,
        member: usize,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        let outcome = match tokio::time::timeout(self.attempt_timeout, call).await {
            Ok(outcome) => outcome,
            Err(_) => Err(attempt_timed_out(self.attempt_timeout)),
        };
        self.last_error.lock()[member] = outcome.as_ref().err().map(ToString::to_string);
        outcome
    }

    /// Every member's row of `tag`, `Err` for a member that did not answer.
    async fn rows(&self, tag: &str) -> Vec<Result<Option<LeafAlloc>>> {
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.rows_of(tag, &all).await
    }

    /// The rows of `tag` in `members` (indexes, ascending), read at once: a member that does
    /// not answer costs one attempt timeout, not one per member. The answers come back in
    /// member order; members not asked are `Err`.
    async fn rows_of(&self, tag: &str, members: &[usize]) -> Vec<Result<Option<LeafAlloc>>> {
        let timeout = self.attempt_timeout;
        let mut reads = tokio::task::JoinSet::new();
        for &k in members {
            let (member, tag) = (Arc::clone(&self.members[k]), tag.to_owned());
            reads.spawn(async move {
                let read = tokio::time::timeout(timeout, member.row(&tag)).await;
                (k, read.unwrap_or_else(|_| Err(attempt_timed_out(timeout))))
            });
        }
        let mut rows: Vec<Result<Option<LeafAlloc>>> = (0..self.members.len())
            .map(|_| Err(attempt_timed_out(timeout)))
            .collect();
        while let Some(joined) = reads.join_next().await {
            // A read task only panics on a bug; its member then counts as not answering.
            if let Ok((k, row)) = joined {
                self.last_error.lock()[k] = row.as_ref().err().map(ToString::to_string);
                rows[k] = row;
            }
        }
        rows
    }

    /// Check the rows of `tag` in every member that answers: delta = N, distinct remainders,
    /// a row everywhere once one member has it. Returns each member's residue (`None`: no row or
    /// no answer).
    pub(crate) async fn check_tag(&self, tag: &str) -> Result<Vec<Option<Residue>>> {
        let rows = self.rows(tag).await;
        let problem = |problem| SegmentError::GroupInconsistent {
            group: self.name.clone(),
            tag: tag.to_owned(),
            problem,
        };
        let mut seen: HashMap<i64, usize> = HashMap::new();
        let mut residues = vec![None; rows.len()];
        let any_row = rows.iter().any(|r| matches!(r, Ok(Some(_))));
        for (k, row) in rows.iter().enumerate() {
            match row {
                Ok(Some(row)) => {
                    if row.residue.delta != self.delta() {
                        return Err(problem(GroupProblem::WrongDelta {
                            database: self.names[k].clone(),
                            delta: row.residue.delta,
                            expected: self.delta(),
                        }));
                    }
                    if let Some(&other) = seen.get(&row.residue.remainder) {
                        return Err(problem(GroupProblem::DuplicateRemainder {
                            first: self.names[other].clone(),
                            second: self.names[k].clone(),
                            remainder: row.residue.remainder,
                        }));
                    }
                    seen.insert(row.residue.remainder, k);
                    residues[k] = Some(row.residue);
                }
                Ok(None) if any_row => {
                    return Err(problem(GroupProblem::MissingRow {
                        database: self.names[k].clone(),
                    }));
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(group = %self.name, database = %self.names[k], %tag, %error,
                        "a database of the segment group did not answer; not checked");
                }
            }
        }
        Ok(residues)
    }

    /// The group's state, read live from every member.
    pub(crate) async fn state(&self) -> GroupState {
        // Relaxed: a monitoring hint.
        let preferred = self.preferred.load(Ordering::Relaxed);
        let mut databases: Vec<GroupDatabaseState> = self
            .names
            .iter()
            .enumerate()
            .map(|(k, url)| GroupDatabaseState {
                url: url.clone(),
                reachable: true,
                preferred: k == preferred,
                error: None,
                tags: Vec::new(),
            })
            .collect();
        for tag in &self.tags {
            // A member that did not answer for one tag is not asked again for the next: the
            // page costs one attempt timeout per silent database, not one per tag.
            let asked: Vec<usize> = (0..databases.len())
                .filter(|&k| databases[k].reachable)
                .collect();
            let rows = self.rows_of(tag, &asked).await;
            for (k, row) in rows.into_iter().enumerate() {
                let database = &mut databases[k];
                if !database.reachable {
                    continue;
                }
                match row {
                    Ok(row) => database.tags.push(GroupTagRow {
                        tag: tag.clone(),
                        exists: row.is_some(),
                        max_id: row.as_ref().map_or(0, |r| r.max_id),
                        step: row.as_ref().map_or(0, |r| r.step),
                        delta: row.as_ref().map_or(0, |r| r.residue.delta),
                        remainder: row.as_ref().map_or(0, |r| r.residue.remainder),
                    }),
                    Err(error) => {
                        database.reachable = false;
                        database.error = Some(error.to_string());
                    }
                }
            }
        }
        for database in &mut databases {
            if !database.reachable {
                database.tags.clear();
            }
        }
        GroupState {
            name: self.name.clone(),
            tags: self.tags.clone(),
            databases,
        }
    }
}

/// A member that did not answer within the group's attempt timeout.
#[cold]
fn attempt_timed_out(timeout: Duration) -> SegmentError {
    SegmentError::TimedOut {
        action: "asking a database of a segment group",
        waited_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
    }
}

impl SegmentSource for GroupSource {
    /// From the preferred member, then the others in ring order; a member's unknown tag or
    /// exhausted row also moves on (another may still serve). Every member failing is
    /// [`SegmentError::GroupUnavailable`] (or `UnknownTag` when every member said so).
    fn claim<'a>(&'a self, tag: &'a str, step: Option<i64>) -> BoxFuture<'a, Result<Claimed>> {
        Box::pin(async move {
            let n = self.members.len();
            // Relaxed: which member to try first is a hint; any order is safe.
            let first = self.preferred.load(Ordering::Relaxed);
            let mut unknown = 0;
            let mut last = String::new();
            for i in 0..n {
                let k = (first + i) % n;
                match self.attempt(k, self.members[k].claim(tag, step)).await {
                    Ok(claim) if claim.residue.delta == self.delta() => {
                        // Relaxed: see above.
                        self.preferred.store(k, Ordering::Relaxed);
                        return Ok(claim);
                    }
                    Ok(claim) => {
                        // Committed but skipped: serving it could collide with a member whose
                        // residue it overlaps.
                        let error = SegmentError::GroupInconsistent {
                            group: self.name.clone(),
                            tag: tag.to_owned(),
                            problem: GroupProblem::WrongDelta {
                                database: self.names[k].clone(),
                                delta: claim.residue.delta,
                                expected: self.delta(),
                            },
                        };
                        last = error.to_string();
                    }
                    Err(SegmentError::UnknownTag(_)) => unknown += 1,
                    Err(error) => {
                        tracing::warn!(group = %self.name, database = %self.names[k], %tag,
                            %error, "claiming from a database of the segment group failed; \
                            trying the next");
                        last = error.to_string();
                    }
                }
            }
            if unknown == n {
                return Err(SegmentError::UnknownTag(tag.to_owned()));
            }
            Err(SegmentError::GroupUnavailable {
                group: self.name.clone(),
                tag: tag.to_owned(),
                tried: n,
                last,
            })
        })
    }

    fn list_tags(&self) -> BoxFuture<'_, Result<Vec<String>>> {
        // The configuration is the authority: a group's tags stay listed while its databases
        // are down (their buffers keep serving what they hold).
        Box::pin(async move { Ok(self.tags.clone()) })
    }

    fn is_group_tag(&self, _tag: &str) -> bool {
        true
    }

    /// Every member or none: all must answer, their rows must agree, then each gets its row
    /// (a new row takes the first remainder no member holds). A member that fails between the
    /// reads and its write leaves the rows written so far; the next start then refuses the
    /// group (a missing row) until this call, repeated, completes them: existing rows keep
    /// their remainders, missing ones take the free ones. A group assigns its members'
    /// residues itself: one asked for is not used.
    fn apply_upsert<'a>(&'a self, upsert: TagUpsert<'a>) -> BoxFuture<'a, Result<LeafAlloc>> {
        let TagUpsert { tag, step, .. } = upsert;
        Box::pin(async move {
            if step < self.delta() {
                return Err(SegmentError::InvalidInput(format!(
                    "step {step} is below the {} databases of segment group `{}`: every segment \
                     must hold a number of each",
                    self.delta(),
                    self.name
                )));
            }
            let rows = self.rows(tag).await;
            if let Some((k, Err(error))) = rows.iter().enumerate().find(|(_, r)| r.is_err()) {
                return Err(SegmentError::GroupUnavailable {
                    group: self.name.clone(),
                    tag: tag.to_owned(),
                    tried: self.members.len(),
                    last: format!("{}: {error}", self.names[k]),
                });
            }
            let mut residues = self.check_tag(tag).await?;
            let taken: Vec<i64> = residues.iter().flatten().map(|r| r.remainder).collect();
            let mut free = (0..self.delta()).filter(|r| !taken.contains(r));
            for residue in &mut residues {
                if residue.is_none() {
                    let remainder = free.next().unwrap_or_default();
                    *residue = Some(Residue::new(self.delta(), remainder)?);
                }
            }
            let mut first_row = None;
            for (k, residue) in residues.into_iter().enumerate() {
                let member = TagUpsert {
                    residue: Some(residue.unwrap_or_default()),
                    ..upsert
                };
                let row = self
                    .attempt(k, self.members[k].apply_upsert(member))
                    .await?;
                first_row.get_or_insert(row);
            }
            first_row.ok_or_else(|| SegmentError::UnknownTag(tag.to_owned()))
        })
    }

    fn row<'a>(&'a self, tag: &'a str) -> BoxFuture<'a, Result<Option<LeafAlloc>>> {
        Box::pin(async move {
            let rows = self.rows(tag).await;
            Ok(rows.into_iter().flatten().flatten().next())
        })
    }
}
