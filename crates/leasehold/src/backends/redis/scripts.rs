//! What a Redis store writes: its Lua scripts (grant, renew, release) and its key names.
//!
//! Who holds a grant (its [`crate::HolderInfo`] line) is kept in `PREFIX{KEY}:holder`,
//! beside the lease in the same slot: set with the lease's expiry by the grant, extended by
//! every renewal, deleted by the release, all in the same scripts as the lease itself.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::Key;

/// The fence is `max(counter + 1, server clock in µs)`, written back, so a counter lost in a
/// restart or behind on a promoted replica restarts above every fence issued before. TIME is
/// read as strings and compared as numbers (exact below 2^53); `replicate_commands`, called
/// before the first write, lets servers older than 5.0 write after TIME (a no-op since).
/// `KEYS`: lease, fence counter, holder info; `ARGV`: owner, ttl ms, info line (`''`: none).
///
/// A grant the owner already holds answers its fence again, changing nothing: owner tokens
/// are minted per attempt, so only a retry of the same request (a cluster client retrying
/// after MOVED/ASK or a broken connection, a Sentinel store retrying on the new primary)
/// meets its own grant, and must not be told busy by it.
pub(super) const GRANT: &str = r"
redis.replicate_commands()
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2]))}
end
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

/// `KEYS`: lease, holder info, release tombstone; `ARGV`: owner, the channel to wake waiters
/// on, the tombstone's life in ms, the publishing command (`SPUBLISH` on a cluster, whose
/// waiters subscribe to the shard channel in the key's slot; `PUBLISH` elsewhere).
///
/// `1`: released now; `2`: this owner's grant was already released by this script (a retry
/// of the same release after its reply was lost: a cluster client retrying after a broken
/// connection or `MOVED`, the store retrying on a fresh connection or a new primary); `0`: not
/// this owner's grant. The release leaves the tombstone `PREFIX{KEY}:released-by` = owner, in
/// the key's slot, for as long as a retry of the request can come (the op timeout). Owner
/// tokens are minted per grant, so only the owner that released can match it, and a match
/// proves what a first answer of `1` proves: the grant was still this owner's when the
/// release removed it. It is read only while nobody holds the key (a successor's grant makes
/// a late retry answer `0`, and a stale release of a key someone else holds stays refused);
/// a later release of the key by another owner replaces it; a failover that loses it
/// (asynchronous replication) leaves the retry answering `0`, as before. Each of these can
/// only turn a clean release into a reported possible overlap, never the reverse.
pub(super) const RELEASE: &str = r"
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3])
  redis.call(ARGV[4], ARGV[2], '1')
  return 1
end
if not cur and redis.call('GET', KEYS[3]) == ARGV[1] then
  return 2
end
return 0";

/// Removes the fence counter and the release tombstone of a key nobody holds
/// (`Store::forget`). `KEYS`: lease, fence counter, tombstone.
pub(super) const FORGET: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('DEL', KEYS[2], KEYS[3])
end
return 0";

/// Per-key names.
///
/// On one server (and Redlock) they are `PREFIX{KEY}SUFFIX`. On a cluster
/// ([`Names::cluster`]) a key containing `{` or `}` would let Redis pick a different hash tag
/// for the lease than for its counter (Redis hashes the text between the first `{` and the
/// first `}` after it, the whole name when that is empty: `PREFIX{}x}` and `PREFIX{}x}:fence`
/// land in different slots). Such a key is named `PREFIX{#H}{KEY}SUFFIX` instead, `H` the
/// 16 hex digits of the key's 64-bit FNV-1a hash: every name of the key has the tag `#H`, so
/// one slot; a key without braces keeps `PREFIX{KEY}` (its own text is the tag).
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub(super) prefix: String,
    /// Whether a key with braces is tagged on its hash (cluster).
    pub(super) hashed: bool,
    /// How long a release's tombstone lives, in ms: the store's op timeout (at least 1 s),
    /// shared by the clones of one store's names.
    tombstone_ms: Arc<AtomicU64>,
}

