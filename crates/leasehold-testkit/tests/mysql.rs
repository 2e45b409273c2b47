//! MySQL/MariaDB: the conformance suite for the lease table and `GET_LOCK` session locks,
//! the process-level scenarios, `KILL CONNECTION`, interop with other clients, long names and
//! the fence table.

use std::time::Duration;

use leasehold::fence::mysql::mysql_async::{self, prelude::Queryable};
use leasehold::{Error, Locker, Wait};
use leasehold_testkit::{MyDatabase, mysql_fixture, mysql_server, mysql_session_fixture};

mod lease {
    use leasehold_testkit::{conformance_suite, mysql_fixture, primitives_suite};
    conformance_suite!(mysql_fixture());
    primitives_suite!(mysql_fixture());
}

mod session {
    use leasehold_testkit::{conformance_suite, mysql_session_fixture, primitives_suite};
    conformance_suite!(mysql_session_fixture());
    primitives_suite!(mysql_session_fixture());
}

leasehold_testkit::process_suite! {
    mutex {
        multi_process_mutual_exclusion_lease: mysql_fixture(),
        multi_process_mutual_exclusion_session: mysql_session_fixture(),
    }
    permits { multi_process_permits_lease: mysql_fixture() }
    stalled mysql_fixture(), resource |_| {
        let res = MyDatabase::new();
        let url = res.url("");
        (res, url)
    };
    session { stalled_session_holder_keeps_its_lock: mysql_session_fixture() }
}

/// `GET_LOCK` has no shared mode and no place for a permit count: readers and semaphores
/// are refused at once, each error naming the store and the primitive; nothing is held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_readers_and_semaphores_are_refused_by_name() {
    let fx = mysql_session_fixture().await;
    let p = fx.locker.guarantees().primitives;
    assert!(!p.permits && !p.shared, "{p:?}");
    let ttl = Duration::from_secs(30);
    let reader = fx.locker.acquire_shared("refused", ttl).await.map(|_| ());
    let permit = fx.locker.acquire_permit("refused", 2, ttl).await.map(|_| ());
    for (r, what) in [(reader, "readers"), (permit, "semaphore")] {
        match r {
            Err(e @ Error::Unsupported { backend: "mysql-session", primitive, .. }) => {
                assert!(primitive.contains(what), "{primitive}");
                let text = e.to_string();
                assert!(text.contains("mysql-session") && text.contains(what), "{text}");
                assert!(text.contains("GET_LOCK") && text.contains("mode=lease"), "{text}");
            }
            other => panic!("{what} on GET_LOCK: {other:?}"),
        }
    }
    // The plain lock is still free: nothing was asked of the store.
    let l = fx.locker.acquire("refused", ttl).await.unwrap();
    assert!(l.release().await.unwrap().is_clean());
}

async fn client(db: &MyDatabase) -> mysql_async::Conn {
    mysql_async::Conn::from_url(db.url("")).await.unwrap()
}

/// The lease table as an operator reads it; a stale release leaves the successor's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_table_is_inspectable() {
    let db = MyDatabase::new();
    let l = Locker::connect(&db.url("")).await.unwrap();
    let mut c = client(&db).await;
    let a = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    let (owner, fence, left): (String, u64, i64) = c
        .query_first(
            "SELECT owner, fence, TIMESTAMPDIFF(SECOND, UTC_TIMESTAMP(6), expires_at)
             FROM leasehold_leases WHERE lock_key = 'job'",
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner, a.owner().to_string());
    assert_eq!(fence, a.fence().get());
    assert!((20..=30).contains(&left), "{left}");
    let stale = a.owner();
    assert!(a.release().await.unwrap().is_clean());
    let b = l.acquire("job", Duration::from_secs(30)).await.unwrap();
    assert!(!l.release_by_owner("job", &stale).await.unwrap());
    let owner: String = c
        .query_first("SELECT owner FROM leasehold_leases WHERE lock_key = 'job'")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner, b.owner().to_string());
    assert!(b.release().await.unwrap().is_clean());
}

/// `KILL CONNECTION` on a session holder's connection: `lost()` fires (at the next heartbeat)
/// and the lock is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_connection_fires_lost_and_frees_the_lock() {
    let db = MyDatabase::new();
    let l = Locker::connect(&db.url("?mode=session&heartbeat=300ms")).await.unwrap();
    let mut c = client(&db).await;
    let key = leasehold_testkit::conformance::unique_key("kill");
    let a = l.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let id: Option<u64> = c.exec_first("SELECT IS_USED_LOCK(?)", (&key,)).await.unwrap().flatten();
    let id = id.expect("the lock is held by one connection");
    c.query_drop(format!("KILL CONNECTION {id}")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), a.lost())
        .await
        .expect("lost() fires when the holder's connection is killed");
    assert!(!a.admit());
    let b = l
        .acquire(&key, Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(5)))
        .await
        .expect("the lock is free once its connection ended");
    assert!(b.release().await.unwrap().is_clean());
}

