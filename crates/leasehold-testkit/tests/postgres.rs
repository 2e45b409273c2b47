//! PostgreSQL: the conformance suite for the lease table and session advisory locks, the
//! process-level scenarios, backend termination, pool hygiene, interop with other clients,
//! the transaction form and the fence table.

use std::time::Duration;

use leasehold::backends::postgres as pg;
use leasehold::fence::postgres::tokio_postgres;
use leasehold::{Error, Key, Locker, Wait};
use leasehold_testkit::{PgSchema, postgres_base, postgres_fixture, postgres_session_fixture};

mod lease {
    use leasehold_testkit::{conformance_suite, postgres_fixture, primitives_suite};
    conformance_suite!(postgres_fixture());
    primitives_suite!(postgres_fixture());
}

mod session {
    use leasehold_testkit::{conformance_suite, postgres_session_fixture, primitives_suite};
    conformance_suite!(postgres_session_fixture());
    primitives_suite!(postgres_session_fixture());
}

leasehold_testkit::process_suite! {
    mutex {
        multi_process_mutual_exclusion_lease: postgres_fixture(),
        multi_process_mutual_exclusion_session: postgres_session_fixture(),
    }
    permits { multi_process_permits_lease: postgres_fixture() }
    stalled postgres_fixture(), resource |_| {
        let res = PgSchema::new();
        let spec = resource_spec(&res);
        (res, spec)
    }, after drop_schema_of;
    session { stalled_session_holder_keeps_its_lock: postgres_session_fixture() }
}

/// Session advisory locks cannot record a semaphore's permit count: asking is refused at
/// once, the error naming the store and the primitive, and nothing is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_semaphores_are_refused_by_name() {
    let fx = postgres_session_fixture().await;
    let g = fx.locker.guarantees();
    assert!(!g.primitives.permits && g.primitives.shared && g.primitives.writer_preference);
    let r = fx.locker.acquire_permit("session-sem", 2, Duration::from_secs(30)).await;
    match r {
        Err(e @ Error::Unsupported { backend: "postgres-session", primitive, .. }) => {
            assert!(primitive.contains("semaphore"), "{primitive}");
            let text = e.to_string();
            assert!(text.contains("postgres-session") && text.contains("semaphore"), "{text}");
            assert!(text.contains("mode=lease"), "says what to use instead: {text}");
        }
        other => panic!("a semaphore on session locks: {other:?}"),
    }
    assert!(fx.locker.holders(Some("session-sem#0")).await.unwrap().is_empty());
}

