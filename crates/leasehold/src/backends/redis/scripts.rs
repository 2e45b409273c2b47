//! What a Redis store writes: its Lua scripts (grant, renew, release) and its key names.
//!
//! Who holds a grant (its [`crate::HolderInfo`] line) is kept in `PREFIX{KEY}:holder`,
//! beside the lease in the same slot: set with the lease's expiry by the grant, extended by
//! every renewal, deleted by the release, all in the same scripts as the lease itself.

use crate::Key;

/// The fence is `max(counter + 1, server clock in µs)`, written back, so a counter lost in a
/// restart or behind on a promoted replica restarts above every fence issued before. TIME is
/// read as strings and compared as numbers (exact below 2^53); `replicate_commands`, called
/// before the first write, lets servers older than 5.0 write after TIME (a no-op since).
/// `KEYS`: lease, fence counter, holder info; `ARGV`: owner, ttl ms, info line (`''`: none).
pub(super) const GRANT: &str = r"
redis.replicate_commands()
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[3])
  end
  local t = redis.call('TIME')
  local now = t[1] .. string.format('%06d', t[2])
  local c = redis.call('GET', KEYS[2])
  if c and tonumber(c) >= tonumber(now) then
    return {1, redis.call('INCR', KEYS[2])}
  end
  redis.call('SET', KEYS[2], now)
  return {1, tonumber(now)}
end
return {0, redis.call('PTTL', KEYS[1])}";

/// Lease without a fence (Redlock instances): `{1}` or `{0, pttl}`. `KEYS`: lease, holder
/// info; `ARGV`: owner, ttl ms, info line.
pub(crate) const GRANT_NO_FENCE: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[2])
  else
    redis.call('DEL', KEYS[2])
  end
  return {1, 0}
end
return {0, redis.call('PTTL', KEYS[1])}";

/// `KEYS`: lease and holder info of each lease, in pairs; `ARGV`: owner and ttl ms of each.
pub(super) const RENEW_MANY: &str = r"
local out = {}
for i = 1, #KEYS / 2 do
  local k = KEYS[2 * i - 1]
  if redis.call('GET', k) == ARGV[2 * i - 1] then
    out[i] = redis.call('PEXPIRE', k, ARGV[2 * i])
    redis.call('PEXPIRE', KEYS[2 * i], ARGV[2 * i])
  else
    out[i] = 0
  end
end
return out";

/// `KEYS`: lease, holder info; `ARGV`: owner, the channel to wake waiters on.
pub(super) const RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('PUBLISH', ARGV[2], '1')
  return 1
end
return 0";

/// Removes the fence counter of a key nobody holds (`Store::forget`).
pub(super) const FORGET: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('DEL', KEYS[2])
end
return 0";

/// Per-key names.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub(super) prefix: String,
}

impl Names {
    pub fn new(prefix: String) -> Self {
        Names { prefix }
    }
    pub fn lease(&self, key: &Key) -> String {
        self.name(key, "")
    }
    pub fn fence(&self, key: &Key) -> String {
        self.name(key, ":fence")
    }
    pub fn channel(&self, key: &Key) -> String {
        self.name(key, ":released")
    }
    pub fn holder(&self, key: &Key) -> String {
        self.name(key, ":holder")
    }
    /// `PREFIX{KEY}SUFFIX`, in one exact allocation (this runs a few times per request).
    fn name(&self, key: &Key, suffix: &str) -> String {
        let k = key.as_str();
        let mut s = String::with_capacity(self.prefix.len() + k.len() + 2 + suffix.len());
        s.push_str(&self.prefix);
        s.push('{');
        s.push_str(k);
        s.push('}');
        s.push_str(suffix);
        s
    }
    pub(super) fn key_of(&self, lease: &str) -> Option<Key> {
        let inner = lease.strip_prefix(&self.prefix)?.strip_prefix('{')?.strip_suffix('}')?;
        Key::new(inner).ok()
    }
}
