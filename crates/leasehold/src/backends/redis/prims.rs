//! Semaphores and readers on Redis (`docs/design.md` §8): Lua scripts beside the mutex's
//! (`scripts.rs`; both are called in `script_calls.rs`), on the same key names, sent by every form that runs scripts on one node
//! per key: one server, the Sentinel form's primary (found again, and a demoted node
//! refused, as for the mutex) and a cluster (each call's keys share one hash tag, so one
//! slot, on that slot's master). Redlock does not hold them.
//!
//! - Readers: `PREFIX{KEY}:readers`, a hash `owner → "expires_ms fence info"` (expiry by the
//!   server's TIME, per reader), and the lease key `PREFIX{KEY}` itself set to `readers`
//!   with a PX of the latest reader expiry, so the mutex's grant (`SET NX`) refuses a writer
//!   while any reader lives, unchanged. A reader's fence comes from `PREFIX{KEY}:fence`, the
//!   mutex's counter, by the same rule. Renew and release (`scripts.rs`) find a reader through
//!   the marker. The last reader's release deletes the marker and wakes waiters.
//! - Writer intents: `PREFIX{KEY}:intents`, a hash `owner → expires_ms`, written by a writer
//!   refused by readers while it waits and refreshed by each of its attempts; a new reader is
//!   refused while another owner's intent lives. The writer's release (also a cancelled
//!   wait's cleanup) or the end of its wait removes it; a granted writer keeps it until its
//!   release, when it is harmless (the writer excludes readers anyway).
//! - Semaphores: slot I of SEM is the key `SEM#I`, named `PREFIX{SEM}#I` (with `:fence`,
//!   `:holder` … after it), and `PREFIX{SEM}:permits` is a hash `"<slot lease name>|owner" →
//!   N` of each slot granted, checked and written by the slot's grant around the mutex's
//!   grant script (the very same Lua), so two callers naming different N for one semaphore
//!   are refused. Entries whose slot is no longer held by that owner are pruned as they are
//!   met. Every name of a slot has SEM's hash tag ([`Names`]), so the script touches one
//!   cluster slot.
//!
//! On a cluster the wake-ups (a release, a withdrawn intent) are published on the key's
//! shard channel (`SPUBLISH`), which its waiters subscribe to (`shard_sub.rs`).

use super::Names;
use crate::Key;

/// A reader's grant. `KEYS`: lease, fence counter, readers, intents; `ARGV`: owner, ttl ms,
/// info line, the store's horizon in ms (the counter outlives the last reader by it). `{1, fence}`, or `{0, ms}` to wait (a writer holds, or another waits).
pub(super) const GRANT_SHARED: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('GET', KEYS[1])
if cur and cur ~= 'readers' then
  return {0, redis.call('PTTL', KEYS[1])}
end
local wait = 0
local it = redis.call('HGETALL', KEYS[4])
for i = 1, #it, 2 do
  local e = tonumber(it[i + 1])
  if e <= now_ms then
    redis.call('HDEL', KEYS[4], it[i])
  elseif it[i] ~= ARGV[1] and e - now_ms > wait then
    wait = e - now_ms
  end
end
if wait > 0 then
  return {0, wait}
end
local now = t[1] .. string.format('%06d', t[2])
local f = now
local c = redis.call('GET', KEYS[2])
if c and tonumber(c) >= tonumber(now) then
  redis.call('INCR', KEYS[2])
  f = redis.call('GET', KEYS[2])
else
  redis.call('SET', KEYS[2], now)
end
local exp = now_ms + tonumber(ARGV[2])
redis.call('HSET', KEYS[3], ARGV[1], string.format('%d', exp) .. ' ' .. f .. ' ' .. ARGV[3])
local last = exp
local rs = redis.call('HGETALL', KEYS[3])
for i = 1, #rs, 2 do
  local e = tonumber(string.match(rs[i + 1], '^(%d+)'))
  if e <= now_ms then
    redis.call('HDEL', KEYS[3], rs[i])
  elseif e > last then
    last = e
  end
end
redis.call('SET', KEYS[1], 'readers', 'PX', last - now_ms)
redis.call('PEXPIRE', KEYS[3], last - now_ms)
redis.call('PEXPIRE', KEYS[2], last - now_ms + tonumber(ARGV[4]))
return {1, tonumber(f)}";

/// A waiting writer's intent, recorded only while readers hold (only they can overtake it).
/// `KEYS`: intents, lease; `ARGV`: owner, hold ms. 1 if recorded.
pub(super) const NOTE_INTENT: &str = r"
if redis.call('GET', KEYS[2]) ~= 'readers' then
  return 0
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now_ms + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d', exp))
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1";

/// Withdraws an intent, and wakes the readers it held back. `KEYS`: intents; `ARGV`: owner,
/// the release channel, the publishing command (`SPUBLISH` on a cluster).
pub(super) const CLEAR_INTENT: &str = r"
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call(ARGV[3], ARGV[2], '1')
  return 1
end
return 0";

/// Before the mutex's grant of a slot: the permit check. `KEYS[4]`: the semaphore's permits
/// hash; `ARGV[5]`: N (`ARGV[4]` is the grant's horizon). `{2, n}`: a live slot was granted for n permits.
pub(super) const SLOT_PROLOGUE: &str = r"
redis.replicate_commands()
local h = redis.call('HGETALL', KEYS[4])
for i = 1, #h, 2 do
  local lk, o = string.match(h[i], '^(.*)|(%x+)$')
  if lk and redis.call('GET', lk) == o then
    if h[i + 1] ~= ARGV[5] then
      return {2, tonumber(h[i + 1])}
    end
  else
    redis.call('HDEL', KEYS[4], h[i])
  end
end
local r = (function()
";

/// After it: the slot's record.
pub(super) const SLOT_EPILOGUE: &str = r"
end)()
if r[1] == 1 then
  redis.call('HSET', KEYS[4], KEYS[1] .. '|' .. ARGV[1], ARGV[5])
end
return r";

/// A key's live readers, `{owner, ms left, "expires_ms fence info"}` flat. `KEYS`: readers.
pub(super) const READERS: &str = r"
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
local rs = redis.call('HGETALL', KEYS[1])
for i = 1, #rs, 2 do
  local e = tonumber(string.match(rs[i + 1], '^(%d+)'))
  if e and e > now_ms then
    out[#out + 1] = rs[i]
    out[#out + 1] = tostring(e - now_ms)
    out[#out + 1] = rs[i + 1]
  end
end
return out";

impl Names {
    pub(super) fn readers(&self, key: &Key) -> String {
        format!("{}:readers", self.lease(key))
    }
    pub(super) fn intents(&self, key: &Key) -> String {
        format!("{}:intents", self.lease(key))
    }
}
