//! Ordered tags (issue 35): biz tags whose IDs strictly increase across the whole cluster. If
//! one call for the tag returns before another starts, on any server, the second's ID is
//! larger; and no ID repeats.
//!
//! One server at a time, the tag's leader, issues its IDs: it holds the tag's lease in the
//! store (`leaf_alloc_ordered`, [`uidgen_store::Store::lead_ordered`]) and claims the tag's
//! segments under its term. Every other server forwards the tag's calls to it over gRPC,
//! batched ([`forward`]). Every server looks at each ordered tag's lease every third of a
//! lease: the leader renews it, the others learn who leads, and the first to see it run out
//! begins the next term. docs/OPERATIONS.md, "Ordered tags", has the argument, the clock
//! assumption and the figures.

mod error;
pub mod forward;
mod lead;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use parking_lot::RwLock;
use serde::Serialize;
use tracing::warn;
use uidgen_store::Store;
use utoipa::ToSchema;

pub use error::OrderedError;
use forward::Channels;
use lead::{Ctx, TagLead};

use crate::config::ordered::OrderedSettings;

/// The ordered tags of this server, with their leads.
#[derive(Debug)]
pub struct OrderedTags {
    ctx: Arc<Ctx>,
    tags: RwLock<HashMap<String, Arc<TagLead>>>,
    /// `tags` is not empty: every plain segment call asks [`is_ordered`](Self::is_ordered),
    /// and without an ordered tag it answers from this flag, not the lock's shared line.
    any: std::sync::atomic::AtomicBool,
    /// When a failed plain call last had the list read ([`refresh_soon`](Self::refresh_soon)).
    last_refresh: parking_lot::Mutex<Option<std::time::Instant>>,
}

/// An ordered tag as `/v1/segments` shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct OrderedView {
    /// The current term (0 before the first leader).
    pub term: i64,
    /// The leader of the term, as last read (`host:pid:…`; empty before the first).
    pub leader: String,
    /// Where the other servers forward to.
    pub leader_address: String,
    /// This server leads the tag now.
    pub leading: bool,
    /// Calls this server forwarded to the leader, and the forwards they went in.
    pub forwarded_calls: u64,
    /// Forwards sent (each carries one or more calls).
    pub forward_batches: u64,
    /// IDs this server issued as the leader.
    pub issued: u64,
    /// Terms this server began.
    pub terms_led: u64,
}

