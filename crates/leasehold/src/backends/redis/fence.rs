//! Redis fenced resource: scripts that claim a fence and perform a write atomically with the
//! fence check.
//!
//! Each protected resource has a fence hash `PREFIX fence:{RESOURCE}` holding the lock key,
//! fence and owner of the current claim; `PREFIX` is the URL's `prefix` option, as for the
//! lease store (default `leasehold:`), so a namespace holds its leases and its fences. Every effect runs in one script that first compares
//! that hash with the caller's [`Fencing`]. In Redis Cluster, give the target keys the same
//! `{RESOURCE}` hash tag so they share the fence hash's slot.
//!
//! **Bounded by the horizon** (`crate::horizon`; the URL's `horizon=`, default a day): a
//! claim whose clock-backed fence was issued more than the horizon ago (by the Redis server's
//! clock) is refused with [`StaleReason::PastHorizon`](crate::StaleReason::PastHorizon),
//! whatever is installed, and a fence hash expires when its fence is twice the horizon old.
//! A fence the expired hash would have refused is smaller than its fence, so already past
//! the horizon: a holder frozen that long stays refused. A holder must claim within the
//! horizon of its grant, and its effects are refused once its claim is twice the horizon
//! old: the horizon must exceed the longest a grant is held. Fences without an age (below
//! [`crate::horizon::CLOCK_FENCE_MIN`]: etcd revisions, ZooKeeper zxids) are never refused as
//! old, and their hashes have no TTL: a retired resource's hash is deleted with `redis-cli
//! del 'PREFIX fence:{RESOURCE}'` once no holder of its lock key can still write.
//!
//! ```no_run
//! # async fn demo(fencing: leasehold::fence::Fencing) -> leasehold::Result<()> {
//! use leasehold::fence::redis::RedisFence;
//! let mut res = RedisFence::connect("redis://127.0.0.1:6379").await?;
//! res.claim("report:2026-11", &fencing).await?;                      // before the first effect
//! res.set("report:2026-11", &fencing, "{report:2026-11}:body", "…").await?;   // fenced effect
//! let n: i64 = res.incr_by("report:2026-11", &fencing, "{report:2026-11}:rows", 10).await?;
//! # let _ = n; Ok(()) }
//! ```
//!
// The links name their items by path: these docs are shown at `leasehold::fence::redis`.
//! [`Fencing`]: crate::Fencing

pub use redis;
use redis::aio::ConnectionManager;
use redis::{FromRedisValue, Script, ToRedisArgs};

use crate::fence::Fencing;
use crate::fence::claim::{Installed, stale};
use crate::{Error, Result};

/// `KEYS`: the fence hash; `ARGV`: lock key, fence, owner, horizon in µs. `{1}` claimed, `{2}`
/// past the horizon, `{0, key, fence, owner}` refused by what is installed.
const CLAIM: &str = r"
redis.replicate_commands()
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f, h = tonumber(ARGV[2]), tonumber(ARGV[4])
local aged = f >= 1000000000000000
if aged and f + h < now_us then return {2} end
local function gt(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end
local cur = redis.call('HMGET', KEYS[1], 'key', 'fence', 'owner')
if cur[1] and cur[1] ~= ARGV[1] then return {0, cur[1], cur[2], cur[3]} end
if (not cur[2]) or gt(ARGV[2], cur[2]) or (ARGV[2] == cur[2] and ARGV[3] == cur[3]) then
  redis.call('HSET', KEYS[1], 'key', ARGV[1], 'fence', ARGV[2], 'owner', ARGV[3])
  if aged then
    redis.call('PEXPIREAT', KEYS[1], string.format('%d', math.floor((f + 2 * h) / 1000)))
  else
    redis.call('PERSIST', KEYS[1])
  end
  return {1}
end
return {0, cur[1], cur[2], cur[3]}";

const CALL: &str = r"
local cur = redis.call('HMGET', KEYS[1], 'key', 'fence', 'owner')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
  return redis.error_reply('LEASEHOLD_STALE ' .. tostring(cur[1]) .. ' ' .. tostring(cur[2]) .. ' ' .. tostring(cur[3]))
end
return redis.call(ARGV[4], KEYS[2], unpack(ARGV, 5))";

/// A Redis connection that applies fenced effects.
#[derive(Clone)]
pub struct RedisFence {
    conn: ConnectionManager,
    prefix: String,
    horizon: std::time::Duration,
    claim: Script,
    call: Script,
}

impl std::fmt::Debug for RedisFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RedisFence")
    }
}

fn err(what: &str, e: redis::RedisError) -> Error {
    crate::backends::redis::redis_err("redis", what, e)
}

fn installed_from(parts: &[Option<String>]) -> Option<Installed> {
    match parts {
        [Some(key), Some(fence), Some(owner)] => Some(Installed {
            key: key.clone(),
            token: fence.parse().unwrap_or(0),
            owner: owner.clone(),
        }),
        _ => None,
    }
}

impl RedisFence {
    /// Wraps an existing connection; fence hashes under the default prefix `leasehold:`.
    pub fn new(conn: ConnectionManager) -> Self {
        Self::with_prefix(conn, "leasehold:")
    }