/// Other clients take the very same lock by name; long keys map to a hashed name the server
/// computes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_lock_names_interoperate() {
    let fx = mysql_session_fixture().await;
    let db = MyDatabase::new();
    let mut c = client(&db).await;
    let short = leasehold_testkit::conformance::unique_key("i");
    let long = format!("{}-{}", short, "x".repeat(100));
    let a = fx.locker.acquire(&short, Duration::from_secs(30)).await.unwrap();
    let b = fx.locker.acquire(&long, Duration::from_secs(30)).await.unwrap();
    let got: Option<i64> = c.exec_first("SELECT GET_LOCK(?, 0)", (&short,)).await.unwrap();
    assert_eq!(got, Some(0), "plain SQL got a lock leasehold holds");
    let got: Option<i64> =
        c.exec_first("SELECT GET_LOCK(CONCAT('leasehold:', SHA1(?)), 0)", (&long,)).await.unwrap();
    assert_eq!(got, Some(0), "the long key's hashed name is held");
    assert!(a.release().await.unwrap().is_clean());
    assert!(b.release().await.unwrap().is_clean());
    let got: Option<i64> = c.exec_first("SELECT GET_LOCK(?, 0)", (&short,)).await.unwrap();
    assert_eq!(got, Some(1));
    let r = fx.locker.acquire(&short, Duration::from_secs(30)).await;
    assert!(matches!(r, Err(Error::Busy { .. })), "{r:?}");
    c.query_drop(format!("DO RELEASE_LOCK('{short}')")).await.unwrap();
    let a = fx.locker.acquire(&short, Duration::from_secs(30)).await.unwrap();
    assert!(a.release().await.unwrap().is_clean());
}

/// After releases, dropped leases and abandoned waits, no lock stays on the connections the
/// store keeps open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_locks_do_not_leak_into_kept_connections() {
    let fx = mysql_session_fixture().await;
    let prefix = leasehold_testkit::conformance::unique_key("leak");
    for i in 0..10 {
        let key = format!("{prefix}-{i}");
        let a = fx.locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
        if i % 2 == 0 {
            assert!(a.release().await.unwrap().is_clean());
        } else {
            drop(a);
        }
        let held = fx.locker.acquire(&prefix, Duration::from_secs(30)).await.unwrap();
        let w = {
            let (l, k) = (fx.locker.clone(), prefix.clone());
            tokio::spawn(
                async move { l.acquire(&k, Duration::from_secs(30)).wait(Wait::Forever).await },
            )
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        w.abort();
        let _ = w.await;
        assert!(held.release().await.unwrap().is_clean());
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let db = MyDatabase::new();
    let mut c = client(&db).await;
    for i in 0..10 {
        let key = format!("{prefix}-{i}");
        let v: Option<Option<u64>> = c.exec_first("SELECT IS_USED_LOCK(?)", (&key,)).await.unwrap();
        assert_eq!(v.flatten(), None, "{key} is still held");
    }
    let v: Option<Option<u64>> = c.exec_first("SELECT IS_USED_LOCK(?)", (&prefix,)).await.unwrap();
    assert_eq!(v.flatten(), None, "an abandoned wait left its lock behind");
}

/// The fence table's rules on MySQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_table_rules() {
    use leasehold::fence::{Fencing, mysql as fence};
    use leasehold::{FenceToken, Key, OwnerToken};
    let db = MyDatabase::new();
    let mut c = client(&db).await;
    fence::install(&mut c).await.unwrap();
    let f =
        |k: &str, t: u64, o: OwnerToken| Fencing::new(Key::new(k).unwrap(), FenceToken::new(t), o);
    let (a, b) = (OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap());
    let stale = |r: leasehold::Result<()>| matches!(r, Err(Error::StaleFence { .. }));
    assert!(stale(fence::check(&mut c, "r", &f("k", 1, a)).await), "nothing installed yet");
    fence::claim(&mut c, "r", &f("k", 5, a)).await.unwrap();
    fence::claim(&mut c, "r", &f("k", 5, a)).await.unwrap();
    assert!(stale(fence::claim(&mut c, "r", &f("k", 5, b)).await), "same token, other owner");
    assert!(stale(fence::claim(&mut c, "r", &f("k", 4, b)).await), "older token");
    assert!(stale(fence::claim(&mut c, "r", &f("other", 9, b)).await), "another key's token");
    assert!(stale(fence::claim(&mut c, "r", &f("k", 0, b)).await), "no fence");
    fence::check(&mut c, "r", &f("k", 5, a)).await.unwrap();
    fence::claim(&mut c, "r", &f("k", 6, b)).await.unwrap();
    assert!(stale(fence::check(&mut c, "r", &f("k", 5, a)).await), "superseded holder");
    fence::check(&mut c, "r", &f("k", 6, b)).await.unwrap();
}

