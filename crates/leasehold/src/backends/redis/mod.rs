//! `redis://[user:pass@]host:port[/db][?prefix=P&wait_replicas=N&wait_timeout=DUR&horizon=DUR]`: leases
//! on one Redis server (a multiplexed, auto-reconnecting connection). `rediss://` (feature
//! `redis-tls`) is the same over TLS, verified against the system roots or, with
//! `tls_ca=PATH`, against that PEM CA certificate.
//!
//! Key layout (prefix default `leasehold:`), inspectable with `redis-cli`:
//! - `leasehold:{KEY}`: the lease, a string holding the owner token, with a PX expiry;
//! - `leasehold:{KEY}:fence`: the fence counter, set by the granting script only to
//!   `max(counter + 1, the server's TIME in µs)`; while a lease exists its value is the
//!   holder's fence. It expires the lease's ttl plus the horizon (`horizon=`, a day by
//!   default; [`crate::horizon`]) after the last grant or renewal: the next grant's fence then
//!   comes from the clock, above every fence the counter issued. A retired prefix is removed with `redis-cli --scan --pattern 'PREFIX*' | xargs redis-cli del`
//!   once no holder or fenced resource relies on it;
//! - `leasehold:{KEY}:holder`: who holds the lease (host, pid, since, command; see
//!   [`crate::HolderInfo`]), written, extended and deleted by the same scripts as the
//!   lease, with the same expiry;
//! - `leasehold:{KEY}:released-by`: the owner of the last release, kept for the op timeout,
//!   so a retry of that release (its reply lost) reports it clean (`RELEASE` in `scripts.rs`);
//! - channel `leasehold:{KEY}:released`: a release publishes here, waking waiters.
//!
//! The keys share the `{KEY}` hash tag, so they live in one cluster slot. The readers' and
//! semaphores' keys are in `prims.rs`; a semaphore's slot `SEM#I` is named
//! `leasehold:{SEM}#I…`, in its semaphore's tag (`Names` in `scripts.rs`).
//!
//! Connecting is bounded by the connect limit ([`crate::Locker::connect_within`]), once, on a
//! first connection where a wrong password (`WRONGPASS`, `NOAUTH`), a database index the
//! server lacks, an ACL refusal or a refused TLS certificate is [`Error::Config`], not an
//! outage; `redis://` aimed at a TLS port and `rediss://` at a plain one are named as such.
//!
//! Grant, renew, release and batched renewal are Lua scripts (EVALSHA, reloaded on
//! `NOSCRIPT`), each comparing the owner token atomically. Without persistence and
//! synchronous replication, a restart or failover can admit a second holder; its fence is
//! still larger than the first holder's (clock-backed, see [`crate::FenceRepeat::ClockBacked`]),
//! so a fenced resource refuses the stale one. `wait_replicas=N` makes each grant wait for N
//! replica acknowledgements (and fail closed without them), which narrows the window in
//! which a second holder can be admitted, but does not close it.

pub mod cluster;
pub(crate) mod cluster_url;
mod connect;
/// The fence resource; its public path is `leasehold::fence::redis`.
#[doc(hidden)]
pub mod fence;
mod form;
mod linger;
mod options;
mod prims;
mod probe;
mod probe_ha;
mod pubsub;
pub mod redlock;
mod script_calls;
mod scripts;
pub mod sentinel;
mod sentinel_url;
mod shard_sub;
mod status;
#[cfg(feature = "tools")]
pub mod tools;
mod wait;
pub(crate) use connect::redis_err;
use form::{Form, form_store};
pub(crate) use options::{RedisUrl, RedlockUrl, parse_query};
pub(crate) use pubsub::{SubWatch, Subscriber};
use script_calls::{Answer, On};
use scripts::{GRANT, RELEASE, RENEW_MANY};
pub(crate) use scripts::{GRANT_NO_FENCE, Names};
use wait::Intents;

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use redis::Script;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use super::Limits;
use crate::store::{AcquireRequest, RenewItem, Watch};
use crate::{Error, FenceRepeat, Guarantees, Key, LockKind, OwnerToken, Result};
use crate::{Holder, HolderInfo};

