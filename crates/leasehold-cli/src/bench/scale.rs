//! `--scenario scale`: `--leases` distinct keys locked once each (acquire, a fenced write,
//! release), and what the store keeps of them: its size before the first key (the empty
//! store), after the last, and once the horizon has passed (`leasehold::horizon`).
//!
//! Redis: `INFO memory` `used_memory` and `DBSIZE`; each key's write is a fenced `INCRBY` of
//! one counter through `leasehold::fence::redis::RedisFence` (fence hash per key's resource).
//! The empty store is measured after one key was locked, so that the scripts are loaded.
//! PostgreSQL: `pg_total_relation_size` and the row count of the lease table and of the
//! resource's `leasehold_fence` table (created in the lease table's schema); each key's write
//! is a fenced `UPDATE` of one row per task in a transaction with
//! `leasehold::fence::postgres::claim_within`. After the horizon, the lease table is what the
//! store's own pruning and compaction left (`VACUUM`, `REINDEX INDEX CONCURRENTLY`, at most
//! once per horizon); the fence table is pruned with `fence::postgres::prune` and compacted
//! with `fence::postgres::compact`, as a maintenance task would. While it waits, one key is
//! locked and released every 100 ms and its grant latency recorded, so that the pruning's
//! and compaction's effect on grants is measured.

// What the two measured stores share (the timed run, the report) is unused in a build with
// neither; the scenario then answers that it measures only them.
#![cfg_attr(not(any(feature = "redis", feature = "postgres")), allow(dead_code, unused_imports))]

use std::time::{Duration, Instant};

use leasehold::{Locker, Scheme};
use serde::Serialize;

use super::{BenchResult, Progress, Settings, round_to, unique};

/// Tasks locking keys at once.
const PAR: usize = 64;
/// The lease's TTL (each is released at once).
const TTL: Duration = Duration::from_secs(5);

/// What the scale scenario measured.
#[derive(Debug, Serialize)]
pub struct Scale {
    pub what: String,
    pub keys: usize,
    pub horizon_s: f64,
    /// Keys locked (acquire, fenced write, release) per second.
    pub keys_per_s: f64,
    /// The store and resource before the first key.
    pub empty: Size,
    /// After the last key's release.
    pub after_last_key: Size,
    /// Once every key's state may be gone (Redis: twice the horizon plus the TTL after the
    /// last; PostgreSQL: also the probe key's, and the store's compaction after it).
    pub after_horizon: Size,
    /// PostgreSQL only: grants of one key, every 100 ms, for 10 s before the first key (the
    /// baseline), and while waiting out the horizon (through the pruning and the compaction).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grants: Option<[Latency; 2]>,
    /// PostgreSQL only: where the bytes after the horizon are (heap, free-space and
    /// visibility maps, indexes, TOAST).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_horizon_detail: Option<String>,
    /// `after_horizon.bytes / empty.bytes`.
    pub after_horizon_vs_empty: f64,
    /// Seconds from the last release to the `after_horizon` measurement.
    pub waited_s: f64,
}

/// Grant latencies (acquire until granted) of a run of grants.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    pub grants: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// A size: bytes (Redis `used_memory`; PostgreSQL the two tables' total relation size) and
/// entries (Redis `DBSIZE`; PostgreSQL the two tables' rows).
#[derive(Debug, Clone, Serialize)]
pub struct Size {
    pub bytes: u64,
    pub entries: u64,
}

pub(super) async fn scale(s: &Settings, locker: &Locker, p: &Progress) -> BenchResult<Scale> {
    p.step(format!("scale: {} keys", s.leases));
    match s.url.scheme() {
        #[cfg(feature = "redis")]
        Scheme::Redis => redis::run(s, locker).await,
        #[cfg(feature = "postgres")]
        Scheme::Postgres => postgres::run(s, locker).await,
        other => {
            let _ = locker;
            Err(format!("--scenario scale measures redis:// and postgres:// stores, not {other:?}"))
        }
    }
}

