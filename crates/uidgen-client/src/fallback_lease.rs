//! The leased fallback's worker id: claimed from a server while one answers, renewed every
//! third of its ttl, kept with its reserved-until mark in a state file, given back on
//! [`Client::close`](crate::Client::close).
//!
//! Invariants:
//! - the fallback issues only under a lease a server granted (or one an earlier process left
//!   in the state directory, unexpired, while no server answers), fenced by it
//!   ([`RemoteLease`]): IDs end by its last confirmed `valid_until` and start above its floor;
//! - a renewal's `valid_until` is believed only once a server answered that the store accepted
//!   it; a renewal refused because the lease was taken over or released ends the lease at
//!   once, deletes its state file, and the next claim asks for a new one;
//! - one lease per client: `current` changes only in the keeper's task (and at `close`);
//! - while the keeper is about to have a lease (a restart continuing the lease an earlier
//!   process left: waiting for that process's lock to go, or for the clock to pass the file's
//!   mark), callers wait for it, up to the client's `wait`, and are told what it waits for and
//!   until when if it does not come.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use tokio::sync::Notify;
use tokio::time::Instant;
use uidgen_core::clock::saturating_millis;
use uidgen_core::{
    Clock, DefaultUidGenerator, Layout, SystemClock, TimeFence, UidError, UidGenerator,
};
use uidgen_worker::RemoteLease;

use crate::error::{ClientError, Result};
use crate::fallback_rpc::Granted;
use crate::peers::{PeerSet, Quiet};

/// How the keeper checks the layout a server grants a lease under: the fallback's check, which
/// disables the fallback on a mismatch (`Fallback::check_layout`). Passed in, so the keeper
/// needs nothing of the fallback that owns it.
pub(crate) type CheckLayout<'a> = &'a (dyn Fn(&str, String) -> Result<()> + Send + Sync);

/// A lease in use and the generator it fences.
#[derive(Debug)]
pub(crate) struct Held {
    lease: Arc<RemoteLease>,
    generator: DefaultUidGenerator<SystemClock>,
}

impl Held {
    pub(crate) fn new(layout: &Layout, lease: RemoteLease) -> Result<Self> {
        let lease = Arc::new(lease);
        let generator = DefaultUidGenerator::new(layout.clone(), lease.worker_id(), SystemClock)?
            .fenced(Arc::clone(&lease) as Arc<dyn TimeFence>);
        Ok(Self { lease, generator })
    }

    pub(crate) fn worker_id(&self) -> u64 {
        self.lease.worker_id()
    }

    fn next_id(&self) -> uidgen_core::Result<u64> {
        let id = self.generator.next_id()?;
        // SeqCst: pairs with the fence in `RemoteLease::let_go`, which ends the lease and then
        // reads how far this generator issued: either that read sees this ID's unit, or this
        // load sees the end and the ID is dropped.
        fence(Ordering::SeqCst);
        if self.lease.is_ended() {
            return Err(UidError::GeneratorStopped(
                self.lease.ended_reason().unwrap_or_default(),
            ));
        }
        Ok(id)
    }

    /// What to tell the store this lease issued up to.
    fn issued_until_ms(&self) -> u64 {
        if let Some(ms) = self.generator.issued_until_ms() {
            self.lease.record_issued_until(ms);
        }
        self.lease.issued_until_ms()
    }
}

/// What a step of the keeper asks for next.
pub(crate) enum Next {
    /// Renew after a third of the ttl.
    Renewal,
    /// Try again soon: no server answered.
    Soon,
    /// Go on at once (a lease was lost: claim a new one).
    Now,
}

/// The leased fallback's state.
#[derive(Debug)]
pub(crate) struct LeaseKeeper {
    pub(crate) layout: Layout,
    pub(crate) state_dir: PathBuf,
    pub(crate) ttl: Duration,
    name: String,
    current: RwLock<Option<Arc<Held>>>,
    /// Why there is no lease now, for [`ClientError::NoFallbackLease`].
    why_none: Mutex<String>,
    /// What the last server to answer said of this client's lease (a refusal or a loss): kept
    /// when every server goes quiet afterwards, so the error still says why the lease went.
    last_answer: Mutex<Option<String>>,
    /// Until when callers may wait for a lease the keeper is about to have (`why_none` says
    /// what it waits for); `None` when it is not about to have one.
    coming_until: Mutex<Option<Instant>>,
    /// Woken whenever `current` or `coming_until` changes.
    changed: Notify,
}

impl LeaseKeeper {
    pub(crate) fn new(layout: Layout, state_dir: PathBuf, ttl: Duration, name: String) -> Self {
        Self {
            layout,
            state_dir,
            ttl,
            name,
            current: RwLock::new(None),
            why_none: Mutex::new("no server has been asked for one yet".to_owned()),
            last_answer: Mutex::new(None),
            coming_until: Mutex::new(None),
            changed: Notify::new(),
        }
    }