impl OrderedTags {
    /// Start looking after the ordered tags of `store`: read their list now and every third of
    /// a lease, and lead or follow each. `address`: where the others reach this server's gRPC
    /// port (`None`: they cannot; it leads for its own callers only). `ca_pem`: with TLS on,
    /// what the leaders' certificates are checked against when forwarding.
    pub async fn start(
        store: Store,
        settings: OrderedSettings,
        address: Option<String>,
        max_step: i64,
        batch_cap: usize,
        ca_pem: Option<Vec<u8>>,
    ) -> Arc<Self> {
        let holder = format!(
            "{}:{}:{:08x}",
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|name| name.trim().to_owned())
                .unwrap_or_else(|_| "host".into()),
            std::process::id(),
            fastrand::u32(..)
        );
        let ordered = Arc::new(Self {
            ctx: Arc::new(Ctx {
                store,
                settings,
                holder,
                address,
                max_step,
                batch_cap,
                channels: Arc::new(Channels::new(ca_pem)),
            }),
            tags: RwLock::new(HashMap::new()),
            any: std::sync::atomic::AtomicBool::new(false),
            last_refresh: parking_lot::Mutex::new(None),
        });
        ordered.sync().await;
        tokio::spawn(sync_loop(Arc::downgrade(&ordered)));
        ordered
    }

    /// The store the leases live in.
    pub fn store(&self) -> &Store {
        &self.ctx.store
    }

    /// Read the list of ordered tags now (after this server marked or unmarked one).
    pub async fn refresh(self: &Arc<Self>) {
        self.sync().await;
    }

    /// [`refresh`](Self::refresh) unless the list was read less than 100 ms ago: after a
    /// plain call of a tag failed (it may have been marked ordered since the last read), at a
    /// rate a store outage's failing calls cannot turn into a flood.
    pub async fn refresh_soon(self: &Arc<Self>) {
        {
            let mut last = self.last_refresh.lock();
            if last.is_some_and(|at| at.elapsed() < Duration::from_millis(100)) {
                return;
            }
            *last = Some(std::time::Instant::now());
        }
        self.sync().await;
    }

    /// This server's holder name in the lease rows.
    pub fn holder(&self) -> &str {
        &self.ctx.holder
    }

    /// Whether `tag` is ordered, as last read (every third of a lease).
    pub fn is_ordered(&self, tag: &str) -> bool {
        // Relaxed: a tag marked meanwhile is seen at the next read, as with the lock; the
        // store refuses its plain claims until then.
        self.any.load(Ordering::Relaxed) && self.tags.read().contains_key(tag)
    }

    /// `n` IDs of ordered `tag`: issued here while this server leads it, else forwarded to the
    /// leader with the caller's `authorization`.
    pub async fn take(
        &self,
        tag: &str,
        n: usize,
        auth: Option<&str>,
    ) -> Result<Vec<i64>, OrderedError> {
        let lead = self.lead_of(tag)?;
        lead.take(&self.ctx, n, auth).await
    }

    /// `n` IDs of `tag` for a forwarded call: issued here if this server leads it, else
    /// [`OrderedError::NotLeading`] (never forwarded again).
    pub async fn take_forwarded(&self, tag: &str, n: usize) -> Result<Vec<i64>, OrderedError> {
        self.lead_of(tag)?.take_local(&self.ctx, n).await
    }

    fn lead_of(&self, tag: &str) -> Result<Arc<TagLead>, OrderedError> {
        self.tags
            .read()
            .get(tag)
            .cloned()
            .ok_or_else(|| OrderedError::NotLeading(tag.to_owned()))
    }

    /// Every ordered tag's view, by tag.
    pub async fn views(&self) -> Vec<(String, OrderedView)> {
        let leads: Vec<Arc<TagLead>> = self.tags.read().values().cloned().collect();
        let mut views = Vec::with_capacity(leads.len());
        for lead in leads {
            let known = lead.known();
            let leading = lead.leading().await;
            // Relaxed (four): counts for the metrics.
            views.push((
                lead.tag.clone(),
                OrderedView {
                    term: leading.unwrap_or(known.term),
                    leader: known.holder,
                    leader_address: known.address,
                    leading: leading.is_some(),
                    forwarded_calls: lead.queue.calls.load(Ordering::Relaxed),
                    forward_batches: lead.queue.batches.load(Ordering::Relaxed),
                    issued: lead.issued.load(Ordering::Relaxed),
                    terms_led: lead.terms.load(Ordering::Relaxed),
                },
            ));
        }
        views.sort_by(|a, b| a.0.cmp(&b.0));
        views
    }

    /// At a clean stop, after the servers stopped taking calls: stop issuing and end every
    /// lease this server holds, so that the successors begin at once.
    pub async fn resign(&self) {
        let leads: Vec<Arc<TagLead>> = self.tags.read().values().cloned().collect();
        for lead in leads {
            lead.resign(&self.ctx).await;
        }
    }

    /// Read the list of ordered tags: new ones get a lead, gone ones are dropped, and every
    /// lead looks at its lease.
    async fn sync(self: &Arc<Self>) {
        let listed = match self.ctx.store.ordered_tags().await {
            Ok(listed) => listed,
            Err(error) => {
                warn!(%error, "cannot read the list of ordered tags");
                return;
            }
        };
        let kept: Vec<Arc<TagLead>> = {
            let mut tags = self.tags.write();
            tags.retain(|tag, lead| {
                let keep = listed.iter().any(|t| &t.biz_tag == tag);
                if !keep {
                    lead.removed.store(true, Ordering::SeqCst);
                }
                keep
            });
            for row in &listed {
                if !tags.contains_key(&row.biz_tag) {
                    let lead = Arc::new(TagLead::new(&row.biz_tag, &self.ctx));
                    tags.insert(row.biz_tag.clone(), lead);
                }
            }
            // Relaxed: written under the write lock, read before the read lock it guards.
            self.any.store(!tags.is_empty(), Ordering::Relaxed);
            tags.values().cloned().collect()
        };
        for lead in kept {
            lead.attempt(&self.ctx, Duration::ZERO).await;
        }
    }
}

/// Look at the list and every lease every third of a lease, while the tags are alive.
async fn sync_loop(ordered: std::sync::Weak<OrderedTags>) {
    loop {
        let every = match ordered.upgrade() {
            Some(ordered) => ordered.ctx.settings.renew_every(),
            None => return,
        };
        tokio::time::sleep(every).await;
        match ordered.upgrade() {
            Some(ordered) => ordered.sync().await,
            None => return,
        }
    }
}