async fn client() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(&postgres_base(), tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

/// Backends holding the advisory lock of `key` (as leasehold and psql compute it).
async fn lock_pids(c: &tokio_postgres::Client, key: &str) -> Vec<i32> {
    c.query(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
           AND ((classid::bigint << 32) | objid::bigint) = hashtextextended($1, 0)",
        &[&key],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn resource_spec(schema: &PgSchema) -> String {
    format!("{}?options=-csearch_path%3D{}_res", postgres_base(), schema.name)
}

async fn drop_schema_of(res: &PgSchema) {
    drop_schema(&format!("{}_res", res.name)).await;
}

async fn drop_schema(name: &str) {
    client().await.batch_execute(&format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await.unwrap();
}

/// The lease table as an operator reads it with psql; a stale release leaves the
/// successor's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_table_is_inspectable() {
    let fx = postgres_fixture().await;
    let schema = fx.url.split("schema=").nth(1).unwrap().to_owned();
    let c = client().await;
    let a = fx.locker.acquire("job", Duration::from_secs(30)).await.unwrap();
    let row = c
        .query_one(
            &format!(
                "SELECT owner, fence, extract(epoch FROM expires_at - now())::float8
                 FROM {schema}.leasehold_leases WHERE key = 'job'"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), a.owner().to_string());
    assert_eq!(row.get::<_, i64>(1) as u64, a.fence().get());
    let left: f64 = row.get(2);
    assert!(left > 20.0 && left <= 30.0, "{left}");
    let stale = a.owner();
    assert!(a.release().await.unwrap().is_clean());
    let b = fx.locker.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert!(!fx.locker.release_by_owner("job", &stale).await.unwrap());
    let owner: String = c
        .query_one(&format!("SELECT owner FROM {schema}.leasehold_leases WHERE key = 'job'"), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(owner, b.owner().to_string());
    assert!(b.release().await.unwrap().is_clean());
}

/// `pg_terminate_backend` on a session holder's backend: `lost()` fires and the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_backend_fires_lost_and_frees_the_lock() {
    let fx = postgres_session_fixture().await;
    let c = client().await;
    let key = leasehold_testkit::conformance::unique_key("terminate");
    let a = fx.locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let pids = lock_pids(&c, &key).await;
    assert_eq!(pids.len(), 1, "the lock is on exactly one backend");
    assert!(a.admit());
    c.execute("SELECT pg_terminate_backend($1)", &[&pids[0]]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), a.lost())
        .await
        .expect("lost() fires when the holder's backend is terminated");
    assert!(!a.admit());
    let b = fx
        .locker
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(5)))
        .await
        .expect("the lock is free once its session ended");
    assert!(b.release().await.unwrap().is_clean());
    assert!(!a.release().await.is_ok_and(|r| r.is_clean()));
}

/// The lease table does not depend on one connection: a terminated backend is replaced and
/// auto-renew keeps the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_survives_a_terminated_connection() {
    let app = format!("lh_term_{}", &leasehold::OwnerToken::generate().unwrap().to_string()[..8]);
    let schema = PgSchema::new();
    let url = format!("{}?schema={}&application_name={app}", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    let ttl = Duration::from_millis(1500);
    let a = l.acquire("k", ttl).auto_renew(true).await.unwrap();
    let c = client().await;
    let n: i64 = c
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert!(n >= 1);
    tokio::time::sleep(ttl * 2).await;
    assert!(!a.is_lost(), "renewal went on over a new connection");
    assert!(a.release().await.unwrap().is_clean());
}

/// Nothing leaks into the connections the store keeps: after releases, dropped leases and
/// abandoned acquires, its open backends hold no advisory lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_locks_do_not_leak_into_kept_connections() {
    let app = format!("lh_leak_{}", &leasehold::OwnerToken::generate().unwrap().to_string()[..8]);
    let schema = PgSchema::new();
    let url =
        format!("{}?mode=session&schema={}&application_name={app}", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    for i in 0..20 {
        let key = format!("leak-{i}");
        let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
        if i % 2 == 0 {
            assert!(a.release().await.unwrap().is_clean());
        } else {
            drop(a); // released in the background
        }
        let held = l.acquire("leak-held", Duration::from_secs(30)).await.unwrap();
        let w = {
            let l = l.clone();
            tokio::spawn(async move {
                l.acquire("leak-held", Duration::from_secs(30)).wait(Wait::Forever).await
            })
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        w.abort();
        let _ = w.await;
        assert!(held.release().await.unwrap().is_clean());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let c = client().await;
    let row = c
        .query_one(
            "SELECT count(DISTINCT a.pid), count(l.pid) FROM pg_stat_activity a
             LEFT JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'advisory'
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    let (conns, locks): (i64, i64) = (row.get(0), row.get(1));
    assert!(conns >= 1, "the store keeps its connections open");
    assert_eq!(locks, 0, "an advisory lock stayed behind on a kept connection");
}

/// psql (or any client) and leasehold take the very same lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_lock_interoperates_with_plain_sql() {
    let fx = postgres_session_fixture().await;
    let c = client().await;
    let key = leasehold_testkit::conformance::unique_key("interop");
    let a = fx.locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let got: bool = c
        .query_one("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", &[&key])
        .await
        .unwrap()
        .get(0);
    assert!(!got, "plain SQL got a lock leasehold holds");
    assert!(a.release().await.unwrap().is_clean());
    let got: bool = c
        .query_one("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", &[&key])
        .await
        .unwrap()
        .get(0);
    assert!(got);
    let r = fx.locker.acquire(&key, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
    let r = fx.locker.holders(Some(&key)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "a foreign holder is reported: {r:?}");
    c.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&key]).await.unwrap();
    let b = fx.locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    assert!(b.release().await.unwrap().is_clean());
}

/// The transaction form excludes session holders and ends with its transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_lock_ends_with_the_transaction() {
    let fx = postgres_session_fixture().await;
    let key = Key::new(leasehold_testkit::conformance::unique_key("xact")).unwrap();
    let mut c = client().await;
    let lease = fx.locker.acquire(key.as_str(), Duration::from_secs(30)).await.unwrap();
    let r: Result<(), Error> =
        pg::with_xact_lock(&mut c, &key, Some(Duration::from_millis(200)), async |_tx| Ok(()))
            .await;
    assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
    assert!(lease.release().await.unwrap().is_clean());

    let l2 = fx.locker.clone();
    let k2 = key.clone();
    let v = pg::with_xact_lock(&mut c, &key, None, async |tx| {
        let inside = l2.acquire(k2.as_str(), Duration::from_secs(30)).await;
        assert!(matches!(inside, Err(Error::Busy { .. })), "held during the transaction");
        let n: i32 = tx.query_one("SELECT 41 + 1", &[]).await.unwrap().get(0);
        Ok::<_, Error>(n)
    })
    .await
    .unwrap();
    assert_eq!(v, 42);
    let after = fx.locker.acquire(key.as_str(), Duration::from_secs(30)).await.unwrap();
    assert!(after.release().await.unwrap().is_clean());

    // An error rolls back and frees the lock too.
    let r: Result<(), Error> = pg::with_xact_lock(&mut c, &key, None, async |tx| {
        assert!(pg::try_xact_lock(tx, &key).await?, "re-entrant inside its own transaction");
        Err(Error::InvalidInput("work failed".into()))
    })
    .await;
    assert!(r.is_err());
    let after = fx.locker.acquire(key.as_str(), Duration::from_secs(30)).await.unwrap();
    assert!(after.release().await.unwrap().is_clean());
}

/// The fence table's rules, and the one-statement fence-column pattern on a user table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_table_and_fence_column() {
    use leasehold::fence::{Fencing, postgres as fence};
    use leasehold::{FenceToken, OwnerToken};
    let schema = PgSchema::new();
    let (mut c, conn) = tokio_postgres::connect(
        &format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    c.batch_execute(&format!("CREATE SCHEMA {}", schema.name)).await.unwrap();
    fence::install(&c).await.unwrap();
    let f =
        |k: &str, t: u64, o: OwnerToken| Fencing::new(Key::new(k).unwrap(), FenceToken::new(t), o);
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    let stale = |r: leasehold::Result<()>| matches!(r, Err(Error::StaleFence { .. }));
    assert!(stale(fence::check(&c, "r", &f("k", 1, a)).await), "nothing installed yet");
    fence::claim(&c, "r", &f("k", 5, a)).await.unwrap();
    fence::claim(&c, "r", &f("k", 5, a)).await.unwrap();
    assert!(stale(fence::claim(&c, "r", &f("k", 5, b)).await), "same token, other owner");
    assert!(stale(fence::claim(&c, "r", &f("k", 4, b)).await), "older token");
    assert!(stale(fence::claim(&c, "r", &f("other", 9, b)).await), "another key's token");
    assert!(stale(fence::claim(&c, "r", &f("k", 0, b)).await), "no fence");
    let tx = c.transaction().await.unwrap();
    fence::check(&tx, "r", &f("k", 5, a)).await.unwrap();
    tx.commit().await.unwrap();
    fence::claim(&c, "r", &f("k", 6, b)).await.unwrap();
    assert!(stale(fence::check(&c, "r", &f("k", 5, a)).await), "superseded holder");

    // The fence column on a table of one's own: newer or equal fences write, older do not.
    c.batch_execute(
        "CREATE TABLE acct (id int PRIMARY KEY, v text, fence bigint NOT NULL DEFAULT 0);
                     INSERT INTO acct VALUES (1, 'init', 0)",
    )
    .await
    .unwrap();
    let write = async |c: &tokio_postgres::Client, v: &str, tok: i64| {
        c.execute("UPDATE acct SET v = $1, fence = $2 WHERE id = 1 AND fence <= $2", &[&v, &tok])
            .await
            .unwrap()
    };
    assert_eq!(write(&c, "from-7", 7).await, 1);
    assert_eq!(write(&c, "from-6", 6).await, 0, "an older fence is refused");
    assert_eq!(write(&c, "again-7", 7).await, 1);
    let v: String = c.query_one("SELECT v FROM acct WHERE id = 1", &[]).await.unwrap().get(0);
    assert_eq!(v, "again-7");
}

/// Options: PgBouncer in transaction pooling refuses session locks with a reason; typos are
/// refused, not ignored.
#[tokio::test]
async fn url_options_are_checked() {
    let base = postgres_base();
    let e =
        Locker::connect(&format!("{base}?mode=session&pgbouncer=transaction")).await.unwrap_err();
    assert!(e.to_string().contains("PgBouncer"), "{e}");
    assert!(Locker::connect(&format!("{base}?pgbouncer=transaction")).await.is_ok());
    let e = Locker::connect(&format!("{base}?mode=sesion")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    let e = Locker::connect(&format!("{base}?schema=a;drop")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    let e = Locker::connect("postgres://postgres@127.0.0.1:1/test").await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e}");
}

/// A waiter on another connection (as in another process) is woken by NOTIFY: the holder's
/// TTL (60 s) is far beyond the wait (20 s), so only the notification can hand it over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_on_another_connection_is_woken_by_notify() {
    let fx = postgres_fixture().await;
    let other = Locker::connect(&fx.url).await.unwrap();
    let key = leasehold_testkit::conformance::unique_key("notify");
    let a = fx.locker.acquire(&key, Duration::from_secs(60)).await.unwrap();
    let w = {
        let key = key.clone();
        tokio::spawn(async move {
            other
                .acquire(&key, Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(20)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    // Without the notification the waiter would sleep to its own deadline (20 s) and only
    // then look again.
    let b = tokio::time::timeout(Duration::from_secs(10), w)
        .await
        .expect("the release's NOTIFY woke the other connection's waiter")
        .unwrap()
        .unwrap();
    assert!(b.fence() > first);
    assert!(b.release().await.unwrap().is_clean());
}

/// `check` keeps the fence row locked until its transaction ends: a successor's `claim`
/// cannot land between a check and the effect it guards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_check_holds_off_a_successor_claim_until_commit() {
    use leasehold::fence::{Fencing, postgres as fence};
    use leasehold::{FenceToken, OwnerToken};
    let schema = PgSchema::new();
    let url = format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name);
    let connect = async || {
        let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        c
    };
    let (mut c1, mut c2) = (connect().await, connect().await);
    c1.batch_execute(&format!("CREATE SCHEMA {}", schema.name)).await.unwrap();
    fence::install(&c1).await.unwrap();
    let key = Key::new("k").unwrap();
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    let fa = Fencing::new(key.clone(), FenceToken::new(5), a);
    let fb = Fencing::new(key, FenceToken::new(6), b);
    fence::claim(&c1, "r", &fa).await.unwrap();

    let tx1 = c1.transaction().await.unwrap();
    fence::check(&tx1, "r", &fa).await.unwrap();
    {
        let tx2 = c2.transaction().await.unwrap();
        tx2.batch_execute("SET LOCAL lock_timeout = '300ms'").await.unwrap();
        let r = fence::claim(&tx2, "r", &fb).await;
        assert!(
            matches!(&r, Err(Error::Backend { .. })) && format!("{r:?}").contains("lock timeout"),
            "the successor's claim landed while a checked effect was still open: {r:?}"
        );
    }
    tx1.commit().await.unwrap();
    fence::claim(&c2, "r", &fb).await.unwrap();
}

/// The session store's fence sequence and the fence table live side by side in one schema
/// (they once shared the name `leasehold_fence`, and the table was silently not created).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_fence_sequence_and_fence_table_share_a_schema() {
    let schema = PgSchema::new();
    let sep = if postgres_base().contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}schema={}&mode=session", postgres_base(), schema.name);
    let l = Locker::connect(&url).await.unwrap();
    let lease = l.acquire("shared-schema", Duration::from_secs(30)).await.unwrap();
    let spec = format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name);
    let (mut db, conn) = tokio_postgres::connect(&spec, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    leasehold::fence::postgres::install(&db).await.unwrap();
    let tx = db.transaction().await.unwrap();
    leasehold::fence::postgres::claim(&tx, "res", &lease.fencing()).await.expect("claim");
    leasehold::fence::postgres::check(&tx, "res", &lease.fencing()).await.expect("check");
    tx.commit().await.unwrap();
    assert!(lease.release().await.unwrap().is_clean());
}

/// Waiting on a lease-table key takes a ticket and a release calls one waiter, so a handoff
/// between processes costs about one grant attempt, not one per waiter (a NOTIFY reaches every
/// listening connection, and without the queue every waiter tried at once). Counted by
/// pg_stat_statements on a private server; 8 waiters, one store (connection, listener) each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_one_waiter_not_the_herd() {
    use leasehold_testkit::stores::postgres::server::PgServer;
    let server = PgServer::start_with(&["-c", "shared_preload_libraries=pg_stat_statements"]);
    server.sql("CREATE EXTENSION pg_stat_statements");
    let url = server.url("");
    let mut tasks = Vec::new();
    let (per_task, waiters) = (25, 8);
    for _ in 0..waiters {
        let locker = Locker::connect(&url).await.unwrap();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per_task {
                let l = locker
                    .acquire("herd", Duration::from_secs(30))
                    .wait(Wait::For(Duration::from_secs(60)))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                assert!(l.release().await.unwrap().is_clean());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let attempts: f64 = server
        .sql(
            "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
             WHERE query LIKE '%INSERT INTO%leasehold_leases%'",
        )
        .parse()
        .unwrap();
    let per_acquisition = attempts / f64::from(per_task * waiters);
    println!("{per_acquisition:.2} grant attempts per acquisition");
    assert!(
        (1.0..3.0).contains(&per_acquisition),
        "{per_acquisition:.2} grant attempts per acquisition ({attempts} in all)"
    );
}

/// A lease table made by an earlier version (no queue columns) gets them on connect, and its
/// rows, holder and fence carry on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_lease_table_gains_the_queue_columns() {
    let schema = PgSchema::new();
    let c = client().await;
    c.batch_execute(&format!(
        "CREATE SCHEMA {s}; CREATE TABLE {s}.leasehold_leases (key text PRIMARY KEY, owner text,
           fence bigint NOT NULL, expires_at timestamptz NOT NULL);
         INSERT INTO {s}.leasehold_leases VALUES ('k', NULL, 41, now())",
        s = schema.name
    ))
    .await
    .unwrap();
    let base = postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    let locker = Locker::connect(&format!("{base}{sep}schema={}", schema.name)).await.unwrap();
    let first = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    let first_fence = first.fence();
    assert!(first_fence.get() > 41, "an older version's fences stay below the new ones");
    // Another locker (another owner identity): a waiter of the same locker would queue in
    // the process and never take a ticket in the table.
    let waiter = {
        let locker = Locker::from_arc(locker.store().clone());
        tokio::spawn(async move {
            locker
                .acquire("k", Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(30)))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(first.release().await.unwrap().is_clean());
    let second = waiter.await.unwrap().unwrap();
    assert!(second.fence() > first_fence);
    let row = c
        .query_one(&format!("SELECT tickets, turn FROM {}.leasehold_leases", schema.name), &[])
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 1), "one ticket, called once");
    assert!(second.release().await.unwrap().is_clean());
}

/// A waiter that gave up leaves its ticket behind. When a release calls that ticket, nobody
/// answers; the next waiter must try after the stagger, not sleep until the timer of the
/// holder it saw (30 s here). Three stores, so no in-process queue orders them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_ticket_does_not_stall_the_queue() {
    let schema = PgSchema::new();
    let base = postgres_base();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}schema={}", schema.name);
    let (holder, quitter, waiter) = (
        Locker::connect(&url).await.unwrap(),
        Locker::connect(&url).await.unwrap(),
        Locker::connect(&url).await.unwrap(),
    );
    let first = holder.acquire("q", Duration::from_secs(30)).await.unwrap();
    // Takes ticket 1, then gives up.
    let gave_up =
        quitter.acquire("q", Duration::from_secs(30)).wait(Wait::For(Duration::from_millis(200)));
    assert!(matches!(gave_up.await, Err(Error::Busy { .. })));
    // Takes ticket 2 and waits (at most 10 s, well short of the holder's 30 s).
    let next = tokio::spawn(async move {
        waiter.acquire("q", Duration::from_secs(30)).wait(Wait::For(Duration::from_secs(10))).await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(first.release().await.unwrap().is_clean());
    let released = std::time::Instant::now();
    let second = next.await.unwrap().expect("no grant within the wait");
    // A stalled waiter gets the key only from the last attempt at the end of its 10 s wait;
    // the stagger lets it in a few milliseconds after the release.
    let after = released.elapsed();
    assert!(after < Duration::from_secs(5), "the queue stalled on the abandoned ticket: {after:?}");
    assert!(second.release().await.unwrap().is_clean());
}