    /// The lease in use, if any.
    pub(crate) fn held(&self) -> Option<Arc<Held>> {
        self.current.read().clone()
    }

    /// The current lease's `valid_until`, if any.
    pub(crate) fn valid_until_ms(&self) -> Option<u64> {
        self.held().map(|held| held.lease.valid_until_ms())
    }

    pub(crate) fn set_current(&self, held: Option<Arc<Held>>) -> Option<Arc<Held>> {
        let previous = std::mem::replace(&mut *self.current.write(), held);
        self.changed.notify_waiters();
        previous
    }

    /// A lease is coming (`why` says what the keeper waits for): callers may wait until
    /// `until` for it.
    pub(crate) fn set_coming(&self, why: String, until: Instant) {
        self.set_why_none(why);
        *self.coming_until.lock() = Some(until);
        self.changed.notify_waiters();
    }

    /// No lease is coming any more (it came, or the wait for it ended).
    fn clear_coming(&self) {
        *self.coming_until.lock() = None;
        self.changed.notify_waiters();
    }

    fn coming_until(&self) -> Option<Instant> {
        *self.coming_until.lock()
    }

    pub(crate) fn set_why_none(&self, why: String) {
        *self.why_none.lock() = why;
    }

    /// Why there is no lease, as a server said it: also kept as the last answer.
    fn set_answered_why_none(&self, why: String) {
        *self.last_answer.lock() = Some(why.clone());
        self.set_why_none(why);
    }

    /// Why there is no lease when no server answers: `why`, and what the last server to answer
    /// said, if one ever did.
    pub(crate) fn set_unanswered_why_none(&self, why: String) {
        let last = self.last_answer.lock().clone();
        self.set_why_none(match last {
            Some(last) => format!("{why}; the last server to answer said: {last}"),
            None => why,
        });
    }

    fn why_none(&self) -> String {
        self.why_none.lock().clone()
    }

    fn ttl_ms(&self) -> u64 {
        saturating_millis(self.ttl)
    }

