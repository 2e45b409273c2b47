//! Bounded state (issue 35): with a tiny horizon, a key's per-key state in the store (Redis
//! fence counters, the PostgreSQL and MySQL lease tables' rows, MySQL's `GET_LOCK` fence
//! rows) and a resource's claims (Redis fence hashes, the PostgreSQL and MySQL fence tables)
//! are gone once the horizon has passed, the next fence
//! is still greater than every earlier one, and a holder frozen past the horizon is refused
//! with `StaleReason::PastHorizon`.

use std::time::Duration;

use leasehold::fence::postgres::{self as pg_fence, tokio_postgres};
use leasehold::fence::redis::RedisFence;
use leasehold::{Error, Fencing, Locker, StaleReason, Wait};
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{MyDatabase, PgSchema, postgres_base};

const TTL: Duration = Duration::from_millis(500);

fn past_horizon(r: leasehold::Result<()>) -> bool {
    matches!(r, Err(Error::StaleFence { reason: StaleReason::PastHorizon, .. }))
}

/// Redis: the counter expires ttl + horizon after the last grant; the next grant's fence,
/// from the clock, is larger than the forgotten one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_counter_is_forgotten_after_the_horizon_and_fences_still_grow() {
    let server = RedisServer::start();
    let l = Locker::connect(&format!("{}?prefix=h:&horizon=1s", server.url())).await.unwrap();
    let a = l.acquire("job", TTL).await.unwrap();
    let pttl: i64 = server.cli(&["PTTL", "h:{job}:fence"]).parse().unwrap();
    assert!(pttl > 1_000 && pttl <= 1_500, "the counter lives ttl + horizon: {pttl}");
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    tokio::time::sleep(TTL + Duration::from_millis(1_300)).await;
    assert_eq!(server.cli(&["EXISTS", "h:{job}:fence"]), "0", "the counter is gone");
    let b = l.acquire("job", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
}

/// Redis: a renewed lease keeps its counter past ttl + horizon (renewals move its expiry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_renewal_keeps_the_counter_of_a_held_key() {
    let server = RedisServer::start();
    let l = Locker::connect(&format!("{}?prefix=h:&horizon=1s", server.url())).await.unwrap();
    let a = l.acquire("job", TTL).auto_renew(true).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!a.is_lost());
    assert_eq!(server.cli(&["GET", "h:{job}:fence"]), a.fence().to_string(), "still there");
    assert!(a.release().await.unwrap().is_clean());
}

/// Redis resource: a fence hash expires twice the horizon after its fence; the stale holder
/// frozen past the horizon is refused (PastHorizon), and the successor claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_resource_forgets_and_refuses_past_the_horizon() {
    let server = RedisServer::start();
    let url = format!("{}?prefix=h:&horizon=1s", server.url());
    let l = Locker::connect(&url).await.unwrap();
    let mut res = RedisFence::connect(&url).await.unwrap();
    // The holder that will freeze: no renewals, its lease runs out.
    let a = l.acquire("acct", TTL).auto_renew(false).await.unwrap();
    // What the holder carries with no deadline of its own (`run`'s environment).
    let stale = Fencing::new(a.key().clone(), a.fence(), a.owner());
    res.claim("acct", &stale).await.unwrap();
    res.set("acct", &stale, "{acct}:v", "a").await.unwrap();
    let pttl: i64 = server.cli(&["PTTL", "h:fence:{acct}"]).parse().unwrap();
    assert!(pttl > 0 && pttl <= 2_000, "the hash lives until its fence is 2 horizons old: {pttl}");
    // The successor, another process: it waits out the stale holder's lease.
    let other = Locker::connect(&url).await.unwrap();
    let b = other.acquire("acct", TTL).wait(Wait::For(Duration::from_secs(5))).await.unwrap();
    res.claim("acct", &b.fencing()).await.unwrap();
    assert!(b.release().await.unwrap().is_clean());
    // The stale holder was frozen for more than twice the horizon: everything is gone.
    tokio::time::sleep(Duration::from_millis(2_300)).await;
    assert_eq!(server.cli(&["EXISTS", "h:fence:{acct}"]), "0", "the fence hash is gone");
    assert!(past_horizon(res.claim("acct", &stale).await), "frozen past the horizon: refused");
    let c = l.acquire("acct", TTL).await.unwrap();
    res.claim("acct", &c.fencing()).await.unwrap();
    res.set("acct", &c.fencing(), "{acct}:v", "c").await.unwrap();
    assert!(c.release().await.unwrap().is_clean());
    drop(a);
}

