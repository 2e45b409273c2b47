//! PostgreSQL compaction (issue 35, docs/design.md §4.6): once the horizon has passed and the
//! pruning deleted the rows of many keys, the lease table and the resource's fence table come
//! back near their empty size (`VACUUM`, `REINDEX INDEX CONCURRENTLY`), grants and claims go
//! on while it runs, and a role that may not compact is told so and nothing else changes.
//!
//! Each test works in a private schema of the machine's PostgreSQL (a role of its own for the
//! last, dropped after). The rows of 100,000 keys idle for an hour are written in one
//! statement, in the shape the lease table's grants and releases leave them, so that the
//! tables are large in a second rather than after minutes of grants.

use std::time::{Duration, Instant};

use leasehold::fence::postgres::{self as pg_fence, Skipped, tokio_postgres};
use leasehold::{Locker, Wait};
use leasehold_testkit::{PgSchema, postgres_base};

const TTL: Duration = Duration::from_secs(5);

/// What a vacuumed table keeps beyond a fresh one however few its rows: its free-space map
/// (up to three pages) and visibility map (one page); and a page more.
const MAPS: i64 = 5 * 8192;

async fn client(url: &str, schema: &str) -> tokio_postgres::Client {
    let url = format!("{url}?options=-csearch_path%3D{schema}");
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

/// The total size of `tables` (heap, maps, TOAST, indexes), in bytes.
async fn size(c: &tokio_postgres::Client, tables: &[&str]) -> i64 {
    let mut total = 0;
    for t in tables {
        let sql = format!("SELECT pg_total_relation_size('{t}')::int8");
        total += c.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0);
    }
    total
}

/// The heap's main fork, and the pages up to its last live row: a vacuum truncates the heap
/// only down to the last page holding a live row.
async fn heap(c: &tokio_postgres::Client, table: &str) -> (i64, i64) {
    let sql = format!(
        "SELECT pg_relation_size('{table}')::int8,
                (coalesce(max((ctid::text::point)[0]) + 1, 0) * 8192)::int8 FROM {table}"
    );
    let r = c.query_one(&sql, &[]).await.unwrap();
    (r.get(0), r.get(1))
}

async fn relfilenode(c: &tokio_postgres::Client, index: &str) -> u32 {
    let sql = format!("SELECT relfilenode FROM pg_class WHERE oid = '{index}'::regclass");
    c.query_one(&sql, &[]).await.unwrap().get(0)
}