    /// Wraps an existing connection; fence hashes under `prefix`.
    pub fn with_prefix(conn: ConnectionManager, prefix: &str) -> Self {
        RedisFence {
            conn,
            prefix: prefix.to_owned(),
            horizon: crate::horizon::DEFAULT_HORIZON,
            claim: Script::new(CLAIM),
            call: Script::new(CALL),
        }
    }

    /// Connects to the Redis holding the resource: a `redis://` URL as the lease store takes
    /// it, whose `prefix` option (default `leasehold:`) names the fence hashes.
    pub async fn connect(url: &str) -> Result<Self> {
        let (base, opts) = crate::backends::redis::parse_query(url)?;
        let client = redis::Client::open(base.as_str())
            .map_err(|e| Error::invalid(format!("bad redis URL: {e}")))?;
        let conn = client.get_connection_manager().await.map_err(|e| {
            Error::unavailable(format!("cannot connect to redis: {e}"), Some(e.into()))
        })?;
        Ok(Self::with_prefix(conn, &opts.prefix).with_horizon(opts.horizon))
    }

    /// This resource with `horizon` (the URL's `horizon=`; default
    /// [`crate::horizon::DEFAULT_HORIZON`]): see the module docs.
    pub fn with_horizon(mut self, horizon: std::time::Duration) -> Self {
        self.horizon = horizon;
        self
    }

    /// The key prefix (the URL's `prefix` option): put the keys a fenced effect writes under
    /// it too, so one namespace holds them all.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The fence hash of `resource`: `PREFIX fence:{RESOURCE}`.
    pub fn fence_key(&self, resource: &str) -> String {
        format!("{}fence:{{{resource}}}", self.prefix)
    }

    /// Installs `fencing` on `resource`: succeeds iff its fence is greater than the installed
    /// one, or equal with the same owner, and the resource is unclaimed or guarded by the same
    /// lock key, and a clock-backed fence is not older than the horizon. Otherwise
    /// [`Error::StaleFence`] (reason [`PastHorizon`](crate::StaleReason::PastHorizon) for the
    /// last).
    pub async fn claim(&mut self, resource: &str, fencing: &Fencing) -> Result<()> {
        crate::fence::claim::require_token(resource, fencing)?;
        let r: Vec<Option<String>> = self
            .claim
            .key(self.fence_key(resource))
            .arg(fencing.key().as_str())
            .arg(fencing.token().get())
            .arg(fencing.owner().to_string())
            .arg(crate::horizon::micros(self.horizon))
            .invoke_async(&mut self.conn)
            .await
            .map_err(|e| err("fence claim", e))?;
        match r.first() {
            Some(Some(one)) if one == "1" => Ok(()),
            Some(Some(two)) if two == "2" => {
                Err(crate::fence::claim::past_horizon(resource, fencing))
            }
            _ => Err(stale(resource, fencing, installed_from(r.get(1..).unwrap_or(&[])))),
        }
    }

    /// Runs `COMMAND target args…` iff `fencing` is exactly the claim installed on `resource`,
    /// in one script. A stale or foreign fence is [`Error::StaleFence`], and nothing runs.
    pub async fn call<T: FromRedisValue>(
        &mut self,
        resource: &str,
        fencing: &Fencing,
        command: &str,
        target: &str,
        args: impl ToRedisArgs,
    ) -> Result<T> {
        let r = self
            .call
            .key(self.fence_key(resource))
            .key(target)
            .arg(fencing.key().as_str())
            .arg(fencing.token().get())
            .arg(fencing.owner().to_string())
            .arg(command)
            .arg(args)
            .invoke_async(&mut self.conn)
            .await;
        match r {
            Ok(v) => Ok(v),
            Err(e) if e.code() == Some("LEASEHOLD_STALE") => {
                let detail = e.detail().unwrap_or("");
                let parts: Vec<Option<String>> = detail
                    .split(' ')
                    .map(|p| (p != "false" && p != "nil").then(|| p.to_string()))
                    .collect();
                Err(stale(resource, fencing, installed_from(&parts)))
            }
            Err(e) => Err(err("fenced call", e)),
        }
    }

    /// `SET target value`, fenced.
    pub async fn set(
        &mut self,
        resource: &str,
        fencing: &Fencing,
        target: &str,
        value: &str,
    ) -> Result<()> {
        let _: redis::Value = self.call(resource, fencing, "SET", target, value).await?;
        Ok(())
    }

    /// `HSET target field value`, fenced.
    pub async fn hset(
        &mut self,
        resource: &str,
        fencing: &Fencing,
        target: &str,
        field: &str,
        value: &str,
    ) -> Result<()> {
        let _: i64 = self.call(resource, fencing, "HSET", target, (field, value)).await?;
        Ok(())
    }

    /// `INCRBY target delta`, fenced; returns the new value.
    pub async fn incr_by(
        &mut self,
        resource: &str,
        fencing: &Fencing,
        target: &str,
        delta: i64,
    ) -> Result<i64> {
        self.call(resource, fencing, "INCRBY", target, delta).await
    }
}
