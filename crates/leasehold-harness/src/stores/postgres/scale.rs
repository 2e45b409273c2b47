//! PostgreSQL's part of `leasehold bench --scenario scale` ([`crate::scale`]): its size is
//! the lease table's and the fence table's `pg_total_relation_size` and rows.

use std::time::{Duration, Instant};

use leasehold::fence::postgres::{self as fence, tokio_postgres};
use leasehold::{Locker, StoreUrl};

use crate::scale::{Measured, PAR, ScaleRun, Size, TTL, grants_until, lock_all, unique};

/// The server's message, not just "db error".
fn pg(e: tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    }
}

async fn connect(cfg: &tokio_postgres::Config) -> Result<tokio_postgres::Client, String> {
    let (client, conn) = cfg.connect(tokio_postgres::NoTls).await.map_err(pg)?;
    tokio::spawn(conn);
    Ok(client)
}

async fn size(c: &tokio_postgres::Client, lease: &str) -> Result<Size, String> {
    let sql = format!(
        "SELECT (pg_total_relation_size('{lease}') + pg_total_relation_size('leasehold_fence'))::bigint,
                ((SELECT count(*) FROM {lease}) + (SELECT count(*) FROM leasehold_fence))::bigint"
    );
    let row = c.query_one(&sql, &[]).await.map_err(pg)?;
    Ok(Size { bytes: row.get::<_, i64>(0) as u64, entries: row.get::<_, i64>(1) as u64 })
}

/// The two tables' bytes by kind: heap main fork, free-space maps, visibility maps,
/// indexes, TOAST (with its index).
async fn forks(c: &tokio_postgres::Client, lease: &str) -> Result<String, String> {
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

/// PostgreSQL's part of the scale scenario.
pub struct Run;

#[async_trait::async_trait]
impl ScaleRun for Run {
    /// `pg_total_relation_size` and the row count of the lease table and of the resource's
    /// `leasehold_fence` table (created in the lease table's schema); each key's write is a
    /// fenced `UPDATE` of one row per task in a transaction with
    /// `leasehold::fence::postgres::claim_within`. After the horizon, the lease table is what
    /// the store's own pruning and compaction left (`VACUUM`, `REINDEX INDEX CONCURRENTLY`, at
    /// most once per horizon); the fence table is pruned with `fence::postgres::prune` and
    /// compacted with `fence::postgres::compact`, as a maintenance task would. While it waits,
    /// one key is locked and released every 100 ms and its grant latency recorded, so that the
    /// pruning's and compaction's effect on grants is measured.
    async fn run(&self, url: &StoreUrl, locker: &Locker, keys: usize) -> Result<Measured, String> {
        run(url, locker, keys).await
    }
}

async fn run(url: &StoreUrl, locker: &Locker, keys: usize) -> Result<Measured, String> {
    let (schema, table, horizon, cfg) =
        leasehold::backends::postgres::tools::lease_table(url).map_err(|e| e.to_string())?;
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
    let probe = unique("scale-probe");
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
            fence::claim_within(&tx, &r, &f, horizon).await.map_err(|e| format!("claim: {e}"))?;
            tx.execute("UPDATE scale_writes SET n = n + 1 WHERE task = $1", &[&(t as i32)])
                .await
                .map_err(pg)?;
            fence::commit(tx, &f).await.map_err(|e| format!("commit: {e}"))
        }
    };
    let rate = lock_all(locker, keys, write).await?;
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
    Ok(Measured {
        horizon,
        keys_per_s: rate,
        sizes: [empty, last, after],
        grants: Some(([before, grants], detail)),
        waited,
        what,
    })
}
