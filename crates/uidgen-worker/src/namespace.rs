//! [`NamespaceRecord`]: what a coordinator (etcd, ZooKeeper) keeps about a namespace itself, so
//! that losing the coordinator's data never hands a worker id out twice.
//!
//! # The problem it solves
//!
//! A coordinator-kept worker id is reused only above its last holder's reservation, which the
//! coordinator keeps (etcd's mark key, ZooKeeper's forever node). When the coordinator loses
//! that record (an etcd or ZooKeeper restarted on an emptied data directory, a container
//! without a volume, a restore from an older snapshot), a claimant reads no record, or an old
//! one, and would start the id at its own clock, below what a surviving holder (still issuing
//! under the cap it was granted) or a holder that died a moment ago has stamped. Issue 36 saw
//! 49,056 equal IDs that way.
//!
//! # The rule
//!
//! Every namespace has one record beside its ids, written before any id of it is claimed.
//! Its [`floor_ms`](NamespaceRecord::floor_ms) is the floor of **every id whose own record was
//! written before the namespace record** (an older write, or none at all):
//!
//! ```text
//! floor(id) = id's reservation                   if the id's record is newer than the namespace's
//!             max(id's reservation, ns.floor)    if it is older
//!             ns.floor                           if the id has no record
//! ```
//!
//! The record is written in three cases, and its floor covers what the namespace may have lost
//! in each:
//!
//! - [`Origin::Init`]: an operator declared the namespace new (`uidgen etcd init`, `uidgen zk
//!   init`), so nothing was ever stamped in it: floor 0.
//! - [`Origin::Adopted`]: the namespace has ids recorded by a uidgen that wrote no namespace
//!   record (or Leaf's nodes): their records are what the coordinator always had: floor 0.
//! - [`Origin::UnknownPast`] and [`Origin::DataLoss`]: a claimant found nothing at all under
//!   the namespace (new, or emptied), or a holder or an operator saw the coordinator's data go
//!   back (its revision or zxid fell, a holder's own record vanished). Every holder that ever
//!   had an id of this namespace stamps nothing past the reservation of its last accepted
//!   report, and that report was accepted before the loss, so before this record was written:
//!   its reservation is at most `loss + reservation`. The floor is `now + reservation +
//!   skew`, where `skew` is the clock difference allowed between hosts (the start wait): the
//!   one place where this argument compares two hosts' clocks, since the lost holder's labels
//!   are gone.
//!
//! A record written later (a loss seen again) makes every id record written before it "older"
//! again, so a restore from a snapshot, whose id records are stale but look current, is
//! covered as soon as anyone rewrites the namespace record: a holder that sees the revision go
//! back, a restart whose state directory remembers a later revision, or the operator
//! (`uidgen etcd recover`, `uidgen zk recover`).
//!
//! A holder whose own id record vanished while its cap still runs may take its id up again
//! ([`may_reestablish`]): nobody else can have claimed the id (a claim writes the id's record,
//! and the namespace floor keeps an unrecorded id from claimants until after the holder's cap),
//! and the holder continues its own stamps.

use serde::{Deserialize, Serialize};

/// Why a namespace record was written (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// An operator declared the namespace new: nothing was stamped in it before.
    Init,
    /// The namespace already held ids recorded without a namespace record (an earlier uidgen,
    /// or Leaf): their records are complete.
    Adopted,
    /// A claimant found the namespace empty: new, or its data lost. Unrecorded ids wait.
    UnknownPast,
    /// A holder, a restart or an operator saw the coordinator's data go back.
    DataLoss,
}

impl Origin {
    /// Whether ids recorded before this record need the namespace floor.
    pub fn fences_older_ids(self) -> bool {
        matches!(self, Self::UnknownPast | Self::DataLoss)
    }
}

/// The record a coordinator keeps beside a namespace's ids: see the module documentation.
///
/// ```
/// use uidgen_worker::{NamespaceRecord, Origin};
/// let record = NamespaceRecord::fenced(Origin::UnknownPast, 1_000, 600_000, 5_000, "10.0.0.7:8080");
/// assert_eq!(record.floor_ms, 606_000);
/// // An id recorded before the namespace record waits for its floor; one recorded after it
/// // (a claim made since) is taken at its own reservation.
/// assert_eq!(record.floor_of(Some(2_000), false), 606_000);
/// assert_eq!(record.floor_of(Some(2_000), true), 2_000);
/// assert_eq!(record.floor_of(None, false), 606_000);
/// assert_eq!(NamespaceRecord::parse(&record.to_json()), Some(record));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceRecord {
    /// Why it was written.
    pub origin: Origin,
    /// The floor of every id whose own record is older than this one (ms since the Unix
    /// epoch, the writer's clock).
    pub floor_ms: u64,
    /// The writer's clock when it wrote this (ms since the Unix epoch).
    pub written_ms: u64,
    /// Who wrote it: a holder's `host:port`, or `uidgen etcd init` and the like.
    pub by: String,
    /// What the writer saw, for operators: "etcd's revision went back from 9120 to 3".
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

