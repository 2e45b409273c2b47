//! Fence-checked transactions bounded by the lease (issue 24): on PostgreSQL, MySQL and
//! SQLite a transaction checked with a fencing that carries a deadline cannot commit after
//! it, and on the two servers a holder stuck inside it stops blocking a successor's claim.
//! "Frozen" here is a holder that stops sending anything (a sleep in this process), which is
//! what a SIGSTOPped process looks like to the server; `leasehold chaos --scenario
//! stalled-holder-tx` does it with real processes.

use std::time::{Duration, Instant};

use leasehold::fence::Fencing;
use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
use leasehold::fence::postgres::tokio_postgres;
use leasehold::{Error, FenceToken, Key, OwnerToken};
use leasehold_testkit::{MyDatabase, PgSchema, postgres_base};

fn fencing(token: u64, deadline_in: Option<Duration>) -> Fencing {
    let f = Fencing::new(
        Key::new("k").unwrap(),
        FenceToken::new(token),
        OwnerToken::generate().unwrap(),
    );
    match deadline_in {
        Some(d) => f.with_deadline(Instant::now() + d),
        None => f,
    }
}

async fn pg(schema: &PgSchema) -> tokio_postgres::Client {
    let url = format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name);
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c
}

async fn pg_setup() -> (PgSchema, tokio_postgres::Client) {
    let schema = PgSchema::new();
    let c = pg(&schema).await;
    c.batch_execute(&format!("CREATE SCHEMA {}", schema.name)).await.unwrap();
    leasehold::fence::postgres::install(&c).await.unwrap();
    c.batch_execute("CREATE TABLE data (id int PRIMARY KEY, v text)").await.unwrap();
    (schema, c)
}

/// A holder stuck inside its checked transaction past its deadline has its session ended by
/// the server: the successor's claim goes through while the holder is still stuck (without
/// the bound it waits until the holder's transaction ends), and the holder's commit fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_stuck_holder_stops_blocking_and_cannot_commit() {
    let (schema, mut holder) = pg_setup().await;
    let old = fencing(5, Some(Duration::from_millis(400)));
    let new = fencing(6, None);
    leasehold::fence::postgres::claim(&holder, "r", &old).await.unwrap();
    let tx = holder.transaction().await.unwrap();
    leasehold::fence::postgres::check(&tx, "r", &old).await.unwrap();
    tx.execute("INSERT INTO data VALUES (1, 'stale')", &[]).await.unwrap();
    // The holder is stuck from here on; a successor claims.
    let mut successor = pg(&schema).await;
    let claimed = tokio::time::timeout(Duration::from_secs(20), async {
        let stx = successor.transaction().await.unwrap();
        leasehold::fence::postgres::claim(&stx, "r", &new).await?;
        leasehold::fence::postgres::commit(stx, &new).await
    })
    .await;
    assert!(
        matches!(claimed, Ok(Ok(()))),
        "the successor's claim waited on the stuck holder's transaction: {claimed:?}"
    );
    let late = leasehold::fence::postgres::commit(tx, &old).await;
    assert!(late.is_err(), "the stuck holder committed after its deadline");
    let rows = successor.query("SELECT v FROM data", &[]).await.unwrap();
    assert!(rows.is_empty(), "the stale effect was committed");
}

/// The server's own clock makes the last check: a transaction whose check recorded a
/// deadline is refused at commit once it has passed, even by a process that thinks it has
/// time left, and even with the idle and statement bounds switched off by the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_commit_is_checked_on_the_server_clock() {
    let (_schema, mut c) = pg_setup().await;
    let short = fencing(5, Some(Duration::from_millis(300)));
    leasehold::fence::postgres::claim(&c, "r", &short).await.unwrap();
    let tx = c.transaction().await.unwrap();
    leasehold::fence::postgres::check(&tx, "r", &short).await.unwrap();
    tx.batch_execute(
        "SET LOCAL idle_in_transaction_session_timeout = 0; SET LOCAL statement_timeout = 0;
         INSERT INTO data VALUES (1, 'late'); SELECT pg_sleep(0.5)",
    )
    .await
    .unwrap();
    let long = Fencing::new(short.key().clone(), short.token(), short.owner())
        .with_deadline(Instant::now() + Duration::from_secs(30));
    let r = leasehold::fence::postgres::commit(tx, &long).await;
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    assert!(c.query("SELECT v FROM data", &[]).await.unwrap().is_empty(), "committed late");
    // A fencing without a deadline is not bounded: as before.
    let plain = fencing(7, None);
    let tx = c.transaction().await.unwrap();
    leasehold::fence::postgres::claim(&tx, "r", &plain).await.unwrap();
    tx.execute("INSERT INTO data VALUES (2, 'plain')", &[]).await.unwrap();
    leasehold::fence::postgres::commit(tx, &plain).await.unwrap();
    // One whose time is up is refused before anything is sent.
    let tx = c.transaction().await.unwrap();
    let gone = fencing(8, Some(Duration::ZERO));
    assert!(matches!(
        leasehold::fence::postgres::check(&tx, "r", &gone).await,
        Err(Error::Lost { .. })
    ));
}

