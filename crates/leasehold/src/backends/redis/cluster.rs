//! `redis-cluster://[user:pass@]HOST:PORT[,HOST:PORT…][?prefix=P]`: leases on a Redis Cluster.
//! The hosts are seeds: the rest of the cluster is discovered (redis-rs's cluster client,
//! which follows `MOVED`/`ASK` and refreshes its slot map after a failover or a slot
//! migration, so the grant, renewals and release of a held lease still reach its key).
//!
//! Same keys, scripts and fences as `redis://` ([`super`]), semaphores' and readers' too
//! (`prims.rs`): the lease, its counter and its holder info share a hash tag, a reader's
//! and a writer intent's keys share KEY's, a semaphore slot's keys and the permit record
//! share the semaphore's, so each script touches one slot (a key with `{` or `}` is tagged on
//! its hash: `Names` in `scripts.rs`). A retried grant meets its own lease and
//! answers its fence, a retried release its own tombstone and answers released
//! (`scripts.rs`). The release publishes on the key's shard channel (`SPUBLISH`), and
//! waiters subscribe to it with `SSUBSCRIBE` on the master of the slot (`shard_sub.rs`).
//! Batched renewal is one script call per slot, all sent at once: the calls for one master
//! share its connection, one round trip per master. `status` scans every master.
//!
//! Replication in a cluster is asynchronous: a master failover can lose a grant and admit a
//! second holder. Its fence is still larger than every earlier one under the clock
//! assumption (the promoted replica's clock), so a fenced resource refuses the stale holder.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
use redis::{Script, Value};

use super::cluster_url::{ClusterUrl, builder, parse_url};
use super::form::{Form, form_store};
use super::script_calls::On;
use super::scripts::{GRANT, RELEASE, RENEW_MANY, key_slot};
use super::shard_sub::ShardSubscriber;
use super::status::parse_holder;
use super::wait::Intents;
use super::{Names, RENEW_CHUNK, redis_err, ttl_ms};
use crate::Holder;
use crate::backends::Limits;
use crate::store::{AcquireRequest, RenewItem, Watch};
use crate::{Error, FenceRepeat, Guarantees, Key, LockKind, OwnerToken, Result};

const BACKEND: &str = "redis-cluster";

/// The Redis Cluster lease store.
#[derive(Clone)]
pub struct RedisClusterStore {
    conn: ClusterConnection,
    names: Names,
    renew_many: Arc<Script>,
    release: Arc<Script>,
    read: Arc<Script>,
    sub: Arc<ShardSubscriber>,
}

/// `KEYS`: lease, fence counter, holder info → their values and the lease's PTTL, in the
/// order [`parse_holder`] reads them (a missing value is `false`, read as none).
const READ: &str = r"
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]),
  redis.call('GET', KEYS[3])}";

impl std::fmt::Debug for RedisClusterStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisClusterStore").field("prefix", &self.names.prefix).finish()
    }
}

impl RedisClusterStore {
    /// Connects to the cluster through its seed nodes (`redis-cluster://H:P[,H:P…]`) within
    /// [`crate::DEFAULT_CONNECT_TIMEOUT`]. [`Error::Config`] when the nodes refuse the
    /// password or the ACL user, [`Error::Unavailable`] when no seed answers.
    pub async fn connect(url: &str) -> Result<Self> {
        Self::open(&parse_url(url)?, Limits::default()).await
    }