async fn pg_client(schema: &str) -> tokio_postgres::Client {
    let url = format!("{}?options=-csearch_path%3D{schema}", postgres_base());
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

/// PostgreSQL lease table: the store's own pruning deletes a key's row once idle past the
/// horizon, never a held key's, and the next grant's fence is still larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_lease_rows_are_pruned_after_the_horizon_and_fences_still_grow() {
    let schema = PgSchema::new();
    let url = format!("{}?schema={}&horizon=1s", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    let a = l.acquire("idle", TTL).await.unwrap();
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let held = l.acquire("held", TTL).auto_renew(true).await.unwrap();
    let c = pg_client(&schema.name).await;
    let rows = |key: &'static str| {
        let c = &c;
        async move {
            c.query_one("SELECT count(*) FROM leasehold_leases WHERE key = $1", &[&key])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    assert_eq!(rows("idle").await, 1);
    // Idle past the horizon (1 s after its expiry), plus a pruning period (250 ms) and slack.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(rows("idle").await, 0, "the idle key's row is gone");
    assert_eq!(rows("held").await, 1, "a held key's row is kept");
    assert!(!held.is_lost());
    let b = l.acquire("idle", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
    assert!(held.release().await.unwrap().is_clean());
}

/// PostgreSQL resource: `claim_within` refuses a fence older than the horizon, `prune`
/// forgets claims twice the horizon old, and the stale holder stays refused after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_resource_forgets_and_refuses_past_the_horizon() {
    let schema = PgSchema::new();
    let url = format!("{}?schema={}&horizon=1s", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    let mut c = pg_client(&schema.name).await;
    pg_fence::install(&c).await.unwrap();
    let h = Duration::from_secs(1);
    // The holder that will freeze: no renewals, its lease runs out.
    let a = l.acquire("acct", TTL).auto_renew(false).await.unwrap();
    // What the holder carries with no deadline of its own (`run`'s environment).
    let stale = Fencing::new(a.key().clone(), a.fence(), a.owner());
    pg_fence::claim_within(&c, "acct", &stale, h).await.unwrap();
    // The successor, another process: it waits out the stale holder's lease.
    let other = Locker::connect(&url).await.unwrap();
    let b = other.acquire("acct", TTL).wait(Wait::For(Duration::from_secs(5))).await.unwrap();
    let tx = c.transaction().await.unwrap();
    pg_fence::claim_within(&tx, "acct", &b.fencing(), h).await.unwrap();
    tx.commit().await.unwrap();
    assert!(b.release().await.unwrap().is_clean());
    assert_eq!(pg_fence::prune(&c, h).await.unwrap(), 0, "nothing is twice the horizon old");
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert_eq!(pg_fence::prune(&c, h).await.unwrap(), 1, "the claim is forgotten");
    let n: i64 = c.query_one("SELECT count(*) FROM leasehold_fence", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    assert!(past_horizon(pg_fence::claim_within(&c, "acct", &stale, h).await), "refused");
    let d = l.acquire("acct", TTL).await.unwrap();
    pg_fence::claim_within(&c, "acct", &d.fencing(), h).await.unwrap();
    assert!(d.release().await.unwrap().is_clean());
}

use leasehold::fence::mysql::mysql_async;

async fn my_conn(db: &MyDatabase) -> mysql_async::Conn {
    mysql_async::Conn::from_url(db.url("")).await.unwrap()
}

async fn my_count(c: &mut mysql_async::Conn, sql: &str, key: &str) -> i64 {
    use mysql_async::prelude::Queryable;
    c.exec_first(sql, (key,)).await.unwrap().unwrap()
}

/// MySQL lease table: the store's own pruning deletes a key's row (and its old reader's row)
/// once idle past the horizon, never before, never a held key's, and the next grant's fence
/// is still larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_lease_rows_are_pruned_after_the_horizon_and_fences_still_grow() {
    let db = MyDatabase::new();
    let l = Locker::connect(&db.url("?horizon=1s")).await.unwrap();
    let a = l.acquire("idle", TTL).await.unwrap();
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let r = l.acquire_shared("read", TTL).await.unwrap();
    assert!(r.release().await.unwrap().is_clean());
    let held = l.acquire("held", TTL).auto_renew(true).await.unwrap();
    let mut c = my_conn(&db).await;
    let rows = "SELECT COUNT(*) FROM leasehold_leases WHERE lock_key = ?";
    // Well within the horizon: a pruning round (every 250 ms) has run and kept it.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(my_count(&mut c, rows, "idle").await, 1, "not before the horizon");
    // Idle past the horizon, plus a pruning period (250 ms) and slack.
    tokio::time::sleep(Duration::from_millis(1_900)).await;
    assert_eq!(my_count(&mut c, rows, "idle").await, 0, "the idle key's row is gone");
    assert_eq!(my_count(&mut c, rows, "read").await, 0, "the read key's row is gone");
    assert_eq!(my_count(&mut c, rows, "held").await, 1, "a held key's row is kept");
    assert!(!held.is_lost());
    let b = l.acquire("idle", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
    assert!(held.release().await.unwrap().is_clean());
}

/// MySQL `GET_LOCK` session locks: the fence table's row of a free key goes once its fence
/// is older than the horizon; a held key's stays; the next fence is still larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_session_fence_rows_are_pruned_after_the_horizon_and_fences_still_grow() {
    let db = MyDatabase::new();
    let l = Locker::connect(&db.url("?mode=session&prefix=hz:&horizon=1s")).await.unwrap();
    let a = l.acquire("idle", TTL).await.unwrap();
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let held = l.acquire("held", TTL).await.unwrap();
    let mut c = my_conn(&db).await;
    let rows = "SELECT COUNT(*) FROM leasehold_leases_fences WHERE lock_key = ?";
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(my_count(&mut c, rows, "idle").await, 1, "not before the horizon");
    tokio::time::sleep(Duration::from_millis(1_400)).await;
    assert_eq!(my_count(&mut c, rows, "idle").await, 0, "the free key's row is gone");
    assert_eq!(my_count(&mut c, rows, "held").await, 1, "a held key's row is kept");
    let b = l.acquire("idle", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
    assert!(!held.is_lost());
    assert!(held.release().await.unwrap().is_clean());
}

/// Two `GET_LOCK` stores with different prefixes share one fence table (the row of a key is
/// the key's, whatever the prefix): neither store's pruning takes the row of a key the other
/// holds. Before, the store whose own lock name (`pb:k`) was free deleted the row of `k`
/// while the other held `pa:k`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_session_fence_rows_held_under_another_prefix_are_kept() {
    let db = MyDatabase::new();
    let a = Locker::connect(&db.url("?mode=session&prefix=pa:&horizon=1s")).await.unwrap();
    let b = Locker::connect(&db.url("?mode=session&prefix=pb:&horizon=1s")).await.unwrap();
    let held = a.acquire("k", TTL).await.unwrap();
    let idle = b.acquire("idle", TTL).await.unwrap();
    let first = idle.fence();
    assert!(idle.release().await.unwrap().is_clean());
    let mut c = my_conn(&db).await;
    let rows = "SELECT COUNT(*) FROM leasehold_leases_fences WHERE lock_key = ?";
    // Both pruners run every 250 ms; the idle key's row goes after the 1 s horizon.
    let started = std::time::Instant::now();
    while my_count(&mut c, rows, "idle").await != 0 {
        assert!(started.elapsed() < Duration::from_secs(10), "the idle key's row stayed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(my_count(&mut c, rows, "k").await, 1, "the row of a key held as pa:k was pruned");
    let again = b.acquire("idle", TTL).await.unwrap();
    assert!(again.fence() > first, "{} after {}", again.fence(), first);
    assert!(again.release().await.unwrap().is_clean());
    assert!(!held.is_lost());
    assert!(held.release().await.unwrap().is_clean());
}

/// MySQL resource: `claim_within` refuses a fence older than the horizon, `prune` forgets
/// claims twice the horizon old, and the stale holder stays refused after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_resource_forgets_and_refuses_past_the_horizon() {
    use leasehold::fence::mysql as my_fence;
    use mysql_async::prelude::Queryable;
    let db = MyDatabase::new();
    let url = db.url("?horizon=1s");
    let l = Locker::connect(&url).await.unwrap();
    let mut c = my_conn(&db).await;
    my_fence::install(&mut c).await.unwrap();
    my_fence::install(&mut c).await.unwrap(); // again: the index is there
    let h = Duration::from_secs(1);
    // The holder that will freeze: no renewals, its lease runs out.
    let a = l.acquire("acct", TTL).auto_renew(false).await.unwrap();
    let stale = Fencing::new(a.key().clone(), a.fence(), a.owner());
    my_fence::claim_within(&mut c, "acct", &stale, h).await.unwrap();
    // The successor, another process: it waits out the stale holder's lease.
    let other = Locker::connect(&url).await.unwrap();
    let b = other.acquire("acct", TTL).wait(Wait::For(Duration::from_secs(5))).await.unwrap();
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    my_fence::claim_within(&mut tx, "acct", &b.fencing(), h).await.unwrap();
    my_fence::commit(tx, &b.fencing()).await.unwrap();
    assert!(b.release().await.unwrap().is_clean());
    assert_eq!(my_fence::prune(&mut c, h).await.unwrap(), 0, "nothing is twice the horizon old");
    // Still within the horizon, the stale holder is refused by the installed claim.
    assert!(matches!(
        my_fence::claim_within(&mut c, "acct", &stale, h).await,
        Err(Error::StaleFence { reason: StaleReason::Newer, .. })
    ));
    tokio::time::sleep(Duration::from_millis(2_200)).await;
    assert_eq!(my_fence::prune(&mut c, h).await.unwrap(), 1, "the claim is forgotten");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM leasehold_fence").await.unwrap();
    assert_eq!(n, Some(0));
    assert!(past_horizon(my_fence::claim_within(&mut c, "acct", &stale, h).await), "refused");
    let d = l.acquire("acct", TTL).await.unwrap();
    my_fence::claim_within(&mut c, "acct", &d.fencing(), h).await.unwrap();
    assert!(d.release().await.unwrap().is_clean());
}

/// SQLite store: its pruning task deletes a key's fence counter (and an expired, unreleased
/// lease's row) once idle past the horizon, never before, never a held key's; the next
/// grant's fence is still larger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_fence_rows_are_pruned_after_the_horizon_and_fences_still_grow() {
    use leasehold::fence::sqlite::rusqlite;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    let l = Locker::connect(&format!("sqlite://{}?horizon=1s", path.display())).await.unwrap();
    let a = l.acquire("idle", TTL).await.unwrap();
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    // Expires without a release: its lease row stays until the horizon has passed too.
    let gone = l.acquire("expired", TTL).auto_renew(false).await.unwrap();
    let r = l.acquire_shared("read", TTL).await.unwrap();
    assert!(r.release().await.unwrap().is_clean());
    let held = l.acquire("held", TTL).auto_renew(true).await.unwrap();
    let db = rusqlite::Connection::open(&path).unwrap();
    let rows = |table: &str, key: &str| -> i64 {
        db.query_row(&format!("SELECT count(*) FROM {table} WHERE key = ?1"), [key], |r| r.get(0))
            .unwrap()
    };
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(rows("leasehold_fences", "idle"), 1, "not before the horizon");
    assert_eq!(rows("leasehold_leases", "expired"), 1, "not before the horizon");
    // Idle past the horizon (the expired lease: 1 s after its expiry), plus a period (250 ms).
    tokio::time::sleep(Duration::from_millis(1_900)).await;
    for key in ["idle", "read", "expired"] {
        assert_eq!(rows("leasehold_fences", key), 0, "{key}: the counter is gone");
    }
    assert_eq!(rows("leasehold_leases", "expired"), 0, "the expired lease's row is gone");
    assert_eq!(rows("leasehold_fences", "held"), 1, "a held key's counter is kept");
    assert_eq!(rows("leasehold_leases", "held"), 1, "a held key's lease is kept");
    assert!(!held.is_lost());
    let b = l.acquire("idle", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
    assert!(held.release().await.unwrap().is_clean());
    drop(gone);
}

/// `flock` store: a lock file (and its readers' companion) goes once its key was not locked
/// within the horizon, never before, never a held key's; the next fence is still larger. An
/// acquire past the horizon starts the same removal in the background.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_lock_files_are_removed_after_the_horizon_and_fences_still_grow() {
    use leasehold::backends::file::FileStore;
    let dir = tempfile::tempdir().unwrap();
    let h = Duration::from_secs(1);
    let store = std::sync::Arc::new(FileStore::open(dir.path()).unwrap().with_horizon(h).unwrap());
    let l = Locker::from_arc(store.clone());
    let a = l.acquire("idle", TTL).await.unwrap();
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let r = l.acquire_shared("read", TTL).await.unwrap();
    assert!(r.release().await.unwrap().is_clean());
    let held = l.acquire("held", TTL).await.unwrap();
    let file = |name: &str| dir.path().join(name).exists();
    assert!(file("idle.lock") && file("read.lock") && file("read.lock.fence"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(store.prune().await.unwrap(), 0, "nothing is idle past the horizon yet");
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(store.prune().await.unwrap(), 2, "idle and read are gone");
    assert!(!file("idle.lock") && !file("read.lock") && !file("read.lock.fence"));
    assert!(file("held.lock"), "a held key's file stays");
    let b = l.acquire("idle", TTL).await.unwrap();
    assert!(b.fence() > first, "{} after {}", b.fence(), first);
    assert!(b.release().await.unwrap().is_clean());
    // In the background: through a URL, an acquire once a quarter horizon has passed.
    let url = format!("file://{}?horizon=1s", dir.path().display());
    let other = Locker::connect(&url).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    let c = other.acquire("trigger", TTL).await.unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(3);
    while file("idle.lock") && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!file("idle.lock"), "removed by the background pruning");
    assert!(file("held.lock") && file("trigger.lock"));
    assert!(c.release().await.unwrap().is_clean());
    assert!(held.release().await.unwrap().is_clean());
}

/// MySQL lease table: a row another transaction has locked (as a grant in flight does) is
/// skipped, not waited for (`SKIP LOCKED`, MariaDB 10.6+ / MySQL 8): the other idle rows go
/// meanwhile, and the locked one at a round after its lock is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_pruning_skips_a_locked_row_and_takes_it_later() {
    use mysql_async::prelude::Queryable;
    let db = MyDatabase::new();
    let l = Locker::connect(&db.url("?horizon=1s")).await.unwrap();
    for key in ["free", "busy"] {
        let a = l.acquire(key, TTL).await.unwrap();
        assert!(a.release().await.unwrap().is_clean());
    }
    let mut c = my_conn(&db).await;
    let mut other = my_conn(&db).await;
    let mut tx = other.start_transaction(Default::default()).await.unwrap();
    tx.query_drop("SELECT * FROM leasehold_leases WHERE lock_key = 'busy' FOR UPDATE")
        .await
        .unwrap();
    let rows = "SELECT COUNT(*) FROM leasehold_leases WHERE lock_key = ?";
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert_eq!(my_count(&mut c, rows, "free").await, 0, "pruned beside the locked row");
    assert_eq!(my_count(&mut c, rows, "busy").await, 1, "the locked row is skipped");
    tx.commit().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(my_count(&mut c, rows, "busy").await, 0, "pruned once let go");
}
