//! What doctor reads of a Redis server (and of each Redlock instance).

use crate::probe::findings::*;
#[allow(unused_imports)]
use std::time::Duration;

fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim())
}

pub(super) async fn redis_config(
    c: &mut ::redis::aio::MultiplexedConnection,
    name: &str,
) -> Option<String> {
    let v: Vec<String> = ::redis::cmd("CONFIG").arg("GET").arg(name).query_async(c).await.ok()?;
    v.get(1).cloned()
}

/// One Redis server's facts (for `redis://` and each Redlock instance).
pub(super) struct RedisFacts {
    pub version: String,
    pub role: String,
    pub replicas: u64,
    pub aof: Option<String>,
    pub fsync: Option<String>,
    pub save: Option<String>,
    pub min_replicas: Option<u64>,
    pub clock: ClockOffset,
    /// `ip:port` of each connected replica, from `INFO replication`.
    pub replica_addrs: Vec<String>,
}

/// `tls_ca`: the URL's private CA, as the store uses it (`rediss://`).
pub(super) async fn redis_facts(
    client_url: &str,
    tls_ca: Option<&std::path::Path>,
) -> std::result::Result<RedisFacts, String> {
    let client = crate::backends::redis::client(client_url, tls_ca).map_err(|e| e.to_string())?;
    let mut c = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let info: String =
        ::redis::cmd("INFO").arg("server").query_async(&mut c).await.map_err(|e| e.to_string())?;
    let repl: String = ::redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let before = now_s();
    let t: Vec<String> =
        ::redis::cmd("TIME").query_async(&mut c).await.map_err(|e| e.to_string())?;
    let after = now_s();
    let server = t.first().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0)
        + t.get(1).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0) / 1e6;
    Ok(RedisFacts {
        version: info_field(&info, "redis_version").unwrap_or("?").to_owned(),
        role: info_field(&repl, "role").unwrap_or("?").to_owned(),
        replicas: info_field(&repl, "connected_slaves").and_then(|v| v.parse().ok()).unwrap_or(0),
        aof: redis_config(&mut c, "appendonly").await,
        fsync: redis_config(&mut c, "appendfsync").await,
        save: redis_config(&mut c, "save").await,
        min_replicas: redis_config(&mut c, "min-replicas-to-write")
            .await
            .and_then(|v| v.parse().ok()),
        clock: offset(before, after, server),
        replica_addrs: repl
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("ip="))
            .filter_map(|l| {
                let field = |k: &str| l.split([':', ',']).find_map(|p| p.strip_prefix(k));
                Some(format!("{}:{}", field("ip=")?, field("port=")?))
            })
            .collect(),
    })
}

/// `client_url` with its `host:port` replaced by `addr` (credentials and db kept).
fn with_addr(client_url: &str, addr: &str) -> String {
    let (scheme, rest) = client_url.split_once("://").unwrap_or(("redis", client_url));
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let auth = rest[..end].rsplit_once('@').map_or(String::new(), |(u, _)| format!("{u}@"));
    format!("{scheme}://{auth}{addr}{}", &rest[end..])
}

/// Each replica's clock against the primary's: the fence floor after a failover is the
/// promoted replica's clock, so one far behind could issue fences below the last ones.
async fn redis_replica_clocks(
    base: &str,
    tls_ca: Option<&std::path::Path>,
    primary: &RedisFacts,
    r: &mut Probe,
) {
    for addr in &primary.replica_addrs {
        let name = format!("replica {addr} clock − primary clock");
        let url = with_addr(base, addr);
        match tokio::time::timeout(Duration::from_secs(3), redis_facts(&url, tls_ca)).await {
            Ok(Ok(f)) => {
                let (d, u) = (
                    f.clock.store_minus_local - primary.clock.store_minus_local,
                    f.clock.uncertainty + primary.clock.uncertainty,
                );
                r.set(&name, format!("{d:+.1} ms (±{u:.1} ms)"));
                if d < -(FAILOVER_CLOCK_SLACK_MS + u) {
                    r.verdict(format!(
                        "replica {addr}'s clock is {:.0} ms behind the primary's: promoted \
                         quickly, it could issue fences below the last ones the primary issued \
                         and a stale holder would win at the resource; fix its clock (NTP)",
                        -d
                    ));
                }
            }
            Ok(Err(e)) => r.set(&name, format!("not read ({e})")),
            Err(_) => r.set(&name, "not read (no answer within 3 s)"),
        }
    }
}