/// Leases renewed per script call; the calls of one batch share one pipelined round trip.
const RENEW_CHUNK: usize = 1000;

/// Whether a request failed on a connection found broken: the connection manager reconnects
/// only after such a failure, so an idempotent request (owner-checked renew or release) gets
/// one retry on the fresh connection.
fn retry_on(e: &redis::RedisError) -> bool {
    e.is_connection_dropped() && !e.is_connection_refusal()
}

/// One Redis server: connection, scripts, subscriber.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub conn: ConnectionManager,
    pub sub: Arc<Subscriber>,
    pub addr: String,
    /// Whether the grant script issues fences (not on Redlock instances).
    fenced: bool,
    grant: Arc<Script>,
    renew_many: Arc<Script>,
    release: Arc<Script>,
}

impl Node {
    pub async fn connect(
        url: &str,
        fenced: bool,
        tls_ca: Option<&std::path::Path>,
        limits: Limits,
    ) -> Result<Node> {
        let client = client(url, tls_ca)?;
        let addr = client.get_connection_info().addr().to_string();
        // The first connection checks what a connection manager would only retry (password,
        // database index, TLS), within the connect limit, and loads the scripts (otherwise
        // the first EVALSHA of each costs a NOSCRIPT round trip; after a server restart
        // redis-rs reloads them on NOSCRIPT).
        let start = Instant::now();
        let mut first = connect::first_connection(&client, &addr, limits.connect).await?;
        let grant = Arc::new(Script::new(if fenced { GRANT } else { GRANT_NO_FENCE }));
        let renew_many = Arc::new(Script::new(RENEW_MANY));
        let release = Arc::new(Script::new(RELEASE));
        let left = limits.connect.saturating_sub(start.elapsed());
        let load = async {
            for s in [&grant, &renew_many, &release] {
                s.prepare_invoke().load_async(&mut first).await?;
            }
            Ok::<_, redis::RedisError>(())
        };
        match tokio::time::timeout(left, load).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(redis_err("redis", &format!("loading the scripts on {addr}"), e));
            }
            Err(_) => {
                return Err(Error::unavailable(
                    format!("redis at {addr} did not answer within {:?}", limits.connect),
                    None,
                ));
            }
        }
        // No driver-level response timeout (redis-rs defaults to 500 ms): the caller's op
        // timeout bounds every request, and a long renewal pipeline for many leases must not
        // turn the requests queued behind it into unknown outcomes. Each reconnect attempt
        // (after a failure) is bounded by the connect limit.
        let cfg = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(limits.connect))
            .set_response_timeout(None)
            .set_number_of_retries(2);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), cfg).map_err(|e| {
            Error::unavailable(format!("cannot connect to redis at {addr}: {e}"), Some(e.into()))
        })?;
        Ok(Node { conn, sub: Subscriber::new(client), addr, fenced, grant, renew_many, release })
    }

    /// `Ok(Ok(fence))` granted, `Ok(Err(pttl))` busy. `info` is kept beside the lease.
    pub async fn grant(
        &self,
        names: &Names,
        key: &Key,
        owner: &OwnerToken,
        ttl: Duration,
        info: Option<&HolderInfo>,
    ) -> Result<std::result::Result<u64, Option<Duration>>> {
        let mut c = self.conn.clone();
        let mut inv = self.grant.prepare_invoke();
        inv.key(names.lease(key));
        if self.fenced {
            inv.key(names.fence(key));
        }
        let line = info.map(HolderInfo::encode).unwrap_or_default();
        inv.key(names.holder(key)).arg(&owner.hex()[..]).arg(ttl_ms(ttl)).arg(line);
        inv.arg(names.horizon_ms());
        let (ok, n): (i64, i64) = inv
            .invoke_async(&mut c)
            .await
            .map_err(|e| redis_err("redis", &format!("acquire on {}", self.addr), e))?;
        Ok(if ok == 1 {
            Ok(n as u64)
        } else {
            Err((n >= 0).then(|| Duration::from_millis(n as u64)))
        })
    }

    /// Renews owner-checked; once more on the fresh connection when the first attempt found
    /// the connection broken (a renewal applied twice is a renewal).
    pub async fn renew_many(&self, names: &Names, items: &[RenewItem]) -> Result<Vec<bool>> {
        let what = || format!("renew on {}", self.addr);
        match self.renew_many_once(names, items).await {
            Err(e) if retry_on(&e) => self
                .renew_many_once(names, items)
                .await
                .map_err(|e2| redis_err("redis", &format!("{} (retried after {e})", what()), e2)),
            r => r.map_err(|e| redis_err("redis", &what(), e)),
        }
    }

    async fn renew_many_once(
        &self,
        names: &Names,
        items: &[RenewItem],
    ) -> redis::RedisResult<Vec<bool>> {
        let mut c = self.conn.clone();
        if items.len() <= RENEW_CHUNK {
            let mut inv = self.renew_many.prepare_invoke();
            for it in items {
                inv.key(names.lease(&it.key)).key(names.holder(&it.key));
                inv.arg(&it.owner.hex()[..]).arg(ttl_ms(it.ttl));
            }
            inv.arg(names.horizon_ms());
            inv.arg("PUBLISH");
            let r: Vec<i64> = inv.invoke_async(&mut c).await?;
            return Ok(r.into_iter().map(|v| v == 1).collect());
        }
        // Many chunks: load once, then pipeline EVALSHA per chunk (one round trip).
        for attempt in 0..2 {
            let mut pipe = redis::pipe();
            for chunk in items.chunks(RENEW_CHUNK) {
                let cmd = pipe.cmd("EVALSHA").arg(self.renew_many.get_hash()).arg(2 * chunk.len());
                for it in chunk {
                    cmd.arg(names.lease(&it.key)).arg(names.holder(&it.key));
                }
                for it in chunk {
                    cmd.arg(&it.owner.hex()[..]).arg(ttl_ms(it.ttl));
                }
                cmd.arg(names.horizon_ms());
                cmd.arg("PUBLISH");
            }
            match pipe.query_async::<Vec<Vec<i64>>>(&mut c).await {
                Ok(r) => return Ok(r.into_iter().flatten().map(|v| v == 1).collect()),
                Err(e) if attempt == 0 && e.code() == Some("NOSCRIPT") => {
                    self.renew_many.prepare_invoke().load_async(&mut c).await?;
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns")
    }

    /// Releases owner-checked; once more on the fresh connection when the first attempt found
    /// the connection broken. A retry that finds the first attempt's tombstone is a clean
    /// release ([`scripts::RELEASE`]); one that finds the grant gone and no tombstone (lost
    /// in a restart or failover, or the grant ended before): whether the first attempt
    /// removed it is unknown, [`Error::UnknownOutcome`].
    pub async fn release(&self, names: &Names, key: &Key, owner: &OwnerToken) -> Result<bool> {
        let what = || format!("release on {}", self.addr);
        match self.release_once(names, key, owner).await {
            Err(e) if retry_on(&e) => match self.release_once(names, key, owner).await {
                Ok(true) => Ok(true),
                Ok(false) => Err(Error::UnknownOutcome(format!(
                    "{}: {e}; a retry found the grant gone (removed by that attempt, or ended \
                     before it)",
                    what()
                ))),
                Err(e2) => Err(redis_err("redis", &format!("{} (retried after {e})", what()), e2)),
            },
            r => r.map_err(|e| redis_err("redis", &what(), e)),
        }
    }

    async fn release_once(
        &self,
        names: &Names,
        key: &Key,
        owner: &OwnerToken,
    ) -> redis::RedisResult<bool> {
        let mut c = self.conn.clone();
        let n: i64 = self
            .release
            .key(names.lease(key))
            .key(names.holder(key))
            .key(names.released_by(key))
            .arg(&owner.hex()[..])
            .arg(names.channel(key))
            .arg(names.tombstone_ms())
            .arg("PUBLISH")
            .invoke_async(&mut c)
            .await?;
        // 2: the first attempt released it (its tombstone).
        Ok(n != 0)
    }

    /// Blocks until `n` replicas acknowledged this connection's writes, or `t`.
    async fn wait_replicas(&self, n: u32, t: Duration) -> Result<u32> {
        let mut c = self.conn.clone();
        redis::cmd("WAIT")
            .arg(n)
            .arg(t.as_millis() as u64)
            .query_async(&mut c)
            .await
            .map_err(|e| redis_err("redis", "WAIT", e))
    }

    pub async fn holders(
        &self,
        names: &Names,
        key: Option<&Key>,
        fenced: bool,
    ) -> Result<Vec<Holder>> {
        Ok(self.holders_and_readers(names, key, fenced).await?.0)
    }

    /// The grant scripts (the mutex's, readers', slots') on this node's connection.
    fn on<'a>(&self, names: &'a Names, backend: &'static str) -> On<'a, ConnectionManager> {
        On { conn: self.conn.clone(), names, backend, publish: "PUBLISH" }
    }
}

/// The client for a store URL (`tls_ca`: the PEM CA a `rediss://` server's certificate is
/// checked against, instead of the system roots).
pub(crate) fn client(url: &str, tls_ca: Option<&std::path::Path>) -> Result<redis::Client> {
    match tls_ca {
        None => redis::Client::open(url),
        Some(ca) => {
            let pem = std::fs::read(ca)
                .map_err(|e| Error::invalid(format!("cannot read tls_ca {}: {e}", ca.display())))?;
            tls_client(url, pem)
        }
    }
    .map_err(|e| Error::invalid(format!("bad redis URL {:?}: {e}", crate::redact(url))))
}

#[cfg(feature = "redis-tls")]
fn tls_client(url: &str, root_cert: Vec<u8>) -> redis::RedisResult<redis::Client> {
    redis::Client::build_with_tls(
        url,
        redis::TlsCertificates { client_tls: None, root_cert: Some(root_cert) },
    )
}

#[cfg(not(feature = "redis-tls"))]
fn tls_client(_url: &str, _root_cert: Vec<u8>) -> redis::RedisResult<redis::Client> {
    Err(redis::RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "tls_ca needs leasehold's redis-tls feature",
    )))
}

