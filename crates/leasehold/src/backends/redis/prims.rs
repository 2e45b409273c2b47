//! Semaphores and readers on Redis (`docs/design.md` §8): Lua scripts beside the mutex's
//! (`scripts.rs`), on the same key names, sent by every form that runs scripts on one node
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

use std::sync::LazyLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;
use redis::aio::ConnectionLike;

use super::{Names, redis_err, ttl_ms};
use crate::store::{AcquireRequest, Attempt, SlotOf, Watch};
use crate::{Error, FenceToken, Holder, HolderInfo, Key, Mode, OwnerToken, Result, Store};

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
const NOTE_INTENT: &str = r"
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
const CLEAR_INTENT: &str = r"
if redis.call('HDEL', KEYS[1], ARGV[1]) == 1 then
  redis.call(ARGV[3], ARGV[2], '1')
  return 1
end
return 0";

/// Before the mutex's grant of a slot: the permit check. `KEYS[4]`: the semaphore's permits
/// hash; `ARGV[5]`: N (`ARGV[4]` is the grant's horizon). `{2, n}`: a live slot was granted for n permits.
const SLOT_PROLOGUE: &str = r"
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
const SLOT_EPILOGUE: &str = r"
end)()
if r[1] == 1 then
  redis.call('HSET', KEYS[4], KEYS[1] .. '|' .. ARGV[1], ARGV[5])
end
return r";

static SHARED: LazyLock<Script> = LazyLock::new(|| Script::new(GRANT_SHARED));
static NOTE: LazyLock<Script> = LazyLock::new(|| Script::new(NOTE_INTENT));
static CLEAR: LazyLock<Script> = LazyLock::new(|| Script::new(CLEAR_INTENT));
static PLAIN: LazyLock<Script> = LazyLock::new(|| Script::new(super::GRANT));
/// The mutex's grant script, wrapped by the permit check and record.
static SLOT: LazyLock<Script> =
    LazyLock::new(|| Script::new(&format!("{SLOT_PROLOGUE}{}{SLOT_EPILOGUE}", super::GRANT)));

/// A key's live readers, `{owner, ms left, "expires_ms fence info"}` flat. `KEYS`: readers.
const READERS: &str = r"
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
static READ_READERS: LazyLock<Script> = LazyLock::new(|| Script::new(READERS));

impl Names {
    pub(super) fn readers(&self, key: &Key) -> String {
        format!("{}:readers", self.lease(key))
    }
    pub(super) fn intents(&self, key: &Key) -> String {
        format!("{}:intents", self.lease(key))
    }
}

/// `Ok(Ok(fence))` granted, `Ok(Err(wait))` busy.
pub(super) type Answer = std::result::Result<u64, Option<Duration>>;

fn answer((ok, n): (i64, i64)) -> Answer {
    if ok == 1 { Ok(n as u64) } else { Err((n >= 0).then(|| Duration::from_millis(n as u64))) }
}

/// The scripts of every grant, on a connection that routes a script to the node holding its
/// first key (a connection manager to one server or to the primary, a cluster connection).
pub(super) struct On<'a, C> {
    pub conn: C,
    pub names: &'a Names,
    /// For errors.
    pub backend: &'static str,
    /// `PUBLISH`, or `SPUBLISH` on a cluster.
    pub publish: &'static str,
}