    pub(crate) async fn open(u: &ClusterUrl, limits: Limits) -> Result<Self> {
        let client: ClusterClient = builder(&u.seeds, limits)
            .build()
            .map_err(|e| Error::invalid(format!("bad redis-cluster URL: {e}")))?;
        let what = format!("connecting to the cluster through {} seed(s)", u.seeds.len());
        let connect = async {
            match tokio::time::timeout(limits.connect, client.get_async_connection()).await {
                Ok(Ok(c)) => Ok(c),
                Ok(Err(e)) => Err(redis_err(BACKEND, &what, e)),
                Err(_) => Err(Error::unavailable(
                    format!("{what}: no answer within {:?}", limits.connect),
                    None,
                )),
            }
        };
        // Another service at the first seed's address is named as such (`backends::peer`).
        let seed = u.seeds.first().and_then(|s| crate::backends::peer::host_port(s));
        let seed = seed.as_ref().map(|(h, p)| (h.as_str(), *p));
        let mut conn = crate::backends::peer::guarded(
            BACKEND,
            crate::backends::peer::Speaks::Redis,
            seed,
            connect,
        )
        .await?;
        let grant = Arc::new(Script::new(GRANT));
        let renew_many = Arc::new(Script::new(RENEW_MANY));
        let release = Arc::new(Script::new(RELEASE));
        // SCRIPT LOAD goes to every node; a node that lacks a script later (a restart, a new
        // master) gets it again on NOSCRIPT.
        let load = async {
            for s in [&grant, &renew_many, &release] {
                s.prepare_invoke().load_async(&mut conn).await?;
            }
            Ok::<_, redis::RedisError>(())
        };
        match tokio::time::timeout(limits.connect, load).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(redis_err(BACKEND, "loading the scripts on the cluster", e)),
            Err(_) => {
                return Err(Error::unavailable(
                    format!("the cluster did not load the scripts within {:?}", limits.connect),
                    None,
                ));
            }
        }
        Ok(RedisClusterStore {
            conn,
            names: Names::cluster(u.prefix.clone()).with_horizon(u.horizon),
            renew_many,
            release,
            read: Arc::new(Script::new(READ)),
            sub: ShardSubscriber::new(u.seeds.clone(), limits),
        })
    }

    /// The masters' `(host, port)`, from `CLUSTER NODES` (masters not flagged failing that
    /// serve slots).
    async fn masters(&self) -> Result<Vec<(String, u16)>> {
        let mut c = self.conn.clone();
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut c)
            .await
            .map_err(|e| redis_err(BACKEND, "CLUSTER NODES", e))?;
        Ok(masters_of(&text))
    }

    async fn scan(&self, host: &str, port: u16, pattern: &str) -> Result<Vec<String>> {
        let mut c = self.conn.clone();
        let mut found = Vec::new();
        let mut cursor = 0u64;
        loop {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(1000);
            let to = SingleNodeRoutingInfo::ByAddress { host: host.to_owned(), port };
            let v = c
                .route_command(cmd, RoutingInfo::SingleNode(to))
                .await
                .map_err(|e| redis_err(BACKEND, &format!("SCAN on {host}:{port}"), e))?;
            let (next, batch): (u64, Vec<String>) = redis::from_redis_value(v)
                .map_err(|e| Error::backend(BACKEND, format!("SCAN on {host}:{port}: {e}"), e))?;
            found.extend(batch);
            if next == 0 {
                return Ok(found);
            }
            cursor = next;
        }
    }

    /// The holder of one lease name, or its readers, read by one script each (one command:
    /// redis-rs follows `MOVED` and `ASK` for it, which it does not for a pipeline, and a
    /// half-moved slot answers `TRYAGAIN` until its keys are together).
    async fn holder(&self, lk: &str) -> Result<Vec<Holder>> {
        let mut c = self.conn.clone();
        let vals: Vec<Value> = self
            .read
            .key(lk)
            .key(format!("{lk}:fence"))
            .key(format!("{lk}:holder"))
            .invoke_async(&mut c)
            .await
            .map_err(|e| redis_err(BACKEND, "status", e))?;
        let marker: Option<String> =
            vals.first().and_then(|v| redis::from_redis_value(v.clone()).ok()).flatten();
        match (marker.as_deref(), self.names.key_of(lk)) {
            (Some("readers"), Some(k)) => self.on().readers_of(&k).await,
            _ => Ok(parse_holder(&self.names, lk, &vals, true).into_iter().collect()),
        }
    }

    /// The grant scripts on the cluster connection (routed by each call's first key).
    fn on(&self) -> On<'_, ClusterConnection> {
        On { conn: self.conn.clone(), names: &self.names, backend: BACKEND, publish: "SPUBLISH" }
    }
}

/// Masters serving slots, from a `CLUSTER NODES` text.
pub(super) fn masters_of(text: &str) -> Vec<(String, u16)> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let serving = f.len() > 8 && f[2].contains("master") && !f[2].contains("fail");
            let (host, port) = f.get(1)?.split('@').next()?.rsplit_once(':')?;
            serving.then(|| Some((host.to_owned(), port.parse().ok()?))).flatten()
        })
        .collect()
}

