//! The peer list: round-robin, per-call timeouts, retries with backoff on another peer (each
//! pause jittered, [`crate::jitter`]), and ejection of failing peers with re-probing.
//!
//! A peer whose call fails with [`Failure::Down`] is ejected for `eject_for`: calls skip it
//! while another peer is healthy. Once its ejection ends, the next call that reaches it in
//! the rotation probes it; when every peer is ejected, the one whose ejection ends first is
//! probed at once, so a recovered server is found by the next call, not after a timer.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::error::{ClientError, Result};
use crate::jitter::Jitter;
use crate::transport::{Bearer, Connection, Failure, Peer, refused};

/// How calls on peers are made.
#[derive(Debug, Clone)]
pub(crate) struct CallPolicy {
    pub timeout: Duration,
    pub attempts: usize,
    pub backoff: Duration,
    pub max_backoff: Duration,
    pub eject_for: Duration,
}

#[derive(Debug)]
struct Slot {
    peer: Peer,
    connection: Connection,
    /// Milliseconds since the set's start until which the peer is skipped; 0 when healthy.
    ejected_until_ms: AtomicU64,
    /// Whether the peer's layout and worker id were checked since it last came up (a
    /// restarted server may hold another worker id).
    checked: AtomicBool,
}

/// The peers of one client.
#[derive(Debug)]
pub(crate) struct PeerSet {
    slots: Vec<Slot>,
    next: AtomicUsize,
    policy: CallPolicy,
    started: Instant,
    /// This client's spread of the pauses between tries, so clients do not retry together.
    jitter: Jitter,
}

/// A successful call: which peer answered, whether it needs its check, and the answer.
pub(crate) struct Answer<T> {
    pub peer: usize,
    pub unchecked: bool,
    pub value: T,
}

