//! PostgreSQL as operators meet it: refused configuration is never an outage, every call
//! answers within its bound behind a frozen peer or another session's table lock, and a
//! session lock's connection names its holder.

use std::time::Duration;

use leasehold::fence::postgres::tokio_postgres;
use leasehold::{Error, Locker};
use leasehold_testkit::{PgSchema, postgres_base, postgres_fixture, postgres_session_fixture};

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

/// Fail open only on an outage: a database or role that does not exist, and a role without
/// the privilege to create the store's schema, are configuration errors in both modes; a
/// closed port is an outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_configuration_is_config_and_a_closed_port_is_unavailable() {
    let tag = leasehold::OwnerToken::generate().unwrap().to_string()[..8].to_owned();
    for mode in ["", "?mode=session"] {
        for url in [
            format!("postgres://postgres@127.0.0.1:5432/lh_no_such_db_{tag}{mode}"),
            format!("postgres://lh_no_such_role_{tag}@127.0.0.1:5432/test{mode}"),
        ] {
            let e = Locker::connect(&url).await.expect_err(&url);
            assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
        }
    }
    // A role that may log in but not create the lease schema (42501), on a private server.
    let server = leasehold_testkit::stores::postgres::server::PgServer::start();
    server.sql("CREATE ROLE lim LOGIN");
    for mode in ["", "&mode=session"] {
        let url =
            format!("postgres://lim@127.0.0.1:{}/postgres?schema=lh_denied{mode}", server.port());
        let e = Locker::connect(&url).await.expect_err("no CREATE privilege");
        assert!(e.is_config() && !e.is_unavailable(), "{url}: {e:?}");
    }
    let closed =
        format!("postgres://postgres@127.0.0.1:{}/test", leasehold_testkit::spawn::free_port());
    let e = Locker::connect(&closed).await.expect_err("nothing listens");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
}

/// Every call has a bound behind a frozen peer (a proxy that swallows everything), in both
/// modes: connecting answers at the connect limit (or the URL's `connect_timeout`), and a
/// connected locker's acquire and `holders` at the op timeout, each within a small slack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_peer_is_answered_within_the_bounds() {
    use leasehold_testkit::proxy::{Fault, FaultProxy};
    use std::time::Instant;
    let schema = PgSchema::new();
    let proxy = FaultProxy::start("127.0.0.1:5432".parse().unwrap()).await.unwrap();
    for mode in ["", "&mode=session"] {
        proxy.set(Fault::Pass);
        let url = format!("postgres://postgres@{}/test?schema={}{mode}", proxy.addr(), schema.name);
        let l = Locker::connect(&url).await.unwrap().with_op_timeout(Duration::from_secs(1));
        if mode.is_empty() {
            assert!(
                l.acquire("warm", Duration::from_secs(30))
                    .await
                    .unwrap()
                    .release()
                    .await
                    .unwrap()
                    .is_clean()
            );
        }
        proxy.set(Fault::Blackhole);
        let t = Instant::now();
        let e = Locker::connect_within(&url, Duration::from_secs(1)).await.expect_err("frozen");
        assert!(e.is_unavailable(), "{e:?}");
        assert!(t.elapsed() < Duration::from_secs(3), "{mode}: connect took {:?}", t.elapsed());
        let t = Instant::now();
        let e = Locker::connect(&format!("{url}&connect_timeout=1")).await.expect_err("frozen");
        assert!(e.is_unavailable(), "{e:?}");
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "{mode}: connect_timeout=1 took {:?}",
            t.elapsed()
        );
        for round in 0..2 {
            let t = Instant::now();
            let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("frozen");
            assert!(e.is_unavailable(), "{e:?}");
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "{mode} {round}: acquire took {:?}",
                t.elapsed()
            );
            let t = Instant::now();
            let r = l.holders(Some("k")).await;
            assert!(
                r.as_ref().is_err_and(Error::is_unavailable) || mode.contains("session"),
                "{r:?}"
            );
            assert!(
                t.elapsed() < Duration::from_secs(3),
                "{mode} {round}: holders took {:?}",
                t.elapsed()
            );
        }
    }
    proxy.set(Fault::Reset);
}

/// A one-shot acquire behind another session's `LOCK TABLE` on the lease table answers within
/// the op timeout, and leaves no statement waiting in the server; so does `holders`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_behind_lock_table_answers_within_the_op_timeout() {
    use std::time::Instant;
    let fx = postgres_fixture().await;
    let schema = fx.url.split("schema=").nth(1).unwrap().to_owned();
    let l = fx.locker.clone().with_op_timeout(Duration::from_secs(1));
    assert!(
        l.acquire("warm", Duration::from_secs(30))
            .await
            .unwrap()
            .release()
            .await
            .unwrap()
            .is_clean()
    );
    let mut admin = client().await;
    let tx = admin.transaction().await.unwrap();
    tx.batch_execute(&format!("LOCK TABLE \"{schema}\".leasehold_leases IN ACCESS EXCLUSIVE MODE"))
        .await
        .unwrap();
    let t = Instant::now();
    let e = l.acquire("k", Duration::from_secs(30)).await.expect_err("the table is locked");
    assert!(e.is_unavailable() && !e.is_config(), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "acquire took {:?}", t.elapsed());
    let t = Instant::now();
    let e = l.holders(None).await.expect_err("the table is locked");
    assert!(e.is_unavailable(), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(2), "holders took {:?}", t.elapsed());
    // Nothing of ours is left waiting for the lock.
    let waiting = || async {
        let c = client().await;
        let sql = format!(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
               AND query LIKE '%\"{schema}\".\"leasehold_leases\"%'"
        );
        c.query_one(&sql, &[]).await.unwrap().get::<_, i64>(0)
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    while waiting().await > 0 {
        assert!(Instant::now() < deadline, "a leasehold statement still waits behind LOCK TABLE");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tx.rollback().await.unwrap();
    let lease = l.acquire("k", Duration::from_secs(30)).await.expect("free again");
    assert!(lease.release().await.unwrap().is_clean());
}

/// A session lock's connection names its holder in `pg_stat_activity` (pid, host, command),
/// so an operator sees who holds it from the server alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_connections_name_their_holder() {
    let fx = postgres_session_fixture().await;
    let c = client().await;
    let key = leasehold_testkit::conformance::unique_key("who");
    let a = fx.locker.acquire(&key, Duration::from_secs(30)).await.unwrap();
    let pids = lock_pids(&c, &key).await;
    assert_eq!(pids.len(), 1, "{pids:?}");
    let row = c
        .query_one("SELECT application_name FROM pg_stat_activity WHERE pid = $1", &[&pids[0]])
        .await
        .unwrap();
    let name: String = row.get(0);
    assert!(name.starts_with(&format!("leasehold {}@", std::process::id())), "{name}");
    assert!(a.release().await.unwrap().is_clean());
}
