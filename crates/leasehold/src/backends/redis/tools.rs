//! What leasehold's own tools need of the Redis store (feature `tools`, not a stable API):
//! `leasehold bench` drives a raw redis-rs client with the very scripts the store sends, with
//! the same keys and arguments; the chaos tools name the store's keys and connect to its
//! server. Each answer about a URL comes from its parsed configuration ([`StoreUrl`]).

use redis::ScriptInvocation;

use super::cluster_url::ClusterUrl;
use super::redlock::RedlockStore;
use super::scripts::{CHANNEL, FENCE, HOLDER, RELEASED_BY};
use super::sentinel_url::SentinelUrl;
use super::{Names, RedisUrl, RedlockUrl};
use crate::fence::redis::RedisFence;
use crate::{Error, Key, Result, StoreUrl};

/// The key prefix of any Redis URL (`redis://`, `rediss://`, `redis-cluster://`,
/// `redis-sentinel://`, `redlock://`): its `prefix` option, `leasehold:` by default.
pub fn prefix(url: &StoreUrl) -> Result<&str> {
    let prefix = if let Some(u) = url.config::<RedisUrl>() {
        &u.opts.prefix
    } else if let Some(u) = url.config::<ClusterUrl>() {
        &u.prefix
    } else if let Some(u) = url.config::<SentinelUrl>() {
        &u.opts.prefix
    } else if let Some(u) = url.config::<RedlockUrl>() {
        &u.opts.prefix
    } else {
        return Err(Error::invalid(format!("{url} is not a Redis URL")));
    };
    Ok(prefix)
}

/// The names the store gives one key's lease and its companions (see the key layout in the
/// `redis` module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyNames {
    /// `PREFIX{KEY}`: the lease (a slot `SEM#I` of a semaphore: `PREFIX{SEM}#I`).
    pub lease: String,
    /// The fence counter.
    pub fence: String,
    /// Who holds the lease.
    pub holder: String,
    /// The last release's owner (its tombstone).
    pub released_by: String,
    /// The channel a release publishes on.
    pub channel: String,
}

/// The names of `key`'s lease and companions on the store `url` names (any Redis URL; on a
/// cluster, a key with braces is tagged on its hash).
pub fn key_names(url: &StoreUrl, key: &Key) -> Result<KeyNames> {
    let prefix = prefix(url)?.to_owned();
    let names = if url.config::<ClusterUrl>().is_some() {
        Names::cluster(prefix)
    } else {
        Names::new(prefix)
    };
    Ok(KeyNames {
        lease: names.lease(key),
        fence: names.fence(key),
        holder: names.holder(key),
        released_by: names.released_by(key),
        channel: names.channel(key),
    })
}

/// A client of the one server a `redis://` or `rediss://` URL names, as the store connects
/// to it (leasehold's options removed; with `tls_ca`, that CA).
pub fn client(url: &StoreUrl) -> Result<redis::Client> {
    let u: &RedisUrl = url.config_of("redis://")?;
    super::client(&u.base, u.opts.tls_ca.as_deref())
}

/// The URL the store's driver connects to a `redis://` or `rediss://` server with
/// (leasehold's options removed, credentials kept), for clients that take a URL (the bench's
/// peer crates). Never print it.
pub fn driver_url(url: &StoreUrl) -> Result<&str> {
    let u: &RedisUrl = url.config_of("redis://")?;
    Ok(&u.base)
}

/// The `redis://` URL of the server at `addr` (`HOST:PORT`) in the deployment a
/// `redis://`, `rediss://` or `redis-cluster://` URL names (a node of the cluster, the
/// server itself), with the URL's credentials and no options: for a raw client of that one
/// server. Never print it.
pub fn node_url(url: &StoreUrl, addr: &str) -> Result<String> {
    let auth = if let Some(u) = url.config::<ClusterUrl>() {
        &u.auth
    } else if let Some(u) = url.config::<RedisUrl>() {
        crate::url::authority(&u.base).1
    } else {
        return Err(Error::invalid(format!("{url} is not a redis:// or redis-cluster:// URL")));
    };
    Ok(format!("redis://{auth}{addr}"))
}

/// The Redlock store a `redlock://` URL names, opened on its parsed configuration within
/// [`crate::DEFAULT_CONNECT_TIMEOUT`] as [`RedlockStore::connect`] opens it (to give it a fence
/// source before a locker takes it).
pub async fn redlock(url: &StoreUrl) -> Result<RedlockStore> {
    let u: &RedlockUrl = url.config_of("redlock://")?;
    RedlockStore::open(u, crate::limits::Limits::default()).await
}

/// A [`RedisFence`] on the server a `redis://` or `rediss://` URL names, its fence hashes
/// under the URL's prefix and forgotten past the URL's horizon, as [`RedisFence::connect`]
/// makes it.
pub async fn fence(url: &StoreUrl) -> Result<RedisFence> {
    let conn = client(url)?
        .get_connection_manager()
        .await
        .map_err(|e| Error::unavailable(format!("cannot connect to redis: {e}"), Some(e.into())))?;
    Ok(RedisFence::with_prefix(conn, prefix(url)?).with_horizon(horizon(url)?))
}

/// The Lua source of the grant and release scripts a fenced `redis://` store sends.
/// Grant → `{1, fence}` or `{0, pttl}`; release → 1 if it was the owner's (2: already
/// released by this owner, a retry).
pub fn scripts() -> (&'static str, &'static str) {
    (super::GRANT, super::RELEASE)
}

/// The grant's keys and arguments as the store sends them, for the lease key `lease`
/// (`PREFIX{KEY}`), an owner token, a TTL in ms and the holder's info line
/// ([`crate::HolderInfo::encode`], `""` for none), with the default horizon
/// ([`crate::horizon::DEFAULT_HORIZON`]).
pub fn grant_args(
    inv: &mut ScriptInvocation<'_>,
    lease: &str,
    owner: &str,
    ttl_ms: u64,
    info: &str,
) {
    inv.key(lease).key(format!("{lease}{FENCE}")).key(format!("{lease}{HOLDER}"));
    inv.arg(owner).arg(ttl_ms).arg(info);
    inv.arg(crate::horizon::DEFAULT_HORIZON.as_millis() as u64);
}

/// The horizon a `redis://` URL sets (`horizon=`, else the default).
pub fn horizon(url: &StoreUrl) -> Result<std::time::Duration> {
    let u: &RedisUrl = url.config_of("redis://")?;
    Ok(u.opts.horizon)
}

/// The release's keys and arguments as a store sends them (its tombstone living the default
/// op timeout), waking waiters with `publish`: `PUBLISH`, or `SPUBLISH` on a cluster.
pub fn release_args(inv: &mut ScriptInvocation<'_>, lease: &str, owner: &str, publish: &str) {
    inv.key(lease).key(format!("{lease}{HOLDER}")).key(format!("{lease}{RELEASED_BY}"));
    let tombstone_ms = crate::DEFAULT_OP_TIMEOUT.as_millis() as u64;
    inv.arg(owner).arg(format!("{lease}{CHANNEL}")).arg(tombstone_ms).arg(publish);
}

/// The Lua source of a reader's grant (`KEYS`: lease, fence counter, readers, intents;
/// `ARGV`: owner, ttl ms, info line) → `{1, fence}` or `{0, ms}`, which issues its fence from
/// the key's counter by the mutex's rule.
pub fn shared_grant_script() -> &'static str {
    super::prims::GRANT_SHARED
}