impl Names {
    pub fn new(prefix: String) -> Self {
        Names { prefix, hashed: false, tombstone_ms: Self::tombstone(crate::DEFAULT_OP_TIMEOUT) }
    }
    /// Names for a Redis Cluster: every name of a key in one slot, whatever the key holds.
    pub fn cluster(prefix: String) -> Self {
        Names { hashed: true, ..Self::new(prefix) }
    }
    fn tombstone(op: Duration) -> Arc<AtomicU64> {
        Arc::new(AtomicU64::new(Self::tombstone_life(op)))
    }
    fn tombstone_life(op: Duration) -> u64 {
        u64::try_from(op.as_millis()).unwrap_or(u64::MAX).max(1000)
    }
    /// Release tombstones live for `op` (the store's op timeout) from now on.
    pub fn set_op_timeout(&self, op: Duration) {
        self.tombstone_ms.store(Self::tombstone_life(op), Ordering::Relaxed);
    }
    /// The tombstone's life for the release script, in ms.
    pub fn tombstone_ms(&self) -> u64 {
        self.tombstone_ms.load(Ordering::Relaxed)
    }
    /// The release tombstone (see [`RELEASE`]).
    pub fn released_by(&self, key: &Key) -> String {
        self.name(key, ":released-by")
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
    /// `PREFIX{KEY}SUFFIX` (or `PREFIX{#H}{KEY}SUFFIX`), in one exact allocation (this runs
    /// a few times per request).
    fn name(&self, key: &Key, suffix: &str) -> String {
        let k = key.as_str();
        let tagged = self.hashed && k.contains(['{', '}']);
        let extra = if tagged { 20 } else { 0 };
        let mut s = String::with_capacity(self.prefix.len() + k.len() + 2 + suffix.len() + extra);
        s.push_str(&self.prefix);
        if tagged {
            s.push_str(&format!("{{#{:016x}}}", fnv1a(k.as_bytes())));
        }
        s.push('{');
        s.push_str(k);
        s.push('}');
        s.push_str(suffix);
        s
    }
    pub(super) fn key_of(&self, lease: &str) -> Option<Key> {
        let inner = lease.strip_prefix(&self.prefix)?.strip_prefix('{')?.strip_suffix('}')?;
        if !self.hashed || !inner.contains(['{', '}']) {
            return Key::new(inner).ok();
        }
        // `#H}{KEY`: only the hash of KEY itself.
        let (tag, key) = inner.strip_prefix('#')?.split_once("}{")?;
        let ok = tag.len() == 16 && u64::from_str_radix(tag, 16).ok()? == fnv1a(key.as_bytes());
        ok.then(|| Key::new(key).ok()).flatten().filter(|k| k.as_str().contains(['{', '}']))
    }
}

/// 64-bit FNV-1a: a stable hash for the cluster's brace-key tags (not a secret, not a
/// checksum anything relies on beyond naming).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
}

/// The cluster slot of a key name: CRC16/XMODEM of its hash tag (the text between the first
/// `{` and the first `}` after it, when not empty) or of the whole name, modulo 16384.
pub(super) fn key_slot(name: &str) -> u16 {
    let b = name.as_bytes();
    let tag = b.iter().position(|&c| c == b'{').and_then(|open| {
        let close = b[open + 1..].iter().position(|&c| c == b'}')?;
        (close > 0).then(|| &b[open + 1..open + 1 + close])
    });
    let mut crc: u16 = 0;
    for &byte in tag.unwrap_or(b) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
        }
    }
    crc % 16384
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_redis_hash_tags() {
        // Values from CLUSTER KEYSLOT.
        assert_eq!(key_slot("123456789"), 12739);
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("{foo}.bar"), 12182);
        assert_eq!(key_slot("a{}b"), key_slot("a{}b"));
        assert_ne!(key_slot("x{}y"), key_slot("x{}y:fence"), "an empty tag hashes the name");
    }

    #[test]
    fn cluster_names_of_brace_keys_share_a_slot_and_read_back() {
        let n = Names::cluster("leasehold:".into());
        for k in ["}x", "a}b{c", "{", "}", "{y}", "plain", "#0000}{z"] {
            let key = Key::new(k).unwrap();
            let lease = n.lease(&key);
            for other in [n.fence(&key), n.holder(&key), n.channel(&key), n.released_by(&key)] {
                assert_eq!(key_slot(&lease), key_slot(&other), "{k}: {lease} / {other}");
            }
            assert_eq!(n.key_of(&lease), Some(key), "{lease}");
        }
        assert_eq!(n.lease(&Key::new("plain").unwrap()), "leasehold:{plain}");
        assert_eq!(n.key_of("leasehold:{#0000000000000000}{a{b}"), None, "a forged hash");
    }
}