impl<C: ConnectionLike + Clone + Send> On<'_, C> {
    /// Any fenced grant attempt: a reader's, a semaphore slot's, or the plain exclusive one.
    pub async fn grant(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        match (req.mode, req.slot) {
            (Mode::Shared, _) => self.grant_shared(req).await,
            (_, Some(slot)) => self.grant_slot(req, slot).await,
            _ => {
                let (n, k) = (self.names, req.key);
                let line = req.info.map(HolderInfo::encode).unwrap_or_default();
                let r: (i64, i64) = PLAIN
                    .key(n.lease(k))
                    .key(n.fence(k))
                    .key(n.holder(k))
                    .arg(&req.owner.hex()[..])
                    .arg(ttl_ms(req.ttl))
                    .arg(line)
                    .arg(n.horizon_ms())
                    .invoke_async(&mut self.conn.clone())
                    .await
                    .map_err(|e| redis_err(self.backend, "acquire", e))?;
                Ok(answer(r))
            }
        }
    }

    /// A reader's grant attempt.
    async fn grant_shared(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        let (n, k) = (self.names, req.key);
        let line = req.info.map(HolderInfo::encode).unwrap_or_default();
        let r: (i64, i64) = SHARED
            .key(n.lease(k))
            .key(n.fence(k))
            .key(n.readers(k))
            .key(n.intents(k))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(req.ttl))
            .arg(line)
            .arg(n.horizon_ms())
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "shared acquire", e))?;
        Ok(answer(r))
    }

    /// A semaphore slot's grant attempt: the mutex's grant, with the permit count checked
    /// and recorded in the same script. The slot's key must be `SEM#I` for the slot's
    /// semaphore and index (so its names share the permit record's hash tag); the locker
    /// always asks so, and anything else is refused as [`Error::InvalidInput`].
    async fn grant_slot(&self, req: &AcquireRequest<'_>, slot: SlotOf<'_>) -> Result<Answer> {
        let (n, k) = (self.names, req.key);
        if k.as_str() != crate::mode::slot_key(slot.semaphore.as_str(), slot.index) {
            return Err(Error::invalid(format!(
                "{:?} is not slot {} of semaphore {:?}",
                k.as_str(),
                slot.index,
                slot.semaphore.as_str()
            )));
        }
        let line = req.info.map(HolderInfo::encode).unwrap_or_default();
        let (ok, v): (i64, i64) = SLOT
            .key(n.lease(k))
            .key(n.fence(k))
            .key(n.holder(k))
            .key(n.permits(slot.semaphore))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(req.ttl))
            .arg(line)
            .arg(n.horizon_ms())
            .arg(slot.permits)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "semaphore acquire", e))?;
        if ok == 2 {
            return Err(Error::invalid(format!(
                "semaphore {:?} is held with {v} permits; this request named {}",
                slot.semaphore.as_str(),
                slot.permits
            )));
        }
        Ok(answer((ok, v)))
    }

    /// Records a refused writer's intent, for the holders' time left plus its own ttl, if
    /// readers hold the key; whether it did.
    pub async fn note_intent(
        &self,
        req: &AcquireRequest<'_>,
        left: Option<Duration>,
    ) -> Result<bool> {
        let hold = left.unwrap_or(req.ttl) + req.ttl;
        let noted: i64 = NOTE
            .key(self.names.intents(req.key))
            .key(self.names.lease(req.key))
            .arg(&req.owner.hex()[..])
            .arg(ttl_ms(hold))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "writer intent", e))?;
        Ok(noted == 1)
    }

    /// Withdraws `owner`'s intent on `key` (waking the readers it held back).
    pub async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()> {
        let _: i64 = CLEAR
            .key(self.names.intents(key))
            .arg(&owner.hex()[..])
            .arg(self.names.channel(key))
            .arg(self.publish)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "writer intent", e))?;
        Ok(())
    }

    /// The live readers of `key` as holders, in fence order, from the readers hash.
    pub async fn readers_of(&self, key: &Key) -> Result<Vec<Holder>> {
        let flat: Vec<String> = READ_READERS
            .key(self.names.readers(key))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| redis_err(self.backend, "status", e))?;
        let mut out = Vec::new();
        for r in flat.chunks_exact(3) {
            let Ok(owner) = r[0].parse::<OwnerToken>() else { continue };
            let left = Duration::from_millis(r[1].parse().unwrap_or(0));
            let mut parts = r[2].splitn(3, ' ').skip(1);
            let fence: u64 = parts.next().and_then(|f| f.parse().ok()).unwrap_or(0);
            let info = parts.next().and_then(HolderInfo::decode);
            let h = Holder::new(key.clone(), owner, Some(FenceToken::new(fence)), Some(left));
            out.push(h.with_info(info).with_mode(Mode::Shared));
        }
        out.sort_by_key(|h| h.fence);
        Ok(out)
    }
}

/// A Redis form that holds readers: how its waiters are woken, and its writers' intents.
#[async_trait]
pub(super) trait Intents: Store {
    /// Subscribes to changes of `key` (a release, an expiry, a withdrawn intent).
    async fn watch_key(&self, key: &Key) -> Result<Box<dyn Watch>>;
    /// [`On::note_intent`] on the node of `req`'s key.
    async fn note_intent(&self, req: &AcquireRequest<'_>, left: Option<Duration>) -> Result<bool>;
    /// [`On::clear_intent`] on the node of `key`.
    async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()>;
}

/// `Store::acquire` of a Redis form: a waiting exclusive request (not a slot) is a writer
/// that records its intent when readers refuse it; the rest wait by watching.
pub(super) async fn acquire<S: Intents>(
    s: &S,
    req: &AcquireRequest<'_>,
    until: Option<Instant>,
) -> Result<Attempt> {
    match until {
        Some(u) if req.mode == Mode::Exclusive && req.slot.is_none() => {
            acquire_as_writer(s, req, u).await
        }
        _ => crate::store::acquire_watching(s, req, until, || s.watch_key(req.key)).await,
    }
}

/// A waiting writer: attempts that record its intent when readers refuse it, and the
/// intent withdrawn when the wait runs out (a grant keeps it until its release).
async fn acquire_as_writer<S: Intents>(
    s: &S,
    req: &AcquireRequest<'_>,
    until: Instant,
) -> Result<Attempt> {
    let noted = AtomicBool::new(false);
    let r = crate::store::acquire_watching_with(
        req,
        Some(until),
        || s.watch_key(req.key),
        || async {
            let a = s.try_acquire(req).await?;
            if let Attempt::Busy { holder_expires_in } = &a
                && s.note_intent(req, *holder_expires_in).await?
            {
                noted.store(true, Ordering::Relaxed);
            }
            Ok(a)
        },
    )
    .await;
    // Granted, the intent stays until the release removes it (harmless meanwhile: the
    // writer excludes readers anyway), so a handoff costs no extra round trip.
    if noted.load(Ordering::Relaxed) && matches!(r, Ok(Attempt::Busy { .. })) {
        s.clear_intent(req.key, req.owner).await?;
    }
    r
}