fn ttl_ms(ttl: Duration) -> u64 {
    (ttl.as_millis() as u64).max(1)
}

fn glob_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
            o.push('\\');
        }
        o.push(ch);
    }
    o
}

/// What the forms that run the primitives' scripts on one node per key hold (`prims.rs`).
const PRIMITIVES_NOTE: &str = "semaphores (permit count checked in the slot's grant script), \
                               fenced readers with writer preference, several keys";

/// The single-server Redis lease store.
#[derive(Debug, Clone)]
pub struct RedisStore {
    node: Node,
    names: Names,
    wait_replicas: Option<(u32, Duration)>,
}

impl RedisStore {
    /// Connects to `url` (`redis://…` with optional `prefix`, `wait_replicas` and
    /// `wait_timeout` query options) within [`crate::DEFAULT_CONNECT_TIMEOUT`]. Fails with
    /// [`Error::Config`] when the server refuses the password, the database index, the ACL
    /// user or the TLS handshake, [`Error::Unavailable`] when it does not answer.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(&RedisUrl::parse(url)?, Limits::default()).await
    }

    pub(crate) async fn open(u: &RedisUrl, limits: Limits) -> Result<Self> {
        if u.tls() && !cfg!(feature = "redis-tls") {
            return Err(Error::invalid("rediss:// (TLS) needs leasehold's redis-tls feature"));
        }
        let opts = &u.opts;
        let node = Node::connect(&u.base, true, opts.tls_ca.as_deref(), limits).await?;
        let names = Names::new(opts.prefix.clone()).with_horizon(opts.horizon);
        Ok(RedisStore { node, names, wait_replicas: opts.wait_replicas })
    }
}