/// Locks `n` keys once each, `PAR` at a time; `write(task, fencing)` is the fenced write.
async fn lock_all<W, F>(locker: &Locker, n: usize, write: W) -> BenchResult<f64>
where
    W: Fn(usize, leasehold::Fencing) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = BenchResult<()>> + Send,
{
    let prefix = unique("scale");
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..PAR {
        let (locker, prefix, write) = (locker.clone(), prefix.clone(), write.clone());
        tasks.push(tokio::spawn(async move {
            for i in (t..n).step_by(PAR) {
                let lease = locker
                    .acquire(&format!("{prefix}:{i}"), TTL)
                    .await
                    .map_err(|e| format!("acquire: {e}"))?;
                write(t, lease.fencing()).await?;
                let released = lease.release().await.map_err(|e| format!("release: {e}"))?;
                if !released.is_clean() {
                    return Err(format!("release of key {i}: {released:?}"));
                }
            }
            Ok::<_, String>(())
        }));
    }
    for t in tasks {
        t.await.map_err(|e| e.to_string())??;
    }
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

fn finish(
    s: &Settings,
    horizon: Duration,
    rate: f64,
    sizes: [Size; 3],
    grants: Option<([Latency; 2], String)>,
    waited: Duration,
    what: &str,
) -> Scale {
    let [empty, last, after] = sizes;
    Scale {
        what: format!(
            "{} distinct keys, each acquired, written once through its fence and released \
             ({PAR} tasks), horizon {} s: {what}",
            s.leases,
            horizon.as_secs_f64()
        ),
        keys: s.leases,
        horizon_s: horizon.as_secs_f64(),
        keys_per_s: round_to(rate, 0),
        after_horizon_vs_empty: round_to(after.bytes as f64 / empty.bytes.max(1) as f64, 3),
        empty,
        after_last_key: last,
        after_horizon: after,
        after_horizon_detail: grants.as_ref().map(|g| g.1.clone()),
        grants: grants.map(|g| g.0),
        waited_s: round_to(waited.as_secs_f64(), 1),
    }
}

/// The text table of the scenario.
pub(super) fn text(sc: &Scale) -> String {
    let mb = |b: u64| b as f64 / 1_000_000.0;
    let mut out = format!("\n[scale] {}\n", sc.what);
    out.push_str(&format!("  keys locked/s {}\n", sc.keys_per_s));
    let mut line = |name: &str, z: &Size| {
        out.push_str(&format!(
            "  {name:<16} {:>10.2} MB  {:>10} entries  ({:.3} × empty)\n",
            mb(z.bytes),
            z.entries,
            z.bytes as f64 / sc.empty.bytes.max(1) as f64
        ))
    };
    line("empty", &sc.empty);
    line("after last key", &sc.after_last_key);
    line("after horizon", &sc.after_horizon);
    out.push_str(&format!("  measured {} s after the last release\n", sc.waited_s));
    if let Some(d) = &sc.after_horizon_detail {
        out.push_str(&format!("  after horizon, by fork: {d}\n"));
    }
    if let Some(gs) = &sc.grants {
        let names = ["before the first key (10 s)", "while waiting (pruning, compaction)"];
        for (name, g) in names.iter().zip(gs) {
            out.push_str(&format!(
                "  grants of one key every 100 ms, {name}: {} grants, p50 {} ms, p99 {} ms, \
                 max {} ms\n",
                g.grants, g.p50_ms, g.p99_ms, g.max_ms
            ));
        }
    }
    out
}

/// Locks one key every 100 ms until `deadline` (acquire, release), recording each grant's
/// latency; a failed grant ends the run with its error.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
async fn grants_until(locker: &Locker, key: &str, deadline: Instant) -> BenchResult<Latency> {
    let mut ms = Vec::new();
    loop {
        let t0 = Instant::now();
        let lease = locker.acquire(key, TTL).await.map_err(|e| format!("probe acquire: {e}"))?;
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        let released = lease.release().await.map_err(|e| format!("probe release: {e}"))?;
        if !released.is_clean() {
            return Err(format!("probe release: {released:?}"));
        }
        if Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ms.sort_by(f64::total_cmp);
    let at =
        |q: f64| ms.get(((ms.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    Ok(Latency {
        grants: ms.len(),
        p50_ms: round_to(at(0.5), 2),
        p99_ms: round_to(at(0.99), 2),
        max_ms: round_to(at(1.0), 2),
    })
}

/// Sleeps until `deadline`.
async fn until(deadline: Instant) {
    tokio::time::sleep(deadline.saturating_duration_since(Instant::now())).await;
}

#[cfg(feature = "redis")]
mod redis {
    use std::time::{Duration, Instant};

    use leasehold::Locker;

    use super::{BenchResult, Scale, Settings, Size, TTL, finish, lock_all, until};

    async fn size(c: &mut ::redis::aio::MultiplexedConnection) -> BenchResult<Size> {
        let info: String =
            ::redis::cmd("INFO").arg("memory").query_async(c).await.map_err(|e| e.to_string())?;
        let bytes = info
            .lines()
            .find_map(|l| l.strip_prefix("used_memory:"))
            .and_then(|v| v.trim().parse().ok())
            .ok_or("INFO memory has no used_memory")?;
        let entries: u64 =
            ::redis::cmd("DBSIZE").query_async(c).await.map_err(|e| e.to_string())?;
        Ok(Size { bytes, entries })
    }

    pub(super) async fn run(s: &Settings, locker: &Locker) -> BenchResult<Scale> {
        use leasehold::backends::redis::tools;
        let horizon = tools::horizon(&s.url).map_err(|e| e.to_string())?;
        let client = tools::client(&s.url).map_err(|e| e.to_string())?;
        let mut c = client.get_multiplexed_async_connection().await.map_err(|e| e.to_string())?;
        let res = tools::fence(&s.url).await.map_err(|e| e.to_string())?;
        let counter = format!("{}scale-writes", res.prefix());
        let write = move |_t: usize, f: leasehold::Fencing| {
            let (mut res, counter) = (res.clone(), counter.clone());
            async move {
                let r = f.key().as_str().to_owned();
                // A claim is idempotent: one whose answer was lost (a timeout on a loaded
                // machine) is sent again. The counter only shows that the writes ran.
                let mut tries = 0;
                loop {
                    tries += 1;
                    match res.claim(&r, &f).await {
                        Ok(()) => break,
                        Err(e) if e.is_retryable() && tries < 5 => continue,
                        Err(e) => return Err(format!("claim: {e}")),
                    }
                }
                res.incr_by(&r, &f, &counter, 1).await.map_err(|e| format!("write: {e}"))?;
                Ok(())
            }
        };
        // One key first, so that the scripts are loaded when the empty store is measured
        // (its state is counted in "empty", and is gone by the end too).
        lock_all(locker, 1, write.clone()).await?;
        let empty = size(&mut c).await?;
        let rate = lock_all(locker, s.leases, write).await?;
        let last = size(&mut c).await?;
        let released = Instant::now();
        // Counters outlive the grant by ttl + horizon, fence hashes by twice the horizon.
        until(released + TTL + 2 * horizon).await;
        // Then Redis's active expiry removes them; wait for the key count to settle.
        let mut after = size(&mut c).await?;
        let give_up = Instant::now() + horizon.max(Duration::from_secs(60));
        while after.entries > empty.entries + 1 && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_secs(1)).await;
            after = size(&mut c).await?;
        }
        let waited = released.elapsed();
        let what = "Redis INFO memory used_memory and DBSIZE (the fence counters expire ttl + \
                    horizon after the grant, the resource's fence hashes twice the horizon \
                    after their fence; one counter key holds the writes)";
        Ok(finish(s, horizon, rate, [empty, last, after], None, waited, what))
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use std::time::{Duration, Instant};

    use leasehold::Locker;
    use leasehold::fence::postgres::{self as fence, tokio_postgres};

    use super::{BenchResult, PAR, Scale, Settings, Size, TTL, finish, grants_until, lock_all};

    /// The server's message, not just "db error".
    fn pg(e: tokio_postgres::Error) -> String {
        match e.as_db_error() {
            Some(d) => format!("{}: {}", d.code().code(), d.message()),
            None => e.to_string(),
        }
    }

    async fn connect(cfg: &tokio_postgres::Config) -> BenchResult<tokio_postgres::Client> {
        let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(pg)?;
        tokio::spawn(conn);
        Ok(client)
    }

    async fn size(c: &tokio_postgres::Client, lease: &str) -> BenchResult<Size> {
        let sql = format!(
            "SELECT (pg_total_relation_size('{lease}') + pg_total_relation_size('leasehold_fence'))::bigint,
                    ((SELECT count(*) FROM {lease}) + (SELECT count(*) FROM leasehold_fence))::bigint"
        );
        let row = c.query_one(&sql, &[]).await.map_err(pg)?;
        Ok(Size { bytes: row.get::<_, i64>(0) as u64, entries: row.get::<_, i64>(1) as u64 })
    }

    /// The two tables' bytes by kind: heap main fork, free-space maps, visibility maps,
    /// indexes, TOAST (with its index).
    async fn forks(c: &tokio_postgres::Client, lease: &str) -> BenchResult<String> {
        let sql = format!(
            "SELECT sum(pg_relation_size(t, 'main'))::bigint, sum(pg_relation_size(t, 'fsm'))::bigint,
                    sum(pg_relation_size(t, 'vm'))::bigint, sum(pg_indexes_size(t))::bigint,
                    sum(pg_total_relation_size(t) - pg_relation_size(t, 'main')
                        - pg_relation_size(t, 'fsm') - pg_relation_size(t, 'vm')
                        - pg_indexes_size(t))::bigint
             FROM unnest(ARRAY['{lease}'::regclass, 'leasehold_fence'::regclass]) t"
        );
        let r = c.query_one(&sql, &[]).await.map_err(pg)?;
        let kb = |i: usize| r.get::<_, i64>(i) / 1024;
        Ok(format!(
            "heap {} kB, free-space maps {} kB, visibility maps {} kB, indexes {} kB, TOAST {} kB",
            kb(0),
            kb(1),
            kb(2),
            kb(3),
            kb(4)
        ))
    }

    pub(super) async fn run(s: &Settings, locker: &Locker) -> BenchResult<Scale> {
        let (schema, table, horizon, cfg) =
            leasehold::backends::postgres::tools::lease_table(&s.url).map_err(|e| e.to_string())?;
        let lease = format!("\"{schema}\".\"{table}\"");
        let admin = connect(&cfg).await?;
        let setup = format!(
            "SET search_path TO \"{schema}\";
             CREATE TABLE IF NOT EXISTS scale_writes (task int PRIMARY KEY, n bigint NOT NULL);
             INSERT INTO scale_writes SELECT g, 0 FROM generate_series(0, {}) g ON CONFLICT DO NOTHING",
            PAR - 1
        );
        admin.batch_execute(&setup).await.map_err(pg)?;
        fence::install(&admin).await.map_err(|e| e.to_string())?;
        // The key that is locked while waiting out the horizon, once first, so that the
        // empty store holds what it holds at the end: that key's row (as Redis's empty store
        // holds one warm-up key's state).
        let probe = super::unique("scale-probe");
        let before = grants_until(locker, &probe, Instant::now() + Duration::from_secs(10)).await?;
        let empty = size(&admin, &lease).await?;
        // One connection per task: a transaction needs its client to itself.
        let mut clients = Vec::new();
        for _ in 0..PAR {
            let c = connect(&cfg).await?;
            c.batch_execute(&format!("SET search_path TO \"{schema}\"")).await.map_err(pg)?;
            clients.push(std::sync::Arc::new(tokio::sync::Mutex::new(c)));
        }
        let write = move |t: usize, f: leasehold::Fencing| {
            let client = clients[t].clone();
            async move {
                let mut c = client.lock().await;
                let tx = c.transaction().await.map_err(pg)?;
                let r = f.key().as_str().to_owned();
                fence::claim_within(&tx, &r, &f, horizon)
                    .await
                    .map_err(|e| format!("claim: {e}"))?;
                tx.execute("UPDATE scale_writes SET n = n + 1 WHERE task = $1", &[&(t as i32)])
                    .await
                    .map_err(pg)?;
                fence::commit(tx, &f).await.map_err(|e| format!("commit: {e}"))
            }
        };
        let rate = lock_all(locker, s.leases, write).await?;
        let last = size(&admin, &lease).await?;
        let released = Instant::now();
        // Lease rows go once idle past the horizon (the store's pruning, every quarter of
        // it), and the store compacts its tables at most once per horizon after deleting;
        // claims go once their fence is twice the horizon old. Meanwhile, grants go on.
        let deadline = released + TTL + 2 * horizon + horizon / 2;
        let grants = grants_until(locker, &probe, deadline).await?;
        fence::prune(&admin, horizon).await.map_err(|e| e.to_string())?;
        let bound = horizon.clamp(Duration::from_secs(60), Duration::from_secs(600));
        let compacted = fence::compact(&admin, bound).await.map_err(|e| e.to_string())?;
        if let Some(why) = &compacted.skipped {
            eprintln!("fence table not compacted: {why:?}");
        }
        // The probe key is a key too: its row goes a horizon after its last grant, and the
        // store's compaction comes at most a horizon (and a pruning period) after the one
        // before. Wait for the row to go, then for that compaction, within a bound.
        let probed = Instant::now();
        let give_up = probed + TTL + 3 * horizon + Duration::from_secs(10);
        let mut after = size(&admin, &lease).await?;
        while after.entries > 0 && Instant::now() < give_up {
            tokio::time::sleep(Duration::from_secs(1)).await;
            after = size(&admin, &lease).await?;
        }
        let next = Instant::now() + horizon + horizon / 4 + Duration::from_secs(2);
        tokio::time::sleep(next.min(give_up).saturating_duration_since(Instant::now())).await;
        fence::compact(&admin, bound).await.map_err(|e| e.to_string())?;
        let after = size(&admin, &lease).await?;
        let waited = released.elapsed();
        let detail = forks(&admin, &lease).await?;
        let what = "PostgreSQL pg_total_relation_size and rows of the lease table and the \
                    resource's leasehold_fence table (lease rows pruned and the table compacted \
                    by the store once idle past the horizon, claims by fence::postgres::prune \
                    and fence::postgres::compact once their fence is twice the horizon old)";
        let grants = Some(([before, grants], detail));
        Ok(finish(s, horizon, rate, [empty, last, after], grants, waited, what))
    }
}
