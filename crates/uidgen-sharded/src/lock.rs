//! [`RedisLock`]: a lock that only its holder can release, and that frees itself when the
//! holder dies.
//!
//! The original service took its refill lock with `SETNX key` plus a separate 60 s `EXPIRE`,
//! and deleted the key in a `finally` block whether or not it had got the lock: a server that
//! lost the race deleted the winner's lock, so a third server could refill at the same time.
//! Here:
//! - taking the lock is one command, `SET key token NX PX ttl`: the key and its expiry are set
//!   together (a crash between `SETNX` and `EXPIRE` would leave a lock that never expires);
//! - only a [`RedisLock`] value can release, and only `acquire` makes one, when the `SET`
//!   succeeded: a caller that did not get the lock has nothing to release;
//! - release is a compare-and-delete script that deletes the key only while it still holds
//!   our token: a holder whose lock expired (it was slow) and was taken by another server
//!   cannot delete the new holder's lock;
//! - a holder that dies never releases; its lock expires after `ttl`.
//!
//! - a lock the original service left without an expiry (its `SETNX` succeeded and the process
//!   died before its `EXPIRE`) would block the list for good, beside a running original
//!   service too: a holder that finds the key held and without an expiry gives it the
//!   original's 60 s ([`ORIGINAL_LOCK_TTL`]), the expiry its holder meant to set.
//!
//! The key names are the original's (`keys.rs`), so its servers and uidgen's exclude each other
//! while both refill one Redis. The lock is advisory here: it keeps servers from claiming
//! segments for the same list at once, which would overfill it. Uniqueness never depends on it
//! (every push is a freshly claimed segment; see the crate doc).

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::RedisResult;
use redis::aio::ConnectionLike;

/// Deletes `KEYS[1]` only while it holds `ARGV[1]`: 1 when deleted, 0 when the key was gone
/// or held another token.
static RELEASE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else \
         return 0 end",
    )
});

/// Gives `KEYS[1]` an expiry of `ARGV[1]` ms if it exists without one: 1 when it did.
static EXPIRE_IF_NONE: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        "if redis.call('PTTL', KEYS[1]) == -1 then \
         return redis.call('PEXPIRE', KEYS[1], ARGV[1]) else return 0 end",
    )
});

/// How long the original service's locks live (`SETNX`, then `EXPIRE key 60`).
pub const ORIGINAL_LOCK_TTL: Duration = Duration::from_secs(60);

/// Makes tokens unique within the process even if the random part repeated.
static TOKENS: AtomicU64 = AtomicU64::new(0);

/// A held lock: the key and the token only this holder knows.
///
/// ```no_run
/// # async fn demo(mut conn: redis::aio::MultiplexedConnection) -> redis::RedisResult<()> {
/// use std::time::Duration;
/// use uidgen_sharded::RedisLock;
/// let ttl = Duration::from_secs(10);
/// if let Some(lock) = RedisLock::acquire(&mut conn, "id.gen.lock_7_3", ttl).await? {
///     // ... refill ...
///     lock.release(&mut conn).await?;
/// } // not acquired: nothing to release
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "a lock that is neither kept nor released blocks others until its ttl ends"]
pub struct RedisLock {
    key: String,
    token: String,
}

impl RedisLock {
    /// `SET key token NX PX ttl`: the lock if nobody holds it, else `None`.
    pub async fn acquire(
        conn: &mut impl ConnectionLike,
        key: &str,
        ttl: Duration,
    ) -> RedisResult<Option<Self>> {
        let token = new_token();
        let ttl_ms = crate::options::ShardedOptions::millis(ttl).max(1);
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(conn)
            .await?;
        if set.is_none() {
            let given: i64 = EXPIRE_IF_NONE
                .key(key)
                .arg(crate::options::ShardedOptions::millis(ORIGINAL_LOCK_TTL))
                .invoke_async(conn)
                .await?;
            if given == 1 {
                tracing::warn!(
                    key,
                    "a refill lock without an expiry (a holder died between SETNX and EXPIRE) \
                     now expires in 60 s"
                );
            }
        }
        Ok(set.map(|_| Self {
            key: key.to_owned(),
            token,
        }))
    }

    /// Delete the lock if it still holds our token; `true` when it did. `false` means the
    /// lock had expired (and maybe been taken by someone else, whose lock is left alone).
    pub async fn release(self, conn: &mut impl ConnectionLike) -> RedisResult<bool> {
        let deleted: i64 = RELEASE
            .key(&self.key)
            .arg(&self.token)
            .invoke_async(conn)
            .await?;
        Ok(deleted == 1)
    }

    /// The lock's key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The token stored under the key while we hold it.
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// A token no other holder has: this process's id, a per-process counter and 128 random bits.
fn new_token() -> String {
    // Relaxed: the counter only has to hand out distinct values; nothing else is ordered by it.
    let n = TOKENS.fetch_add(1, Ordering::Relaxed);
    format!(
        "{}-{n}-{:016x}{:016x}",
        std::process::id(),
        fastrand::u64(..),
        fastrand::u64(..)
    )
}
