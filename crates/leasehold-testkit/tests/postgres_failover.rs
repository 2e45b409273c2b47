//! PostgreSQL on private servers this test starts (the machine's binaries): a primary and a
//! streaming standby, cut off and promoted, and the fences issued across that failover.

use std::time::Duration;

use leasehold::Locker;

/// The private-server helpers chaos builds on: a standby that catches up, is cut off, and is
/// promoted; a primary killed and restarted on its data.
#[test]
fn private_primary_and_standby() {
    use leasehold_testkit::stores::postgres::server::PgServer;
    let mut primary = PgServer::start();
    let standby = PgServer::standby_of(&primary);
    primary.sql("CREATE TABLE t (v int); INSERT INTO t VALUES (1)");
    standby.catch_up(&primary);
    assert_eq!(standby.sql("SELECT count(*) FROM t"), "1");
    standby.detach();
    primary.sql("INSERT INTO t VALUES (2)");
    primary.restart();
    assert_eq!(primary.sql("SELECT count(*) FROM t"), "2", "committed rows survive a kill -9");
    primary.kill9();
    standby.promote();
    assert_eq!(standby.sql("SELECT count(*) FROM t"), "1", "the cut-off standby missed row 2");
    standby.sql("INSERT INTO t VALUES (3)");
    assert_eq!(standby.sql("SELECT count(*) FROM t"), "2");
}

/// A standby promoted after missing the last grants (asynchronous replication) still issues
/// fences above every fence the old primary issued, on the lease table (each row set to
/// `max(fence + 1, clock_timestamp() in µs)`) and on the session lock's sequence (`nextval`,
/// moved up to the clock on every new connection). 40 grants on one connection are more than
/// the 32 values a sequence's WAL record covers, so a standby without the clock-back would
/// hand out some of them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_standby_issues_larger_fences() {
    use leasehold_testkit::stores::postgres::server::PgServer;
    let mut primary = PgServer::start();
    let standby = PgServer::standby_of(&primary);
    let forms = ["", "?mode=session"];
    let mut last = Vec::new();
    for form in forms {
        let l = Locker::connect(&primary.url(form)).await.unwrap();
        let warm = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
        last.push(warm.fence());
        assert!(warm.release().await.unwrap().is_clean());
    }
    standby.catch_up(&primary);
    standby.detach();
    for (i, form) in forms.iter().enumerate() {
        let l = Locker::connect(&primary.url(form)).await.unwrap();
        for _ in 0..40 {
            let lease = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
            assert!(lease.fence() > last[i]);
            last[i] = lease.fence();
            assert!(lease.release().await.unwrap().is_clean());
        }
    }
    primary.kill9();
    standby.promote();
    for (i, form) in forms.iter().enumerate() {
        let l = Locker::connect(&standby.url(form)).await.unwrap();
        let lease = l.acquire("acct", Duration::from_secs(30)).await.unwrap();
        assert!(
            lease.fence() > last[i],
            "{form:?}: fence {} on the promoted standby, {} issued before on the primary",
            lease.fence(),
            last[i]
        );
        assert!(lease.fence().get() < leasehold::store::MAX_FENCE);
        assert!(lease.release().await.unwrap().is_clean());
    }
}