form_store!(RedisStore {
        fn guarantees(&self) -> Guarantees {
            Guarantees {
                backend: "redis",
                kind: LockKind::Lease,
                exclusion: "linearizable while the one server lives (single-threaded script execution)",
                store_failure: match self.wait_replicas {
                    None => {
                        "a restart without persistence, or a failover to a replica that missed the \
                         grant, can admit a second holder; its fence is larger than the stale \
                         holder's, so a fenced resource refuses the stale one"
                    }
                    Some(_) => {
                        "each grant waits for wait_replicas acknowledgements (or fails closed): a \
                         failover to an acknowledging replica keeps the grant; asynchronous \
                         replication can still lose it, and then a second holder is admitted \
                         with a larger fence"
                    }
                },
                expiry: "the server's clock (SET PX, PEXPIRE)",
                fence: "max(counter + 1, server TIME in µs) of a per-key counter, in the granting \
                        script; the counter expires ttl + horizon after the last grant or renewal \
                        (horizon=, a day by default), and the clock then starts above its fences",
                fence_repeat: FenceRepeat::ClockBacked,
                failure_admits_second_holder: true,
                holders_know_fence: true,
                holders_know_info: true,
                waiting: "pub/sub message on release (one waiter woken per process), else the \
                          holder's PTTL",
                primitives: crate::Primitives { note: PRIMITIVES_NOTE, ..crate::Primitives::ALL },
            }
        }

        async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
            self.node.renew_many(&self.names, items).await
        }

        async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
            self.node.release(&self.names, key, owner).await
        }

        async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
            self.node.holders_with_readers(&self.names, key, "redis").await
        }
});

