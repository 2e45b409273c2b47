//! A Redis Cluster against one Redis server in the same run (`leasehold bench --store
//! redis-cluster://… --single redis://…`): each side's counters (`INFO commandstats` of every
//! master serving slots, or of the one server), raw redis-rs sending leasehold's own grant and
//! release scripts (on one server's connection, and on redis-rs's cluster connection routed by
//! key slot, releasing with `SPUBLISH` as the store does), `redis-benchmark` (`--cluster` on the
//! cluster), and how leasehold key names spread over the masters (`CLUSTER KEYSLOT`).

use std::sync::Arc;

use leasehold::backends::redis::tools;
use leasehold::{Scheme, StoreUrl};
use redis::aio::MultiplexedConnection;

use super::baseline::{ALL_REQUESTS, Raw, RedisBenchmark, View, err};
use crate::baseline::RawError;
use crate::family::{Family, Member, Side};

/// The script calls: one grant and one release per uncontended cycle.
const SCRIPT_CALLS: &[&str] = &["evalsha", "eval"];

/// A raw connection to the server at `addr` of the deployment `store` names, with its
/// credentials.
async fn node(addr: &str, store: &StoreUrl) -> Result<MultiplexedConnection, RawError> {
    let url = tools::node_url(store, addr).map_err(err)?;
    let client = redis::Client::open(url).map_err(|e| format!("{addr}: {e}"))?;
    client.get_multiplexed_async_connection().await.map_err(|e| format!("{addr}: {e}"))
}

/// The cluster's masters serving slots, `host:port`, with their slot ranges, in address
/// order.
async fn masters(seed: &str, store: &StoreUrl) -> Result<Vec<(String, Vec<(u16, u16)>)>, RawError> {
    let mut c = node(seed, store).await?;
    let text: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut c)
        .await
        .map_err(|e| format!("CLUSTER NODES: {e}"))?;
    let mut out = Vec::new();
    for l in text.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 9 || !f[2].contains("master") || f[2].contains("fail") {
            continue;
        }
        let addr = f[1].split('@').next().unwrap_or_default().to_owned();
        let slots = f[8..]
            .iter()
            .filter_map(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        out.push((addr, slots));
    }
    out.sort();
    Ok(out)
}

/// `redis-benchmark` against the server at `addr` (`host:port`).
fn load(addr: &str, cluster: bool) -> Result<Arc<RedisBenchmark>, RawError> {
    let (host, port) = addr.rsplit_once(':').ok_or("node address")?;
    let port = port.parse().map_err(|e| format!("node address {addr}: {e}"))?;
    Ok(Arc::new(RedisBenchmark { host: host.to_owned(), port, cluster }))
}

/// The comparison of the cluster `store` with the one server `single`.
struct Cluster {
    /// The one server, then the cluster.
    sides: [Side; 2],
    store: StoreUrl,
    masters: Vec<(String, Vec<(u16, u16)>)>,
    /// A connection to the first master, which answers `CLUSTER KEYSLOT`.
    first: MultiplexedConnection,
}

/// The cluster `store` against the one server `single`; an error for other URLs or when a
/// connection failed.
pub async fn compare_with(
    store: &StoreUrl,
    single: &StoreUrl,
) -> Result<Box<dyn Family>, RawError> {
    if store.scheme() != Scheme::RedisCluster || single.scheme() != Scheme::Redis {
        return Err("--single compares a redis-cluster:// --store with one redis:// server".into());
    }
    let seeds = store.hosts();
    let seed = seeds.first().ok_or("no seed")?;
    let ms = masters(seed, store).await?;
    let mut members = Vec::new();
    for (addr, _) in &ms {
        let view = View { conn: node(addr, store).await?, store: store.clone() };
        members.push(Member { addr: addr.clone(), view: Arc::new(view) });
    }
    let first = members.first().ok_or("the cluster has no master serving slots")?;
    let first_conn = node(&first.addr, store).await?;
    let cluster_load = load(&first.addr, true)?;
    let one = *single.hosts().first().ok_or("no server")?;
    let one_conn = node(one, single).await?;
    let seed_urls: Vec<String> = seeds
        .iter()
        .map(|h| tools::node_url(store, h))
        .collect::<leasehold::Result<_>>()
        .map_err(err)?;
    let cluster_conn = redis::cluster::ClusterClient::new(seed_urls)
        .map_err(|e| format!("cluster client: {e}"))?
        .get_async_connection()
        .await
        .map_err(|e| format!("cluster connection: {e}"))?;
    let single_side = Side {
        members: vec![Member {
            addr: one.to_owned(),
            view: Arc::new(View { conn: one_conn.clone(), store: single.clone() }),
        }],
        raw: Arc::new(Arc::new(Raw::on(one_conn, true, "PUBLISH"))),
        load: load(one, false)?,
    };
    let cluster_side = Side {
        members,
        raw: Arc::new(Arc::new(Raw::on(cluster_conn, true, "SPUBLISH"))),
        load: cluster_load,
    };
    Ok(Box::new(Cluster {
        sides: [single_side, cluster_side],
        store: store.clone(),
        masters: ms,
        first: first_conn,
    }))
}

#[async_trait::async_trait]
impl Family for Cluster {
    fn sides(&self) -> [&Side; 2] {
        [&self.sides[0], &self.sides[1]]
    }

    fn counted(&self) -> &'static [&'static str] {
        ALL_REQUESTS
    }

    fn per_cycle(&self) -> &'static [&'static str] {
        SCRIPT_CALLS
    }

    fn load_label(&self) -> (&'static str, &'static str) {
        ("redis-benchmark -c 50 -P 16 SET NX PX", " (--cluster)")
    }

    fn raw_label(&self) -> &'static str {
        "uncontended, raw redis-rs"
    }

    /// The store's layout on the cluster (prefix, key in braces).
    fn key_name(&self, key: &str) -> Result<String, RawError> {
        let key = leasehold::Key::new(key).map_err(err)?;
        Ok(tools::key_names(&self.store, &key).map_err(err)?.lease)
    }

    /// By `CLUSTER KEYSLOT` of each key's lease name (one pipelined round trip) and the
    /// masters' slot ranges.
    async fn key_share(&self, keys: &[String]) -> Result<Vec<f64>, RawError> {
        let mut pipe = redis::pipe();
        for k in keys {
            pipe.cmd("CLUSTER").arg("KEYSLOT").arg(self.key_name(k)?);
        }
        let mut c = self.first.clone();
        let slots: Vec<u16> = pipe.query_async(&mut c).await.map_err(err)?;
        let mut count = vec![0usize; self.masters.len()];
        for slot in slots {
            let at =
                self.masters.iter().position(|m| m.1.iter().any(|&(a, b)| a <= slot && slot <= b));
            if let Some(i) = at {
                count[i] += 1;
            }
        }
        Ok(count.iter().map(|&n| n as f64 / keys.len().max(1) as f64).collect())
    }
}
