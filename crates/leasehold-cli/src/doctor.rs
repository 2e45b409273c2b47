//! `leasehold doctor`: reads a deployment's real settings and says what it guarantees.
//!
//! The backend's guarantees (`docs/design.md` §5) are data in the library; this turns them into the
//! verdict for *this* deployment: persistence, replication, synchronous settings, poolers,
//! members, and the settings that would change the verdict.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use leasehold::Locker;
use serde_json::{Value, json};

/// What doctor found.
#[derive(Debug, Default)]
pub struct Report {
    /// Server facts, in reading order: (setting, value).
    pub settings: Vec<(String, String)>,
    /// What this deployment guarantees, sentence by sentence.
    pub verdicts: Vec<String>,
    /// Settings that would change the verdict.
    pub changes: Vec<String>,
    /// Store clock minus local clock, and its uncertainty (half the round trip), if the
    /// protocol reveals the store's clock.
    pub clock: Option<(f64, f64)>,
}

impl Report {
    fn set(&mut self, k: &str, v: impl ToString) {
        self.settings.push((k.to_owned(), v.to_string()));
    }
    fn verdict(&mut self, v: impl Into<String>) {
        self.verdicts.push(v.into());
    }
    fn change(&mut self, v: impl Into<String>) {
        self.changes.push(v.into());
    }
}

type R<T> = Result<T, String>;

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// `server_s` read between `before` and `after` (seconds since the epoch): (offset, ±) in ms.
fn offset(before: f64, after: f64, server_s: f64) -> (f64, f64) {
    let mid = (before + after) / 2.0;
    (((server_s - mid) * 1e4).round() / 10.0, (((after - before) / 2.0) * 1e4).round() / 10.0)
}

fn query_flag(url: &str, name: &str) -> Option<String> {
    let (_, q) = url.split_once('?')?;
    q.split('&').find_map(|p| {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        (k == name).then(|| v.to_owned())
    })
}

pub async fn run(url: &str, locker: &Locker) -> R<Report> {
    let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
    let mut r = Report::default();
    let limit = Duration::from_secs(20);
    let work = async {
        match scheme {
            "redis" | "rediss" => redis(url, &mut r).await,
            "redlock" => redlock(url, &mut r).await,
            "postgres" | "postgresql" => postgres(url, &mut r).await,
            "mysql" => mysql(url, &mut r).await,
            "etcd" => etcd(url, locker, &mut r).await,
            "zk" => zookeeper(url, &mut r).await,
            "sqlite" => {
                r.set("path", &url["sqlite://".len()..]);
                r.verdict(
                    "one machine only: processes on other hosts do not see these leases, even on \
                     a shared file system",
                );
                r.verdict(
                    "leases survive process and machine restarts in the file; a reboot frees \
                     them (boot id); fences survive power loss (synchronous=FULL)",
                );
                r.change("for exclusion across machines, use a networked store (postgres://, etcd://, redis://)");
                Ok(())
            }
            "file" => {
                r.set("dir", &url["file://".len()..]);
                r.verdict(
                    "one host, local file system only: flock on NFS or other network file \
                     systems does not exclude other hosts",
                );
                r.verdict("the holder's death releases its lock at once; fences survive in the lock files");
                Ok(())
            }
            other => Err(format!("doctor does not know the {other}:// store")),
        }
    };
    match tokio::time::timeout(limit, work).await {
        Ok(res) => res?,
        Err(_) => {
            return Err(format!("the store did not answer doctor's questions within {limit:?}"));
        }
    }
    if locker.guarantees().fence_repeat == leasehold::FenceRepeat::ClockBacked {
        fence_clock(&mut r);
    }
    Ok(r)
}

/// The clock-backed fences' assumption, and what doctor could check of it.
fn fence_clock(r: &mut Report) {
    r.verdict(format!(
        "fences are max(counter + 1, the store's clock in µs), so they never go back after a \
         restart or failover; this assumes that {}",
        leasehold::CLOCK_ASSUMPTION
    ));
    if let Some((o, u)) = r.clock
        && o.abs() > FAILOVER_CLOCK_SLACK_MS + u
    {
        r.verdict(format!(
            "the store's clock is {o:+.0} ms from this host's: one of the two is not kept by \
             NTP; a store server with a clock that far off could, after a failover, issue \
             fences below the last ones"
        ));
    }
}

// ------------------------------------------------------------------------------- Redis

fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim())
}

