//! Popping a shard's list against its mark, so that a list restored key by key is never served
//! again.
//!
//! `link.rs` covers Redis going back in time as a whole (a restart from an old snapshot, a
//! failover): the server's identity changes. A restore of single keys into the *same* server
//! does not change it: an operator who backed up a list (`LRANGE`, `DUMP`) and writes it back
//! (`RPUSH`, `LPUSH`, `RESTORE`, `RENAME` of a copy, `MIGRATE` from another server) puts numbers
//! that were already served back in front of callers, and `run_id` and `master_replid` stay
//! the same. So each list has a *mark*, `{prefix}popped_{app}_{shard}`: the highest index ever
//! popped from it.
//!
//! Why a number at or below the mark is never served, and every other one is served at most
//! once: every pop runs [`POP`], one script, so Redis runs it atomically, between any two other
//! commands. It pops, hands out only the entries above the mark, in order, and raises the mark
//! to the last one it hands out, in the same script. So the indexes served from a list rise
//! strictly, pop after pop, whoever pops; an index can only be served again if the mark went
//! back. Nothing uidgen writes lowers it. In normal operation nothing is refused: the list holds
//! its segments in the order they were claimed (each push is one freshly claimed segment,
//! above every number claimed before it, pushed in order; the refill lock keeps pushes in claim
//! order), so every entry lies above everything popped before it.
//!
//! When an entry at or below the mark turns up, the list has been written behind uidgen's back:
//! the script hands out nothing from that entry on, deletes the rest of the list (it cannot be
//! told apart from a restored copy), and says how many entries it dropped; the caller refills
//! from a fresh segment. Numbers are skipped, never repeated. The same happens, harmlessly,
//! when two refills' pushes were reordered (a refill slower than `lock_ttl`, whose lock expired
//! and was taken): the older segment's numbers are skipped.
//!
//! What the mark cannot catch: a restore of both the list *and* its mark (the mark goes back
//! with it), and losing the mark while an old copy of the list is around. See the operator's
//! side in docs/OPERATIONS.md ("Sharded mode: what Redis may lose").

use std::sync::LazyLock;

use redis::aio::MultiplexedConnection;

/// Pop up to `ARGV[1]` entries of the list `KEYS[1]` against its mark `KEYS[2]`; see the
/// module doc. Answers `{served, left, dropped, mark}`: the entries handed out (those that are
/// not numbers pass through, for the caller to skip), the list's length afterwards, how many
/// entries were dropped as stale (with the rest of the list), and the mark (`""` if none).
///
/// Indexes are below 2^50, so Lua's doubles hold them exactly; the mark is stored as the text
/// that was popped, never formatted by Lua (whose `tostring` rounds to 14 digits). A mark that
/// is not a number is an error reply: without it, a restored list cannot be recognised.
static POP: LazyLock<redis::Script> = LazyLock::new(|| {
    redis::Script::new(
        r#"
local mark = redis.call('GET', KEYS[2])
local high = -1
if mark then
  high = tonumber(mark)
  if high == nil then
    return redis.error_reply('uidgen: ' .. KEYS[2] .. ' holds ' .. string.sub(mark, 1, 32) ..
      ', not an index: it is the highest index served from ' .. KEYS[1] ..
      "; set it to that shard's id_alloc max_id and delete the list")
  end
end
local popped = redis.call('LPOP', KEYS[1], ARGV[1])
if not popped then
  return {{}, 0, 0, mark or ''}
end
local served = {}
local dropped = 0
for i = 1, #popped do
  local value = popped[i]
  local index = tonumber(value)
  if index == nil then
    served[#served + 1] = value
  elseif index > high then
    served[#served + 1] = value
    high = index
    mark = value
  else
    dropped = #popped - i + 1 + redis.call('LLEN', KEYS[1])
    redis.call('DEL', KEYS[1])
    break
  end
end
if mark then
  redis.call('SET', KEYS[2], mark)
end
return {served, redis.call('LLEN', KEYS[1]), dropped, mark or ''}
"#,
    )
});

/// What one pop did.
#[derive(Debug, Default)]
pub(crate) struct Popped {
    /// The entries handed out, in list order.
    pub(crate) served: Vec<String>,
    /// The list's length afterwards.
    pub(crate) left: u64,
    /// Entries dropped because the list held one at or below its mark (0 normally).
    pub(crate) dropped: u64,
    /// The mark after the pop (empty when the list never served anything).
    pub(crate) mark: String,
}

/// Pop up to `n` entries of `list` against `mark` (see [`POP`]).
pub(crate) async fn pop(
    conn: &mut MultiplexedConnection,
    list: &str,
    mark: &str,
    n: usize,
) -> redis::RedisResult<Popped> {
    let (served, left, dropped, mark): (Vec<String>, u64, u64, String) =
        POP.key(list).key(mark).arg(n).invoke_async(conn).await?;
    Ok(Popped {
        served,
        left,
        dropped,
        mark,
    })
}