async fn my(db: &MyDatabase) -> mysql_async::Conn {
    mysql_async::Conn::from_url(db.url("")).await.unwrap()
}

async fn my_setup() -> (MyDatabase, mysql_async::Conn) {
    let db = MyDatabase::new();
    let mut c = my(&db).await;
    leasehold::fence::mysql::install(&mut c).await.unwrap();
    c.query_drop("CREATE TABLE data (id INT PRIMARY KEY, v TEXT) ENGINE = InnoDB").await.unwrap();
    (db, c)
}

/// MySQL: the server closes the stuck holder's connection (whole seconds, so about a second
/// here), which frees the successor's claim and rolls the stale effect back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_stuck_holder_stops_blocking_and_cannot_commit() {
    let (db, mut holder) = my_setup().await;
    let old = fencing(5, Some(Duration::from_millis(400)));
    let new = fencing(6, None);
    {
        let mut tx = holder.start_transaction(Default::default()).await.unwrap();
        leasehold::fence::mysql::claim(&mut tx, "r", &old).await.unwrap();
        leasehold::fence::mysql::commit(tx, &old).await.unwrap();
    }
    let mut tx = holder.start_transaction(Default::default()).await.unwrap();
    leasehold::fence::mysql::check(&mut tx, "r", &old).await.unwrap();
    tx.query_drop("INSERT INTO data VALUES (1, 'stale')").await.unwrap();
    let mut successor = my(&db).await;
    let claimed = tokio::time::timeout(Duration::from_secs(20), async {
        let mut stx = successor.start_transaction(Default::default()).await.unwrap();
        leasehold::fence::mysql::claim(&mut stx, "r", &new).await?;
        leasehold::fence::mysql::commit(stx, &new).await
    })
    .await;
    assert!(
        matches!(claimed, Ok(Ok(()))),
        "the successor's claim waited on the stuck holder's transaction: {claimed:?}"
    );
    let late = leasehold::fence::mysql::commit(tx, &old).await;
    assert!(late.is_err(), "the stuck holder committed after its deadline");
    let rows: Vec<String> = successor.query("SELECT v FROM data").await.unwrap();
    assert!(rows.is_empty(), "the stale effect was committed: {rows:?}");
}

/// MySQL's last check and COMMIT go in one request, so the server refuses once its clock has
/// passed the recorded deadline; the connection's timeouts are put back either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_commit_is_checked_on_the_server_clock() {
    let (_db, mut c) = my_setup().await;
    let before: (u64, u64) = c
        .query_first("SELECT @@SESSION.wait_timeout, @@SESSION.innodb_lock_wait_timeout")
        .await
        .unwrap()
        .unwrap();
    let short = fencing(5, Some(Duration::from_millis(300)));
    let long = Fencing::new(short.key().clone(), short.token(), short.owner())
        .with_deadline(Instant::now() + Duration::from_secs(30));
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    leasehold::fence::mysql::claim(&mut tx, "r", &short).await.unwrap();
    tx.query_drop("INSERT INTO data VALUES (1, 'late')").await.unwrap();
    tx.query_drop("DO SLEEP(0.5)").await.unwrap(); // busy, not idle: the connection stays
    let r = leasehold::fence::mysql::commit(tx, &long).await;
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    let rows: Vec<String> = c.query("SELECT v FROM data").await.unwrap();
    assert!(rows.is_empty(), "committed late: {rows:?}");
    let after: (u64, u64) = c
        .query_first("SELECT @@SESSION.wait_timeout, @@SESSION.innodb_lock_wait_timeout")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, after, "the connection's timeouts were not put back");
    // In time, it commits, and the timeouts are put back too.
    let ok = fencing(6, Some(Duration::from_secs(30)));
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    leasehold::fence::mysql::claim(&mut tx, "r", &ok).await.unwrap();
    tx.query_drop("INSERT INTO data VALUES (2, 'in time')").await.unwrap();
    leasehold::fence::mysql::commit(tx, &ok).await.unwrap();
    let rows: Vec<String> = c.query("SELECT v FROM data").await.unwrap();
    assert_eq!(rows, vec!["in time".to_owned()]);
    let after: (u64, u64) = c
        .query_first("SELECT @@SESSION.wait_timeout, @@SESSION.innodb_lock_wait_timeout")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before, after);
}