/// Grants of one key, back to back, until `stop` says so: their latencies, and each fence
/// larger than the last (a grant lost or doubled would show as an error or a fence that
/// does not grow).
async fn grants(
    l: Locker,
    key: &'static str,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Vec<f64> {
    let mut ms = Vec::new();
    let mut last = 0;
    while !*stop.borrow() {
        let t0 = Instant::now();
        let lease = l.acquire(key, TTL).wait(Wait::For(Duration::from_secs(5))).await.unwrap();
        ms.push(t0.elapsed().as_secs_f64() * 1000.0);
        assert!(lease.fence().get() > last, "fence {} after {last}", lease.fence());
        last = lease.fence().get();
        assert!(lease.release().await.unwrap().is_clean());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    ms
}

fn max(ms: &[f64]) -> f64 {
    ms.iter().copied().fold(0.0, f64::max)
}

/// The store's own pruning and compaction: 100,000 idle keys' rows are deleted, the table
/// vacuumed and its primary key rebuilt, and the size comes back near the empty store's,
/// while another key is granted and released back to back throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_table_comes_back_near_its_empty_size_while_grants_go_on() {
    let schema = PgSchema::new();
    let url = format!("{}?schema={}&horizon=1s", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    // The key granted throughout, once first: the empty store holds its row.
    assert!(l.acquire("busy", TTL).await.unwrap().release().await.unwrap().is_clean());
    let c = client(&postgres_base(), &schema.name).await;
    let tables = ["leasehold_leases", "leasehold_leases_readers"];
    let empty = size(&c, &tables).await;
    let pkey = relfilenode(&c, "leasehold_leases_pkey").await;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let granting = tokio::spawn(grants(l.clone(), "busy", stopped));
    c.batch_execute(
        "INSERT INTO leasehold_leases (key, owner, fence, expires_at)
         SELECT 'idle-key-' || g, NULL,
                (extract(epoch FROM clock_timestamp()) * 1000000)::bigint - 3600000000,
                now() - interval '1 hour'
         FROM generate_series(1, 100000) g",
    )
    .await
    .unwrap();
    let full = size(&c, &tables).await;
    assert!(full > 20 * empty, "100,000 rows: {full} bytes against {empty} empty");
    // Pruned every 250 ms, compacted once a horizon (1 s) has passed since the store began.
    let deadline = Instant::now() + Duration::from_secs(8);
    let rows = || async {
        c.query_one("SELECT count(*) FROM leasehold_leases", &[]).await.unwrap().get::<_, i64>(0)
    };
    while Instant::now() < deadline
        && (rows().await > 1 || relfilenode(&c, "leasehold_leases_pkey").await == pkey)
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Let the next compaction (a horizon after the one that rebuilt the index) run too.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stop.send(true).unwrap();
    let ms = granting.await.unwrap();
    let during = size(&c, &tables).await;
    let (heap_bytes, live_end) = heap(&c, "leasehold_leases").await;
    eprintln!(
        "lease table: empty {empty} B, 100,000 idle rows {full} B, compacted with one key busy \
         {during} B (heap {heap_bytes} B, its last live row's page ends at {live_end} B); {} \
         grants meanwhile, max {:.1} ms",
        ms.len(),
        max(&ms)
    );
    assert_eq!(rows().await, 1, "only the busy key's row is left");
    assert_ne!(relfilenode(&c, "leasehold_leases_pkey").await, pkey, "the index was rebuilt");
    assert!(ms.len() >= 10, "grants went on: {}", ms.len());
    // The heap's emptied tail was given back, down to the busy key's row wherever it is.
    assert!(heap_bytes <= live_end + 8192, "heap {heap_bytes} B, live rows up to {live_end} B");
    // The busy key idle past the horizon too: its row is pruned, and the next compaction
    // brings the table back near its empty size.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = during;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        after = size(&c, &tables).await;
        if rows().await == 0 && after <= empty + MAPS {
            break;
        }
    }
    eprintln!("lease table after the horizon: {after} B against {empty} B empty");
    assert_eq!(rows().await, 0);
    assert!(after <= empty + MAPS, "after {after} B against {empty} B empty");
}

