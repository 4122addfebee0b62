//! One ordered tag on one server: the lease it holds or the leader it knows, the numbers it
//! issues while it leads, and the calls it forwards while it does not.
//!
//! The leader's rule (docs/OPERATIONS.md, "Ordered tags", has the argument): it takes the
//! numbers, then checks that its own account of the lease still runs, and only then answers.
//! Its account ends [`own_lease`](crate::config::ordered::OrderedSettings::own_lease) after it
//! *sent* the renewal that the store granted, by the monotonic clock, before the database's
//! clock lets a successor begin. So every answer it gives was decided before any successor
//! issued, and a successor's first segment lies above every number it claimed.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tracing::{info, warn};
use uidgen_store::{Lead, OrderedTag, Store, StoreError};

use super::error::OrderedError;
use super::forward::{Channels, ForwardFailure, ForwardQueue};
use crate::config::ordered::OrderedSettings;

/// What every tag of one server shares: the store, the settings, who this server is.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub(crate) store: Store,
    pub(crate) settings: OrderedSettings,
    /// Unique per server life: host, process and a random part.
    pub(crate) holder: String,
    /// Where the others forward to this server; `None`: they cannot (gRPC off), so while it
    /// leads they wait.
    pub(crate) address: Option<String>,
    /// The largest segment a leader claims at once (`segment.max_step`).
    pub(crate) max_step: i64,
    pub(crate) batch_cap: usize,
    pub(crate) channels: Arc<Channels>,
}

/// A segment claimed less than this long after the previous one doubles the step, one that
/// lasted more than four times this halves it back towards the stored step: a busy tag claims
/// about once per this, whatever its rate.
const SEGMENT_TARGET: Duration = Duration::from_secs(15);

/// The numbers a leader issues from, for one term.
#[derive(Debug, Default)]
struct Issuer {
    /// The term this server leads in; 0: it does not lead.
    term: i64,
    /// Its account of the lease ends here (monotonic clock).
    valid_until: Option<Instant>,
    /// Claimed and not yet issued, lowest first.
    ranges: VecDeque<Range<i64>>,
    /// The highest number issued in this term: nothing at or below is issued again.
    floor: i64,
    /// The step of the last claim and when it was made.
    step: Option<i64>,
    claimed_at: Option<Instant>,
}

impl Issuer {
    fn leads(&self, now: Instant) -> bool {
        self.term != 0 && self.valid_until.is_some_and(|until| now < until)
    }

    /// A new term (or none, 0): nothing of an earlier term is issued again.
    fn begin(&mut self, term: i64) {
        *self = Self {
            term,
            ..Self::default()
        };
    }

    fn next_step(&self, max_step: i64) -> Option<i64> {
        let (step, at) = (self.step?, self.claimed_at?);
        let lasted = at.elapsed();
        Some(if lasted < SEGMENT_TARGET {
            step.saturating_mul(2).min(max_step.max(step))
        } else if lasted > SEGMENT_TARGET * 4 {
            (step / 2).max(1)
        } else {
            step
        })
    }
}

/// The lease row as this server last read it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Known {
    pub(crate) term: i64,
    pub(crate) holder: String,
    pub(crate) address: String,
    /// Some server's lease ran when read.
    pub(crate) led: bool,
    /// That server is this one.
    pub(crate) mine: bool,
}

impl Known {
    fn of(tag: &OrderedTag, holder: &str) -> Self {
        Self {
            term: tag.term,
            holder: tag.holder.clone(),
            address: tag.address.clone(),
            led: tag.led(),
            mine: tag.holder == holder && tag.led(),
        }
    }
}

/// One ordered tag on this server.
#[derive(Debug)]
pub(crate) struct TagLead {
    pub(crate) tag: String,
    issuer: tokio::sync::Mutex<Issuer>,
    known: parking_lot::Mutex<Known>,
    /// When the lease row was last read or written: the calls that find no leader look it up
    /// again, at most this often.
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
    pub(crate) queue: Arc<ForwardQueue>,
    /// IDs issued as the leader, terms begun, for the metrics.
    pub(crate) issued: AtomicU64,
    pub(crate) terms: AtomicU64,
    /// The tag is no longer ordered: its task ends.
    pub(crate) removed: AtomicBool,
}

