//! What doctor reads of a Redis Cluster (masters, replicas per master, each node's cluster,
//! persistence and replication settings and clock) and of a Sentinel deployment (the
//! sentinels, their quorum, the primary and replicas as they see them).

use std::collections::BTreeMap;
use std::time::Duration;

use super::probe::{RedisFacts, redis_config, redis_facts, redis_persistence};
use crate::probe::findings::*;

/// One node of `CLUSTER NODES`: address, master (or the master's id), failing.
struct Line {
    id: String,
    addr: String,
    master: bool,
    master_id: Option<String>,
    failing: bool,
    slots: u32,
}

fn lines(text: &str) -> Vec<Line> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .map(|s| match s.split_once('-') {
                    Some((a, b)) => {
                        b.parse::<u32>().unwrap_or(0).saturating_sub(a.parse().unwrap_or(0)) + 1
                    }
                    None => 1,
                })
                .sum();
            Some(Line {
                id: f[0].to_owned(),
                addr: f[1].split('@').next()?.to_owned(),
                master: f[2].contains("master"),
                master_id: (f[3] != "-").then(|| f[3].to_owned()),
                failing: f[2].contains("fail"),
                slots,
            })
        })
        .collect()
}

async fn facts(url: &str) -> std::result::Result<RedisFacts, String> {
    match tokio::time::timeout(Duration::from_secs(3), redis_facts(url, None)).await {
        Ok(r) => r,
        Err(_) => Err("no answer within 3 s".into()),
    }
}

pub(crate) async fn cluster(
    u: &super::cluster::ClusterUrl,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    let auth = u.seeds[0].strip_prefix("redis://").and_then(|s| s.rsplit_once('@'));
    let auth = auth.map_or(String::new(), |(a, _)| format!("{a}@"));
    let mut text = None;
    for seed in &u.seeds {
        let Ok(client) = ::redis::Client::open(seed.as_str()) else { continue };
        let ask = async {
            let mut c = client.get_multiplexed_async_connection().await?;
            ::redis::cmd("CLUSTER").arg("NODES").query_async::<String>(&mut c).await
        };
        if let Ok(Ok(t)) = tokio::time::timeout(Duration::from_secs(3), ask).await {
            text = Some(t);
            break;
        }
    }
    let text = text.ok_or("no seed answered CLUSTER NODES")?;
    let nodes = lines(&text);
    let masters: Vec<&Line> = nodes.iter().filter(|n| n.master && n.slots > 0).collect();
    r.set("masters (serving slots)", masters.len());
    let mut unreplicated = Vec::new();
    for m in &masters {
        let reps: Vec<&str> = nodes
            .iter()
            .filter(|n| n.master_id.as_deref() == Some(m.id.as_str()) && !n.failing)
            .map(|n| n.addr.as_str())
            .collect();
        r.set(
            &format!("master {}", m.addr),
            format!(
                "{} slots{}, replicas: {}",
                m.slots,
                if m.failing { ", FAILING" } else { "" },
                if reps.is_empty() { "none".to_owned() } else { reps.join(", ") }
            ),
        );
        if reps.is_empty() {
            unreplicated.push(m.addr.clone());
        }
    }
    let mut worst: Option<ClockOffset> = None;
    let mut weak = 0;
    let mut timeouts = BTreeMap::new();
    let mut coverage = BTreeMap::new();
    let mut min_replicas = BTreeMap::new();
    for n in &nodes {
        let node_url = format!("redis://{auth}{}", n.addr);
        match facts(&node_url).await {
            Ok(f) => {
                let (kind, _) = redis_persistence(&f);
                if kind != "durable" && n.master {
                    weak += 1;
                }
                let (nt, cov) = match ::redis::Client::open(node_url.as_str()) {
                    Ok(cl) => match cl.get_multiplexed_async_connection().await {
                        Ok(mut c) => (
                            redis_config(&mut c, "cluster-node-timeout").await,
                            redis_config(&mut c, "cluster-require-full-coverage").await,
                        ),
                        Err(_) => (None, None),
                    },
                    Err(_) => (None, None),
                };
                let nt = nt.unwrap_or_else(|| "unknown".into());
                let cov = cov.unwrap_or_else(|| "unknown".into());
                let mr = f.min_replicas.map_or("unknown".into(), |v| v.to_string());
                r.set(
                    &format!("node {}", n.addr),
                    format!(
                        "{}, cluster-node-timeout {nt} ms, cluster-require-full-coverage {cov}, \
                         appendonly={} appendfsync={} save={:?}, min-replicas-to-write {mr}, \
                         clock {:+.1} ms (±{:.1})",
                        f.role,
                        f.aof.as_deref().unwrap_or("?"),
                        f.fsync.as_deref().unwrap_or("?"),
                        f.save.as_deref().unwrap_or("?"),
                        f.clock.store_minus_local,
                        f.clock.uncertainty
                    ),
                );
                *timeouts.entry(nt).or_insert(0) += 1;
                *coverage.entry(cov).or_insert(0) += 1;
                *min_replicas.entry(mr).or_insert(0) += 1;
                if worst.is_none_or(|w| f.clock.store_minus_local.abs() > w.store_minus_local.abs())
                {
                    worst = Some(f.clock);
                }
            }
            Err(e) => {
                r.set(&format!("node {}", n.addr), format!("unreachable: {e}"));
                if n.master {
                    weak += 1;
                }
            }
        }
    }
    r.clock = worst;
    let summary = |m: &BTreeMap<String, i32>| {
        m.iter().map(|(k, n)| format!("{k} ({n} nodes)")).collect::<Vec<_>>().join(", ")
    };
    r.set("cluster-node-timeout (ms)", summary(&timeouts));
    r.set("cluster-require-full-coverage", summary(&coverage));
    r.set("min-replicas-to-write", summary(&min_replicas));
    r.verdict(format!(
        "Redis Cluster, {} masters: exclusion per key is linearizable while the master of its \
         slot lives; replication is asynchronous, so a master failover can lose a grant and \
         admit a second holder; fences stay above every earlier one under the clock assumption \
         ({}), so fenced resources refuse the stale holder, unfenced ones do not",
        masters.len(),
        crate::CLOCK_ASSUMPTION
    ));
    if !unreplicated.is_empty() {
        r.verdict(format!(
            "master(s) {} have no replica: losing one stops grants for its slots' keys{}",
            unreplicated.join(", "),
            if coverage.contains_key("yes") {
                " (and, with cluster-require-full-coverage yes, for every key)"
            } else {
                ""
            }
        ));
    }
    if weak > 0 {
        r.verdict(format!(
            "{weak} master(s) without fsync-always persistence or unreachable: a restart of one \
             frees its leases and forgets its counters (the next fences start at its clock)"
        ));
        r.change("appendonly yes + appendfsync always on every master");
    }
    r.change(
        "for survival of a master loss without a second holder, use a quorum store (etcd://, \
         zk://) or PostgreSQL with synchronous replication",
    );
    Ok(())
}