async fn redis_config(c: &mut redis::aio::MultiplexedConnection, name: &str) -> Option<String> {
    let v: Vec<String> = redis::cmd("CONFIG").arg("GET").arg(name).query_async(c).await.ok()?;
    v.get(1).cloned()
}

/// One Redis server's facts (for `redis://` and each Redlock instance).
struct RedisFacts {
    version: String,
    role: String,
    replicas: u64,
    aof: Option<String>,
    fsync: Option<String>,
    save: Option<String>,
    min_replicas: Option<u64>,
    clock: (f64, f64),
    /// `ip:port` of each connected replica, from `INFO replication`.
    replica_addrs: Vec<String>,
}

async fn redis_facts(client_url: &str) -> R<RedisFacts> {
    let client = redis::Client::open(client_url).map_err(|e| e.to_string())?;
    let mut c = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
    let info: String =
        redis::cmd("INFO").arg("server").query_async(&mut c).await.map_err(|e| e.to_string())?;
    let repl: String = redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let before = now_s();
    let t: Vec<String> = redis::cmd("TIME").query_async(&mut c).await.map_err(|e| e.to_string())?;
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
async fn redis_replica_clocks(base: &str, primary: &RedisFacts, r: &mut Report) {
    for addr in &primary.replica_addrs {
        let name = format!("replica {addr} clock − primary clock");
        match tokio::time::timeout(Duration::from_secs(3), redis_facts(&with_addr(base, addr)))
            .await
        {
            Ok(Ok(f)) => {
                let (d, u) = (f.clock.0 - primary.clock.0, f.clock.1 + primary.clock.1);
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

/// How far behind the old primary a promoted server's clock may be before doctor warns: a
/// failover takes at least this long, and the clock-backed fences rely on it.
const FAILOVER_CLOCK_SLACK_MS: f64 = 1000.0;

fn version_at_least(v: &str, major: u64, minor: u64) -> bool {
    let mut it = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// The persistence verdict for one Redis server.
fn redis_persistence(f: &RedisFacts) -> (&'static str, String) {
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

async fn redis(url: &str, r: &mut Report) -> R<()> {
    let base = leasehold::backends::redis::client_url(url).map_err(|e| e.to_string())?;
    let f = redis_facts(&base).await?;
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
    redis_replica_clocks(&base, &f, r).await;
    let wait = query_flag(url, "wait_replicas").and_then(|v| v.parse::<u64>().ok());
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

async fn redlock(url: &str, r: &mut Report) -> R<()> {
    let rest = &url["redlock://".len()..];
    let (hosts, _) = rest.split_once('?').unwrap_or((rest, ""));
    let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
    let mut weak = 0;
    for h in &hosts {
        match redis_facts(&format!("redis://{h}")).await {
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
                        f.clock.0
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

// ---------------------------------------------------------------------------- PostgreSQL

async fn postgres(url: &str, r: &mut Report) -> R<()> {
    use leasehold::backends::postgres::tokio_postgres::NoTls;
    let cfg = leasehold::backends::postgres::client_config(url).map_err(|e| e.to_string())?;
    let (client, conn) = cfg.connect(NoTls).await.map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let show = |name: &'static str| {
        let client = &client;
        async move {
            client
                .query_one(&format!("SHOW {name}"), &[])
                .await
                .map(|row| row.get::<_, String>(0))
                .unwrap_or_else(|_| "unknown".into())
        }
    };
    let version = show("server_version").await;
    let sync_commit = show("synchronous_commit").await;
    let sync_names = show("synchronous_standby_names").await;
    let fsync = show("fsync").await;
    let recovery: bool = client
        .query_one("SELECT pg_is_in_recovery()", &[])
        .await
        .map(|r| r.get(0))
        .unwrap_or(false);
    let standbys = client
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) \
             FROM pg_stat_replication",
            &[],
        )
        .await
        .map(|row| (row.get::<_, i64>(0), row.get::<_, i64>(1)))
        .ok();
    // A transaction-pooling proxy hands consecutive transactions to different backends.
    let mut pids = Vec::new();
    for _ in 0..4 {
        if let Ok(row) = client.query_one("SELECT pg_backend_pid()", &[]).await {
            pids.push(row.get::<_, i32>(0));
        }
    }
    pids.dedup();
    let pooled = pids.len() > 1;
    let before = now_s();
    let server: Option<f64> = client
        .query_one("SELECT extract(epoch FROM clock_timestamp())::float8", &[])
        .await
        .map(|row| row.get(0))
        .ok();
    let after = now_s();
    driver.abort();

    let session = query_flag(url, "mode").as_deref() == Some("session");
    r.set("version", &version);
    r.set("mode", if session { "session advisory locks" } else { "lease table" });
    r.set("in recovery (standby)", recovery);
    r.set("fsync", &fsync);
    r.set("synchronous_commit", &sync_commit);
    r.set("synchronous_standby_names", format!("{sync_names:?}"));
    match standbys {
        Some((n, s)) => r.set("streaming standbys", format!("{n} ({s} synchronous)")),
        None => r.set("streaming standbys", "unknown (pg_stat_replication not readable)"),
    }
    r.set(
        "transaction-pooling proxy in front",
        if pooled { "yes (backend pid changes between transactions)" } else { "no sign of one" },
    );
    r.clock = server.map(|s| offset(before, after, s));

    if recovery {
        r.verdict("this server is a standby (read-only): grants will fail; point the store at the primary");
    }
    if pooled && session {
        r.verdict(
            "a transaction-pooling proxy (PgBouncer) is in front: session advisory locks are not \
             safe here (the lock stays on a server connection other clients get); use the lease \
             table or with_xact_lock",
        );
        r.change("mode=lease, or connect to PostgreSQL directly for mode=session");
    }
    if session {
        r.verdict(
            "session advisory locks: linearizable; a server restart or failover ends every \
             session and with it every lock, and the holders' lost() fires",
        );
    } else {
        r.verdict(
            "lease table: linearizable (row lock); expiry by the database's now(), no client clock",
        );
    }
    if fsync == "off" {
        r.verdict(
            "fsync=off: a crash can lose committed grants and fence bumps: a second holder is \
             possible, with a larger fence (clock-backed), so fenced resources refuse the stale one",
        );
        r.change("fsync=on");
    }
    if matches!(sync_commit.as_str(), "off") {
        r.verdict(
            "synchronous_commit=off: a crash can lose the last grants acknowledged to clients",
        );
        r.change("synchronous_commit=on");
    }
    match standbys {
        Some((0, _)) => {
            if !session {
                r.verdict(
                    "no standbys: committed grants survive a crash; losing the server stops every \
                     grant until it is back",
                );
            }
            r.change("a synchronous standby (synchronous_standby_names) to survive the server's loss without a second holder");
        }
        Some((n, s)) if s == 0 || sync_names.trim().is_empty() => {
            r.verdict(format!(
                "{n} asynchronous standby(s): promoting one can lose the latest grants: a second \
                 holder can be admitted, with a larger fence (clock-backed), so fenced resources \
                 refuse the stale one"
            ));
            r.change("synchronous_standby_names (and synchronous_commit=on or remote_apply): a promoted standby has every acknowledged grant");
        }
        Some((n, s)) => {
            r.verdict(format!(
                "{n} standby(s), {s} synchronous: a grant is acknowledged only once a synchronous \
                 standby has it; promoting that standby keeps every grant"
            ));
        }
        None => r.verdict("replication unknown (no permission to read pg_stat_replication)"),
    }
    Ok(())
}

// --------------------------------------------------------------------------- MySQL

async fn mysql(url: &str, r: &mut Report) -> R<()> {
    use leasehold::backends::mysql::mysql_async::{self, prelude::Queryable};
    let opts = leasehold::backends::mysql::client_opts(url).map_err(|e| e.to_string())?;
    let mut c = mysql_async::Conn::new(opts).await.map_err(|e| e.to_string())?;
    let (version, flush, sync_binlog, read_only, log_bin): (
        String,
        String,
        String,
        String,
        String,
    ) = c
        .query_first(
            "SELECT VERSION(), CAST(@@innodb_flush_log_at_trx_commit AS CHAR), \
             CAST(@@sync_binlog AS CHAR), CAST(@@read_only AS CHAR), CAST(@@log_bin AS CHAR)",
        )
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no answer")?;
    let is_replica =
        !c.query::<mysql_async::Row, _>("SHOW SLAVE STATUS").await.unwrap_or_default().is_empty();
    let replicas = c.query::<mysql_async::Row, _>("SHOW SLAVE HOSTS").await.ok().map(|v| v.len());
    let semi: Option<String> = c
        .query_first::<(String, String), _>("SHOW VARIABLES LIKE 'rpl_semi_sync_master_enabled'")
        .await
        .ok()
        .flatten()
        .map(|(_, v)| v);
    let before = now_s();
    let server: Option<String> =
        c.query_first("SELECT CAST(UNIX_TIMESTAMP(NOW(6)) AS CHAR)").await.ok().flatten();
    let after = now_s();
    let _ = c.disconnect().await;

    let session = query_flag(url, "mode").as_deref() == Some("session");
    r.set("version", &version);
    r.set("mode", if session { "GET_LOCK session locks" } else { "lease table" });
    r.set("innodb_flush_log_at_trx_commit", &flush);
    r.set("sync_binlog", &sync_binlog);
    r.set("read_only", &read_only);
    r.set("binary log", &log_bin);
    r.set("this server replicates from a primary", is_replica);
    r.set(
        "registered replicas",
        replicas.map(|n| n.to_string()).unwrap_or("unknown (no privilege)".into()),
    );
    r.set("semi-synchronous replication", semi.as_deref().unwrap_or("not installed"));
    r.clock = server.and_then(|s| s.parse::<f64>().ok()).map(|s| offset(before, after, s));

    if matches!(read_only.as_str(), "1" | "ON") || is_replica {
        r.verdict("this server is a replica or read-only: grants will fail; point the store at the primary");
    }
    if session {
        r.verdict(
            "GET_LOCK session locks: linearizable on this server; they are not replicated: a \
             failover or restart ends every lock and fires the holders' lost()",
        );
    } else {
        r.verdict(
            "lease table: linearizable (InnoDB row lock); expiry by the server's UTC_TIMESTAMP(6)",
        );
        if flush != "1" {
            r.verdict(format!(
                "innodb_flush_log_at_trx_commit={flush}: a crash can lose up to a second of \
                 committed grants: a second holder is possible, with a larger fence (clock-backed)"
            ));
            r.change("innodb_flush_log_at_trx_commit=1");
        }
        match replicas {
            Some(0) | None if !is_replica => r.verdict(
                "no replicas registered: losing the server stops every grant until it is back",
            ),
            Some(n) if semi.as_deref() != Some("ON") => {
                r.verdict(format!(
                    "{n} asynchronous replica(s): promoting one can lose the latest grants: a \
                     second holder is possible, with a larger fence (clock-backed), so fenced \
                     resources refuse the stale one"
                ));
                r.change("semi-synchronous replication (rpl_semi_sync_master_enabled=ON)");
            }
            _ => {}
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------- etcd

async fn etcd(url: &str, locker: &Locker, r: &mut Report) -> R<()> {
    let store =
        leasehold::backends::etcd::EtcdStore::connect(url).await.map_err(|e| e.to_string())?;
    let client = store.client();
    let members = client.member_list().await.map_err(|e| e.to_string())?.members;
    let status = client.status().await.map_err(|e| e.to_string())?;
    let n = members.len();
    r.set("version", &status.version);
    r.set("members", n);
    for m in &members {
        let leader = if m.id == status.leader { " (leader)" } else { "" };
        r.set(
            &format!("member {}", if m.name.is_empty() { "(unstarted)" } else { &m.name }),
            format!(
                "{}{leader}{}",
                m.client_urls.join(","),
                if m.is_learner { " learner" } else { "" }
            ),
        );
    }
    r.set("raft term", status.raft_term);
    r.set("lock prefix", format!("{:?}", store.prefix()));
    r.set("session TTL", query_flag(url, "ttl").unwrap_or("10s (default)".into()));
    let _ = locker;
    let voters = members.iter().filter(|m| !m.is_learner).count();
    let tolerate = voters.saturating_sub(1) / 2;
    r.verdict(format!(
        "{voters} voting member(s): linearizable grants; survives the loss of {tolerate} \
         member(s); a leader change keeps every lease (etcd extends leases on election)"
    ));
    if voters == 1 {
        r.verdict(
            "a single member: its loss stops every grant and every keepalive (holders' lost() \
             fires before their sessions could expire); losing its data directory resets \
             revisions, so fences go back and a stale holder would win at the resource: restore \
             from a snapshot, never restart it empty",
        );
        r.change("3 or 5 members: survive 1 or 2 member losses with no second holder");
    } else if voters % 2 == 0 {
        r.verdict(format!(
            "an even member count ({voters}) tolerates no more failures than {} members",
            voters - 1
        ));
        r.change("an odd number of members");
    }
    r.verdict(
        "a holder cut off from the majority cannot confirm keepalives: admit() turns false at \
         once and lost() fires at 0.9 x TTL after the last confirmed one, before the server can \
         expire the session",
    );
    r.verdict("the etcd protocol does not reveal the server's clock; leasehold does not need it");
    Ok(())
}

// ----------------------------------------------------------------------- ZooKeeper

/// A four-letter-word command on `host:port` (often disabled: then `None`).
async fn four(host: &str, cmd: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(host))
        .await
        .ok()?
        .ok()?;
    s.write_all(cmd.as_bytes()).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out)).await.ok()?.ok()?;
    (!out.is_empty() && !out.contains("is not executed")).then_some(out)
}

async fn zookeeper(url: &str, r: &mut Report) -> R<()> {
    let store =
        leasehold::backends::zookeeper::ZkStore::connect(url).await.map_err(|e| e.to_string())?;
    let client = store.client().await.map_err(|e| e.to_string())?;
    r.set("negotiated session timeout", format!("{:?}", client.session_timeout()));
    let rest = &url["zk://".len()..];
    let hosts: Vec<&str> =
        rest.split(['/', '?']).next().unwrap_or("").split(',').filter(|h| !h.is_empty()).collect();
    let mut modes = Vec::new();
    for h in &hosts {
        match four(h, "srvr").await {
            Some(out) => {
                let field = |k: &str| {
                    out.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_owned())
                };
                let mode = field("Mode:").unwrap_or("?".into());
                r.set(
                    &format!("server {h}"),
                    format!("{mode}, {}", field("Zookeeper version:").unwrap_or("?".into())),
                );
                modes.push(mode);
            }
            None => r.set(&format!("server {h}"), "srvr refused (4lw.commands.whitelist)"),
        }
    }
    let ensemble = match client.get_config().await {
        Ok((data, _)) => {
            String::from_utf8_lossy(&data).lines().filter(|l| l.starts_with("server.")).count()
        }
        Err(_) => 0,
    };
    if ensemble > 0 {
        r.set("ensemble members (/zookeeper/config)", ensemble);
    }
    let size = if ensemble > 0 {
        ensemble
    } else if modes.iter().any(|m| m == "standalone") {
        1
    } else {
        hosts.len()
    };
    if size <= 1 {
        r.verdict(
            "a single (standalone) server: linearizable while it lives; its loss stops every \
             grant, disconnects every holder (admit() false at once, lost() 0.4 x the session \
             timeout later) and, if it comes back after the timeout, expires their sessions",
        );
        r.change(
            "an ensemble of 3 or 5 servers: survive 1 or 2 server losses with no second holder",
        );
    } else {
        r.verdict(format!(
            "an ensemble of {size}: survives the loss of {} server(s); sessions move to a live \
             server within the session timeout",
            (size - 1) / 2
        ));
    }
    r.verdict(
        "a disconnected holder: admit() is false at once; lost() fires if the client is not \
         reconnected within 0.4 x the session timeout, and at once on Expired",
    );
    Ok(())
}

// ---------------------------------------------------------------------------- output

pub fn json(url: &str, locker: &Locker, r: &Report) -> Value {
    json!({
        "store": url,
        "guarantees": locker.guarantees(),
        "settings": r.settings.iter().map(|(k, v)| json!({ "setting": k, "value": v })).collect::<Vec<_>>(),
        "clock_offset_ms": r.clock.map(|(o, u)| json!({ "store_minus_local": o, "uncertainty": u })),
        "this_deployment": r.verdicts,
        "would_change_it": r.changes,
    })
}

pub fn text(url: &str, locker: &Locker, r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "store: {url}");
    let _ = writeln!(out, "\nthe backend promises:");
    for line in locker.guarantees().to_string().lines() {
        let _ = writeln!(out, "  {line}");
    }
    if !r.settings.is_empty() {
        let _ = writeln!(out, "\nthis deployment:");
        let w = r.settings.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in &r.settings {
            let _ = writeln!(out, "  {k:<w$}  {v}");
        }
    }
    if let Some((o, u)) = r.clock {
        let _ = writeln!(
            out,
            "  {:<w$}  {o:+.1} ms (±{u:.1} ms); leasehold never compares the two clocks",
            "store clock − local clock",
            w = r.settings.iter().map(|(k, _)| k.len()).max().unwrap_or(0)
        );
    }
    let _ = writeln!(out, "\nwhat it guarantees:");
    for v in &r.verdicts {
        let _ = writeln!(out, "  - {v}");
    }
    if !r.changes.is_empty() {
        let _ = writeln!(out, "\nwhat would change it:");
        for c in &r.changes {
            let _ = writeln!(out, "  - {c}");
        }
    }
    out
}