impl TagLead {
    pub(crate) fn new(tag: &str, ctx: &Ctx) -> Self {
        Self {
            tag: tag.to_owned(),
            issuer: tokio::sync::Mutex::new(Issuer::default()),
            known: parking_lot::Mutex::new(Known::default()),
            last_attempt: tokio::sync::Mutex::new(None),
            queue: Arc::new(ForwardQueue::new(
                tag,
                ctx.batch_cap,
                super::forward::forward_timeout(ctx.settings.lease),
                Arc::clone(&ctx.channels),
            )),
            issued: AtomicU64::new(0),
            terms: AtomicU64::new(0),
            removed: AtomicBool::new(false),
        }
    }

    /// The lease as last read.
    pub(crate) fn known(&self) -> Known {
        self.known.lock().clone()
    }

    /// Renew or take the lease, unless that was done less than `min_gap` ago.
    pub(crate) async fn attempt(&self, ctx: &Ctx, min_gap: Duration) {
        let mut last = self.last_attempt.lock().await;
        if last.is_some_and(|at| at.elapsed() < min_gap) {
            return;
        }
        *last = Some(Instant::now());
        // A server the others cannot reach (gRPC off) still leads for its own callers; the
        // others, finding no address, wait for a leader they can reach.
        let address = ctx.address.as_deref().unwrap_or("");
        // Before the store hears of it: the lease the store grants runs from later than this.
        let sent = Instant::now();
        let lead = tokio::time::timeout(
            ctx.settings.renew_every(),
            ctx.store.lead_ordered(
                &self.tag,
                &ctx.holder,
                address,
                ctx.settings.lease,
                ctx.settings.settle(),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::InvalidInput(
                "the store did not answer within a third of a lease".into(),
            ))
        });
        match lead {
            Ok(Lead::Leading { tag, new_term }) => {
                let mut issuer = self.issuer.lock().await;
                if new_term || issuer.term != tag.term {
                    issuer.begin(tag.term);
                    // Relaxed: a count for the metrics.
                    self.terms.fetch_add(1, Ordering::Relaxed);
                    info!(
                        tag = self.tag,
                        term = tag.term,
                        "this server leads the ordered tag"
                    );
                }
                issuer.valid_until = Some(sent + ctx.settings.own_lease());
                *self.known.lock() = Known::of(&tag, &ctx.holder);
            }
            Ok(Lead::Follower(tag)) => {
                let mut issuer = self.issuer.lock().await;
                if issuer.term != 0 {
                    info!(
                        tag = self.tag,
                        term = issuer.term,
                        leader = tag.holder,
                        "this server no longer leads the ordered tag"
                    );
                    issuer.begin(0);
                }
                *self.known.lock() = Known::of(&tag, &ctx.holder);
            }
            Err(StoreError::NotOrdered(_)) => {
                self.issuer.lock().await.begin(0);
                self.removed.store(true, Ordering::SeqCst);
            }
            // The account of the lease runs out by itself: nothing to undo.
            Err(error) => {
                warn!(tag = self.tag, %error, "cannot renew or take the ordered tag's lease")
            }
        }
    }

    /// `n` IDs issued here, when this server leads the tag.
    pub(crate) async fn take_local(&self, ctx: &Ctx, n: usize) -> Result<Vec<i64>, OrderedError> {
        let mut issuer = self.issuer.lock().await;
        if !issuer.leads(Instant::now()) {
            return Err(OrderedError::NotLeading(self.tag.clone()));
        }
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            let Some(range) = issuer.ranges.front_mut() else {
                self.claim(ctx, &mut issuer).await?;
                continue;
            };
            let want = i64::try_from(n - ids.len()).unwrap_or(i64::MAX);
            let end = range.start.saturating_add(want).min(range.end);
            ids.extend(range.start..end);
            range.start = end;
            if range.is_empty() {
                issuer.ranges.pop_front();
            }
        }
        // After the numbers are taken: an answer is given only if the lease still ran then.
        if !issuer.leads(Instant::now()) {
            issuer.begin(0);
            return Err(OrderedError::NotLeading(self.tag.clone()));
        }
        if let Some(&last) = ids.last() {
            issuer.floor = last;
        }
        // Relaxed: a count for the metrics.
        self.issued.fetch_add(ids.len() as u64, Ordering::Relaxed);
        Ok(ids)
    }

    /// Claim the next segment under the issuer's term, above everything issued in it.
    async fn claim(&self, ctx: &Ctx, issuer: &mut Issuer) -> Result<(), OrderedError> {
        let step = issuer.next_step(ctx.max_step);
        let claim = tokio::time::timeout(
            ctx.settings.lease,
            ctx.store
                .claim_ordered_segment(&self.tag, &ctx.holder, issuer.term, step),
        )
        .await;
        match claim {
            Ok(Ok(claim)) => {
                let range = claim.range();
                issuer.step = Some(claim.step);
                issuer.claimed_at = Some(Instant::now());
                // Claims only rise; kept all the same, as the order rests on it.
                let start = range.start.max(issuer.floor.saturating_add(1));
                if start < range.end {
                    issuer.ranges.push_back(start..range.end);
                }
                Ok(())
            }
            Ok(Err(StoreError::LeadLost { .. } | StoreError::NotOrdered(_))) => {
                issuer.begin(0);
                Err(OrderedError::NotLeading(self.tag.clone()))
            }
            Ok(Err(error)) => Err(OrderedError::Store(error)),
            Err(_) => Err(OrderedError::NoLeader {
                tag: self.tag.clone(),
                waited_ms: u64::try_from(ctx.settings.lease.as_millis()).unwrap_or(u64::MAX),
                last: "the store did not answer a segment claim".into(),
            }),
        }
    }

    /// `n` IDs: issued here while this server leads, else forwarded to the leader; waiting
    /// for a leader up to `ordered.wait_ms`.
    pub(crate) async fn take(
        &self,
        ctx: &Ctx,
        n: usize,
        auth: Option<&str>,
    ) -> Result<Vec<i64>, OrderedError> {
        let started = Instant::now();
        let deadline = started + ctx.settings.wait;
        let mut last = String::from("no leader yet");
        loop {
            match self.take_local(ctx, n).await {
                Err(OrderedError::NotLeading(_)) => {}
                Err(OrderedError::NoLeader { last: why, .. }) => last = why,
                done => return done,
            }
            let known = self.known();
            if known.led && !known.mine && !known.address.is_empty() {
                match self.queue.forward(&known.address, n, auth).await {
                    Ok(ids) => return Ok(ids),
                    Err(ForwardFailure::Final(status)) => {
                        return Err(OrderedError::Refused(status));
                    }
                    Err(ForwardFailure::Retry(why)) => last = why,
                }
            }
            if self.removed.load(Ordering::SeqCst) {
                return Err(OrderedError::Store(StoreError::NotOrdered(
                    self.tag.clone(),
                )));
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(OrderedError::NoLeader {
                    tag: self.tag.clone(),
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    last,
                });
            }
            self.attempt(ctx, Duration::from_millis(20)).await;
            let known_now = self.known();
            if !(known_now.led && known_now.term != known.term) {
                tokio::time::sleep((deadline - now).min(Duration::from_millis(20))).await;
            }
        }
    }

    /// At a clean stop: stop issuing, then end the lease so that a successor need not wait
    /// for it to run out.
    pub(crate) async fn resign(&self, ctx: &Ctx) {
        let term = {
            let mut issuer = self.issuer.lock().await;
            let term = issuer.term;
            issuer.begin(0);
            term
        };
        if term != 0
            && let Err(error) = ctx.store.resign_ordered(&self.tag, &ctx.holder, term).await
        {
            warn!(tag = self.tag, %error, "cannot end the ordered tag's lease; it runs out by itself");
        }
    }

    /// Whether this server leads the tag now, and in which term.
    pub(crate) async fn leading(&self) -> Option<i64> {
        let issuer = self.issuer.lock().await;
        issuer.leads(Instant::now()).then_some(issuer.term)
    }
}