/// A flat `[k1, v1, k2, v2, …]` reply as a map.
fn flat(v: &[String]) -> BTreeMap<&str, &str> {
    v.chunks(2).filter(|p| p.len() == 2).map(|p| (p[0].as_str(), p[1].as_str())).collect()
}

pub(crate) async fn sentinel(
    u: &super::sentinel_url::SentinelUrl,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    let mut primary = None;
    let mut quorums = Vec::new();
    for s in &u.sentinels {
        let read = async {
            let client = ::redis::Client::open(u.sentinel_url(s))?;
            let mut c = client.get_multiplexed_async_connection().await?;
            let master: Vec<String> =
                ::redis::cmd("SENTINEL").arg("MASTER").arg(&u.service).query_async(&mut c).await?;
            let replicas: Vec<Vec<String>> = ::redis::cmd("SENTINEL")
                .arg("REPLICAS")
                .arg(&u.service)
                .query_async(&mut c)
                .await?;
            Ok::<_, ::redis::RedisError>((master, replicas))
        };
        match tokio::time::timeout(Duration::from_secs(3), read).await {
            Ok(Ok((master, replicas))) => {
                let m = flat(&master);
                let addr =
                    format!("{}:{}", m.get("ip").unwrap_or(&"?"), m.get("port").unwrap_or(&"?"));
                let reps: Vec<String> = replicas
                    .iter()
                    .map(|rep| {
                        let f = flat(rep);
                        format!(
                            "{} ({}, link {})",
                            f.get("name").unwrap_or(&"?"),
                            f.get("flags").unwrap_or(&"?"),
                            f.get("master-link-status").unwrap_or(&"?")
                        )
                    })
                    .collect();
                let quorum = m.get("quorum").unwrap_or(&"?").to_string();
                r.set(
                    &format!("sentinel {s}"),
                    format!(
                        "primary {addr} ({}), quorum {quorum}, {} other sentinel(s), replicas: {}",
                        m.get("flags").unwrap_or(&"?"),
                        m.get("num-other-sentinels").unwrap_or(&"?"),
                        if reps.is_empty() { "none".into() } else { reps.join(", ") }
                    ),
                );
                quorums.push(quorum);
                primary.get_or_insert(addr);
            }
            Ok(Err(e)) => r.set(&format!("sentinel {s}"), format!("refused: {e}")),
            Err(_) => r.set(&format!("sentinel {s}"), "unreachable (no answer within 3 s)"),
        }
    }
    let primary = primary.ok_or_else(|| format!("no sentinel answered for {:?}", u.service))?;
    r.set("service", &u.service);
    r.set("primary (as the sentinels name it)", &primary);
    let f = facts(&u.node_url(&primary)).await?;
    r.set("primary role (ROLE/INFO)", &f.role);
    r.set("primary connected replicas", f.replicas);
    r.set("appendonly", f.aof.as_deref().unwrap_or("unknown"));
    r.set("appendfsync", f.fsync.as_deref().unwrap_or("unknown"));
    r.set("min-replicas-to-write", f.min_replicas.map_or("unknown".into(), |v| v.to_string()));
    r.clock = Some(f.clock);
    let answered = quorums.len();
    quorums.dedup();
    if f.role != "master" {
        r.verdict(format!(
            "the node the sentinels name ({primary}) says it is a {}: a failover is under way or \
             the sentinels disagree; leasehold refuses it until one says master",
            f.role
        ));
    }
    let (_, text) = redis_persistence(&f);
    r.verdict(format!(
        "Sentinel-managed Redis ({answered} of {} sentinels answered, quorum {}): exclusion is \
         linearizable while the primary lives; replication is asynchronous, so a failover to a \
         replica that missed a grant admits a second holder, with a larger fence under the \
         clock assumption; the primary's persistence: {text}",
        u.sentinels.len(),
        quorums.join("/")
    ));
    if answered * 2 <= u.sentinels.len() {
        r.verdict(
            "a majority of the listed sentinels did not answer: no failover can be authorized",
        );
    }
    if f.replicas == 0 {
        r.verdict("the primary has no connected replica: there is nothing to fail over to");
    }
    if u.opts.wait_replicas.is_none() && f.replicas > 0 {
        r.change("?wait_replicas=N on the store URL: each grant waits for N replica acks");
    }
    Ok(())
}
