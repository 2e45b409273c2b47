//! Two stores open on one SQLite file in one process, and other processes coming and going
//! beside them: the first store's grants still exclude them. (Opening the file by hand to
//! check it, as the store once did, closed a descriptor of it, which drops every POSIX lock
//! the process holds on the file, SQLite's own included: another process could then take
//! itself for the last connection and remove the write-ahead log under the first store.)

mod common;

use common::*;
use std::process::Command;
use std::time::Duration;

fn busy_elsewhere(url: &str, key: &str, fence: leasehold::FenceToken) {
    let o = Command::new(BIN)
        .env("LEASEHOLD_STORE", url)
        .args(["run", key, "--", "true"])
        .output()
        .unwrap();
    assert_eq!(code(&o), 75, "{key} (fence {fence}) granted to another process: {}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_store_on_the_file_keeps_the_first_stores_grants() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leases.db").display());
    let first = leasehold::Locker::connect(&url).await.unwrap();
    let ttl = Duration::from_secs(30);
    let before = first.acquire("before", ttl).await.unwrap();
    let _second = leasehold::Locker::connect(&url).await.unwrap();
    busy_elsewhere(&url, "before", before.fence());
    for i in 0..5 {
        // Each check is a process that opens the file, fails to take the key and closes it.
        let key = format!("after-{i}");
        let lease = first.acquire(&key, ttl).await.unwrap();
        busy_elsewhere(&url, &key, lease.fence());
        assert!(lease.release().await.unwrap().is_clean(), "{key}");
    }
    assert!(before.release().await.unwrap().is_clean());
}
