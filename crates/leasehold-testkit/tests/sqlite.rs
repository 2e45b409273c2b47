//! The conformance suite and the process-level scenarios on the embedded SQLite store.

use leasehold_testkit::{conformance_suite, primitives_suite, process, sqlite_fixture};
use std::path::Path;

conformance_suite!(sqlite_fixture());
primitives_suite!(sqlite_fixture());

fn worker() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lh-worker"))
}

/// Four processes, three permits: each slot exclusive, never more than three at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_process_permits() {
    let fx = sqlite_fixture().await;
    process::multi_process_permits(&fx.url, worker(), 4, 30, 3).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_process_mutual_exclusion() {
    let fx = sqlite_fixture().await;
    process::multi_process_mutex(&fx.url, worker(), 4, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_holder_is_fenced_off() {
    let fx = sqlite_fixture().await;
    let dir = tempfile::tempdir().unwrap();
    let res = format!("sqlite:{}", dir.path().join("resource.db").display());
    let r = process::stalled_holder(&fx.locker, &fx.url, worker(), &res, true).await;
    process::assert_stale_write_rejected(&r);
    process::assert_release_said_not_ours(&r);
}

/// The control: the same run without the fence check lets the stale write through, so the
/// fenced test above is able to fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_holder_without_fencing_overwrites_successor() {
    let fx = sqlite_fixture().await;
    let dir = tempfile::tempdir().unwrap();
    let res = format!("sqlite:{}", dir.path().join("resource.db").display());
    let r = process::stalled_holder(&fx.locker, &fx.url, worker(), &res, false).await;
    process::assert_stale_write_accepted(&r);
}

/// A restored backup (or a deleted database file) still issues fences above every fence
/// issued before: the granting transaction sets `max(fence + 1, the wall clock in µs)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_backup_still_issues_larger_fences() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("locks.db");
    let url = format!("sqlite://{}", db.display());
    let l = leasehold::Locker::connect(&url).await.unwrap();
    let first = l.acquire("job", std::time::Duration::from_secs(30)).await.unwrap();
    let mut last = first.fence();
    assert!(first.release().await.unwrap().is_clean());
    drop(l);
    std::fs::copy(&db, dir.path().join("backup.db")).unwrap();
    let l = leasehold::Locker::connect(&url).await.unwrap();
    for _ in 0..3 {
        let lease = l.acquire("job", std::time::Duration::from_secs(30)).await.unwrap();
        assert!(lease.fence() > last);
        last = lease.fence();
        assert!(lease.release().await.unwrap().is_clean());
    }
    drop(l);
    for ext in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("locks.db{ext}")));
    }
    std::fs::copy(dir.path().join("backup.db"), &db).unwrap();
    let l = leasehold::Locker::connect(&url).await.unwrap();
    let lease = l.acquire("job", std::time::Duration::from_secs(30)).await.unwrap();
    assert!(lease.fence() > last, "{} after {last}", lease.fence());
    assert!(lease.release().await.unwrap().is_clean());
}

/// Returning from `main` with a lease held frees the key at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_with_lease_releases() {
    let fx = sqlite_fixture().await;
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_lh-exit"));
    leasehold_testkit::process::exit_with_lease_releases(&fx.locker, &fx.url, bin).await;
}

/// A path the store cannot use is a configuration error, never an outage a job may run
/// through: a directory where the database file belongs, a parent that is a file, a file
/// that is not a database, a path where nobody may create files (sysfs, even for root).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_paths_are_config() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("adir")).unwrap();
    std::fs::write(d.path().join("afile"), "x").unwrap();
    std::fs::write(d.path().join("notdb"), "this is not a SQLite database, ".repeat(20)).unwrap();
    let mut urls = vec![
        format!("sqlite://{}/adir", d.path().display()),
        format!("sqlite://{}/afile/leases.db", d.path().display()),
        format!("sqlite://{}/notdb", d.path().display()),
    ];
    if cfg!(target_os = "linux") {
        urls.push("sqlite:///sys/leasehold-test.db".into());
    }
    for url in urls {
        let e = leasehold::Locker::connect(&url).await.expect_err(&url);
        assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
    }
}

/// Auto-renew renews at ttl/3, counted at the store: about 6 renewals in 6 s at ttl 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_renew_rate() {
    let fx = sqlite_fixture().await;
    leasehold_testkit::counted::auto_renew_rate(&fx.locker).await;
}