/// The resource's table: `prune` deletes 100,000 claims twice the horizon old, `compact`
/// vacuums and rebuilds both indexes, and the size comes back near the empty table's, while
/// another resource is claimed back to back on another connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_table_compacts_after_prune_while_claims_go_on() {
    let schema = PgSchema::new();
    let url = format!("{}?schema={}&horizon=1s", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    let c = client(&postgres_base(), &schema.name).await;
    pg_fence::install(&c).await.unwrap();
    let empty = size(&c, &["leasehold_fence"]).await;
    c.batch_execute(
        "INSERT INTO leasehold_fence (resource, lock_key, fence, owner)
         SELECT 'old-resource-' || g, 'old-key-' || g,
                (extract(epoch FROM clock_timestamp()) * 1000000)::bigint - 3600000000 + g,
                'owner-0123456789abcdef'
         FROM generate_series(1, 100000) g",
    )
    .await
    .unwrap();
    let full = size(&c, &["leasehold_fence"]).await;
    let h = Duration::from_secs(1);
    assert_eq!(pg_fence::prune(&c, h).await.unwrap(), 100_000);
    // Claims of another resource, each in its own transaction, throughout the compaction.
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut other = client(&postgres_base(), &schema.name).await;
    let claiming = tokio::spawn(async move {
        let mut ms = Vec::new();
        while !*stopped.borrow() {
            let lease = l.acquire("acct", TTL).await.unwrap();
            let t0 = Instant::now();
            let tx = other.transaction().await.unwrap();
            pg_fence::claim_within(&tx, "acct", &lease.fencing(), h).await.unwrap();
            pg_fence::commit(tx, &lease.fencing()).await.unwrap();
            ms.push(t0.elapsed().as_secs_f64() * 1000.0);
            assert!(lease.release().await.unwrap().is_clean());
        }
        ms
    });
    let done = pg_fence::compact(&c, Duration::from_secs(60)).await.unwrap();
    stop.send(true).unwrap();
    let ms = claiming.await.unwrap();
    let during = size(&c, &["leasehold_fence"]).await;
    let (heap_bytes, live_end) = heap(&c, "leasehold_fence").await;
    eprintln!(
        "fence table: empty {empty} B, 100,000 claims {full} B, compacted with one resource \
         busy {during} B (heap {heap_bytes} B, its last live row's page ends at {live_end} B; \
         {done:?}); {} claims meanwhile, max {:.1} ms",
        ms.len(),
        max(&ms)
    );
    assert!(!ms.is_empty(), "claims went on");
    assert_eq!(done.skipped, None);
    assert!(done.vacuumed);
    assert_eq!(done.reindexed.len(), 2, "both indexes rebuilt: {:?}", done.reindexed);
    assert!(heap_bytes <= live_end + 8192, "heap {heap_bytes} B, live rows up to {live_end} B");
    // Nothing left to rebuild: the next call rebuilds nothing.
    let again = pg_fence::compact(&c, Duration::from_secs(60)).await.unwrap();
    assert!(again.reindexed.is_empty(), "{again:?}");
    // The busy resource's claim twice the horizon old too: pruned, and the table compacts
    // back near its empty size.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert_eq!(pg_fence::prune(&c, h).await.unwrap(), 1);
    // A vacuum removes a deleted row only once no running transaction (on the whole
    // database, the shared machine's included) may still see it: compacted again until then.
    let deadline = Instant::now() + Duration::from_secs(3);
    let (mut last, mut after);
    loop {
        last = pg_fence::compact(&c, Duration::from_secs(60)).await.unwrap();
        after = size(&c, &["leasehold_fence"]).await;
        if after <= empty + MAPS || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("fence table after the horizon: {after} B against {empty} B empty ({last:?})");
    assert_eq!(last.bytes_after as i64, after);
    assert!(after <= empty + MAPS, "after {after} B against {empty} B empty");
}

/// A role that does not own the table: `compact` says so, naming both roles, and changes
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_that_may_not_compact_is_told_so() {
    let schema = PgSchema::new();
    let base = postgres_base();
    let admin = client(&base, &schema.name).await;
    let role = format!("{}_app", schema.name);
    admin
        .batch_execute(&format!(
            "CREATE SCHEMA {s}; SET search_path TO {s};
             CREATE ROLE {role} LOGIN; GRANT USAGE ON SCHEMA {s} TO {role};",
            s = schema.name
        ))
        .await
        .unwrap();
    pg_fence::install(&admin).await.unwrap();
    admin
        .batch_execute(&format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON leasehold_fence TO {role}"
        ))
        .await
        .unwrap();
    let user = base.replacen("postgres://postgres@", &format!("postgres://{role}@"), 1);
    assert_ne!(user, base, "LEASEHOLD_TEST_POSTGRES names the user postgres");
    let app = client(&user, &schema.name).await;
    let done = pg_fence::compact(&app, Duration::from_secs(60)).await;
    drop(app);
    let cleanup = format!("DROP SCHEMA {} CASCADE; DROP ROLE {role}", schema.name);
    admin.batch_execute(&cleanup).await.unwrap();
    let done = done.unwrap();
    match &done.skipped {
        Some(Skipped::NotPermitted(why)) => {
            assert!(why.contains(&role) && why.contains("postgres"), "{why}")
        }
        other => panic!("expected NotPermitted, got {other:?}"),
    }
    assert!(!done.vacuumed && done.reindexed.is_empty());
}