    /// One ID under the lease; every peer is down (`peers`, `last_error`). While the keeper is
    /// about to have a lease (a restart continuing the one an earlier process left), waits for
    /// it up to `wait`.
    ///
    /// Cancel safety: an ID is taken only when the call returns it.
    pub(crate) async fn next_id(
        &self,
        peers: &str,
        last_error: &str,
        wait: Duration,
    ) -> Result<u64> {
        let no_lease = |reason: String| ClientError::NoFallbackLease {
            peers: peers.to_owned(),
            last_error: last_error.to_owned(),
            reason,
        };
        let deadline = Instant::now() + wait;
        let held = loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the checks, so a change in between still wakes us.
            changed.as_mut().enable();
            if let Some(held) = self.held() {
                break held;
            }
            let until = match self.coming_until() {
                Some(coming) if coming.min(deadline) > Instant::now() => coming.min(deadline),
                _ => return Err(no_lease(self.why_none())),
            };
            let _ = tokio::time::timeout_at(until, changed).await;
        };
        match held.next_id() {
            Ok(id) => Ok(id),
            Err(UidError::BeyondFence { .. }) => Err(ClientError::FallbackLeaseExpired {
                peers: peers.to_owned(),
                worker_id: held.worker_id(),
                valid_until_ms: held.lease.valid_until_ms(),
            }),
            Err(UidError::GeneratorStopped(reason)) => Err(no_lease(format!(
                "the lease on worker id {} ended: {reason}",
                held.worker_id()
            ))),
            Err(error) => Err(ClientError::FallbackIssue(error)),
        }
    }

    /// Take a lease: from a server, or, when none answers, one an earlier process left in the
    /// state directory.
    async fn obtain(&self, check_layout: CheckLayout<'_>, peers: &PeerSet) -> Next {
        let (name, ttl_ms) = (self.name.as_str(), self.ttl_ms());
        let answer = peers
            .call_each(|connection| async move { connection.claim_fallback(name, ttl_ms).await })
            .await;
        match answer {
            Quiet::Answered { peer, value } => {
                let peer = peers.peer(peer).to_string();
                self.start(check_layout, peers, &peer, value).await
            }
            Quiet::Refused { peer, message, .. } => {
                self.set_answered_why_none(format!("{peer} refused to lease one: {message}"));
                tracing::warn!(%peer, message, "uidgen client: no fallback lease");
                Next::Renewal
            }
            Quiet::AllDown { last_error, .. } => {
                let next = self.resume(&last_error).await;
                self.clear_coming();
                next
            }
        }
    }

    /// Keep a lease `peer` granted: check its layout, lock its state file and wait for the
    /// clock to pass its floor. Handed back if it cannot be kept.
    async fn start(
        &self,
        check_layout: CheckLayout<'_>,
        peers: &PeerSet,
        peer: &str,
        granted: Granted,
    ) -> Next {
        let Granted { grant, layout } = granted;
        if let Err(error) = check_layout(peer, layout) {
            self.set_why_none(error.to_string());
            self.give_back(peers, grant.worker_id, &grant.holder, 0)
                .await;
            return Next::Renewal;
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let kept = match RemoteLease::start(&self.state_dir, &self.layout, &grant, clock).await {
            Ok(Some(lease)) => Held::new(&self.layout, lease).map_err(|e| e.to_string()),
            Ok(None) => Err(format!(
                "another process holds {}; asked for another lease",
                RemoteLease::state_file(&self.state_dir, grant.worker_id).display()
            )),
            Err(error) => Err(error.to_string()),
        };
        match kept {
            Ok(held) => {
                tracing::info!(
                    worker_id = grant.worker_id,
                    valid_until_ms = grant.valid_until_ms,
                    %peer,
                    "uidgen client: leased a fallback worker id"
                );
                *self.last_answer.lock() = None;
                self.set_current(Some(Arc::new(held)));
                Next::Renewal
            }
            Err(reason) => {
                tracing::warn!(
                    worker_id = grant.worker_id,
                    reason,
                    "uidgen client: cannot keep the fallback lease; handing it back"
                );
                self.set_why_none(format!(
                    "the lease on worker id {} could not be kept: {reason}",
                    grant.worker_id
                ));
                self.give_back(peers, grant.worker_id, &grant.holder, grant.floor_ms)
                    .await;
                Next::Soon
            }
        }
    }

    /// Renew the lease in use.
    async fn renew(&self, peers: &PeerSet, held: &Held) -> Next {
        let (id, holder) = (held.worker_id(), held.lease.holder());
        let (ttl_ms, issued) = (self.ttl_ms(), held.issued_until_ms());
        let answer = peers
            .call_each(|connection| async move {
                connection.renew_fallback(id, holder, ttl_ms, issued).await
            })
            .await;
        match answer {
            Quiet::Answered { value, .. } => {
                held.lease.confirm(value);
                Next::Renewal
            }
            Quiet::Refused {
                peer,
                message,
                gone: true,
            } => {
                let reason = format!("{peer} says it is not this client's any more: {message}");
                tracing::error!(
                    worker_id = id,
                    reason,
                    "uidgen client: fallback lease lost; it no longer issues on that worker id"
                );
                held.lease.lose(&reason);
                self.set_current(None);
                self.set_answered_why_none(format!(
                    "the lease on worker id {id} was lost: {reason}"
                ));
                Next::Now
            }
            Quiet::Refused { peer, message, .. } => {
                tracing::warn!(worker_id = id, %peer, message,
                    "uidgen client: a server refused to renew the fallback lease");
                Next::Soon
            }
            Quiet::AllDown { .. } => Next::Soon,
        }
    }

    /// Hand a lease back (best effort: unanswered, it expires).
    async fn give_back(&self, peers: &PeerSet, worker_id: u64, holder: &str, issued: u64) {
        let answer = peers
            .call_each(|connection| async move {
                connection.release_fallback(worker_id, holder, issued).await
            })
            .await;
        if let Quiet::Answered { .. } = answer {
            tracing::info!(worker_id, "uidgen client: released the fallback lease");
        }
    }

    /// Let the lease in use go: no ID is issued under it from now on, its state file is
    /// deleted, and a server records how far it issued and frees it.
    pub(crate) async fn release(&self, peers: &PeerSet) {
        let Some(held) = self.set_current(None) else {
            return;
        };
        self.set_why_none("the client released its lease".to_owned());
        match held.lease.let_go(|| held.generator.issued_until_ms()) {
            Ok(issued) => {
                self.give_back(peers, held.worker_id(), held.lease.holder(), issued)
                    .await;
            }
            Err(error) => {
                // A restart could continue the lease from the file: let it expire instead.
                tracing::warn!(%error, "uidgen client: cannot delete the fallback lease's state \
                    file; the lease is left to expire");
            }
        }
    }

    /// One step: take a lease when there is none, else renew the one in use.
    pub(crate) async fn step(&self, check_layout: CheckLayout<'_>, peers: &PeerSet) -> Next {
        match self.held() {
            None => self.obtain(check_layout, peers).await,
            Some(held) => {
                let next = self.renew(peers, &held).await;
                // A lease continued from the file is renewed soon until a server confirms it.
                match next {
                    Next::Renewal if !held.lease.is_confirmed() => Next::Soon,
                    next => next,
                }
            }
        }
    }

    /// The first step, at connect: a lease now if a server answers.
    pub(crate) async fn first_step(&self, check_layout: CheckLayout<'_>, peers: &PeerSet) {
        if let Next::Now = self.step(check_layout, peers).await {
            self.step(check_layout, peers).await;
        }
    }
}