impl NamespaceRecord {
    /// A record that fences nothing: a new namespace ([`Origin::Init`]) or one whose ids'
    /// records are complete ([`Origin::Adopted`]).
    pub fn open(origin: Origin, now_ms: u64, by: impl Into<String>) -> Self {
        Self {
            origin,
            floor_ms: 0,
            written_ms: now_ms,
            by: by.into(),
            why: String::new(),
        }
    }

    /// A record that fences every older id until `now + reservation + skew`: no holder whose
    /// last accepted report came before `now` stamps past `now + reservation`, and `skew`
    /// allows for the writer's clock being behind that holder's.
    pub fn fenced(
        origin: Origin,
        now_ms: u64,
        reservation_ms: u64,
        skew_ms: u64,
        by: impl Into<String>,
    ) -> Self {
        Self {
            origin,
            floor_ms: now_ms
                .saturating_add(reservation_ms)
                .saturating_add(skew_ms),
            written_ms: now_ms,
            by: by.into(),
            why: String::new(),
        }
    }

    /// The record a start writes where it finds none: [`Origin::Adopted`] (fencing nothing)
    /// when the coordinator `recorded` ids of the namespace already (an earlier uidgen's, or
    /// Leaf's), else [`Origin::UnknownPast`], which cannot tell a new namespace from a lost
    /// one and so fences every id as [`fenced`](Self::fenced) does, saying nothing was under
    /// `root`.
    ///
    /// ```
    /// use uidgen_worker::{NamespaceRecord, Origin};
    /// let adopted = NamespaceRecord::first(true, 1_000, 600_000, 5_000, "10.0.0.7:8080", "/p");
    /// assert_eq!((adopted.origin, adopted.floor_ms), (Origin::Adopted, 0));
    /// let unknown = NamespaceRecord::first(false, 1_000, 600_000, 5_000, "10.0.0.7:8080", "/p");
    /// assert_eq!((unknown.origin, unknown.floor_ms), (Origin::UnknownPast, 606_000));
    /// assert_eq!(unknown.why, "nothing under /p at the first start");
    /// ```
    pub fn first(
        recorded: bool,
        now_ms: u64,
        reservation_ms: u64,
        skew_ms: u64,
        by: impl Into<String>,
        root: &str,
    ) -> Self {
        if recorded {
            Self::open(Origin::Adopted, now_ms, by)
        } else {
            Self::fenced(Origin::UnknownPast, now_ms, reservation_ms, skew_ms, by)
                .because(format!("nothing under {root} at the first start"))
        }
    }

    /// The same record with what its writer saw.
    #[must_use]
    pub fn because(mut self, why: impl Into<String>) -> Self {
        self.why = why.into();
        self
    }

    /// The floor of an id whose record holds `reserved_until_ms` (`None`: no record), written
    /// after this namespace record (`newer`) or before it.
    pub fn floor_of(&self, reserved_until_ms: Option<u64>, newer: bool) -> u64 {
        match reserved_until_ms {
            Some(reserved) if newer => reserved,
            Some(reserved) => reserved.max(self.floor_ms),
            None => self.floor_ms,
        }
    }

