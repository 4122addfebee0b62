//! [`EtcdOrderMarks`]: the order marks of ID spaces (issue 33 item 1, "order across
//! restarts") kept in the etcd the worker ids come from, one key per space,
//! `{prefix}/order/{space}`, so that servers which each keep a store of their own (the
//! embedded SQLite) share them.
//!
//! Invariant: the value only rises. A raise reads the key and writes it in a transaction that
//! compares the key's `mod_revision` with the one read (0: absent), so a write that another
//! server's raise overtook in between is not applied; the transaction's failure branch reads
//! the key again, and the raise stops as soon as the value it finds is at least its own.
//! The key has no lease: a mark outlives every holder, as the ids' `marks/` keys do. It sits
//! beside `workers/` and `marks/`, never under them, so their listings do not see it.

use uidgen_worker::{MarkRaise, OrderMarkRecord, order_mark_name};

use crate::error::{EtcdError, Result};
use crate::gateway::{Gateway, Kv, compare_mod, get, put};
use crate::options::EtcdOptions;

/// Conditional writes a raise tries before it reports contention (each one lost means another
/// server wrote the key meanwhile; a raise-only value settles in a few).
const RAISE_ATTEMPTS: u32 = 16;

/// What a failed raise was doing, for its error.
const RAISING: &str = "raising the ID space's order mark";

/// ID spaces' order marks in etcd, for [`OrderFence`](uidgen_worker::OrderFence).
///
/// ```no_run
/// # async fn demo() -> uidgen_etcd::Result<()> {
/// use uidgen_etcd::{EtcdOptions, EtcdOrderMarks};
/// use uidgen_worker::MarkRaise;
/// let options = EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen/order", "10.0.0.7:8080");
/// let marks = EtcdOrderMarks::new(&options)?;
/// assert_eq!(marks.mark_key("default"), "/uidgen/order/order/default");
/// marks.raise(MarkRaise::new("default", "10.0.0.7:8080", 1_800_000_000_000, 0)).await?;
/// // A lower raise: the mark is kept.
/// marks.raise(MarkRaise::new("default", "10.0.0.8:8080", 1_700_000_000_000, 0)).await?;
/// assert_eq!(marks.read("default").await?, Some(1_800_000_000_000));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct EtcdOrderMarks {
    gateway: Gateway,
    prefix: String,
}

impl EtcdOrderMarks {
    /// Marks under `options.prefix` on `options.endpoints` (nothing is asked of etcd yet).
    pub fn new(options: &EtcdOptions) -> Result<Self> {
        Ok(Self {
            gateway: Gateway::new(options)?,
            prefix: options.prefix.clone(),
        })
    }

    /// The key of `space`'s mark.
    pub fn mark_key(&self, space: &str) -> String {
        format!("{}/order/{}", self.prefix, order_mark_name(space))
    }

    /// The space's mark; `None` while no server of the space has written one.
    ///
    /// Cancel safety: a read only.
    pub async fn read(&self, space: &str) -> Result<Option<u64>> {
        let key = self.mark_key(space);
        let kv = self
            .gateway
            .get("reading the ID space's order mark", &key)
            .await?;
        kv.map(|kv| value_of(&kv)).transpose()
    }

    /// Raise the space's mark to `raise.until_ms` unless it is at least that already;
    /// returns the mark as the raise left it (at least `raise.until_ms`).
    ///
    /// Cancel safety: a raise dropped midway may or may not have been applied; either way the
    /// mark did not fall.
    pub async fn raise(&self, raise: MarkRaise<'_>) -> Result<u64> {
        let (key, until_ms) = (self.mark_key(raise.space), raise.until_ms);
        let json = raise.record_json();
        let mut current = self.gateway.get(RAISING, &key).await?;
        for _ in 0..RAISE_ATTEMPTS {
            let revision = match &current {
                Some(kv) => {
                    let mark = value_of(kv)?;
                    if mark >= until_ms {
                        return Ok(mark);
                    }
                    kv.mod_revision
                }
                None => 0,
            };
            let txn = self
                .gateway
                .txn(
                    RAISING,
                    vec![compare_mod(&key, revision)],
                    vec![put(&key, &json, 0)],
                    vec![get(&key)],
                )
                .await?;
            if txn.succeeded {
                return Ok(until_ms);
            }
            // Another server wrote it since the read: look at what it wrote.
            current = txn
                .ranges
                .into_iter()
                .next()
                .and_then(|r| r.into_iter().next());
        }
        Err(EtcdError::Etcd {
            endpoint: key,
            action: RAISING,
            reason: format!(
                "{RAISE_ATTEMPTS} conditional writes lost to other servers raising it at once; \
                 the order fence tries again"
            ),
        })
    }
}

/// The mark a key holds; an error for a value that is not one (someone else's key).
fn value_of(kv: &Kv) -> Result<u64> {
    OrderMarkRecord::mark_in(&kv.value).map_err(|e| EtcdError::Etcd {
        endpoint: kv.key.clone(),
        action: "reading the ID space's order mark",
        reason: format!(
            "the key does not hold an order mark ({e}): remove it or choose another \
                 `etcd.prefix`"
        ),
    })
}

uidgen_worker::order_marks_from!(EtcdOrderMarks, "etcd", read, raise);
