//! The conformance suite and the process-level scenarios on the `flock` store.

use leasehold_testkit::{conformance_suite, file_fixture, process};
use std::path::Path;

conformance_suite!(file_fixture());

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