fn version_at_least(v: &str, major: u64, minor: u64) -> bool {
    let mut it = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// The persistence verdict for one Redis server.
pub(super) fn redis_persistence(f: &RedisFacts) -> (&'static str, String) {
    match (f.aof.as_deref(), f.fsync.as_deref(), f.save.as_deref()) {
        (Some("yes"), Some("always"), _) => (
            "durable",
            "AOF with fsync on every write: grants and fence counters survive a restart or a \
             crash of this server"
                .into(),
        ),
        (Some("yes"), fsync, _) => (
            "aof-lossy",
            format!(
                "AOF with appendfsync={}: a clean restart keeps everything, but a crash can lose \
                 the last writes (about a second): a grant made just before it can vanish, so a \
                 second holder can be admitted; its fence is still larger (clock-backed), so \
                 fenced resources refuse the stale holder, unfenced ones do not",
                fsync.unwrap_or("?")
            ),
        ),
        (Some("no"), _, Some(save)) if save.trim().is_empty() => (
            "none",
            "no persistence (appendonly no, save \"\"): a restart frees every lease at once and \
             forgets the fence counters; the next fences start from the server's clock, above \
             every earlier one, so fenced resources refuse the stale holder, unfenced ones do not"
                .into(),
        ),
        (Some("no"), _, Some(save)) => (
            "rdb",
            format!(
                "RDB snapshots only (save \"{save}\"): a restart returns to the last snapshot: \
                 leases granted since are forgotten (a second holder can be admitted) and old \
                 ones may come back; fence counters go back to the snapshot's values, but the \
                 next grants issue the server's clock in µs, above every earlier fence"
            ),
        ),
        _ => (
            "unknown",
            "persistence unknown (CONFIG GET is refused here, as on many managed services): \
             check appendonly/appendfsync with your provider"
                .into(),
        ),
    }
}

pub(crate) async fn redis(u: &super::RedisUrl, r: &mut Probe) -> std::result::Result<(), String> {
    let (base, tls_ca) = (&u.base, u.opts.tls_ca.as_deref());
    let f = redis_facts(base, tls_ca).await?;
    r.set("version", &f.version);
    r.set("role", &f.role);
    r.set("connected replicas", f.replicas);
    r.set("appendonly", f.aof.as_deref().unwrap_or("unknown"));
    r.set("appendfsync", f.fsync.as_deref().unwrap_or("unknown"));
    r.set("save", f.save.as_deref().map(|s| format!("{s:?}")).unwrap_or("unknown".into()));
    r.set(
        "min-replicas-to-write",
        f.min_replicas.map(|v| v.to_string()).unwrap_or("unknown".into()),
    );
    let delex = version_at_least(&f.version, 8, 4);
    r.set("DELEX … IFEQ (Redis 8.4+)", if delex { "available" } else { "not available" });
    r.clock = Some(f.clock);
    redis_replica_clocks(base, tls_ca, &f, r).await;
    let wait = u.opts.wait_replicas.map(|(n, _)| n);
    r.set("leasehold wait_replicas", wait.map(|w| w.to_string()).unwrap_or("off".into()));

    if f.role != "master" {
        r.verdict(format!(
            "this server is a {} (read-only): grants will fail; point the store at the primary",
            f.role
        ));
    }
    let (kind, text) = redis_persistence(&f);
    r.verdict(format!("single Redis: exclusion is linearizable while this server lives; {text}"));
    match (f.replicas, wait) {
        (0, _) => r.verdict(
            "no replicas: losing this server stops every grant until it is back (and the \
             persistence verdict above applies)",
        ),
        (n, None) => r.verdict(format!(
            "{n} replica(s), asynchronous: a failover to a replica that missed a grant admits a \
             second holder, with a larger fence (clock-backed): fenced resources refuse the \
             stale one"
        )),
        (n, Some(w)) => r.verdict(format!(
            "{n} replica(s); each grant waits for {w} replica ack(s) and fails closed without \
             them: a failover loses a grant only if every acked replica is lost too (WAIT is not \
             a consensus protocol)"
        )),
    }
    if let Some(m) = f.min_replicas.filter(|m| *m > 0) {
        r.verdict(format!(
            "min-replicas-to-write {m}: the primary refuses writes (grants fail closed) when fewer \
             replicas are connected"
        ));
    }
    if kind != "durable" {
        r.change("appendonly yes + appendfsync always: grants and fence counters survive crashes");
    }
    if f.replicas > 0 && wait.is_none() {
        r.change("?wait_replicas=N on the store URL: each grant waits for N replica acks");
    }
    if f.replicas == 0 {
        r.change(
            "for survival of a node loss without a second holder, use a quorum store \
             (etcd://, zk://) or PostgreSQL with synchronous replication",
        );
    }
    if !delex {
        r.change(
            "Redis 8.4+ adds DELEX … IFEQ (a native compare-and-delete); leasehold's scripts do \
             the same on older servers",
        );
    }
    Ok(())
}

pub(crate) async fn redlock(
    u: &super::RedlockUrl,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    let hosts = &u.hosts;
    let mut weak = 0;
    for h in hosts {
        match redis_facts(&format!("redis://{h}"), None).await {
            Ok(f) => {
                let (kind, _) = redis_persistence(&f);
                r.set(
                    &format!("instance {h}"),
                    format!(
                        "Redis {}, {}, appendonly={} appendfsync={}, clock {:+.1} ms",
                        f.version,
                        f.role,
                        f.aof.as_deref().unwrap_or("?"),
                        f.fsync.as_deref().unwrap_or("?"),
                        f.clock.store_minus_local
                    ),
                );
                if kind != "durable" {
                    weak += 1;
                }
            }
            Err(e) => {
                r.set(&format!("instance {h}"), format!("unreachable: {e}"));
                weak += 1;
            }
        }
    }
    let n = hosts.len();
    let quorum = n / 2 + 1;
    r.verdict(format!(
        "Redlock over {n} instances, quorum {quorum}: exclusion holds while a majority lives and \
         **clock drift and process pauses stay within the drift allowance** (1 % + 2 ms of the \
         TTL); a pause longer than that can let two holders overlap, which only fencing catches"
    ));
    if weak > 0 {
        r.verdict(format!(
            "{weak} instance(s) without fsync-always persistence or unreachable: one of them \
             restarting empty can complete a second majority and admit a second holder"
        ));
        r.change("appendonly yes + appendfsync always on every instance (or delay restarts by the longest TTL)");
    }
    r.verdict(
        "Redlock issues no fence of its own: attach a FenceSource, or the grants carry fence 0",
    );
    r.change("for fences and no timing assumptions, use a quorum store (etcd://, zk://)");
    Ok(())
}