#[async_trait]
impl Form for RedisStore {
    type Conn = ConnectionManager;

    fn names(&self) -> &Names {
        &self.names
    }

    async fn scripts(&self) -> Result<On<'_, ConnectionManager>> {
        Ok(self.node.on(&self.names, "redis"))
    }

    /// The grant, then, with `wait_replicas`, the replicas' acknowledgement: short of it, the
    /// grant is released and the attempt fails closed.
    async fn grant(&self, req: &AcquireRequest<'_>) -> Result<Answer> {
        let r = self.node.on(&self.names, "redis").grant(req).await?;
        if let (Ok(_), Some((n, t))) = (&r, self.wait_replicas) {
            let acked = self.node.wait_replicas(n, t).await?;
            if acked < n {
                let _ = self.node.release(&self.names, req.key, req.owner).await;
                return Err(Error::unavailable(
                    format!(
                        "grant acknowledged by {acked} of the {n} replicas required within {t:?}; released it"
                    ),
                    None,
                ));
            }
        }
        Ok(r)
    }
}

#[async_trait]
impl Intents for RedisStore {
    async fn watch_key(&self, key: &Key) -> Result<Box<dyn Watch>> {
        Ok(Box::new(self.node.sub.watch(self.names.channel(key)).await?))
    }
    async fn note_intent(&self, req: &AcquireRequest<'_>, left: Option<Duration>) -> Result<bool> {
        self.node.on(&self.names, "redis").note_intent(req, left).await
    }
    async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()> {
        self.node.on(&self.names, "redis").clear_intent(key, owner).await
    }
}

/// `redis://HOST:PORT[/DB]`.
pub(crate) const STORE: super::Descriptor = super::Descriptor {
    form: "redis://HOST:PORT",
    usage: "redis://[USER:PASS@]HOST:PORT[/DB][?prefix=P&wait_replicas=N&wait_timeout=100ms]",
    summary: "one Redis server",
    parse: |url| super::parsed(RedisUrl::parse(url)),
};

/// `rediss://HOST:PORT[?tls_ca=PEM]`.
#[cfg(feature = "redis-tls")]
pub(crate) const TLS_STORE: super::Descriptor = super::Descriptor {
    form: "rediss://HOST:PORT[?tls_ca=PEM]",
    usage: "rediss://[USER:PASS@]HOST:PORT[/DB][?tls_ca=PATH]",
    summary: "the same over TLS",
    ..STORE
};

impl super::StoreConfig for RedisUrl {
    fn open(&self, limits: Limits) -> super::Boxed<'_, Result<Arc<dyn crate::Store>>> {
        super::opened(RedisStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> super::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(probe::redis(self, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_share_a_hash_tag() {
        let n = Names::new("leasehold:".into());
        let k = Key::new("a}b{c").unwrap();
        assert_eq!(n.lease(&k), "leasehold:{a}b{c}");
        assert_eq!(n.fence(&k), "leasehold:{a}b{c}:fence");
        assert_eq!(n.channel(&k), "leasehold:{a}b{c}:released");
        assert_eq!(n.holder(&k), "leasehold:{a}b{c}:holder");
        assert_eq!(n.key_of(&n.lease(&k)), Some(k));
    }
}
