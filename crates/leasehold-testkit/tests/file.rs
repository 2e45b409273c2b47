//! The conformance suite and the process-level scenarios on the `flock` store.

use leasehold_testkit::{conformance_suite, file_fixture, primitives_suite, process};
use std::path::Path;

conformance_suite!(file_fixture());
primitives_suite!(file_fixture());

fn worker() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_lh-worker"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_process_mutual_exclusion() {
    let fx = file_fixture().await;
    process::multi_process_mutex(&fx.url, worker(), 4, 40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_session_holder_keeps_lock_until_death() {
    let fx = file_fixture().await;
    process::stalled_session_holder_keeps_lock(&fx.locker, &fx.url, worker()).await;
}

/// A deleted lock file (a cleaned-up directory, a restored backup) still issues fences above
/// every fence issued before: `max(counter + 1, the wall clock in µs)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_lock_file_still_issues_larger_fences() {
    let dir = tempfile::tempdir().unwrap();
    let l = leasehold::Locker::connect(&format!("file://{}", dir.path().display())).await.unwrap();
    let mut last = None;
    for _ in 0..3 {
        let lease = l.acquire("job", std::time::Duration::from_secs(30)).await.unwrap();
        assert!(last.is_none_or(|f| lease.fence() > f));
        last = Some(lease.fence());
        assert!(lease.release().await.unwrap().is_clean());
    }
    for e in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    let lease = l.acquire("job", std::time::Duration::from_secs(30)).await.unwrap();
    assert!(lease.fence() > last.unwrap(), "{} after {last:?}", lease.fence());
    assert!(lease.release().await.unwrap().is_clean());
}

/// A lock directory the store cannot use is a configuration error, never an outage: a file in
/// its place, a parent that is a file, a place where nobody may create files (sysfs, even
/// for root).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_directories_are_config() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("afile"), "x").unwrap();
    for url in [
        format!("file://{}/afile", d.path().display()),
        format!("file://{}/afile/locks", d.path().display()),
        "file:///sys/leasehold-test".to_owned(),
    ] {
        let e = leasehold::Locker::connect(&url).await.expect_err(&url);
        assert!(e.is_config() && !e.is_unavailable() && !e.is_retryable(), "{url}: {e:?}");
    }
}