form_store!(RedisClusterStore {
        fn guarantees(&self) -> Guarantees {
            Guarantees {
                backend: BACKEND,
                kind: LockKind::Lease,
                exclusion: "linearizable per key while the master of its slot lives (single-threaded \
                            script execution there)",
                store_failure: "replication is asynchronous: a master failover can lose a grant and \
                                admit a second holder; its fence is larger than the stale holder's \
                                under the clock assumption, so a fenced resource refuses the stale \
                                one",
                expiry: "the slot master's clock (SET PX, PEXPIRE)",
                fence: "max(counter + 1, server TIME in µs) of a per-key counter in the key's \
                        slot, in the granting script; the counter expires ttl + horizon after the \
                        last grant or renewal (horizon=, a day by default)",
                fence_repeat: FenceRepeat::ClockBacked,
                failure_admits_second_holder: true,
                holders_know_fence: true,
                holders_know_info: true,
                waiting: "sharded pub/sub (SSUBSCRIBE) on the master of the key's slot, \
                          re-subscribed after MOVED or a failover, a poll every second in case a \
                          message was lost; else the holder's PTTL",
                primitives: crate::Primitives {
                    note: "semaphores (a slot's keys carry the semaphore's hash tag: the permit \
                           check and the grant are one script on its slot's master), fenced \
                           readers with writer preference (their keys share KEY's tag), several \
                           keys (one after another, sorted, each on its own master)",
                    ..crate::Primitives::ALL
                },
            }
        }

        async fn renew_many(&self, items: &[RenewItem]) -> Result<Vec<bool>> {
            // A script touches one slot: one call per slot (chunked), all in flight together.
            let mut by_slot: HashMap<u16, Vec<usize>> = HashMap::new();
            for (i, it) in items.iter().enumerate() {
                by_slot.entry(key_slot(&self.names.lease(&it.key))).or_default().push(i);
            }
            let calls = by_slot.values().flat_map(|ix| ix.chunks(RENEW_CHUNK)).map(|chunk| {
                let mut c = self.conn.clone();
                let mut inv = self.renew_many.prepare_invoke();
                for &i in chunk {
                    let it = &items[i];
                    inv.key(self.names.lease(&it.key)).key(self.names.holder(&it.key));
                    inv.arg(&it.owner.hex()[..]).arg(ttl_ms(it.ttl));
                }
                inv.arg(self.names.horizon_ms());
                inv.arg("SPUBLISH");
                async move {
                    let r: Vec<i64> = inv.invoke_async(&mut c).await?;
                    Ok::<_, redis::RedisError>(chunk.iter().copied().zip(r).collect::<Vec<_>>())
                }
            });
            let mut out = vec![false; items.len()];
            for r in futures_util::future::join_all(calls).await {
                for (i, v) in r.map_err(|e| redis_err(BACKEND, "renew", e))? {
                    out[i] = v == 1;
                }
            }
            Ok(out)
        }

        async fn release(&self, key: &Key, owner: &OwnerToken) -> Result<bool> {
            let mut c = self.conn.clone();
            let n: i64 = self
                .release
                .key(self.names.lease(key))
                .key(self.names.holder(key))
                .key(self.names.released_by(key))
                .arg(&owner.hex()[..])
                .arg(self.names.channel(key))
                .arg(self.names.tombstone_ms())
                .arg("SPUBLISH")
                .invoke_async(&mut c)
                .await
                .map_err(|e| redis_err(BACKEND, "release", e))?;
            // 2: redis-rs retried it (a lost reply, MOVED) and the first attempt had released it.
            Ok(n != 0)
        }

        async fn holders(&self, key: Option<&Key>) -> Result<Vec<Holder>> {
            let names = match key {
                Some(k) => vec![self.names.lease(k)],
                None => {
                    let pattern = self.names.lease_pattern();
                    let mut all = Vec::new();
                    for (host, port) in self.masters().await? {
                        all.extend(self.scan(&host, port, &pattern).await?);
                    }
                    all.sort();
                    all.dedup();
                    all
                }
            };
            let mut out = Vec::new();
            for chunk in names.chunks(32) {
                let found = futures_util::future::join_all(chunk.iter().map(|lk| self.holder(lk)));
                for h in found.await {
                    out.extend(h?);
                }
            }
            Ok(out)
        }
});

#[async_trait]
impl Form for RedisClusterStore {
    type Conn = ClusterConnection;

    fn names(&self) -> &Names {
        &self.names
    }

    async fn scripts(&self) -> Result<On<'_, ClusterConnection>> {
        Ok(self.on())
    }
}

#[async_trait]
impl Intents for RedisClusterStore {
    async fn watch_key(&self, key: &Key) -> Result<Box<dyn Watch>> {
        Ok(Box::new(self.sub.watch(self.names.channel(key)).await?))
    }
    async fn note_intent(&self, req: &AcquireRequest<'_>, left: Option<Duration>) -> Result<bool> {
        self.on().note_intent(req, left).await
    }
    async fn clear_intent(&self, key: &Key, owner: &OwnerToken) -> Result<()> {
        self.on().clear_intent(key, owner).await
    }
}

/// `redis-cluster://HOST:PORT[,HOST:PORT…]`.
pub(crate) const STORE: crate::backends::Descriptor = crate::backends::Descriptor {
    form: "redis-cluster://HOST:PORT[,HOST:PORT…]",
    usage: "redis-cluster://[USER:PASS@]H1:P1[,H2:P2…][?prefix=P]",
    summary: "Redis Cluster (seed nodes)",
    parse: |url| crate::backends::parsed(parse_url(url)),
};

impl crate::backends::StoreConfig for ClusterUrl {
    fn open(&self, limits: Limits) -> crate::backends::Boxed<'_, Result<Arc<dyn crate::Store>>> {
        crate::backends::opened(RedisClusterStore::open(self, limits))
    }

    fn probe<'a>(
        &'a self,
        p: &'a mut crate::probe::findings::Probe,
    ) -> crate::backends::Boxed<'a, std::result::Result<(), String>> {
        Box::pin(super::probe_ha::cluster(self, p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masters_are_read_from_cluster_nodes() {
        let text = "\
a 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460
b 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922
c 127.0.0.1:7002@17002 master,fail - 0 0 3 connected
d 127.0.0.1:7003@17003 slave a 0 0 1 connected";
        assert_eq!(masters_of(text), [("127.0.0.1".to_owned(), 7000), ("127.0.0.1".into(), 7001)]);
    }
}