#[tokio::test]
async fn url_options_are_checked() {
    let server = mysql_server();
    let e = Locker::connect(&server).await.unwrap_err();
    assert!(e.to_string().contains("database"), "{e}");
    let e = Locker::connect(&format!("{server}/test?mode=sesion")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    let e = Locker::connect(&format!("{server}/test?table=a-b")).await.unwrap_err();
    assert!(matches!(e, Error::InvalidInput(_)), "{e}");
    let e = Locker::connect("mysql://root@127.0.0.1:1/test").await.unwrap_err();
    assert!(matches!(e, Error::Unavailable { .. }), "{e}");
}

/// The private MariaDB chaos kills: committed rows survive a kill -9 and restart.
#[test]
fn private_server_survives_kill9() {
    let mut server = leasehold_testkit::stores::mysql::server::MyServer::start();
    server.sql("CREATE TABLE test.t (v int) ENGINE=InnoDB; INSERT INTO test.t VALUES (1)");
    server.restart();
    assert_eq!(server.sql("SELECT count(*) FROM test.t"), "1");
}

/// A server restart drops every GET_LOCK at once. With a one-minute heartbeat, the holder
/// still learns of it within moments (the store's sentinel connection sees the server go),
/// not a heartbeat later, after a successor may have taken the lock
/// (`leasehold chaos --scenario store-kill` found this).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_holder_learns_of_a_server_restart_at_once() {
    let mut server = leasehold_testkit::stores::mysql::server::MyServer::start();
    let url = server.url("?mode=session&heartbeat=60000ms");
    let locker = Locker::connect(&url).await.unwrap();
    let lease = locker.acquire("k", Duration::from_secs(30)).await.unwrap();
    let lost = lease.lost();
    server.kill9();
    // Well inside the heartbeat: only the sentinel can have told it.
    tokio::time::timeout(Duration::from_secs(10), lost)
        .await
        .expect("lost() did not fire within 10 s of the server's death");
    server.restart();
    let again = Locker::connect(&url).await.unwrap();
    let next = again.acquire("k", Duration::from_secs(30)).await.expect("the restart freed it");
    assert!(next.release().await.unwrap().is_clean());
}

/// A replica promoted after missing the last grants holds the rows as they were before them.
/// Modelled here by putting a fence row back to that earlier state (the shared server has no
/// replica): the next grant still issues a fence above every one issued before, on the lease
/// table and on the session lock's fence table (`max(fence + 1, UTC µs)`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_row_behind_still_issues_larger_fences() {
    let db = MyDatabase::new();
    let mut c = client(&db).await;
    for (form, table, col) in [
        ("", "leasehold_leases", "lock_key"),
        ("?mode=session", "leasehold_leases_fences", "lock_key"),
    ] {
        let l = Locker::connect(&db.url(form)).await.unwrap();
        let mut issued = Vec::new();
        for _ in 0..4 {
            let lease = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
            issued.push(lease.fence());
            assert!(lease.release().await.unwrap().is_clean());
        }
        assert!(issued.windows(2).all(|w| w[1] > w[0]), "{form:?}: {issued:?}");
        c.exec_drop(
            format!("UPDATE {table} SET fence = ? WHERE {col} = 'acct'"),
            (issued[0].get(),),
        )
        .await
        .unwrap();
        let lease = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
        assert!(lease.fence() > issued[3], "{form:?}: {} after {issued:?}", lease.fence());
        assert!(lease.fence().get() < leasehold::store::MAX_FENCE);
        assert!(lease.release().await.unwrap().is_clean());
        // An older version's counter (small numbers) stays below the new fences.
        c.exec_drop(format!("UPDATE {table} SET fence = 41 WHERE {col} = 'acct'"), ())
            .await
            .unwrap();
        let lease = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
        assert!(lease.fence().get() > 41 && lease.fence() > issued[3]);
        assert!(lease.release().await.unwrap().is_clean());
    }
}