    /// The JSON a coordinator keeps.
    pub fn to_json(&self) -> Vec<u8> {
        // A struct of strings, integers and a unit enum always serialises.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A record read back; `None` when the bytes are not one.
    pub fn parse(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// Why this record fences, in a sentence for people, naming the coordinator (`"etcd"`,
    /// `"ZooKeeper"`).
    ///
    /// ```
    /// use uidgen_worker::{NamespaceRecord, Origin};
    /// let record = NamespaceRecord::fenced(Origin::DataLoss, 0, 1, 1, "a:1").because("restored");
    /// assert_eq!(record.fence_reason("etcd"), "etcd was seen to lose data: restored (recorded by a:1)");
    /// ```
    pub fn fence_reason(&self, authority: &str) -> String {
        let what = match self.origin {
            Origin::UnknownPast => format!(
                "{authority} held nothing under it when a start first came (a new namespace, or \
                 one whose data {authority} lost)"
            ),
            Origin::DataLoss => format!("{authority} was seen to lose data"),
            Origin::Init | Origin::Adopted => "its namespace record fences it".to_owned(),
        };
        if self.why.is_empty() {
            format!("{what} (recorded by {})", self.by)
        } else {
            format!("{what}: {} (recorded by {})", self.why, self.by)
        }
    }

    /// Whether this record already covers a loss that a holder whose last accepted report was
    /// written at `last_accepted_ms` (its clock) has just seen: the record was written after
    /// that report and fences older ids. A holder that finds it so does not rewrite it (a
    /// rewrite would fence records written since, its fellow survivors' among them).
    pub fn covers_loss_after(&self, last_accepted_ms: u64) -> bool {
        self.origin.fences_older_ids() && self.written_ms >= last_accepted_ms
    }
}

/// Whether a holder whose own id record vanished (or was found older than its last write) may
/// take the id up again at `now_ms`: only while its cap, less the start wait a claimant could
/// use to take the id at its reservation, is still ahead. Past that a claimant may have taken
/// the id at the reservation the holder's record promised.
///
/// ```
/// use uidgen_worker::may_reestablish;
/// assert!(may_reestablish(1_000, 10_000, 5_000));
/// assert!(!may_reestablish(5_000, 10_000, 5_000));
/// ```
pub fn may_reestablish(now_ms: u64, cap_ms: u64, start_wait_ms: u64) -> bool {
    now_ms.saturating_add(start_wait_ms) < cap_ms
}

/// The highest revision (etcd) or zxid (ZooKeeper) a holder has seen, and whether the
/// coordinator's answers went below it: the mark of a coordinator that lost data or was
/// restored from an older snapshot.
///
/// ```
/// use uidgen_worker::RevisionWatch;
/// let watch = RevisionWatch::default();
/// assert_eq!(watch.observe(10), None);
/// assert_eq!(watch.observe(12), None);
/// assert_eq!(watch.observe(3), Some(12)); // went back: the highest seen before
/// assert_eq!(watch.take_regression(), Some((12, 3)));
/// assert_eq!(watch.take_regression(), None);
/// assert_eq!(watch.observe(4), None); // the watch follows the new history from here
/// ```
#[derive(Debug, Default)]
pub struct RevisionWatch {
    highest: std::sync::atomic::AtomicI64,
    regression: parking_lot::Mutex<Option<(i64, i64)>>,
}

impl RevisionWatch {
    /// Note a revision an answer carried (0 or below: none). Returns the highest seen before
    /// when this one is below it; the regression is also kept for
    /// [`take_regression`](Self::take_regression), and the watch restarts from `revision`.
    pub fn observe(&self, revision: i64) -> Option<i64> {
        use std::sync::atomic::Ordering;
        if revision <= 0 {
            return None;
        }
        // SeqCst: a regression found by one answer must be seen by the holder's next round,
        // whichever thread read that answer; rare enough that the cost does not matter.
        let before = self.highest.fetch_max(revision, Ordering::SeqCst);
        if revision >= before {
            return None;
        }
        // Follow the new history: later answers are compared with it, not the lost one.
        self.highest.store(revision, Ordering::SeqCst);
        let mut kept = self.regression.lock();
        let highest = kept.map_or(before, |(high, _)| high.max(before));
        *kept = Some((highest, revision));
        Some(before)
    }

    /// The regression seen since the last call, as (highest before, first seen after).
    pub fn take_regression(&self) -> Option<(i64, i64)> {
        self.regression.lock().take()
    }

    /// The highest revision seen (0 before any).
    pub fn highest(&self) -> i64 {
        // SeqCst: see observe().
        self.highest.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn open_records_fence_nothing_and_fenced_ones_every_older_id() {
        let open = NamespaceRecord::open(Origin::Init, 5, "uidgen etcd init");
        assert_eq!(open.floor_of(None, false), 0);
        assert_eq!(open.floor_of(Some(9), false), 9);
        let lost = NamespaceRecord::fenced(Origin::DataLoss, 100, 50, 5, "a:1").because("x");
        assert_eq!(lost.floor_ms, 155);
        assert_eq!(lost.floor_of(Some(200), false), 200);
        assert_eq!(lost.floor_of(Some(120), false), 155);
        assert_eq!(lost.floor_of(Some(120), true), 120);
        assert!(lost.covers_loss_after(100) && !lost.covers_loss_after(101));
        assert!(!open.covers_loss_after(0));
    }

    #[test]
    fn records_read_back_and_garbage_does_not() {
        let record = NamespaceRecord::fenced(Origin::UnknownPast, 1, 2, 3, "h:1");
        let json = String::from_utf8(record.to_json()).unwrap();
        assert_eq!(
            json,
            r#"{"origin":"unknown_past","floor_ms":6,"written_ms":1,"by":"h:1"}"#
        );
        assert_eq!(NamespaceRecord::parse(json.as_bytes()), Some(record));
        assert_eq!(NamespaceRecord::parse(b"{}"), None);
    }

    #[test]
    fn a_watch_reports_each_regression_once_and_follows_the_new_history() {
        let watch = RevisionWatch::default();
        assert_eq!(watch.observe(0), None);
        assert_eq!(watch.observe(50), None);
        assert_eq!(watch.observe(7), Some(50));
        assert_eq!(watch.observe(8), None);
        assert_eq!(watch.observe(2), Some(8));
        // Two regressions before the holder looked: the highest lost, the latest seen.
        assert_eq!(watch.take_regression(), Some((50, 2)));
        assert_eq!(watch.highest(), 2);
    }
}