/// SQLite: no server can end a stuck holder's transaction, but the holder that resumes past
/// its deadline does not commit; with a lease's own fencing, checks refuse once it is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_late_commit_is_refused() {
    use leasehold::fence::sqlite::{
        self,
        rusqlite::{Connection, TransactionBehavior},
    };
    let dir = tempfile::tempdir().unwrap();
    let mut db = Connection::open(dir.path().join("r.db")).unwrap();
    sqlite::install(&db).unwrap();
    db.execute_batch("CREATE TABLE data (id INTEGER PRIMARY KEY, v TEXT)").unwrap();
    let f = fencing(5, Some(Duration::from_millis(200)));
    sqlite::claim(&db, "r", &f).unwrap();
    let tx = db.transaction_with_behavior(TransactionBehavior::Immediate).unwrap();
    sqlite::check(&tx, "r", &f).unwrap();
    tx.execute("INSERT INTO data VALUES (1, 'late')", []).unwrap();
    std::thread::sleep(Duration::from_millis(300)); // stuck past the deadline
    assert!(matches!(sqlite::commit(tx, &f), Err(Error::Lost { .. })));
    let n: i64 = db.query_row("SELECT count(*) FROM data", [], |r| r.get(0)).unwrap();
    assert_eq!(n, 0, "committed late");

    // A lease's own fencing: refused once the lease is released (or lost).
    let store = tempfile::tempdir().unwrap();
    let locker = leasehold::Locker::connect(&format!("sqlite://{}/l.db", store.path().display()))
        .await
        .unwrap();
    let lease = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    let lf = lease.fencing();
    assert!(lf.time_left().is_some_and(|t| t > Duration::from_secs(20)), "{:?}", lf.time_left());
    sqlite::claim(&db, "r2", &lf).unwrap();
    assert!(lease.release().await.unwrap().is_clean());
    assert_eq!(lf.time_left(), Some(Duration::ZERO));
    assert!(matches!(sqlite::check(&db, "r2", &lf), Err(Error::Lost { .. })));
}

/// A lease on an embedded store, auto-renewed, for the tests below (the lock store does not
/// matter to the fence resource; its renewals do).
async fn renewed_lease(ttl: Duration) -> (tempfile::TempDir, leasehold::Locker, leasehold::Lease) {
    let store = tempfile::tempdir().unwrap();
    let locker = leasehold::Locker::connect(&format!("sqlite://{}/l.db", store.path().display()))
        .await
        .unwrap();
    let lease = locker.acquire("k", ttl).await.unwrap();
    (store, locker, lease)
}