impl PeerSet {
    pub(crate) fn new(
        peers: &[Peer],
        policy: CallPolicy,
        token: Option<&str>,
        tls_root: Option<&[u8]>,
    ) -> Result<Self> {
        let bearer = Bearer::new(token)?;
        let http = reqwest::Client::builder()
            .default_headers(bearer.http_headers())
            .timeout(policy.timeout)
            .connect_timeout(policy.timeout)
            .build()
            .map_err(|e| crate::error::invalid("peers", format!("HTTP client: {e}")))?;
        let slots = peers
            .iter()
            .map(|peer| {
                Ok(Slot {
                    peer: peer.clone(),
                    connection: Connection::new(peer, &http, policy.timeout, &bearer, tls_root)?,
                    ejected_until_ms: AtomicU64::new(0),
                    checked: AtomicBool::new(false),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            slots,
            next: AtomicUsize::new(0),
            policy,
            started: Instant::now(),
            jitter: Jitter::new(),
        })
    }

    pub(crate) fn peer(&self, index: usize) -> &Peer {
        &self.slots[index].peer
    }

    pub(crate) fn connection(&self, index: usize) -> &Connection {
        &self.slots[index].connection
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The peers, for messages.
    pub(crate) fn names(&self) -> String {
        self.slots
            .iter()
            .map(|slot| slot.peer.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The peer to try next: the first healthy (or re-probable) one in the rotation from
    /// `start`, else the one whose ejection ends first.
    fn pick(&self, start: usize) -> usize {
        let now = self.now_ms();
        let n = self.slots.len();
        let mut earliest = (u64::MAX, start % n);
        for offset in 0..n {
            let index = (start + offset) % n;
            // Relaxed: a hint for choosing a peer; a stale value only costs one failed try.
            let until = self.slots[index].ejected_until_ms.load(Ordering::Relaxed);
            if until <= now {
                return index;
            }
            if until < earliest.0 {
                earliest = (until, index);
            }
        }
        earliest.1
    }

    fn eject(&self, index: usize) {
        let until = self
            .now_ms()
            .saturating_add(u64::try_from(self.policy.eject_for.as_millis()).unwrap_or(u64::MAX))
            .max(1);
        let slot = &self.slots[index];
        // Relaxed: both are hints read by `pick` and the layout check; no data hangs on them.
        slot.ejected_until_ms.store(until, Ordering::Relaxed);
        slot.checked.store(false, Ordering::Relaxed);
    }

    /// True when every peer is ejected right now (the client is in an outage).
    pub(crate) fn all_ejected(&self) -> bool {
        let now = self.now_ms();
        self.slots
            .iter()
            // Relaxed: a hint, as in `pick`.
            .all(|slot| slot.ejected_until_ms.load(Ordering::Relaxed) > now)
    }

    /// Call `op` on peers in turn until one answers: each try bounded by the timeout, a
    /// failed peer ejected, a pause that doubles between tries (each slept as a random part of
    /// it, from half to all: see [`crate::jitter`]). A refusal ends the call.
    ///
    /// Cancel safety: cancelling drops the call in flight; nothing is left half done here
    /// (what the server did with it is the server's: a lease it granted is skipped).
    pub(crate) async fn call<T, F, Fut>(&self, mut op: F) -> Result<Answer<T>>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        // Relaxed: only spreads calls over peers; any interleaving is a fair rotation.
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last_error = String::from("no peer tried");
        let mut pause = self.policy.backoff;
        for attempt in 0..self.policy.attempts {
            if attempt > 0 {
                tokio::time::sleep(self.jitter.spread(pause)).await;
                pause = (pause * 2).min(self.policy.max_backoff);
            }
            let index = self.pick(start.wrapping_add(attempt));
            let slot = &self.slots[index];
            let outcome =
                tokio::time::timeout(self.policy.timeout, op(slot.connection.clone())).await;
            match outcome {
                Ok(Ok(value)) => {
                    // Relaxed: hints, as in `eject`.
                    slot.ejected_until_ms.store(0, Ordering::Relaxed);
                    let unchecked = !slot.checked.swap(true, Ordering::Relaxed);
                    return Ok(Answer {
                        peer: index,
                        unchecked,
                        value,
                    });
                }
                Ok(Err(Failure::Refused(message) | Failure::Gone(message))) => {
                    return Err(refused(&slot.peer, &message));
                }
                Ok(Err(failure)) => {
                    last_error = format!("{}: {}", slot.peer, failure.message());
                    tracing::debug!(peer = %slot.peer, error = failure.message(),
                        "peer failed; ejected");
                    self.eject(index);
                }
                Err(_) => {
                    last_error = format!(
                        "{}: no answer within {} ms",
                        slot.peer,
                        self.policy.timeout.as_millis()
                    );
                    self.eject(index);
                }
            }
        }
        Err(ClientError::AllPeersDown {
            peers: self.names(),
            last_error,
        })
    }
}

/// How [`PeerSet::call_each`] ended.
pub(crate) enum Quiet<T> {
    /// A peer answered: which one, and the answer.
    Answered { peer: usize, value: T },
    /// A peer refused the request itself; `gone` when it said that what the request names
    /// is gone for good (a fallback lease taken over or released).
    Refused {
        peer: String,
        message: String,
        gone: bool,
    },
    /// No peer answered; the last failure seen.
    AllDown { last_error: String },
}

impl PeerSet {
    /// Call `op` on each peer once, in rotation, until one answers or refuses. Nothing else
    /// changes: no ejection, no retry round, no check state. For the fallback lease calls,
    /// which must not take a server out of the ID rotation because its store or its fallback
    /// range failed them.
    ///
    /// Cancel safety: as for [`call`](Self::call).
    pub(crate) async fn call_each<T, F, Fut>(&self, mut op: F) -> Quiet<T>
    where
        F: FnMut(Connection) -> Fut,
        Fut: std::future::Future<Output = Result<T, Failure>>,
    {
        // Relaxed: only spreads calls over peers, as in `call`.
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let mut last_error = String::from("no peer tried");
        for offset in 0..self.slots.len() {
            let index = self.pick(start.wrapping_add(offset));
            let slot = &self.slots[index];
            let outcome =
                tokio::time::timeout(self.policy.timeout, op(slot.connection.clone())).await;
            match outcome {
                Ok(Ok(value)) => return Quiet::Answered { peer: index, value },
                Ok(Err(Failure::Down(message))) => {
                    last_error = format!("{}: {message}", slot.peer);
                }
                Ok(Err(failure)) => {
                    return Quiet::Refused {
                        peer: slot.peer.to_string(),
                        gone: matches!(failure, Failure::Gone(_)),
                        message: failure.message().to_owned(),
                    };
                }
                Err(_) => {
                    last_error = format!(
                        "{}: no answer within {} ms",
                        slot.peer,
                        self.policy.timeout.as_millis()
                    );
                }
            }
        }
        Quiet::AllDown { last_error }
    }

    /// Have the peer checked again on its next answer (its check could not run now).
    pub(crate) fn mark_unchecked(&self, index: usize) {
        // Relaxed: a hint, as in `eject`.
        self.slots[index].checked.store(false, Ordering::Relaxed);
    }
}
