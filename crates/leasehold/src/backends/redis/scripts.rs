//! What a Redis store writes: its Lua scripts (grant, renew, release; the readers' and
//! semaphores' own are in `prims.rs`) and its key names.
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
/// `KEYS`: lease, fence counter, holder info; `ARGV`: owner, ttl ms, info line (`''`: none),
/// the store's horizon in ms.
///
/// The counter expires the lease's ttl plus the horizon after the grant (renewals move it
/// along: [`RENEW_MANY`]), so a key nobody held within the horizon leaves nothing behind; the
/// next grant's clock is then past every fence the counter issued (`crate::horizon`).
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
    local f = redis.call('INCR', KEYS[2])
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]) + tonumber(ARGV[4]))
    return {1, f}
  end
  redis.call('SET', KEYS[2], now, 'PX', tonumber(ARGV[2]) + tonumber(ARGV[4]))
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

/// `KEYS`: lease and holder info of each lease, in pairs; `ARGV`: owner and ttl ms of each,
/// then the store's horizon in ms, then the publishing command (`PUBLISH`, or `SPUBLISH` on
/// a cluster). A renewed key's fence counter `LEASE:fence` (in the lease's slot) is kept for
/// the ttl plus the horizon, as the grant set it.
/// A renewal that shortens a lease (`run --at-least` cutting the key to the rest of its
/// period) publishes on its release channel (`LEASE:released`, payload `0`), so waiters that
/// read the longer expiry look again instead of sleeping until it.
/// A lease key holding `readers` is held by readers (`prims.rs`): the owner's entry in
/// `LEASE:readers` is renewed if it is live, and the marker kept to the latest reader.
pub(super) const RENEW_MANY: &str = r"
redis.replicate_commands()
local out = {}
local horizon = tonumber(ARGV[#ARGV - 1])
for i = 1, #KEYS / 2 do
  local k = KEYS[2 * i - 1]
  local v = redis.call('GET', k)
  if v == ARGV[2 * i - 1] then
    local before = redis.call('PTTL', k)
    out[i] = redis.call('PEXPIRE', k, ARGV[2 * i])
    redis.call('PEXPIRE', KEYS[2 * i], ARGV[2 * i])
    redis.call('PEXPIRE', k .. ':fence', tonumber(ARGV[2 * i]) + horizon)
    if before > tonumber(ARGV[2 * i]) then
      redis.call(ARGV[#ARGV], k .. ':released', '0')
    end
  elseif v == 'readers' then
    out[i] = 0
    local r = redis.call('HGET', k .. ':readers', ARGV[2 * i - 1])
    if r then
      local t = redis.call('TIME')
      local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      local e, rest = string.match(r, '^(%d+) (.*)$')
      if tonumber(e) > now_ms then
        local ttl = tonumber(ARGV[2 * i])
        redis.call('HSET', k .. ':readers', ARGV[2 * i - 1],
          string.format('%d', now_ms + ttl) .. ' ' .. rest)
        if redis.call('PTTL', k) < ttl then
          redis.call('PEXPIRE', k, ttl)
          redis.call('PEXPIRE', k .. ':readers', ttl)
        end
        if redis.call('PTTL', k .. ':fence') < ttl + horizon then
          redis.call('PEXPIRE', k .. ':fence', ttl + horizon)
        end
        out[i] = 1
      end
    end
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
///
/// A reader's release (the lease key holds `readers`, `prims.rs`) removes its entry, and the
/// marker with the last live one; any release also withdraws the owner's writer intent (the
/// cleanup of a wait given up), waking the readers it held back.
pub(super) const RELEASE: &str = r"
redis.replicate_commands()
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  redis.call('HDEL', KEYS[1] .. ':intents', ARGV[1])
  redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3])
  redis.call(ARGV[4], ARGV[2], '1')
  return 1
end
if cur == 'readers' then
  local rk = KEYS[1] .. ':readers'
  local r = redis.call('HGET', rk, ARGV[1])
  if r then
    local t = redis.call('TIME')
    local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('HDEL', rk, ARGV[1])
    local last = 0
    local rs = redis.call('HGETALL', rk)
    for i = 1, #rs, 2 do
      local e = tonumber(string.match(rs[i + 1], '^(%d+)'))
      if e <= now_ms then
        redis.call('HDEL', rk, rs[i])
      elseif e > last then
        last = e
      end
    end
    if last == 0 then
      redis.call('DEL', KEYS[1], rk)
    else
      redis.call('SET', KEYS[1], 'readers', 'PX', last - now_ms)
    end
    redis.call(ARGV[4], ARGV[2], '1')
    if tonumber(string.match(r, '^(%d+)')) > now_ms then
      return 1
    end
    return 0
  end
end
if not cur and redis.call('GET', KEYS[3]) == ARGV[1] then
  return 2
end
if redis.call('HDEL', KEYS[1] .. ':intents', ARGV[1]) == 1 then
  redis.call(ARGV[4], ARGV[2], '1')
end
return 0";

/// Removes the fence counter and the release tombstone of a key nobody holds
/// (`Store::forget`). `KEYS`: lease, fence counter, tombstone.
pub(super) const FORGET: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return redis.call('DEL', KEYS[2], KEYS[3])
end
return 0";

/// The suffixes of a lease's companions, after its name `PREFIX{KEY}` (see the key layout in
/// the module docs of `redis`).
pub(super) const FENCE: &str = ":fence";
pub(super) const HOLDER: &str = ":holder";
pub(super) const RELEASED_BY: &str = ":released-by";
pub(super) const CHANNEL: &str = ":released";

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Per-key names.
///
/// On one server, a Sentinel primary and Redlock they are `PREFIX{KEY}SUFFIX`. A semaphore's
/// slot `SEM#I` (a key ending in `#` and decimal digits after a non-empty text, which is how
/// [`crate::mode::slot_key`] names slot I of SEM) is `PREFIX{SEM}#ISUFFIX` instead, and the
/// semaphore's permit record `PREFIX{SEM}:permits`: every name of a slot carries SEM's hash
/// tag, so the slot's grant script, which reads and writes the record, touches one cluster
/// slot. The form is decided from the key's text alone, because renew, release, `holders`
/// and `forget` get nothing but the key; a slot's grant ([`crate::store::SlotOf`]) is checked
/// to name the same key (`prims.rs`). A plain lock on a key `SEM#I` is the same grant as
/// slot I of SEM on every store (the slot's key is an ordinary key), so it is named the same.
///
/// No two keys share a name: every name is `PREFIX{STEM}` + (`#DIGITS` for a slot) + a fixed
/// suffix (none, or one of `:fence` `:holder` `:released` `:released-by` `:readers`
/// `:intents` `:permits`, none of which ends another); a plain lease ends in `}`, a slot's
/// in a digit, and a key ending in `#DIGITS` always takes the slot form, so the key is read
/// back exactly ([`Names::key_of`], checked by naming the key again). A mutex key holding `#`
/// (`a#b`, `#5`, `x}#1}`) that is not `TEXT#DIGITS` keeps the plain form.
///
/// On a cluster ([`Names::cluster`]) a key containing `{` or `}` would let Redis pick a
/// different hash tag for the lease than for its counter (Redis hashes the text between the
/// first `{` and the first `}` after it, the whole name when that is empty: `PREFIX{}x}` and
/// `PREFIX{}x}:fence` land in different slots). Such a key is named `PREFIX{#H}{KEY}SUFFIX`
/// instead (a slot whose SEM has braces `PREFIX{#H}{SEM}#ISUFFIX`), `H` the 16 hex digits of
/// the 64-bit FNV-1a hash of KEY (of SEM for a slot): every name of the key has the tag `#H`,
/// so one slot; a key without braces keeps `PREFIX{KEY}` (its own text is the tag).
#[derive(Debug, Clone)]
pub(crate) struct Names {
    pub(super) prefix: String,
    /// Whether a key with braces is tagged on its hash (cluster).
    pub(super) hashed: bool,
    /// How long a release's tombstone lives, in ms: the store's op timeout (at least 1 s),
    /// shared by the clones of one store's names.
    tombstone_ms: Arc<AtomicU64>,
    /// The store's horizon in ms (`horizon=`): how long a fence counter outlives the last
    /// grant or renewal of its key.
    horizon_ms: u64,
}

impl Names {
    pub fn new(prefix: String) -> Self {
        Names {
            prefix,
            hashed: false,
            tombstone_ms: Self::tombstone(crate::DEFAULT_OP_TIMEOUT),
            horizon_ms: ms(crate::horizon::DEFAULT_HORIZON),
        }
    }
    /// These names, for a store whose per-key state outlives its last grant by `h`.
    pub fn with_horizon(self, h: Duration) -> Self {
        Names { horizon_ms: ms(h), ..self }
    }
    /// The horizon in ms, for the scripts.
    pub fn horizon_ms(&self) -> u64 {
        self.horizon_ms
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
        self.name(key, RELEASED_BY)
    }
    pub fn lease(&self, key: &Key) -> String {
        self.name(key, "")
    }
    pub fn fence(&self, key: &Key) -> String {
        self.name(key, FENCE)
    }
    pub fn channel(&self, key: &Key) -> String {
        self.name(key, CHANNEL)
    }
    pub fn holder(&self, key: &Key) -> String {
        self.name(key, HOLDER)
    }
    /// The permit record of the semaphore `sem` (its slots are `sem#I`), in `sem`'s tag.
    pub fn permits(&self, sem: &Key) -> String {
        self.tagged(sem.as_str(), "", ":permits")
    }
    /// `SCAN MATCH` pattern of every lease name of this prefix: a plain lease ends in `}`, a
    /// slot's in a digit, every other name in a letter.
    pub fn lease_pattern(&self) -> String {
        format!("{}{{*[}}0-9]", super::glob_escape(&self.prefix))
    }
    /// `PREFIX{KEY}SUFFIX`, `PREFIX{SEM}#ISUFFIX` for a slot (or either with `{#H}` before).
    fn name(&self, key: &Key, suffix: &str) -> String {
        let (stem, slot) = split_slot(key.as_str());
        self.tagged(stem, slot, suffix)
    }
    /// `PREFIX{STEM}SLOTSUFFIX` (or `PREFIX{#H}{STEM}SLOTSUFFIX`), in one exact allocation
    /// (this runs a few times per request).
    fn tagged(&self, stem: &str, slot: &str, suffix: &str) -> String {
        let hashed = self.hashed && stem.contains(['{', '}']);
        let extra = if hashed { 20 } else { 0 };
        let len = self.prefix.len() + stem.len() + 2 + slot.len() + suffix.len() + extra;
        let mut s = String::with_capacity(len);
        s.push_str(&self.prefix);
        if hashed {
            s.push_str(&format!("{{#{:016x}}}", fnv1a(stem.as_bytes())));
        }
        s.push('{');
        s.push_str(stem);
        s.push('}');
        s.push_str(slot);
        s.push_str(suffix);
        s
    }
    /// The key whose lease is named `lease`, if one is (`None` for any other name).
    pub(super) fn key_of(&self, lease: &str) -> Option<Key> {
        let rest = lease.strip_prefix(&self.prefix)?;
        // `{#H}` before the key's own braces, when a cluster tags the key on its hash.
        let untagged = rest
            .get(19..)
            .filter(|_| self.hashed && rest.starts_with("{#") && rest.as_bytes()[18] == b'}');
        [untagged, Some(rest)].into_iter().flatten().find_map(|r| {
            let body = r.strip_prefix('{')?;
            let text = match body.strip_suffix('}') {
                Some(key) => key.to_owned(),
                None => {
                    let (stem, digits) = body.rsplit_once("}#")?;
                    format!("{stem}#{digits}")
                }
            };
            // Only a name this key is given: the form, the tag and its hash all match.
            Key::new(text).ok().filter(|k| self.lease(k) == lease)
        })
    }
}

/// `(SEM, "#I")` for a slot's key `SEM#I` (I decimal digits, SEM not empty), else the key
/// and `""`.
fn split_slot(key: &str) -> (&str, &str) {
    match key.rfind('#') {
        Some(i)
            if i > 0
                && i + 1 < key.len()
                && key.as_bytes()[i + 1..].iter().all(u8::is_ascii_digit) =>
        {
            key.split_at(i)
        }
        _ => (key, ""),
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

    /// Every name a key is given (the lease first), as a lock, a reader's key or a slot.
    fn all_names(n: &Names, key: &Key) -> Vec<String> {
        let mut v = vec![n.lease(key), n.fence(key), n.holder(key), n.channel(key)];
        v.extend([n.released_by(key), n.readers(key), n.intents(key)]);
        v
    }

    #[test]
    fn a_slot_shares_its_semaphores_tag_on_every_form() {
        for n in [Names::new("leasehold:".into()), Names::cluster("leasehold:".into())] {
            for sem in ["pool", "a}b{c", "{x}", "q#1", "#", "x}#2", "p:permits"] {
                let sem = Key::new(sem).unwrap();
                let tag = key_slot(&n.permits(&sem));
                for i in [0, 7, 255] {
                    let slot = Key::new(crate::mode::slot_key(sem.as_str(), i)).unwrap();
                    for name in all_names(&n, &slot) {
                        if n.hashed || !sem.as_str().contains(['{', '}']) {
                            assert_eq!(key_slot(&name), tag, "{name} beside {}", n.permits(&sem));
                        }
                    }
                    assert_eq!(n.key_of(&n.lease(&slot)), Some(slot.clone()), "{slot}");
                }
            }
            let pool = Key::new("pool").unwrap();
            assert_eq!(n.lease(&Key::new("pool#3").unwrap()), "leasehold:{pool}#3");
            assert_eq!(n.fence(&Key::new("pool#3").unwrap()), "leasehold:{pool}#3:fence");
            assert_eq!(n.permits(&pool), "leasehold:{pool}:permits");
            assert_eq!(n.permits(&Key::new("q#1").unwrap()), "leasehold:{q#1}:permits");
            assert_eq!(n.lease(&Key::new("q#1#0").unwrap()), "leasehold:{q#1}#0");
        }
    }

    #[test]
    fn no_two_keys_share_a_name() {
        // Plain keys holding `#` and `}` next to slots of semaphores they could be taken for.
        let keys = [
            "pool",
            "pool#0",
            "pool#00",
            "pool#1",
            "pool}#1",
            "pool#1}",
            "pool}#1}",
            "pool#",
            "#1",
            "#",
            "##1",
            "pool#1#0",
            "pool#1:fence",
            "pool}#1:fence",
            "pool#x",
            "a}b#0",
            "a}b}#0",
            "{pool}#1",
            "pool#0:permits",
            "pool:permits",
            "#0000}{z#1",
        ];
        for n in [Names::new("p:".into()), Names::cluster("p:".into())] {
            let mut seen = std::collections::HashMap::new();
            for k in keys {
                let key = Key::new(k).unwrap();
                // And its names as a semaphore.
                for name in all_names(&n, &key).into_iter().chain([n.permits(&key)]) {
                    if let Some(other) = seen.insert(name.clone(), k) {
                        assert_eq!(other, k, "{k:?} and {other:?} are both named {name}");
                    }
                }
                assert_eq!(n.key_of(&n.lease(&key)), Some(key.clone()), "{k}");
                for other in all_names(&n, &key).iter().skip(1).chain([&n.permits(&key)]) {
                    assert_eq!(n.key_of(other), None, "{other} is no lease");
                }
            }
        }
    }

    #[test]
    fn the_scan_pattern_matches_leases_only() {
        // The glob Redis applies, for the names at hand: `PREFIX{` … then `}` or a digit.
        let n = Names::new("p:".into());
        let matches =
            |s: &str| s.starts_with("p:{") && s.ends_with(|c: char| c == '}' || c.is_ascii_digit());
        assert_eq!(n.lease_pattern(), "p:{*[}0-9]");
        for k in ["pool", "pool#3", "a}b", "x#"] {
            let key = Key::new(k).unwrap();
            assert!(matches(&n.lease(&key)));
            let others = all_names(&n, &key).into_iter().skip(1).chain([n.permits(&key)]);
            assert!(others.into_iter().all(|o| !matches(&o)), "{k}");
        }
    }
}