/// Waits until the lease has less than `left` before its local deadline (just before a
/// renewal moves it), so a check made then sees little time left, as in the trial.
async fn until_left_below(lease: &leasehold::Lease, left: Duration) {
    let t0 = Instant::now();
    while lease.deadline().unwrap().saturating_duration_since(Instant::now()) >= left {
        assert!(t0.elapsed() < Duration::from_secs(10), "the lease never got below {left:?}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Issue 35: a worker that checks, works 1.5 s and writes under a 2 s lease that
/// auto-renewal keeps alive commits. (Bounded by the time left at the check, its session was
/// ended by the server while the lease stayed healthy, and the write met "connection closed".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_checked_transaction_lives_as_long_as_its_renewed_lease() {
    let (_schema, mut db) = pg_setup().await;
    let (_dir, _locker, lease) = renewed_lease(Duration::from_secs(2)).await;
    let f = lease.fencing();
    leasehold::fence::postgres::claim(&db, "r", &f).await.unwrap();
    until_left_below(&lease, Duration::from_millis(1300)).await;
    let tx = db.transaction().await.unwrap();
    leasehold::fence::postgres::check(&tx, "r", &f).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // the work
    tx.execute("INSERT INTO data VALUES (1, 'worked')", &[]).await.expect("the write");
    leasehold::fence::postgres::commit(tx, &f).await.expect("the commit");
    let rows = db.query("SELECT v FROM data", &[]).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(lease.release().await.unwrap().is_clean());
}

/// A checked transaction idle past the lease's window (`ttl·(1 − drift) − margin`, the most
/// time a renewal leaves) is ended by the server's backstop; the holder hears a typed
/// [`Error::Lost`], from `commit` and from its own statement through `effect_error`, never a
/// bare driver error, and nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_transaction_ended_by_its_backstop_is_a_typed_loss() {
    let (schema, mut db) = pg_setup().await;
    let (_dir, _locker, lease) = renewed_lease(Duration::from_secs(1)).await;
    let f = lease.fencing();
    leasehold::fence::postgres::claim(&db, "r", &f).await.unwrap();
    let tx = db.transaction().await.unwrap();
    leasehold::fence::postgres::check(&tx, "r", &f).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await; // idle longer than the window
    let raw = tx.execute("INSERT INTO data VALUES (1, 'late')", &[]).await.unwrap_err();
    let typed = leasehold::fence::postgres::effect_error(&f, raw);
    assert!(matches!(typed, Error::Lost { .. }), "{typed:?}");
    let r = leasehold::fence::postgres::commit(tx, &f).await;
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    let c = pg(&schema).await;
    assert!(c.query("SELECT v FROM data", &[]).await.unwrap().is_empty());
    drop(db);
    assert!(lease.release().await.unwrap().is_clean());
}

/// MySQL, as the PostgreSQL case above: whole seconds, so a 3 s lease checked with under
/// 1.9 s left (bounded to 2 s before) and 2.5 s of work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_checked_transaction_lives_as_long_as_its_renewed_lease() {
    let (_db, mut c) = my_setup().await;
    let (_dir, _locker, lease) = renewed_lease(Duration::from_secs(3)).await;
    let f = lease.fencing();
    {
        let mut tx = c.start_transaction(Default::default()).await.unwrap();
        leasehold::fence::mysql::claim(&mut tx, "r", &f).await.unwrap();
        leasehold::fence::mysql::commit(tx, &f).await.unwrap();
    }
    until_left_below(&lease, Duration::from_millis(1900)).await;
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    leasehold::fence::mysql::check(&mut tx, "r", &f).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await; // the work
    tx.query_drop("INSERT INTO data VALUES (1, 'worked')").await.expect("the write");
    leasehold::fence::mysql::commit(tx, &f).await.expect("the commit");
    let rows: Vec<String> = c.query("SELECT v FROM data").await.unwrap();
    assert_eq!(rows, vec!["worked".to_owned()]);
    assert!(lease.release().await.unwrap().is_clean());
}

/// MySQL: a connection idle past the lease's window (rounded up to whole seconds) is closed
/// by the server; the holder hears [`Error::Lost`], and nothing is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_transaction_ended_by_its_backstop_is_a_typed_loss() {
    let (db, mut c) = my_setup().await;
    let (_dir, _locker, lease) = renewed_lease(Duration::from_secs(1)).await;
    let f = lease.fencing();
    let mut tx = c.start_transaction(Default::default()).await.unwrap();
    leasehold::fence::mysql::claim(&mut tx, "r", &f).await.unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await; // idle past the 1 s bound
    let raw = tx.query_drop("INSERT INTO data VALUES (1, 'late')").await.unwrap_err();
    let typed = leasehold::fence::mysql::effect_error(&f, raw);
    assert!(matches!(typed, Error::Lost { .. }), "{typed:?}");
    let r = leasehold::fence::mysql::commit(tx, &f).await;
    assert!(matches!(r, Err(Error::Lost { .. })), "{r:?}");
    let mut other = my(&db).await;
    let rows: Vec<String> = other.query("SELECT v FROM data").await.unwrap();
    assert!(rows.is_empty(), "{rows:?}");
    assert!(lease.release().await.unwrap().is_clean());
}