/// Fail open only on an outage, on a private MariaDB: a wrong password, an unknown user or
/// database, and a user without the privilege to create the lease table (1142) are
/// configuration errors in both modes; a closed port is an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_configuration_is_config_and_a_closed_port_is_unavailable() {
    let server = leasehold_testkit::stores::mysql::server::MyServer::start();
    let p = server.port();
    server.sql("CREATE USER 'lim'@'%' IDENTIFIED BY 'pw'; GRANT SELECT ON test.* TO 'lim'@'%'");
    for mode in ["", "?mode=session"] {
        for url in [
            format!("mysql://root:wrong@127.0.0.1:{p}/test{mode}"),
            format!("mysql://nobody@127.0.0.1:{p}/test{mode}"),
            format!("mysql://root@127.0.0.1:{p}/no_such_db{mode}"),
            format!("mysql://lim:pw@127.0.0.1:{p}/test{mode}"),
        ] {
            let e = Locker::connect(&url).await.expect_err(&url);
            assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
            assert!(!e.to_string().contains("wrong@"), "a password in an error: {e}");
        }
    }
    let closed = format!("mysql://root@127.0.0.1:{}/test", leasehold_testkit::spawn::free_port());
    let e = Locker::connect(&closed).await.expect_err("nothing listens");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
}

/// Every call has a bound behind a frozen peer (a proxy that swallows everything): connecting
/// answers at the connect limit (or the URL's `connect_timeout`), and a connected locker's
/// acquire and `holders` at the op timeout, each within a small slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_peer_is_answered_within_the_bounds() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    use std::time::Instant;
    let db = MyDatabase::new();
    let upstream = mysql_server();
    let port = upstream.rsplit(':').next().unwrap().trim_end_matches('/');
    let proxy = FaultProxy::start(format!("127.0.0.1:{port}").parse().unwrap()).await.unwrap();
    for mode in ["", "?mode=session"] {
        proxy.set(Fault::Pass);
        let url = format!("mysql://root@{}/{}{mode}", proxy.addr(), db.name);
        let l = Locker::connect(&url).await.unwrap().with_op_timeout(Duration::from_secs(1));
        proxy.set(Fault::Blackhole);
        let t = Instant::now();
        let e = Locker::connect_within(&url, Duration::from_secs(1)).await.expect_err("frozen");
        assert!(e.is_unavailable(), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "{mode}: connect took {:?}", t.elapsed());
        let sep = if mode.is_empty() { '?' } else { '&' };
        let t = Instant::now();
        let e =
            Locker::connect(&format!("{url}{sep}connect_timeout=1s")).await.expect_err("frozen");
        assert!(e.is_unavailable(), "{e:?}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{mode}: connect_timeout took {:?}",
            t.elapsed()
        );
        let t = Instant::now();
        let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("frozen");
        assert!(e.is_unavailable(), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "{mode}: acquire took {:?}", t.elapsed());
        let t = Instant::now();
        let _ = l.holders(Some("k")).await;
        assert!(t.elapsed() < Duration::from_secs(3), "{mode}: holders took {:?}", t.elapsed());
    }
    proxy.set(Fault::Reset);
}

/// A one-shot acquire behind another session's `LOCK TABLES … WRITE` on the lease table
/// answers within the op timeout, and leaves no statement waiting in the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_behind_lock_tables_answers_within_the_op_timeout() {
    use std::time::Instant;
    let db = MyDatabase::new();
    // 2.5 s: the server's lock waits are whole seconds (4/5 of it, rounded up: 2 s).
    let op = Duration::from_millis(2500);
    let l = Locker::connect(&db.url("")).await.unwrap().with_op_timeout(op);
    assert!(
        l.acquire("warm", Duration::from_secs(30))
            .await
            .unwrap()
            .release()
            .await
            .unwrap()
            .is_clean()
    );
    let mut admin = client(&db).await;
    admin.query_drop("LOCK TABLES leasehold_leases WRITE").await.unwrap();
    let t = Instant::now();
    let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("the table is locked");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
    assert!(t.elapsed() < op + Duration::from_secs(1), "acquire took {:?}", t.elapsed());
    let mut look = client(&db).await;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let waiting: Option<i64> = look
            .exec_first(
                "SELECT COUNT(*) FROM information_schema.processlist WHERE db = ?
                   AND state LIKE 'Waiting for table%' AND info LIKE '%leasehold_leases%'",
                (&db.name,),
            )
            .await
            .unwrap();
        if waiting == Some(0) {
            break;
        }
        assert!(Instant::now() < deadline, "a leasehold statement still waits behind LOCK TABLES");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    admin.query_drop("UNLOCK TABLES").await.unwrap();
    let lease = l.acquire("k", Duration::from_secs(30)).await.expect("free again");
    assert!(lease.release().await.unwrap().is_clean());
}
